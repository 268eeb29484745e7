//! `ruleweave simulate PACK --games N`: the pack's scripted players (`scripts/<pack>/players/`)
//! play N games each on the rules as they are, and the report says how the games ended (each
//! outcome's share with a 95% interval), in how many turns, and where the tracked numbers stood.
//!
//! A player is `fn play(view, state)` in `scripts/<pack>/players/NAME.rhai`: it gets what a
//! person sees (the display) and the state, and returns the next input (a map of input fields,
//! or a line of text). Its `random()` is seeded by the game and the turn, so a seed gives the same
//! report every time. Games end at the pack's `finish:` or its `simulate.max_turns`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

#[derive(clap::Args)]
pub struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// Games per player.
    #[arg(long, default_value_t = 100)]
    games: u32,
    /// A player to play (repeatable; the pack's shipped players when none is named).
    #[arg(long = "player", value_name = "NAME")]
    players: Vec<String>,
    /// Choose a session option (repeatable): --set difficulty=hard.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// What seeds the games' randomness: the same seed, the same report.
    #[arg(long, default_value = "ruleweave")]
    seed: String,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Also write the report as one self-contained HTML page with charts.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// The same games (players, seeds, moves) on a second copy of the rules (a root with
    /// config/, scripts/ and prompts/: the last commit checked out, a folder), compared.
    #[arg(long, value_name = "DIR")]
    against: Option<std::path::PathBuf>,
}

/// One player's games.
struct Played {
    name: String,
    outcomes: Vec<String>,
    turns: Vec<f64>,
    /// Each tracked field's value at the end of each game.
    track: Vec<(String, Vec<f64>)>,
    /// Each tracked field's values after each turn: `[turn - 1][game]`.
    per_turn: Vec<(String, Vec<Vec<f64>>)>,
    error: Option<String>,
}

pub fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    if args.games == 0 {
        bail!("--games is at least 1");
    }
    let config = crate::config::Config::load(root)?;
    let engine = rt.block_on(super::engine(root, &config, "memory"))?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let options = super::options(&pack, &args.set)?;
    let shipped = pack.players();
    let names = if args.players.is_empty() { shipped.clone() } else { args.players.clone() };
    if names.is_empty() {
        bail!(
            "pack `{}` ships no players: write one as scripts/{}/players/NAME.rhai (fn play(view, state))",
            args.pack,
            args.pack
        );
    }
    if let Some(unknown) = names.iter().find(|n| !shipped.contains(n)) {
        bail!("pack `{}` has no player `{unknown}` (players: {})", args.pack, shipped.join(", "));
    }
    // The players are this copy's, on both sides of a comparison: only the rules differ.
    let players = names
        .iter()
        .map(|name| {
            Ok((
                name.clone(),
                ruleweave::ScriptCall::new(&engine, &args.pack, &format!("players/{name}.rhai::play"), 2)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let spec = pack.simulate().clone();
    let here = Side { engine: &engine, options: &options, label: None };
    let report = play(rt, &args, &spec, &players, &here)?;
    let mut json = report_json(&args, &report);
    let mut failed = report.iter().any(|p| p.error.is_some());
    if let Some(dir) = &args.against {
        let other = rt.block_on(super::engine(dir, &config, "memory"))?;
        let other_pack =
            super::load_pack(&other, &args.pack).map_err(|e| anyhow::anyhow!("--against {}: {e:#}", dir.display()))?;
        let other_options = super::options(&other_pack, &args.set)
            .map_err(|e| anyhow::anyhow!("--against {}: {e:#}", dir.display()))?;
        let there = Side { engine: &other, options: &other_options, label: Some(dir.display().to_string()) };
        let against = play(rt, &args, &spec, &players, &there)?;
        failed |= against.iter().any(|p| p.error.is_some());
        json["against"] = json!({
            "root": dir.display().to_string(),
            "players": players_json(&against),
            "differences": differences(&report, &against),
        });
    }
    if let Some(file) = &args.html {
        std::fs::write(file, super::report::page(&json))
            .map_err(|e| anyhow::anyhow!("cannot write the report to {}: {e}", file.display()))?;
    }
    if args.json {
        println!("{json}");
    } else {
        print_table(&json);
        if let Some(file) = &args.html {
            println!("\nthe report with its charts: {}", file.display());
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// One copy of the rules the games are played on.
struct Side<'a> {
    engine: &'a ruleweave::Engine,
    options: &'a serde_json::Map<String, Value>,
    /// The copy's root, for the progress line (`None`: this one).
    label: Option<String>,
}

/// Every player's games on one copy of the rules: the same games (ids, seeds, moves) whichever
/// copy plays them.
fn play(
    rt: &tokio::runtime::Runtime,
    args: &Args,
    spec: &ruleweave::Simulate,
    players: &[(String, ruleweave::ScriptCall)],
    side: &Side<'_>,
) -> Result<Vec<Played>> {
    let progress = !args.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let on = side.label.as_ref().map_or(String::new(), |l| format!(" (against {l})"));
    let mut report = Vec::new();
    for (name, player) in players {
        let mut played = Played {
            name: name.clone(),
            outcomes: Vec::new(),
            turns: Vec::new(),
            track: spec.track.iter().map(|t| (t.clone(), Vec::new())).collect(),
            per_turn: spec.track.iter().map(|t| (t.clone(), Vec::new())).collect(),
            error: None,
        };
        for game in 0..args.games {
            if progress {
                eprint!("\rruleweave: {name}{on}: game {}/{}", game + 1, args.games);
            }
            let id = format!("sim-{}-{name}-{game}", args.seed);
            let mut session = rt.block_on(side.engine.open_with_id(&args.pack, side.options, Some(id.clone())))?;
            let mut turns = 0;
            while turns < spec.max_turns && !session.is_finished() {
                let view = serde_json::to_value(session.view())?;
                let next = match player.call_as(&id, u64::from(turns) + 1, &[view, session.state()]) {
                    Ok(v) => v,
                    Err(e) => {
                        played.error = Some(format!("player `{name}` failed in game {game}: {e}"));
                        break;
                    }
                };
                let input = match super::turn_input(&session, next) {
                    Ok(input) => input,
                    Err(e) => {
                        played.error =
                            Some(format!("player `{name}` gave no input the pack reads in game {game}: {e:#}"));
                        break;
                    }
                };
                if let Err(e) = rt.block_on(session.turn(input)) {
                    played.error = Some(format!("game {game} of player `{name}` failed at turn {}: {e}", turns + 1));
                    break;
                }
                turns += 1;
                for (field, by_turn) in &mut played.per_turn {
                    if let Some(x) = session.field(field).and_then(|v| v.as_f64()) {
                        by_turn.resize_with(by_turn.len().max(turns as usize), Vec::new);
                        by_turn[turns as usize - 1].push(x);
                    }
                }
            }
            if played.error.is_some() {
                break;
            }
            let outcome = match &spec.outcome {
                Some(field) => match session.field(field) {
                    Some(Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None => "none".into(),
                },
                None if session.is_finished() => "finished".into(),
                None => "unfinished".into(),
            };
            played.outcomes.push(outcome);
            played.turns.push(f64::from(turns));
            for (field, values) in &mut played.track {
                if let Some(x) = session.field(field).and_then(|v| v.as_f64()) {
                    values.push(x);
                }
            }
        }
        if progress {
            eprintln!();
        }
        report.push(played);
    }
    Ok(report)
}

/// For each player and outcome, this copy's share less the other's, with a 95% interval
/// (Newcombe's hybrid score interval, from the two Wilson intervals); beyond noise when the
/// interval leaves out 0.
fn differences(here: &[Played], there: &[Played]) -> Vec<Value> {
    let mut out = Vec::new();
    for (a, b) in here.iter().zip(there) {
        let mut outcomes: Vec<&str> = a.outcomes.iter().chain(&b.outcomes).map(String::as_str).collect();
        outcomes.sort_unstable();
        outcomes.dedup();
        for outcome in outcomes {
            let count = |p: &Played| p.outcomes.iter().filter(|o| *o == outcome).count();
            let (n1, n2) = (a.outcomes.len(), b.outcomes.len());
            let (k1, k2) = (count(a), count(b));
            let share = |k: usize, n: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
            let (p1, p2) = (share(k1, n1), share(k2, n2));
            let ((l1, u1), (l2, u2)) = (wilson(k1, n1), wilson(k2, n2));
            let delta = p1 - p2;
            let low = delta - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt();
            let high = delta + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt();
            out.push(json!({
                "player": a.name,
                "outcome": outcome,
                "delta": delta,
                "low": low,
                "high": high,
                "beyond_noise": low > 0.0 || high < 0.0,
            }));
        }
    }
    out
}

/// The report as the contract says: `{"pack", "games", "seed", "players": [...], "against": null}`
/// (`run` fills `against` when there is one).
fn report_json(args: &Args, report: &[Played]) -> Value {
    json!({"pack": args.pack, "games": args.games, "seed": args.seed, "players": players_json(report), "against": null})
}

/// Each player's games: outcomes with their intervals, turns, tracked fields.
fn players_json(report: &[Played]) -> Vec<Value> {
    report
        .iter()
        .map(|p| {
            let n = p.outcomes.len();
            let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
            for o in &p.outcomes {
                *counts.entry(o.as_str()).or_default() += 1;
            }
            let outcomes: Map<String, Value> = counts
                .into_iter()
                .map(|(o, k)| {
                    let (low, high) = wilson(k, n);
                    (o.to_owned(), json!({"share": k as f64 / n as f64, "low": low, "high": high}))
                })
                .collect();
            let track: Map<String, Value> = p
                .track
                .iter()
                .map(|(f, v)| {
                    let mut at_end = spread(v);
                    let by_turn =
                        p.per_turn.iter().find(|(g, _)| g == f).map(|(_, t)| t.as_slice()).unwrap_or_default();
                    // Where the field stood after each turn, over the games still going then.
                    at_end["per_turn"] = by_turn.iter().map(|values| spread(values)).collect();
                    (f.clone(), at_end)
                })
                .collect();
            let mut v =
                json!({"name": p.name, "games": n, "outcomes": outcomes, "turns": spread(&p.turns), "track": track});
            if let Some(e) = &p.error {
                v["error"] = json!(e);
            }
            v
        })
        .collect()
}

/// The 95% Wilson interval of `k` successes in `n` trials.
fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.959_963_985);
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    // At the ends the interval reaches 0 or 1 exactly (its float sum falls a hair short).
    let low = if k == 0.0 { 0.0 } else { (centre - half).max(0.0) };
    let high = if k == n { 1.0 } else { (centre + half).min(1.0) };
    (low, high)
}

/// The median, 10th and 90th percentiles of `values` (nearest rank), or nulls for none.
fn spread(values: &[f64]) -> Value {
    if values.is_empty() {
        return json!({"median": null, "p10": null, "p90": null});
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    json!({"median": at(0.5), "p10": at(0.1), "p90": at(0.9)})
}

/// The report for a person: per player, each outcome's share and interval, the turns, the
/// tracked numbers; with a comparison, the other copy's the same way and the differences.
fn print_table(report: &Value) {
    print_players(&report["players"]);
    let against = &report["against"];
    if against.is_null() {
        return;
    }
    let root = against["root"].as_str().unwrap_or("");
    println!("\nagainst {root}");
    print_players(&against["players"]);
    println!("\ndifferences (these rules − {root}), 95% intervals");
    let pct = |v: &Value| ruleweave::text::decimals(v.as_f64().unwrap_or(0.0) * 100.0, 1);
    for d in against["differences"].as_array().into_iter().flatten() {
        let sign = if d["delta"].as_f64().unwrap_or(0.0) > 0.0 { "+" } else { "" };
        println!(
            "  {:<12} {:<20} {:>6} points  ({}–{})  {}",
            d["player"].as_str().unwrap_or(""),
            d["outcome"].as_str().unwrap_or(""),
            format!("{sign}{}", pct(&d["delta"])),
            pct(&d["low"]),
            pct(&d["high"]),
            if d["beyond_noise"] == true { "beyond noise" } else { "within noise" }
        );
    }
}

/// Each player's games, as a table.
fn print_players(players: &Value) {
    let round = |v: &Value| v.as_f64().map_or("-".to_owned(), |x| ruleweave::text::decimals(x, 2));
    for p in players.as_array().into_iter().flatten() {
        println!("{} ({} games)", p["name"].as_str().unwrap_or(""), p["games"]);
        if let Some(e) = p["error"].as_str() {
            println!("  stopped: {e}");
        }
        for (outcome, s) in p["outcomes"].as_object().into_iter().flatten() {
            println!(
                "  {outcome:<20} {:>6}%  (95%: {}–{}%)",
                round(&json!(s["share"].as_f64().unwrap_or(0.0) * 100.0)),
                round(&json!(s["low"].as_f64().unwrap_or(0.0) * 100.0)),
                round(&json!(s["high"].as_f64().unwrap_or(0.0) * 100.0))
            );
        }
        let t = &p["turns"];
        println!(
            "  turns                median {}, p10 {}, p90 {}",
            round(&t["median"]),
            round(&t["p10"]),
            round(&t["p90"])
        );
        for (field, s) in p["track"].as_object().into_iter().flatten() {
            println!(
                "  {field:<20} median {}, p10 {}, p90 {}",
                round(&s["median"]),
                round(&s["p10"]),
                round(&s["p90"])
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_intervals_and_percentiles() {
        let (lo, hi) = wilson(50, 100);
        assert!((lo - 0.4038).abs() < 1e-3 && (hi - 0.5962).abs() < 1e-3, "{lo} {hi}");
        assert_eq!(wilson(0, 10).0, 0.0);
        let s = spread(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(s, json!({"median": 3.0, "p10": 1.0, "p90": 5.0}));
    }

    fn games(name: &str, won: usize, lost: usize) -> Played {
        let outcomes =
            std::iter::repeat_n("won", won).chain(std::iter::repeat_n("lost", lost)).map(String::from).collect();
        Played { name: name.into(), outcomes, turns: Vec::new(), track: Vec::new(), per_turn: Vec::new(), error: None }
    }

    /// Newcombe's interval of a difference of two shares (his worked example 1: 56/70 against
    /// 48/80 gives 0.0524 to 0.3339), and which differences are beyond noise.
    #[test]
    fn differences_have_newcombes_interval() {
        let d = differences(&[games("p", 56, 14)], &[games("p", 48, 32)]);
        let won = d.iter().find(|d| d["outcome"] == "won").unwrap();
        assert!((won["delta"].as_f64().unwrap() - 0.2).abs() < 1e-9, "{won}");
        assert!((won["low"].as_f64().unwrap() - 0.0524).abs() < 1e-3, "{won}");
        assert!((won["high"].as_f64().unwrap() - 0.3339).abs() < 1e-3, "{won}");
        assert_eq!(won["beyond_noise"], true);
        let same = differences(&[games("p", 5, 5)], &[games("p", 6, 4)]);
        assert!(same.iter().all(|d| d["beyond_noise"] == false), "{same:?}");
    }
}

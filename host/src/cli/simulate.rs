//! `ruleweave simulate PACK --games N`: the pack's scripted players play N games each on the
//! rules as they are (see [`ruleweave_lab::simulate`]), and the report is printed as a table, as JSON, or
//! written as a page with charts.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use ruleweave_lab::jobs::SweepAsked;
use ruleweave_lab::simulate::tune::SweepReport;
use ruleweave_lab::simulate::{Plan, PlayerReport, Report, Rules, Spread, outcome_label};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// Games per player (at most 100,000).
    #[arg(long, default_value_t = 100)]
    games: u32,
    /// A player to play (repeatable; the pack's scripted players when none is named):
    /// NAME for scripts/<pack>/players/NAME.rhai, model:PROFILE for a model player (the pack's
    /// `llm:` profile with its persona in prompts/<pack>/players/PROFILE.j2).
    #[arg(long = "player", value_name = "NAME")]
    players: Vec<String>,
    /// Choose a session option (repeatable): --set difficulty=hard.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Set a number of the pack's params: for this run, without editing the file (repeatable):
    /// --param thresholds.medium=55.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Play the same games at each value of a parameter, NAME=LO..HI[:STEP] (a step of 1 for an
    /// integer, a tenth of the range otherwise); twice for a grid of two parameters.
    #[arg(long = "sweep", value_name = "NAME=LO..HI[:STEP]")]
    sweeps: Vec<String>,
    /// What seeds the games' randomness: the same seed, the same report.
    #[arg(long, default_value = ruleweave_lab::jobs::SEED)]
    seed: String,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Also write the report as one self-contained HTML page with charts.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Games played at once (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Keep each game in the store (RULEWEAVE_STORE, ruleweave.toml) as sim-SEED-PLAYER-GAME, to
    /// open with `replay` or the console; a later run with the same seed replaces them.
    #[arg(long)]
    record: bool,
    /// The same games (players, seeds, moves) on a second copy of the rules (a root with
    /// config/, scripts/ and prompts/: the last commit checked out, a folder), compared.
    #[arg(long, value_name = "DIR")]
    against: Option<std::path::PathBuf>,
    #[command(flatten)]
    spending: super::spending::Flags,
}

/// The most games per player one run plays: every game's result is held until the report, and a
/// hundred thousand games of the largest pack is as much as a laptop should be asked for.
const MOST_GAMES: u32 = 100_000;

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    if !(1..=MOST_GAMES).contains(&args.games) {
        bail!("--games is 1 to {MOST_GAMES} per player, not {}", args.games);
    }
    let config = crate::config::Config::load(root)?;
    // Recorded games go to the configured store; otherwise nothing outlives the run.
    let store = if args.record { config.store.as_str() } else { "memory" };
    let engine = rt.block_on(super::engine(root, &config, store))?;
    let real = args.spending.real(&config, &*super::load_pack(&engine, &args.pack)?)?;
    let engine = match &real {
        Some(real) if !args.sweeps.is_empty() || args.against.is_some() => {
            bail!("--sweep and --against play on the stand-ins: real models ({}) play plain runs", real.describe())
        }
        Some(real) => rt.block_on(super::spending::engine_with(root, &config, store, real.llm.clone()))?,
        None => engine,
    };
    let version = super::load_pack(&engine, &args.pack)?.version().to_owned();
    let engine = super::copy_of(&engine, &args.pack, &args.params)?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let options = super::options(&pack, &args.set)?;
    if !args.sweeps.is_empty() {
        return sweep(rt, &engine, &config, args, options);
    }
    // The players are this copy's, on both sides of a comparison: only the rules differ.
    let players = ruleweave_lab::simulate::players(&engine, &pack, &args.players)?;
    // A game waiting on a real model holds a thread, not a core: as many games as calls in flight.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let jobs = args.jobs.unwrap_or_else(|| real.as_ref().map_or(cores, |r| r.games_at_once())).max(1);
    let mut plan = Plan {
        pack: args.pack.clone(),
        games: args.games,
        first: 0,
        seed: args.seed.clone(),
        jobs,
        spec: pack.simulate().clone(),
        record: args.record,
        spend: None,
    };
    if let Some(real) = &real {
        // The same games on the stand-ins first: what the real run is expected to call and cost.
        let dry =
            super::spending::dry_run(root, rt, &config, &args.pack, &args.params, &options, &args.players, &plan)?;
        real.estimate(&dry.engine, &dry.pack, &config, || dry.play(rt)).check(real, args.spending.yes())?;
        plan.spend = Some(real.spend.clone());
    }
    let other = match &args.against {
        Some(dir) => {
            let other = rt.block_on(super::engine(dir, &config, "memory"))?;
            let against = |e: anyhow::Error| anyhow::anyhow!("--against {}: {e:#}", dir.display());
            let other_pack = super::load_pack(&other, &args.pack).map_err(against)?;
            let other = super::copy_of(&other, &args.pack, &[]).map_err(against)?;
            let other_options = super::options(&other_pack, &args.set).map_err(against)?;
            Some((dir, other, other_options))
        }
        None => None,
    };
    let sides = 1 + u64::from(other.is_some());
    let bar = progress(!args.json, u64::from(args.games) * players.len() as u64 * sides);
    let tick = || bar.inc(1);
    // Every game is played: Ctrl-C ends the process.
    let never = std::sync::atomic::AtomicBool::new(false);
    bar.set_message(args.pack.clone());
    let here = ruleweave_lab::simulate::play(
        rt.handle(),
        &plan,
        &players,
        &Rules { engine: &engine, options: &options },
        &config.prices,
        &tick,
        &never,
    );
    let mut report = ruleweave_lab::simulate::report(&plan, &here);
    report.models = ruleweave_lab::simulate::models(&engine, &pack);
    report.calibration = super::calibrate::kept_headline(root, rt, &config, &args.pack, &version);
    let mut failed = here.iter().any(|p| p.error.is_some());
    if let Some((dir, other, other_options)) = &other {
        bar.set_message(format!("against {}", dir.display()));
        // The other copy's games are not recorded: they have the same ids as this copy's.
        let plan = Plan { record: false, ..plan.clone() };
        let rules = Rules { engine: other, options: other_options };
        let there = ruleweave_lab::simulate::play(rt.handle(), &plan, &players, &rules, &config.prices, &tick, &never);
        failed |= there.iter().any(|p| p.error.is_some());
        ruleweave_lab::simulate::compare(&mut report, root, dir, &here, &there);
    }
    bar.finish_and_clear();
    if let Some(file) = &args.html {
        std::fs::write(file, crate::pages::page(&report))
            .map_err(|e| anyhow::anyhow!("cannot write the report to {}: {e}", file.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_table(&report);
        if args.record {
            let first = plan.game_id(players[0].name(), 0);
            println!(
                "\nrecorded as sim-{}-PLAYER-GAME (0 to {}): ruleweave replay --session {first}",
                args.seed,
                args.games - 1
            );
        }
        if let Some(file) = &args.html {
            println!("\nthe report with its charts: {}", file.display());
        }
    }
    Ok(match (failed, report.stopped) {
        (true, _) => ExitCode::from(1),
        // Stopped by its cap: the report holds the games it finished.
        (false, Some(_)) => ExitCode::from(3),
        (false, None) => ExitCode::SUCCESS,
    })
}

/// `--sweep`: the same games at each value, one table (or one JSON object) for all.
fn sweep(
    rt: &tokio::runtime::Runtime,
    engine: &ruleweave::Engine,
    config: &crate::config::Config,
    args: Args,
    options: serde_json::Map<String, serde_json::Value>,
) -> Result<ExitCode> {
    if args.record || args.against.is_some() {
        bail!("--sweep plays its games on its own: it takes no --record or --against");
    }
    let asked = SweepAsked {
        pack: &args.pack,
        ranges: &args.sweeps,
        games: args.games,
        players: &args.players,
        seed: &args.seed,
        options,
        jobs: args.jobs,
        prices: config.prices.clone(),
    };
    let sweep = asked.check().map_err(|r| anyhow::anyhow!(super::refused(&r)))?;
    let values = sweep.values(engine)?;
    let players =
        ruleweave_lab::simulate::players(engine, &*engine.packs().get(&args.pack)?, &args.players)?.len() as u64;
    let bar = progress(!args.json, u64::from(args.games) * players * values as u64);
    bar.set_message(format!("{} sweep", args.pack));
    let never = std::sync::atomic::AtomicBool::new(false);
    let points = ruleweave_lab::simulate::tune::sweep(rt.handle(), engine, &sweep, &|| bar.inc(1), &never)?;
    bar.finish_and_clear();
    let max_turns = engine.packs().get(&args.pack)?.simulate().max_turns;
    let report = sweep.report(max_turns, points);
    if let Some(file) = &args.html {
        std::fs::write(file, crate::pages::sweep(&report))
            .map_err(|e| anyhow::anyhow!("cannot write the sweep to {}: {e}", file.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} games per player at each value, each played to its end or {max_turns} turns\n", args.games);
    print!("{}", sweep_summary(&report));
    println!("\nat each value\n");
    for point in &report.sweep {
        let value = match &point.value {
            serde_json::Value::Object(m) => m.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", "),
            v => format!("{} = {v}", sweep.ranges[0].param),
        };
        println!("{value}");
        print_players(&point.players, max_turns);
        println!();
    }
    if let Some(file) = &args.html {
        println!("the sweep with its charts: {}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A sweep at a glance: a line per value (or grid cell) and player, a column per outcome any
/// game ended in, each its share and 95% interval. The detail of each value follows it.
fn sweep_summary(report: &SweepReport) -> String {
    let rows = report.table();
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r.get(c).map_or(0, |x| x.chars().count())).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(x, w)| format!("{x:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A bar on standard error while games are played, drawn only at a terminal.
pub(super) fn progress(wanted: bool, games: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(games), ProgressDrawTarget::stderr());
    if !wanted || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} games, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// The report for a person: per player, each outcome's share and interval, the turns, the
/// tracked numbers; with a comparison, what differs between the copies, the other copy's games
/// the same way, and the differences.
fn print_table(report: &Report) {
    println!("{} games per player, each played to its end or {} turns", report.games, report.max_turns);
    let real: Vec<String> =
        report.models.iter().filter(|(_, by)| *by != "stand-in").map(|(p, by)| format!("{p} on {by}")).collect();
    if !real.is_empty() {
        println!("real models: {} (the other profiles on the stand-in)", real.join(", "));
    }
    if let Some(spent) = &report.spent {
        let of = spent.budget_usd.map(|b| format!(" of the {b} budget")).unwrap_or_default();
        println!("spent: {} calls, {:.4}{of}", spent.calls, spent.usd);
    }
    if let Some(cache) = &report.cache {
        println!("cache: {} calls answered from it, {} asked of the models", cache.hits, cache.misses);
    }
    if let Some(stop) = report.stopped {
        let why = match stop {
            ruleweave_lab::spend::Stop::BudgetUsd => "the next call would have passed --budget-usd",
            ruleweave_lab::spend::Stop::MaxCalls => "it made the calls --max-calls allows",
            ruleweave_lab::spend::Stop::MaxTime => "its --max-time was up",
        };
        let stopped: usize = report.players.iter().map(|p| p.stopped.len()).sum();
        println!("stopped: {why}; {stopped} games stopped at a turn boundary are not counted below");
    }
    println!();
    print_players(&report.players, report.max_turns);
    let Some(against) = &report.against else { return };
    let root = &against.root;
    println!("\nwhat differs (these rules → {root})");
    if against.changes.is_empty() {
        println!("  nothing: the two copies of the pack are the same");
    }
    for c in against.changes.iter().take(MOST_CHANGES_SHOWN) {
        let show = |v: &serde_json::Value| match v {
            serde_json::Value::Null => "(none)".to_owned(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        println!("  {} {}: {} → {}", c.file, c.key, show(&c.ours), show(&c.theirs));
    }
    if against.changes.len() > MOST_CHANGES_SHOWN {
        println!("  … and {} more (--json lists them all)", against.changes.len() - MOST_CHANGES_SHOWN);
    }
    // Every changed line, file by file.
    for d in &against.diff {
        println!();
        print!("{}", d.unified);
    }
    println!("\nagainst {root}");
    print_players(&against.players, report.max_turns);
    println!("\ndifferences (these rules − {root}), 95% intervals");
    let pct = |x: f64| ruleweave::text::decimals(x * 100.0, 1);
    let verdict = |beyond: bool| if beyond { "beyond noise" } else { "within noise" };
    for d in &against.differences {
        let sign = if d.delta > 0.0 { "+" } else { "" };
        println!(
            "  {:<12} {:<26} {:>6} points  ({}–{})  {}",
            d.player,
            outcome_label(&d.outcome, report.max_turns),
            format!("{sign}{}", pct(d.delta)),
            pct(d.low),
            pct(d.high),
            verdict(d.beyond_noise)
        );
    }
    let num = |x: f64| ruleweave::text::decimals(x, 2);
    for t in &against.tracked {
        let label =
            if t.field == "turns" { "turns to finish (median)".to_owned() } else { format!("{} (median)", t.field) };
        let Some(delta) = t.delta else {
            println!("  {:<12} {label:<26}      -  (no game to pair)", t.player);
            continue;
        };
        let sign = if delta > 0.0 { "+" } else { "" };
        let interval = match (t.low, t.high) {
            (Some(low), Some(high)) => format!("({}–{})  {}", num(low), num(high), verdict(t.beyond_noise)),
            _ => format!("(too few games for an interval: {})", t.games),
        };
        println!("  {:<12} {label:<26} {:>6}         {interval}", t.player, format!("{sign}{}", num(delta)));
    }
}

/// The most changes between two copies the table lists (the JSON has them all).
const MOST_CHANGES_SHOWN: usize = 20;

/// Each player's games, as a table.
pub(super) fn print_players(players: &[PlayerReport], max_turns: u32) {
    let round = |x: Option<f64>| x.map_or("-".to_owned(), |x| ruleweave::text::decimals(x, 2));
    let spread = |label: &str, s: &Spread, show: &dyn Fn(Option<f64>) -> String| {
        println!("  {label:<26} median {}, p10 {}, p90 {}", show(s.median), show(s.p10), show(s.p90));
    };
    for p in players {
        println!("{} ({} games)", p.name, p.games);
        if let Some(e) = &p.error {
            println!("  stopped: {e}");
        }
        for (outcome, s) in &p.outcomes {
            let pct = |x: f64| round(Some(x * 100.0));
            let label = outcome_label(outcome, max_turns);
            println!("  {label:<26} {:>6}%  (95%: {}–{}%)", pct(s.share), pct(s.low), pct(s.high));
        }
        spread("turns to finish", &p.turns, &round);
        for (field, s) in &p.track {
            spread(field, &s.end, &round);
        }
        spread("tokens per game", &p.tokens, &round);
        if !p.unpriced.is_empty() {
            println!("  cost per game        unknown: no price for {} in [prices]", p.unpriced.join(", "));
        } else if let Some(c) = &p.cost {
            // Priced calls always cost something: calls that cost nothing were the stand-in's.
            if c.p90 == Some(0.0) && p.tokens.p90.is_some_and(|t| t > 0.0) {
                println!("  {:<26} free (stand-in)", "cost per game");
            } else if c.p90 == Some(0.0) {
                println!("  {:<26} free (no model calls)", "cost per game");
            } else {
                spread("cost per game", c, &|x| x.map_or("-".to_owned(), |x| format!("{x:.4}")));
            }
        }
    }
}

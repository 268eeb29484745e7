//! `ruleweave calibrate PACK`: how far each stand-in is from its model, on the calls a real model
//! answered in recorded sessions (or, with `--live N`, in games played now with both asked); see
//! [`ruleweave_lab::calibrate`].

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{Result, bail};
use ruleweave::LlmChoice;
use ruleweave::llm::Provider;
use ruleweave::store::SessionQuery;
use ruleweave_lab::calibrate::{self, Both, Calibration, Pair};
use ruleweave_lab::simulate::{Plan, Rules};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// The store the recorded sessions are in (default: RULEWEAVE_STORE, ruleweave.toml).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// A session to read (repeatable; default: every session of the pack the store keeps).
    #[arg(long = "session", value_name = "ID")]
    sessions: Vec<String>,
    /// Only sessions made since TIME: an RFC 3339 time (2026-11-28T09:00:00Z) or a span back
    /// from now (90m, 24h, 7d).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// A profile to calibrate (repeatable; default: every profile a real model answered).
    #[arg(long = "profile", value_name = "NAME")]
    profiles: Vec<String>,
    /// Play N games now with the pack's scripted players instead, each call of the real models'
    /// profiles answered by the model (which drives the game) and by the stand-in too: for a
    /// pack with no recorded sessions. Takes --model and the budget flags.
    #[arg(long, value_name = "N")]
    live: Option<u32>,
    /// A player of the live games (repeatable; the pack's scripted players when none is named).
    #[arg(long = "player", value_name = "NAME")]
    players: Vec<String>,
    /// Choose a session option of the live games (repeatable): --set difficulty=hard.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// What seeds the live games.
    #[arg(long, default_value = ruleweave_lab::jobs::SEED)]
    seed: String,
    /// Print the calibration as one JSON object.
    #[arg(long)]
    json: bool,
    /// Also write it as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    #[command(flatten)]
    spending: super::spending::Flags,
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let config = crate::config::Config::load(root)?;
    let calibration = match args.live {
        Some(games) => live(root, rt, &config, &args, games)?,
        None => recorded(root, rt, &config, &args)?,
    };
    // Kept where it was read (a live one in the configured store), for the reports of this
    // version to carry.
    let store = match args.live {
        Some(_) => config.store.clone(),
        None => args.store.clone().unwrap_or_else(|| config.store.clone()),
    };
    if let Err(e) = rt.block_on(keep(root, &store, &calibration)) {
        eprintln!("warning: the calibration is not kept in the store: {e:#}");
    }
    if let Some(file) = &args.html {
        std::fs::write(file, crate::pages::calibration(&calibration))
            .map_err(|e| anyhow::anyhow!("cannot write the calibration to {}: {e}", file.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&calibration)?);
    } else {
        print!("{}", table(&calibration));
    }
    Ok(if calibration.stopped.is_some() { ExitCode::from(3) } else { ExitCode::SUCCESS })
}

/// Keeps `calibration` in the store at `url`, for the reports of its pack version.
async fn keep(root: &Path, url: &str, calibration: &Calibration) -> Result<()> {
    let store = ruleweave::store::open(&super::under_root(root, url)).await?;
    let Some(tables) = crate::server::tables::Tables::open(&store).await? else { return Ok(()) };
    let body = serde_json::to_value(calibration)?;
    tables.calibrations.keep_calibration(&calibration.pack, &calibration.version, &body).await?;
    Ok(())
}

/// The headline of `pack`'s calibration at `version` kept in the configured store, if there is
/// one. Nothing is opened (or made) where no store can hold one: a memory store, or a SQLite file
/// that does not exist yet.
pub(super) fn kept_headline(
    root: &Path,
    rt: &tokio::runtime::Runtime,
    config: &crate::config::Config,
    pack: &str,
    version: &str,
) -> Option<ruleweave_lab::calibrate::Headline> {
    let url = super::under_root(root, &config.store);
    let file = url.strip_prefix("sqlite://").map(|p| Path::new(p.split('?').next().unwrap_or(p)).to_owned());
    if url.starts_with("memory") || file.is_some_and(|f| !f.exists()) {
        return None;
    }
    rt.block_on(async {
        let store = ruleweave::store::open(&url).await.ok()?;
        let tables = crate::server::tables::Tables::open(&store).await.ok()??;
        let body = tables.calibrations.calibration(pack, version).await.ok()??;
        serde_json::from_value::<Calibration>(body).ok().map(|c| c.headline())
    })
}

/// The calls real models answered in the store's recorded sessions.
fn recorded(
    root: &Path,
    rt: &tokio::runtime::Runtime,
    config: &crate::config::Config,
    args: &Args,
) -> Result<Calibration> {
    if args.spending != super::spending::Flags::default() || !args.players.is_empty() || !args.set.is_empty() {
        bail!("--model, the budget flags, --player and --set are for --live games: recorded sessions cost nothing");
    }
    let store = args.store.as_deref().unwrap_or(&config.store);
    let engine = rt.block_on(super::engine(root, config, store))?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let since = args.since.as_deref().map(since_ms).transpose()?;
    let ids = match args.sessions.is_empty() {
        false => args.sessions.clone(),
        true => rt.block_on(sessions_of(&engine, &args.pack, since))?,
    };
    let pairs = rt.block_on(calibrate::recorded_pairs(&engine, &pack, &ids, &args.profiles))?;
    eprintln!(
        "{} sessions of `{}` read ({}): {} calls a real model answered",
        ids.len(),
        args.pack,
        ruleweave::store::redact(store),
        pairs.len()
    );
    if pairs.is_empty() {
        bail!(
            "no call a real model answered in the sessions read: play sessions on a real model and keep them \
             (ruleweave.toml's [store] expire_finished_after), or play games now with --live N --model PROFILE=PROVIDER"
        );
    }
    let compared = calibrate::compare(&pairs);
    let profiles: Vec<String> = compared.keys().cloned().collect();
    let replayed = rt.block_on(calibrate::replay_on_standins(&engine, &pack, &ids, &profiles))?;
    Ok(Calibration {
        pack: args.pack.clone(),
        version: pack.version().to_owned(),
        sessions: ids.len(),
        profiles: compared,
        replayed: Some(replayed),
        spent: None,
        stopped: None,
    })
}

/// The pack's sessions in the store, newest first, made at or after `since` (unix ms).
async fn sessions_of(engine: &ruleweave::Engine, pack: &str, since: Option<i64>) -> Result<Vec<String>> {
    let index = ruleweave::store::needs(&**engine.store(), engine.store().index(), "a session index")?;
    let mut ids = Vec::new();
    let mut before: Option<(i64, String)> = None;
    loop {
        let cursor = before.as_ref().map(|(at, id)| (*at, id.as_str()));
        let page = index.list(SessionQuery { pack: Some(pack), limit: 500, before: cursor, only: None }).await?;
        let Some(last) = page.last() else { break };
        before = Some((last.created_at, last.id.clone()));
        let older = since.is_some_and(|s| last.created_at < s);
        ids.extend(page.into_iter().filter(|s| since.is_none_or(|t| s.created_at >= t)).map(|s| s.id));
        if older {
            break;
        }
    }
    Ok(ids)
}

/// `--since`: an RFC 3339 time, or a span back from now; unix milliseconds.
fn since_ms(text: &str) -> Result<i64> {
    match ruleweave_lab::outcomes::time_ms(text) {
        Some(ms) => Ok(ms),
        None => bail!("--since {text}: give an RFC 3339 time (2026-11-28T09:00:00Z) or a span back from now (24h, 7d)"),
    }
}

/// `--live N`: games played now, each call of the real models' profiles answered by both.
fn live(
    root: &Path,
    rt: &tokio::runtime::Runtime,
    config: &crate::config::Config,
    args: &Args,
    games: u32,
) -> Result<Calibration> {
    if !args.sessions.is_empty() || args.since.is_some() || args.store.is_some() {
        bail!("--live plays games of its own: it reads no --session, --since or --store");
    }
    if !(1..=ruleweave_lab::simulate::MOST_GAMES).contains(&games) {
        bail!("--live is 1 to {} games per player, not {games}", ruleweave_lab::simulate::MOST_GAMES);
    }
    let base = rt.block_on(super::engine(root, config, "memory"))?;
    let pack = super::load_pack(&base, &args.pack)?;
    let Some(real) = args.spending.real(config, &pack)? else {
        bail!("--live needs a real model: name it with --model PROFILE=PROVIDER (or set RULEWEAVE_LLM)");
    };
    let standin = pack.standin().ok_or_else(|| anyhow::anyhow!("pack `{}` has no stand-in model", args.pack))?;
    let LlmChoice::ByProfile(chosen) = &real.llm else { bail!("--live: no profile plays on a real model") };
    let pairs: Arc<Mutex<Vec<Pair>>> = Arc::default();
    let both: BTreeMap<String, Arc<dyn Provider>> = chosen
        .iter()
        .filter(|(p, _)| args.profiles.is_empty() || args.profiles.contains(p))
        .map(|(p, model)| {
            (p.clone(), Arc::new(Both::new(model.clone(), standin.clone(), pairs.clone())) as Arc<dyn Provider>)
        })
        .collect();
    let engine =
        rt.block_on(super::spending::engine_with(root, config, "memory", LlmChoice::ByProfile(Arc::new(both))))?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let options = super::options(&pack, &args.set)?;
    let players = ruleweave_lab::simulate::players(&engine, &pack, &args.players)?;
    let mut plan = Plan {
        pack: args.pack.clone(),
        games,
        first: 0,
        seed: args.seed.clone(),
        jobs: real.games_at_once(),
        spec: pack.simulate().clone(),
        record: false,
        spend: None,
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    // The same games on the stand-ins first: what the live ones are expected to call and cost.
    let dry = super::spending::dry_run(root, rt, config, &args.pack, &[], &options, &args.players, &plan)?;
    real.estimate(&dry.engine, &dry.pack, config, || dry.play(rt)).check(&real, args.spending.yes())?;
    plan.spend = Some(real.spend.clone());
    let rules = Rules { engine: &engine, options: &options };
    let played = ruleweave_lab::simulate::play(rt.handle(), &plan, &players, &rules, &config.prices, &|| {}, &never);
    if let Some(e) = played.iter().find_map(|p| p.error.as_ref()) {
        bail!("{e}");
    }
    let pairs = pairs.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Calibration {
        pack: args.pack.clone(),
        version: pack.version().to_owned(),
        sessions: played.iter().map(|p| p.games()).sum(),
        profiles: calibrate::compare(&pairs),
        replayed: None,
        spent: Some(real.spend.spent()),
        stopped: real.spend.stopped(),
    })
}

/// The calibration for a person: each profile's numbers and categories, then the replay.
fn table(c: &Calibration) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let n = |x: f64| ruleweave::text::decimals(x, 2);
    for (profile, p) in &c.profiles {
        let _ = writeln!(
            out,
            "{profile}: {} calls compared{}",
            p.calls,
            match p.unread {
                0 => String::new(),
                k => format!(" ({k} replies not read as JSON)"),
            }
        );
        for (field, g) in &p.numbers {
            let interval = match (g.low, g.high) {
                (Some(lo), Some(hi)) => format!(" (95%: {} to {})", n(lo), n(hi)),
                _ => String::new(),
            };
            let rank = g.rank_correlation.map(|r| format!(", rank correlation {}", n(r))).unwrap_or_default();
            let _ = writeln!(
                out,
                "  {field:<22} model − stand-in {:>7}{interval}, mean |difference| {}{rank}",
                n(g.mean_difference),
                n(g.mean_absolute)
            );
        }
        for (field, a) in &p.categories {
            let _ = writeln!(out, "  {field:<22} agree {}% of {} calls", n(a.agreement * 100.0), a.pairs);
            for (model, by) in &a.confusion {
                let row: Vec<String> = by.iter().map(|(s, k)| format!("{s} {k}")).collect();
                let _ = writeln!(out, "    model {model}: stand-in {}", row.join(", "));
            }
        }
    }
    if let Some(r) = &c.replayed {
        let _ = writeln!(
            out,
            "\nreplayed with the stand-ins in the models' place: of {} turns, {} would have routed otherwise, {} ended otherwise",
            r.turns, r.routed_differently, r.ended_differently
        );
        for why in &r.failed {
            let _ = writeln!(out, "  not replayed: {why}");
        }
    }
    if let Some(spent) = &c.spent {
        let _ = writeln!(out, "\nspent: {} calls, {:.4}", spent.calls, spent.usd);
    }
    out
}

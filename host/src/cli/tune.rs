//! `ruleweave tune PACK --vary NAME=LO..HI --target PLAYER:OUTCOME=SHARE`: the value of a
//! parameter at which a player's games end in an outcome the share of the time a designer wants
//! (see [`ruleweave_lab::simulate::tune`] for how it searches and what "found" promises).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use indicatif::ProgressBar;

use ruleweave_lab::jobs::TuneAsked;
use ruleweave_lab::simulate::tune::{self, Evaluation, TuneReport};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// The parameter to vary and its range: thresholds.medium=40..80.
    #[arg(long, value_name = "NAME=LO..HI")]
    vary: String,
    /// The share wanted: PLAYER:OUTCOME=SHARE (liar:won_*=0.3; OUTCOME ending in `*` adds up
    /// every outcome it begins).
    #[arg(long, value_name = "PLAYER:OUTCOME=SHARE")]
    target: String,
    /// How close to the share is close enough: the answer's 95% interval lies within it.
    #[arg(long, default_value_t = 0.05)]
    within: f64,
    /// The most games one value gets (its interval narrows as they double from 100).
    #[arg(long, default_value_t = tune::GAMES_MAX)]
    games_max: u32,
    /// The most games the whole search plays.
    #[arg(long, default_value_t = 40_000)]
    budget: u64,
    /// Choose a session option (repeatable): --set difficulty=hard.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Set another number of the pack's params for the run (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// What seeds the games: the same seed, the same answer.
    #[arg(long, default_value = ruleweave_lab::jobs::SEED)]
    seed: String,
    /// Games played at once (default: one per core).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Print the answer as one JSON object.
    #[arg(long)]
    json: bool,
    /// Also write the answer as one self-contained HTML page: each value tried, its share and
    /// interval over the target's band.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// On real models, the cache is on by default: in `ruleweave-cache/` beside the store's file
    /// (or under the root).
    #[command(flatten)]
    spending: super::spending::Flags,
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let config = crate::config::Config::load(root)?;
    let engine = rt.block_on(super::engine(root, &config, "memory"))?;
    let spending = match args.spending.names_models(&config) {
        true => args.spending.clone().caching_by_default(crate::config::cache_dir(root, &config.store)),
        false => args.spending.clone(),
    };
    let real = spending.real(&config, &*super::load_pack(&engine, &args.pack)?)?;
    let engine = match &real {
        Some(real) => rt.block_on(super::spending::engine_with(root, &config, "memory", real.llm.clone()))?,
        None => engine,
    };
    let version = super::load_pack(&engine, &args.pack)?.version().to_owned();
    let engine = super::params_of(&engine, &args.pack, &args.params)?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let options = super::options(&pack, &args.set)?;
    let asked = TuneAsked {
        pack: &args.pack,
        vary: &args.vary,
        target: &args.target,
        within: args.within,
        seed: &args.seed,
        options,
        games_max: args.games_max,
        budget: args.budget,
        // A game waiting on a real model holds a thread, not a core: as many games as calls in flight.
        jobs: args.jobs.or_else(|| real.as_ref().map(|r| r.games_at_once())),
    };
    let mut request = asked.check(&engine).map_err(|r| anyhow::anyhow!(super::refused(&r)))?;
    if let Some(real) = &real {
        // Its most: the calls of its whole games budget, from a hundred of the same games on
        // the stand-ins.
        let standin =
            rt.block_on(super::spending::engine_with(root, &config, "memory", ruleweave::LlmChoice::Standin))?;
        super::load_pack(&standin, &args.pack)?;
        let standin = super::copy_of(&standin, &args.pack, &args.params)?;
        let standin_pack = super::load_pack(&standin, &args.pack)?;
        let player =
            ruleweave_lab::simulate::players(&standin, &standin_pack, std::slice::from_ref(&request.target.player))?;
        let games = args.budget.min(u64::from(tune::FIRST_GAMES)) as u32;
        let batch = ruleweave_lab::simulate::Batch {
            pack: args.pack.clone(),
            games,
            players: vec![request.target.player.clone()],
            seed: args.seed.clone(),
            options: request.options.clone(),
            jobs: None,
            prices: Default::default(),
        };
        let plan = ruleweave_lab::simulate::Plan::of(&batch, &standin_pack);
        let rules = ruleweave_lab::simulate::Rules { engine: &standin, options: &request.options };
        let never = std::sync::atomic::AtomicBool::new(false);
        let estimate = real.estimate(&standin, &standin_pack, &config, || {
            ruleweave_lab::simulate::play(rt.handle(), &plan, &player, &rules, &config.prices, &|| {}, &never);
        });
        estimate.scaled(u64::from(games), args.budget).check(real, args.spending.yes())?;
        request.spend = Some(real.spend.clone());
    }
    let bar = super::simulate::progress(!args.json, args.budget);
    let shown = |b: &ProgressBar, p: &tune::TuneProgress| {
        b.set_position(args.budget - p.games_left);
        b.set_message(format!("{} = {}", request.vary.param, ruleweave::text::decimals(p.value, 6)));
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    let mut report = tune::tune(rt.handle(), &engine, &request, &|p| shown(&bar, p), &never)?;
    report.calibration = super::calibrate::kept_headline(root, rt, &config, &args.pack, &version);
    bar.finish_and_clear();
    if let Some(file) = &args.html {
        std::fs::write(file, crate::pages::tune(&report))
            .map_err(|e| anyhow::anyhow!("cannot write the answer to {}: {e}", file.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_report(&report);
        if let Some(file) = &args.html {
            println!("\nthe answer with its chart: {}", file.display());
        }
    }
    // Like `test`, an answer that was not found fails a script that asked for one; a tune its
    // spending cap stopped exits as a simulate does.
    Ok(match (report.found, report.stopped) {
        (_, Some(_)) => ExitCode::from(3),
        (true, None) => ExitCode::SUCCESS,
        (false, None) => ExitCode::from(1),
    })
}

/// The answer for a person: the value (or that there is none, and why), then every value tried.
fn print_report(r: &TuneReport) {
    let t = &r.target;
    let pct = |x: f64| format!("{}%", ruleweave::text::decimals(x * 100.0, 1));
    let aim = format!("{} {} {} ± {}", t.player, t.outcome, pct(t.share), pct(t.within));
    let at = |e: &Evaluation| format!("{} (95%: {}–{}, {} games)", pct(e.share), pct(e.low), pct(e.high), e.games);
    if r.found {
        println!("{} = {} gives {aim}: {}", r.param, r.value, at(&r.share));
    } else {
        println!("no value of {} found for {aim}", r.param);
        if let Some(why) = &r.why {
            println!("  {why}");
        }
        println!("  nearest: {} = {}: {}", r.param, r.value, at(&r.share));
        if let [below, above] = r.neighbours.as_slice() {
            println!("  either side of the target:");
            for e in [below, above] {
                println!("    {} = {}: {}", r.param, e.value, at(e));
            }
        }
    }
    println!("\nvalues tried ({} games in {:.1} s, seed {})", r.games_played, r.seconds, r.seed);
    for e in &r.evaluations {
        let cached =
            e.cache.map(|c| format!("  ({} calls from the cache, {} asked)", c.hits, c.misses)).unwrap_or_default();
        println!("  {:>8}  {}{cached}", e.value.to_string(), at(e));
    }
    if let Some(spent) = &r.spent {
        let of = spent.budget_usd.map(|b| format!(" of the {b} budget")).unwrap_or_default();
        println!("\nspent: {} calls, {:.4}{of}", spent.calls, spent.usd);
    }
}

//! `ruleweave outcomes PACK`: how the pack's live games ended, by variant of its experiment,
//! against the control, from the store's outcome rows (the report `GET /v1/packs/{pack}/outcomes`
//! answers).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use ruleweave_lab::outcomes::{OutcomesReport, Predicted, VariantOutcomes};

#[derive(clap::Args, Debug)]
// `--version` here is the pack's, not the program's.
#[command(disable_version_flag = true)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// The store the live games are in (default: RULEWEAVE_STORE, ruleweave.toml).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Only games opened since TIME: an RFC 3339 time (2026-12-01T09:00:00Z, or a date) or a
    /// span back from now (24h, 7d).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only games opened before TIME (as --since).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Only games opened at this version of the pack.
    #[arg(long, value_name = "VERSION")]
    version: Option<String>,
    /// Beside each live effect, the one the pack's scripted players predict: their games on the
    /// control's rules and on each variant's, on the stand-ins.
    #[arg(long)]
    predicted: bool,
    /// Games per scripted player on each variant's rules, for --predicted.
    #[arg(long, value_name = "N", default_value_t = 200)]
    predicted_games: u32,
    /// What seeds the predicted games.
    #[arg(long, default_value = ruleweave_lab::jobs::SEED)]
    seed: String,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the report as one self-contained HTML page with charts.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let config = crate::config::Config::load(root)?;
    let time = |flag: &str, text: &Option<String>| -> Result<Option<i64>> {
        let Some(text) = text else { return Ok(None) };
        match ruleweave_lab::outcomes::time_ms(text) {
            Some(ms) => Ok(Some(ms)),
            None => bail!("--{flag} {text}: give an RFC 3339 time (2026-12-01T09:00:00Z) or a span back from now (7d)"),
        }
    };
    let (since, until) = (time("since", &args.since)?, time("until", &args.until)?);
    let url = args.store.as_deref().unwrap_or(&config.store);
    let engine = rt.block_on(super::engine(root, &config, url))?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let store = engine.store();
    let Some(rows) = store.outcomes() else { bail!("the store {url} keeps no outcome rows") };
    let query = ruleweave::store::OutcomeQuery { pack: &args.pack, since, until, version: args.version.as_deref() };
    let mut report = rt.block_on(ruleweave_lab::outcomes::report(rows, &pack, query))?;
    if args.predicted {
        if !(1..=100_000).contains(&args.predicted_games) {
            bail!("--predicted-games is 1 to 100000, not {}", args.predicted_games);
        }
        // Played on the stand-ins, in a store of their own: a prediction keeps nothing.
        let standin =
            rt.block_on(super::spending::engine_with(root, &config, "memory", ruleweave::LlmChoice::Standin))?;
        report.predicted =
            ruleweave_lab::outcomes::predict(rt.handle(), &standin, &args.pack, args.predicted_games, &args.seed)?;
    }
    if let Some(file) = &args.html {
        std::fs::write(file, crate::pages::live(&report))
            .map_err(|e| anyhow::anyhow!("cannot write the report to {}: {e}", file.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_report(&report);
    if let Some(file) = &args.html {
        println!("\nthe report with its charts: {}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The report for a person: each variant's games and shares, then each difference from the
/// control.
fn print_report(r: &OutcomesReport) {
    match (&r.experiment, &r.control) {
        (Some(e), Some(c)) => println!("{}: experiment `{e}`, control `{c}`", r.pack),
        _ => println!("{}: no experiment (every live game together)", r.pack),
    }
    let pct = |x: f64| format!("{}%", ruleweave::text::decimals(100.0 * x, 1));
    for v in &r.variants {
        println!();
        let name = v.name.as_deref().unwrap_or("all games");
        let weight = v.weight.map(|w| format!(", weight {}", ruleweave::text::decimals(w, 2))).unwrap_or_default();
        println!("{name}{weight}: {} made, {} finished", v.made, v.finished);
        for (outcome, s) in &v.outcomes {
            println!("  {outcome:<16} {:>7}  (95%: {}–{})", pct(s.share), pct(s.low), pct(s.high));
        }
        for (field, spread) in &v.tracked {
            let n = |x: Option<f64>| x.map_or("-".to_owned(), |x| ruleweave::text::decimals(x, 2));
            println!("  {field:<16} median {} (p10 {}, p90 {})", n(spread.median), n(spread.p10), n(spread.p90));
        }
        print_against(v, r.control.as_deref(), r.predicted.as_ref());
    }
}

fn print_against(v: &VariantOutcomes, control: Option<&str>, predicted: Option<&Predicted>) {
    let Some(control) = control.filter(|_| !v.against_control.is_empty()) else { return };
    let points = |x: f64| format!("{} points", ruleweave_lab::outcomes::points(x));
    println!("  against {control}:");
    for d in &v.against_control {
        let verdict = d.verdict();
        println!("    {:<16} {} (95%: {} to {}), {verdict}", d.outcome, points(d.delta), points(d.low), points(d.high));
        let Some(p) = predicted else { continue };
        let Some(variant) = &v.name else { continue };
        match p.effects_on(variant, &d.outcome).as_slice() {
            [] => {}
            [one] => println!("    {:<16} predicted {} ({})", "", points(one.delta), one.player),
            [lo, .., hi] => {
                println!(
                    "    {:<16} predicted {} ({}) to {} ({})",
                    "",
                    points(lo.delta),
                    lo.player,
                    points(hi.delta),
                    hi.player
                )
            }
        }
    }
}

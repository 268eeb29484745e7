//! `ruleweave bench PACK`: times a pack's selectors on states recorded from real sessions, each
//! scorer scripted against its native twin where the host has one, and prints a table.
//!
//! States come from `ruleweave run` output (`--states FILE`: JSON lines with `turn` and `state`)
//! or from stored sessions (`--session ID`, from `play` or `serve`). Each state is timed as the
//! selection would see it in the turn after the one that recorded it. With `--embeddings`, a
//! selector's `similarity:` compares by the stand-in's vectors, made once per state before timing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use ruleweave::{ScorerImpl, Selection};
use serde_json::Value;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// `ruleweave run PACK` output: JSON lines with `turn` and `state` (repeatable).
    #[arg(long, value_name = "FILE")]
    states: Vec<PathBuf>,
    /// A stored session of the pack, every turn's state (repeatable).
    #[arg(long, value_name = "ID")]
    session: Vec<String>,
    /// Where `--session`s are kept (default sqlite://ruleweave.db, or RULEWEAVE_STORE).
    #[arg(long)]
    store: Option<String>,
    /// Only this selector (default: every selector of the pack).
    #[arg(long)]
    selector: Option<String>,
    /// Runs over every state, per scorer and implementation.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Score as with embeddings on: a selector's `similarity:` texts get the stand-in's vectors
    /// (made once per state, not timed). Default: similarity by words.
    #[arg(long)]
    embeddings: bool,
}

/// One row of the table: the whole selection, or one scorer over every candidate.
enum Row {
    Whole,
    Scorer(String),
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let config = crate::config::Config::load(root)?;
    // Only `--session` reads a store: without one, nothing is opened (or created) on disk.
    let store = match (&args.store, args.session.is_empty()) {
        (_, true) => "memory".to_owned(),
        (Some(s), false) => s.clone(),
        (None, false) => config.store.clone(),
    };
    let engine = rt.block_on(super::engine(root, &config, &store))?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let mut states = Vec::new();
    for file in &args.states {
        states.extend(read_states(file)?);
    }
    for id in &args.session {
        states.extend(rt.block_on(engine.turn_states(id))?);
    }
    if states.is_empty() {
        bail!(
            "no states to time: record some with `ruleweave run {p} --input FILE > states.jsonl` and pass \
             --states states.jsonl, or play a session and pass --session ID",
            p = pack.name()
        );
    }
    let selectors: Vec<String> = match &args.selector {
        Some(s) => vec![s.clone()],
        None => pack.selectors().into_iter().map(str::to_owned).collect(),
    };
    if selectors.is_empty() {
        bail!("pack `{}` declares no selectors: there is nothing to time", pack.name());
    }
    for name in selectors {
        let (mut runs, embedded) = selections(&engine, pack.name(), &name, &states, args.embeddings)?;
        let table = time_rows(&mut runs, args.iterations)?;
        let similarity = match (args.embeddings, embedded) {
            (false, _) => "similarity by words".to_owned(),
            (true, 0) => "similarity by words (the selector has no `similarity:`)".to_owned(),
            (true, n) => format!("similarity by the stand-in's embeddings ({n} texts)"),
        };
        println!(
            "{} / {name}: {} states, {} runs each, {similarity}; mean per state",
            pack.name(),
            runs.len(),
            args.iterations
        );
        print_table(table);
    }
    Ok(ExitCode::SUCCESS)
}

/// Selector `name` ready over each state (with the stand-in's vectors when `embeddings`), and
/// how many texts got vectors.
fn selections(
    engine: &ruleweave::Engine,
    pack: &str,
    name: &str,
    states: &[(u64, Value)],
    embeddings: bool,
) -> Result<(Vec<Selection>, usize)> {
    let mut runs = Vec::new();
    let mut embedded = 0;
    for (turn, state) in states {
        let mut sel = Selection::new(engine, pack, name, state, *turn)?;
        if embeddings {
            let vectors = sel.standin_embeddings()?;
            embedded += vectors.len();
            sel.set_embeddings(Some(vectors));
        }
        runs.push(sel);
    }
    Ok((runs, embedded))
}

/// A row of the table: its label, and the mean time scripted and native (where it has one).
type Timed = (String, Option<Duration>, Option<Duration>);

/// Times the whole selection and each scorer, scripted and native, with a progress bar.
fn time_rows(runs: &mut [Selection], iterations: u32) -> Result<Vec<Timed>> {
    let scorers = runs[0].scorers();
    let all_native = scorers.iter().all(|(_, _, native)| *native);
    let mut rows = vec![(Row::Whole, true, all_native)];
    rows.extend(scorers.into_iter().map(|(id, script, native)| (Row::Scorer(id), script, native)));
    let work: u64 = rows.iter().map(|(_, s, n)| u64::from(*s) + u64::from(*n)).sum();
    let bar = ProgressBar::new(work * u64::from(iterations));
    bar.set_style(
        ProgressStyle::with_template("{msg:>28} [{bar:30}] {pos}/{len} runs")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut table = Vec::new();
    for (row, script, native) in &rows {
        let label = match row {
            Row::Whole => "whole selection".to_owned(),
            Row::Scorer(id) => id.clone(),
        };
        bar.set_message(label.clone());
        let mut time = |imp: ScorerImpl| -> Result<Duration> {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                for sel in runs.iter_mut() {
                    let start = Instant::now();
                    match row {
                        Row::Whole => sel.run(Some(imp)).map(|_| ()),
                        Row::Scorer(id) => sel.run_scorer(id, imp).map(|_| ()),
                    }
                    .with_context(|| label.clone())?;
                    total += start.elapsed();
                }
                bar.inc(1);
            }
            Ok(total / (iterations * runs.len() as u32))
        };
        let scripted = if *script { Some(time(ScorerImpl::Script)?) } else { None };
        let native_t = if *native { Some(time(ScorerImpl::Native)?) } else { None };
        table.push((label, scripted, native_t));
    }
    bar.finish_and_clear();
    Ok(table)
}

fn print_table(table: Vec<Timed>) {
    println!("{:<28} {:>12} {:>12} {:>8}", "", "scripted", "native", "ratio");
    for (label, scripted, native) in table {
        let cell = |d: Option<Duration>| d.map_or("—".to_owned(), |d| format!("{:.1} µs", d.as_secs_f64() * 1e6));
        let ratio = match (scripted, native) {
            (Some(s), Some(n)) if !n.is_zero() => format!("{:.2}x", s.as_secs_f64() / n.as_secs_f64()),
            _ => "—".to_owned(),
        };
        println!("{label:<28} {:>12} {:>12} {ratio:>8}", cell(scripted), cell(native));
    }
    println!("(a scorer alone includes making the candidates: the focus generators run either way)");
}

/// `(turn, state)` of every line of `ruleweave run` output that has both.
fn read_states(file: &Path) -> Result<Vec<(u64, Value)>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value =
            serde_json::from_str(line).with_context(|| format!("{}:{}: not a JSON line", file.display(), i + 1))?;
        match (v.get("turn").and_then(Value::as_u64), v.get("state")) {
            (Some(turn), Some(state)) if state.is_object() => out.push((turn, state.clone())),
            _ if v.get("error").is_some() => {}
            _ => bail!("{}:{}: a line of `ruleweave run` output has `turn` and `state`", file.display(), i + 1),
        }
    }
    Ok(out)
}

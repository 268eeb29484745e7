//! `ruleweave test [PACK] [--filter NAME] [--bless] [--param NAME=VALUE]...`: a pack's test cases, `tests/<pack>/*.yaml`,
//! run offline and in parallel.
//!
//! A case is the options, the inputs turn by turn, the model replies to use (by profile, in the
//! order the calls are made; a call without one gets the pack's stand-in) and what to expect after
//! chosen turns: fields of the state with their values (a map compares the keys it gives), or an
//! error. `--bless` writes what the pack does now into each case's expectations (the fields
//! already expected, or the pack's output fields for a turn that expects nothing); `play` writes a
//! played session as a case with `/save NAME`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use ruleweave::Engine;

use ruleweave_lab::cases::{Case, case_files, pick, read_case, write_case};
use ruleweave_lab::replay::{Fallback, Replayer};
use serde_json::Value;

#[derive(clap::Args)]
pub(super) struct Args {
    /// Only this pack's cases (default: every pack that has a tests/<pack>/ folder).
    pack: Option<String>,
    /// Only cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Rewrite each case's expectations from what the pack does now.
    #[arg(long)]
    bless: bool,
    /// Set a number of the pack's params for this run, without editing the file (repeatable;
    /// needs PACK): --param thresholds.medium=55. What the cases expect is then checked
    /// against the pack with those values.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Also print the engine's log warnings as the cases run (a node's fallback, a script's
    /// `warn()`); without it only the results are printed, and errors.
    #[arg(long, short)]
    pub(super) verbose: bool,
}

/// Where expectation and value differ, one line per leaf: `decision.strategy: expected "deepen",
/// got "broaden"`. A map compares only the keys the expectation gives.
pub(super) fn mismatches(path: &str, expected: &Value, got: &Value, out: &mut Vec<String>) {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            for (k, v) in e {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                match g.get(k) {
                    Some(gv) => mismatches(&p, v, gv, out),
                    None => out.push(format!("{p}: expected {}, missing", show(v))),
                }
            }
        }
        (Value::Array(e), Value::Array(g)) if e.len() == g.len() => {
            for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                mismatches(&format!("{path}[{i}]"), ev, gv, out);
            }
        }
        (Value::Array(e), Value::Array(g)) => {
            out.push(format!("{path}: expected {} items, got {}: {}", e.len(), g.len(), show(got)))
        }
        (e, g) if numbers_equal(e, g) => {}
        (e, g) if e != g => out.push(format!("{path}: expected {}, got {}", show(e), show(g))),
        _ => {}
    }
}

/// 3 and 3.0 are the same expectation (YAML writes whole floats as integers).
fn numbers_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
        _ => false,
    }
}

fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 80 { s } else { format!("{}…", s.chars().take(79).collect::<String>()) }
}

/// One case's outcome.
struct Outcome {
    pack: String,
    name: String,
    path: PathBuf,
    turns: usize,
    failures: Vec<String>,
    notes: Vec<String>,
    blessed: Option<Case>,
}

/// Runs `case` of `pack`: every turn, each expectation checked; with `bless`, the case rewritten
/// from what happened.
async fn run_case(engine: &Engine, pack: &str, case: &Case, bless: bool) -> Result<(Vec<String>, Vec<String>, Case)> {
    let replayer = Replayer::new(engine, pack, Fallback::Standin)?;
    let diffs = replayer.replay(&case.recording(pack)).await?;
    let outputs: Vec<String> = engine.packs().get(pack)?.outputs().to_vec();
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    let mut blessed = case.clone();
    for ((t, d), b) in case.turns.iter().zip(&diffs).zip(&mut blessed.turns) {
        let at = format!("turn {}", d.turn);
        notes.extend(d.notes.iter().filter(|n| !n.contains("(the fallback answered)")).map(|n| format!("{at}: {n}")));
        match (&t.expect_error, &d.error) {
            (Some(want), Some(got)) if got.contains(want.as_str()) => {}
            (Some(want), Some(got)) => failures.push(format!("{at}: expected an error saying {want:?}, got: {got}")),
            (Some(want), None) => failures.push(format!("{at}: expected an error saying {want:?}; the turn succeeded")),
            (None, Some(got)) => failures.push(format!("{at}: the turn failed: {got}")),
            (None, None) => {}
        }
        if d.error.is_none() {
            if let Some(expect) = &t.expect {
                let mut out = Vec::new();
                mismatches("", &Value::Object(expect.clone()), &d.state, &mut out);
                failures.extend(out.into_iter().map(|m| format!("{at}: {m}")));
            }
            if bless {
                let fields: Vec<String> = match &t.expect {
                    Some(e) if !e.is_empty() => e.keys().cloned().collect(),
                    _ => outputs.clone(),
                };
                b.expect = Some(pick(&d.state, &fields));
                b.expect_error = None;
            }
        } else if bless {
            b.expect = None;
            b.expect_error = d.error.clone();
        }
        if bless {
            // The replies the rules no longer ask for go: each profile's last ones.
            for profile in &d.unused {
                if let Some(replies) = b.replies.get_mut(profile) {
                    replies.pop();
                }
            }
            b.replies.retain(|_, replies| !replies.is_empty());
        }
    }
    Ok((failures, notes, blessed))
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    // The binary's native twins, so a case plays a pack as `play` does.
    let mut engine = ruleweave_natives::register(Engine::builder(root)).build();
    if !args.params.is_empty() {
        let Some(pack) = &args.pack else { bail!("--param sets one pack's params: name the PACK") };
        if args.bless {
            bail!("--bless with --param would write what the pack does with other values than its files say");
        }
        engine = super::params_of(&engine, pack, &args.params)?;
    }
    let packs = match &args.pack {
        Some(p) => vec![p.clone()],
        None => engine.packs().names()?.into_iter().filter(|p| root.join("tests").join(p).is_dir()).collect(),
    };
    let mut jobs = Vec::new();
    for pack in &packs {
        if let Err(e) = engine.packs().get(pack) {
            eprint!("{}", crate::diagnostics::render(&e, root));
            bail!("pack `{pack}` did not load");
        }
        for path in case_files(root, pack) {
            // A case is a file of the root's own: `test` prints a case's lines and `--bless`
            // rewrites it, so a link (to a file anywhere) is refused, unread.
            let linked = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
            if linked(&path) || linked(&root.join("tests")) || linked(&root.join("tests").join(pack)) {
                bail!(
                    "{} is a link (or in one): `ruleweave test` reads and --bless rewrites only the root's own files",
                    path.display()
                );
            }
            let case = read_case(&path)?;
            if args.filter.as_ref().is_some_and(|f| !case.name.contains(f.as_str())) {
                continue;
            }
            jobs.push((pack.clone(), path, case));
        }
    }
    if jobs.is_empty() {
        println!("no test cases (a pack's cases are tests/<pack>/*.yaml)");
        return Ok(ExitCode::SUCCESS);
    }
    let engine = Arc::new(engine);
    let bless = args.bless;
    let outcomes: Vec<Outcome> = rt.block_on(async {
        let tasks: Vec<_> = jobs
            .into_iter()
            .map(|(pack, path, case)| {
                let engine = engine.clone();
                tokio::spawn(async move {
                    let turns = case.turns.len();
                    let name = case.name.clone();
                    match run_case(&engine, &pack, &case, bless).await {
                        Ok((failures, notes, blessed)) => {
                            Outcome { pack, name, path, turns, failures, notes, blessed: Some(blessed) }
                        }
                        Err(e) => Outcome {
                            pack,
                            name,
                            path,
                            turns,
                            failures: vec![format!("{e:#}")],
                            notes: Vec::new(),
                            blessed: None,
                        },
                    }
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            match t.await {
                Ok(o) => out.push(o),
                Err(e) => eprintln!("a test case crashed: {e}"),
            }
        }
        out
    });
    let mut failed = 0;
    for o in &outcomes {
        if bless && let Some(case) = &o.blessed {
            write_case(&o.path, case)?;
            println!("blessed {}/{} ({}) → {}", o.pack, o.name, turns(o.turns), o.path.display());
            continue;
        }
        if o.failures.is_empty() {
            println!("ok    {}/{} ({})", o.pack, o.name, turns(o.turns));
        } else {
            failed += 1;
            println!("FAIL  {}/{} ({})", o.pack, o.name, o.path.display());
            for f in &o.failures {
                println!("        {f}");
            }
        }
        for n in &o.notes {
            println!("        note: {n}");
        }
    }
    if bless {
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} passed, {failed} failed", outcomes.len() - failed);
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// "1 turn", "3 turns".
fn turns(n: usize) -> String {
    if n == 1 { "1 turn".to_owned() } else { format!("{n} turns") }
}

//! `ruleweave check`: load and validate every pack.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use ruleweave::Engine;

pub(super) fn run(root: &Path) -> Result<ExitCode> {
    // Checking needs no model: the stand-in choice keeps it offline whatever the environment says.
    let engine = ruleweave_natives::register(Engine::builder(root)).build();
    let packs = engine.packs().load_all()?;
    if packs.is_empty() {
        println!("no packs under {} (config/*.yaml)", root.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = 0;
    for (name, result) in packs {
        match result {
            Ok(pack) => {
                let nodes = pack.nodes().count();
                let standin = if pack.has_standin() { ", stand-in model" } else { "" };
                let warned = match pack.warnings().len() {
                    0 => String::new(),
                    1 => ", 1 warning".to_owned(),
                    n => format!(", {n} warnings"),
                };
                println!("ok      {name} (version {}, {nodes} nodes{standin}{warned})", pack.version());
                if let Some(e) = pack.experiment() {
                    println!("        experiment `{}`: {}", e.name, shares(e));
                }
                for w in pack.warnings() {
                    eprint!("{}", crate::diagnostics::render_warning(w, root));
                }
            }
            Err(e) => {
                failed += 1;
                let n = e.count();
                println!("FAILED  {name} ({n} problem{})", if n == 1 { "" } else { "s" });
                eprint!("{}", crate::diagnostics::render(&e, root));
            }
        }
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// An experiment's variants with their shares of new players and what each sets:
/// `control 60%, lenient 20% (thresholds.medium=55)`.
fn shares(e: &ruleweave::Experiment) -> String {
    let total: f64 = e.variants.iter().map(|v| v.weight).sum();
    let shown: Vec<String> = e
        .variants
        .iter()
        .map(|v| {
            let share = ruleweave::text::decimals(100.0 * v.weight / total, 1);
            let sets: Vec<String> = v.params.iter().map(|(path, value)| format!("{path}={value}")).collect();
            match sets.is_empty() {
                true => format!("{} {share}% (the control)", v.name),
                false => format!("{} {share}% ({})", v.name, sets.join(", ")),
            }
        })
        .collect();
    shown.join(", ")
}

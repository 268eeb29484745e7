//! `ruleweave run PACK --input FILE`: one turn per input, one JSON line per turn:
//! `{"turn": n, "output": {...}, "state": {...}}`.
//!
//! A turn that fails prints `{"turn": n, "error": {"code", "message"}}` instead; the session is as
//! it was before that input, the next input goes on from there, and the exit status is 1.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// A YAML or JSON list of inputs: maps of input fields, or strings for one-text-field packs.
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Choose a session option (repeatable): --set difficulty=hard.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Set a number of the pack's params for this run, without editing the file (repeatable):
    /// --param thresholds.medium=55.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Add each turn's events to its line.
    #[arg(long)]
    events: bool,
    /// Keep the session in a store: sqlite://PATH, postgres://... (default: memory, kept nowhere).
    #[arg(long)]
    store: Option<String>,
    /// Who plays (at most 128 printable characters): for a pack with an experiment, the key its
    /// variant is chosen by, so a player keeps their variant from session to session.
    #[arg(long, value_name = "ID")]
    player_id: Option<String>,
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let config = crate::config::Config::load(root)?;
    let engine = rt.block_on(super::engine(root, &config, args.store.as_deref().unwrap_or("memory")))?;
    super::load_pack(&engine, &args.pack)?;
    let engine = super::params_of(&engine, &args.pack, &args.params)?;
    let pack = super::load_pack(&engine, &args.pack)?;
    let options = super::options(&pack, &args.set)?;
    let text = std::fs::read_to_string(&args.input).with_context(|| format!("cannot read {}", args.input.display()))?;
    let inputs =
        match super::parse_value(&text).with_context(|| format!("{} is not YAML or JSON", args.input.display()))? {
            Value::Array(items) => items,
            other => bail!("{} must hold a list of inputs, not {}", args.input.display(), kind(&other)),
        };
    let how = ruleweave::OpenAs { player: args.player_id.clone(), ..ruleweave::OpenAs::default() };
    let mut session = rt.block_on(engine.open_as(&args.pack, &options, how))?;
    let variant = session.variant().map(|v| format!(", variant {v}")).unwrap_or_default();
    eprintln!(
        "ruleweave: {} (version {}), session {}{variant}, on {}",
        pack.name(),
        pack.version(),
        session.id(),
        super::model_banner(&engine, &pack)
    );
    for line in super::key_lines(&config) {
        eprintln!("ruleweave: {line}");
    }
    let mut stdout = std::io::stdout().lock();
    let mut failed = false;
    for item in inputs {
        let number = session.turns() + 1;
        let line = match session.input_from(item) {
            Err(e) => {
                failed = true;
                json!({"turn": number, "error": {"code": e.kind().code(), "message": e.to_string()}})
            }
            Ok(input) => match rt.block_on(session.turn(input)) {
                Ok(r) => {
                    let mut line =
                        json!({"turn": r.turn, "output": r.output, "state": session.state(), "display": r.display});
                    if let Some(p) = &r.paused {
                        line["paused"] = json!(p);
                    }
                    if args.events {
                        line["events"] = serde_json::to_value(&r.events)?;
                    }
                    line
                }
                Err(e) => {
                    failed = true;
                    json!({"turn": number, "error": crate::diagnostics::json(&e)})
                }
            },
        };
        writeln!(stdout, "{line}")?;
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "a map",
        Value::String(_) => "a string",
        Value::Null => "nothing",
        _ => "a single value",
    }
}

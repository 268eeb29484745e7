//! `ruleweave replay (--session ID | --file CASE) [--live] [--json]`: a recorded session (or a
//! test case) played again on the pack as it is now, with the recorded model and search answers,
//! and what changed, turn by turn.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use ruleweave::LlmChoice;
use ruleweave_lab::replay::{Fallback, Recording, Replayer, TurnDiff};

use crate::config::Config;

#[derive(clap::Args)]
pub(super) struct Args {
    /// A stored session.
    #[arg(long, conflicts_with = "file")]
    session: Option<String>,
    /// A test case file (tests/<pack>/NAME.yaml); its pack is the folder's name.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Where the session is kept (default: the configured store).
    #[arg(long)]
    store: Option<String>,
    /// Ask the real provider (and search engine) what the recording cannot answer.
    #[arg(long)]
    live: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let config = Config::load(root)?;
    let store = args.store.clone().unwrap_or_else(|| config.store.clone());
    let engine = rt.block_on(super::engine(root, &config, &store))?;
    let (rec, expected) = match (&args.session, &args.file) {
        (Some(id), _) => (rt.block_on(Recording::from_store(&engine, id))?, None),
        (None, Some(file)) => {
            let pack =
                file.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let case = ruleweave_lab::cases::read_case(file)?;
            let expected: Vec<_> = case.turns.iter().map(|t| t.expect.clone()).collect();
            (case.recording(&pack), Some(expected))
        }
        (None, None) => bail!("replay what? --session ID or --file CASE"),
    };
    super::load_pack(&engine, &rec.pack)?;
    let fallback = if args.live {
        match engine.llm() {
            LlmChoice::Provider(p) => Fallback::Live(p.clone(), config.search.clone()),
            LlmChoice::Standin | LlmChoice::ByProfile(_) => {
                bail!("--live needs a model provider: set OPENAI_API_KEY (or RULEWEAVE_LLM)")
            }
        }
    } else if args.file.is_some() {
        // A case is replayed as `ruleweave test` plays it: a call it gives no reply for is
        // answered by the pack's stand-in, so an unchanged pack replays unchanged.
        Fallback::Standin
    } else {
        Fallback::Fail
    };
    let replayer = Replayer::new(&engine, &rec.pack, fallback)?;
    let mut diffs = rt.block_on(replayer.replay(&rec))?;
    if let Some(expected) = expected {
        // A case records no states: compare what it expects, as `ruleweave test` does (the
        // fields and keys it names; a field that matches there is unchanged here).
        for (d, e) in diffs.iter_mut().zip(expected) {
            if let Some(e) = e {
                let before = serde_json::Value::Object(e.clone());
                let mut now = serde_json::Map::new();
                for (k, want) in &e {
                    let got = d.state.get(k).cloned().unwrap_or_default();
                    let mut differs = Vec::new();
                    super::test::mismatches(k, want, &got, &mut differs);
                    now.insert(k.clone(), if differs.is_empty() { want.clone() } else { got });
                }
                d.changes = ruleweave_lab::replay::diff(&before, &serde_json::Value::Object(now));
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"pack": rec.pack, "turns": diffs}))?);
    } else {
        print(&rec, &diffs);
    }
    Ok(ExitCode::SUCCESS)
}

fn print(rec: &Recording, diffs: &[TurnDiff]) {
    println!("replaying {} turn(s) of {} on the pack as it is now", diffs.len(), rec.pack);
    for d in diffs {
        println!("{}", d.summary());
        for n in &d.notes {
            println!("    note: {n}");
        }
    }
    let changed = diffs.iter().filter(|d| !d.is_same()).count();
    println!("{changed} of {} turn(s) changed", diffs.len());
}

//! `ruleweave sessions [PACK] [--json]`: the sessions a store keeps, newest first, with the ids
//! `replay --session` and `play --session` take.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use ruleweave::store::{SessionQuery, needs, rfc3339_of};

use crate::config::Config;

#[derive(clap::Args)]
pub(super) struct Args {
    /// Only this pack's sessions.
    pack: Option<String>,
    /// Where the sessions are kept (default: the configured store, ruleweave.db under the root).
    #[arg(long)]
    store: Option<String>,
    /// The most sessions to list, newest first.
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// One JSON object a line (id, pack, pack_version, turns, created_at, updated_at, finished,
    /// forked_from), times in RFC 3339 as the HTTP API gives them.
    #[arg(long)]
    json: bool,
}

/// The most sessions one listing prints.
const MOST_LISTED: u32 = 10_000;

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    if !(1..=MOST_LISTED).contains(&args.limit) {
        bail!("--limit is 1 to {MOST_LISTED}, not {}", args.limit);
    }
    let config = Config::load(root)?;
    let url = args.store.clone().unwrap_or_else(|| config.store.clone());
    let found = rt.block_on(async {
        let store = ruleweave::store::open(&url).await?;
        let query = SessionQuery { pack: args.pack.as_deref(), limit: args.limit, before: None, only: None };
        needs(&*store, store.index(), "a session index")?.list(query).await
    })?;
    if args.json {
        for s in &found {
            let forked_from =
                s.parent.as_ref().map(|(id, checkpoint)| serde_json::json!({"id": id, "checkpoint": checkpoint}));
            let line = serde_json::json!({
                "id": s.id,
                "pack": s.pack,
                "pack_version": s.pack_version,
                "turns": s.turns,
                "created_at": rfc3339_of(s.created_at),
                "updated_at": rfc3339_of(s.updated_at),
                "finished": s.finished,
                "forked_from": forked_from,
            });
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        let which = args.pack.as_ref().map_or(String::new(), |p| format!(" of {p}"));
        println!("no sessions{which} in {}", ruleweave::store::redact(&url));
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:<22} {:<12} {:>5}  {:<24}  finished", "id", "pack", "turns", "updated");
    for s in &found {
        println!(
            "{:<22} {:<12} {:>5}  {:<24}  {}",
            s.id,
            s.pack,
            s.turns,
            rfc3339_of(s.updated_at),
            if s.finished { "yes" } else { "no" }
        );
    }
    if found.len() == args.limit as usize {
        println!("(the newest {}: --limit N lists more)", args.limit);
    }
    println!("\nruleweave replay --session ID plays one again; ruleweave play PACK --session ID goes on with it");
    Ok(ExitCode::SUCCESS)
}

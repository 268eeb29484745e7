//! `ruleweave serve`: the HTTP API and the web console.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;

use crate::config::{Config, redact};
use crate::server::{self, AppState};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The address to listen on (default 127.0.0.1:8080, or RULEWEAVE_ADDR, or ruleweave.toml).
    #[arg(long)]
    addr: Option<SocketAddr>,
    /// Where sessions are kept: memory, sqlite://PATH, postgres://... (default sqlite://ruleweave.db).
    #[arg(long)]
    store: Option<String>,
    /// Reload packs as their files change (config/, scripts/, prompts/): each edit that validates
    /// serves from the next turn on; a broken one is logged and the last good version serves.
    #[arg(long)]
    watch: bool,
}

pub(super) fn run(root: &Path, rt: &tokio::runtime::Runtime, args: Args) -> Result<ExitCode> {
    let mut config = Config::load(root)?;
    if let Some(addr) = args.addr {
        config.addr = addr;
    }
    if let Some(store) = args.store {
        config.store = store;
    }
    config.check_exposure()?;
    rt.block_on(async {
        let engine = super::engine_for(root, &config, &config.store, Some(config.allowed_models.clone())).await?;
        eprintln!(
            "ruleweave: packs from {}, sessions in {}, models: {}",
            root.display(),
            redact(&config.store),
            engine.llm().describe()
        );
        for line in super::key_lines(&config) {
            eprintln!("ruleweave: {line}");
        }
        if config.server.token.is_none() {
            eprintln!(
                "ruleweave: no token (RULEWEAVE_TOKEN): anyone who can reach {} can read and play every session",
                config.addr
            );
        }
        let state = Arc::new(AppState::new(engine.clone(), config.server.clone()));
        let _watcher = match args.watch {
            true => {
                let store = engine.store().file().into_iter().collect::<Vec<_>>();
                let w = ruleweave::Watcher::start_except(engine.packs(), &store)?;
                eprintln!("ruleweave: watching config/, scripts/, prompts/, data/ and schemas/ for edits");
                tokio::spawn(log_reloads(engine.packs().subscribe(), engine.root().to_path_buf()));
                Some(w)
            }
            false => None,
        };
        server::run(state, config.addr).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Prints each reload on stderr, the way `play` does, for whoever watches the server's log.
async fn log_reloads(mut rx: tokio::sync::broadcast::Receiver<ruleweave::PackEvent>, root: std::path::PathBuf) {
    loop {
        match rx.recv().await {
            Ok(e) => eprint!("ruleweave: {}", super::describe_reload(&e, &root)),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

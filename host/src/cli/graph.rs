//! `ruleweave graph PACK`: the graph as a Mermaid flowchart, or with `--html FILE` as a page that
//! draws it (SVG laid out here: nothing fetched, opens offline).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use ruleweave::Engine;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
    /// Write the graph drawn as SVG into one self-contained HTML page, instead of printing Mermaid.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

pub(super) fn run(root: &Path, args: Args) -> Result<ExitCode> {
    let engine = ruleweave_natives::register(Engine::builder(root)).build();
    let pack = super::load_pack(&engine, &args.pack)?;
    match &args.html {
        Some(file) => {
            std::fs::write(file, crate::drawing::page(pack.name(), &pack.drawing()))
                .with_context(|| format!("cannot write the graph to {}", file.display()))?;
            println!("the graph of {}: {}", pack.name(), file.display());
        }
        None => print!("{}", pack.mermaid()),
    }
    Ok(ExitCode::SUCCESS)
}

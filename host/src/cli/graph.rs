//! `ruleweave graph PACK`: the graph as a Mermaid flowchart.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use ruleweave::Engine;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The pack (config/<PACK>.yaml).
    pack: String,
}

pub(super) fn run(root: &Path, args: Args) -> Result<ExitCode> {
    let engine = ruleweave_natives::register(Engine::builder(root)).build();
    let pack = super::load_pack(&engine, &args.pack)?;
    print!("{}", pack.mermaid());
    Ok(ExitCode::SUCCESS)
}

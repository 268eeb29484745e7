//! The ruleweave host: the `ruleweave` command line, the HTTP server and its configuration.
//! A library so the server can be started in-process (tests, or a program embedding the API).

#![warn(unreachable_pub)]

pub mod cli;
pub mod config;
pub mod diagnostics;
pub mod drawing;
pub mod pages;
pub mod server;
pub mod telemetry;

/// An engine on `root`'s packs that plays on their stand-in models (and search stand-ins), into
/// a store of its own, with the shipped native nodes and scorers: what the server's batches of
/// simulated games run on.
pub async fn standin_engine(root: &std::path::Path) -> ruleweave::Result<ruleweave::Engine> {
    use ruleweave::embed::{self, Model, Options};
    let options = Options { root: root.to_owned(), store: "memory".into(), model: Model::Standin };
    embed::open_engine(options, ruleweave_natives::register).await
}

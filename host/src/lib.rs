//! The ruleweave host: the `ruleweave` command line, one file per subcommand, over the server
//! (`ruleweave-server`, re-exported here as [`server`] with its configuration and telemetry),
//! the lab and the language server. A library so the command line's parts can be tested and
//! benchmarked in-process.

#![warn(unreachable_pub)]

pub mod cli;
pub mod diagnostics;

pub use ruleweave_server as server;
pub use ruleweave_server::{config, drawing, pages, standin_engine, telemetry};

//! `ruleweave serve`: the HTTP API, the web console, the chat face, health and metrics
//! (`http`, re-exported here), over its own tables of keys and jobs (`tables`); with the host's
//! configuration (`ruleweave.toml`, the environment, flags), its telemetry, and the pages it
//! draws (a pack's graph, the lab's reports), which the command line shares.

#![warn(unreachable_pub)]

pub mod config;
pub mod drawing;
pub mod pages;
pub mod tables;
pub mod telemetry;

mod http;

pub use http::*;

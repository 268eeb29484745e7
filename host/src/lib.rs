//! The ruleweave host: the `ruleweave` command line, the HTTP server and its configuration.
//! A library so the server can be started in-process (tests, or a program embedding the API).

#![warn(unreachable_pub)]

pub mod cli;
pub mod config;
pub mod diagnostics;
pub mod drawing;
mod input;
pub mod server;
pub mod simulate;
pub mod telemetry;

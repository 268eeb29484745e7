//! The host's end-to-end tests, linked as one binary: one link and one executable instead of one
//! per file, which keeps a clean build's disk and link time small. A new file here needs its `mod`
//! line below; `every_file_is_declared` fails until it has one.

mod support;

mod bindings;
mod chat;
mod cli;
mod conformance;
mod connections;
mod console;
mod debate;
mod declared;
mod designer;
mod designer_loop;
mod fuzz;
mod hostile;
mod house;
mod idle;
mod keys;
mod lobby;
mod lsp;
mod migrations;
mod openapi;
mod party;
mod providers;
mod quotas;
mod real_models;
mod serve;
mod server;
mod stepping;
mod telemetry;
mod tune;
mod tutorial;
mod variants;

#[test]
fn every_file_is_declared() {
    declared::every_file_is_declared(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/main.rs"));
}

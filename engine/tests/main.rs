//! The engine's integration tests, linked as one binary: one link and one executable instead of
//! one per file, which keeps a clean build's disk and link time small. A new file here needs its
//! `mod` line below; `every_file_is_declared` fails until it has one.

mod support;

mod data;
mod debate;
mod designer;
mod display;
mod docs;
#[cfg(feature = "watch")]
mod embedding;
mod house;
mod interview;
mod map;
mod packs;
mod party;
mod pirate;
#[cfg(feature = "watch")]
mod reload;
mod replies;
mod runtime;
mod select;
#[cfg(feature = "sqlite")]
mod sessions;
mod stepping;

#[path = "../../tests/declared.rs"]
mod declared;

#[test]
fn every_file_is_declared() {
    declared::every_file_is_declared(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/main.rs"));
}

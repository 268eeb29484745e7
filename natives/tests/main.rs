//! The native twins' tests, linked as one binary. A new file here needs its `mod` line below;
//! `every_file_is_declared` fails until it has one.

mod designer;
mod twins;

#[path = "../../tests/declared.rs"]
mod declared;

#[test]
fn every_file_is_declared() {
    declared::every_file_is_declared(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/main.rs"));
}

//! Each test binary is one `main.rs` declaring its directory's files as modules; a file it leaves
//! out would compile into nothing and never run. This check, called by every such binary, fails
//! instead.

use std::path::Path;

/// Panics naming each `*.rs` file beside `main` that `main` does not declare with `mod name;`.
pub fn every_file_is_declared(main: &Path) {
    let source = std::fs::read_to_string(main).unwrap();
    let mut missing: Vec<String> = std::fs::read_dir(main.parent().unwrap())
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().ok()?;
            Some(name.strip_suffix(".rs")?.to_owned())
        })
        .filter(|name| {
            let declaration = format!("mod {name};");
            name != "main" && !source.lines().any(|l| l == declaration)
        })
        .collect();
    missing.sort();
    assert!(missing.is_empty(), "{} leaves out {missing:?}: add `mod name;` lines for them", main.display());
}

//! The engine's house stays navigable: `engine/src/README.md` names every file, so the map a
//! newcomer reads is the tree they find. (That no module reaches back to one that depends on it
//! is held for every crate of the workspace by `tests/house.rs`.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as paths relative to `src/`.
fn files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(src()).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_readme_maps_every_file() {
    let readme = std::fs::read_to_string(src().join("README.md")).unwrap();
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `")).collect();
    let first_cell = |row: &str| row.split('|').nth(1).unwrap_or("").trim().trim_matches('`').to_owned();
    let named = |row: &str, name: &str| row.contains(&format!("`{name}`")) || row.contains(&format!("`{name}.rs`"));
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut missing = Vec::new();
    for file in all.iter().filter(|f| *f != "lib.rs" || !rows.iter().any(|r| first_cell(r) == "lib.rs")) {
        // A row of its own, or the row of a folder it is in that names it (by its path under
        // that folder, with or without `.rs`; a folder's `mod.rs` is the folder's row itself).
        let own = rows.iter().any(|r| first_cell(r) == *file);
        let in_folder = rows.iter().any(|r| {
            let cell = first_cell(r);
            let Some(folder) = cell.strip_suffix('/') else { return false };
            let Some(under) = file.strip_prefix(&format!("{folder}/")) else { return false };
            let under = under.trim_end_matches(".rs");
            match under.strip_suffix("/mod") {
                _ if under == "mod" => true,
                Some(sub) => r.contains(&format!("`{sub}/")),
                None => named(r, under) || named(r, under.rsplit('/').next().unwrap_or(under)),
            }
        });
        if !own && !in_folder {
            missing.push(file.clone());
        }
    }
    assert!(missing.is_empty(), "engine/src/README.md does not name {missing:?}");
    assert!(all.len() > 60, "the walk found the files: {}", all.len());
}

/// The README stays a guide a newcomer reads through: what it is, the two commands, playing,
/// writing a pack, embedding, serving, the performance table; the rest is in docs/.
#[test]
fn the_readme_stays_a_guide() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 350, "README.md has {lines} lines: move the detail into docs/ and link it");
    for doc in
        ["docs/packs.md", "docs/api.md", "docs/cli.md", "docs/sessions.md", "docs/security.md", "docs/performance.md"]
    {
        assert!(readme.contains(doc), "the README links {doc}");
    }
}

/// No two files of a folder whose names differ only by a suffix (`select.rs` and
/// `selection.rs`, `sql.rs` and `sqlite.rs`): a reader cannot tell from the names which holds what.
#[test]
fn no_file_name_is_another_with_a_suffix() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let entries: BTreeSet<(String, String)> = all
        .iter()
        .map(|f| {
            let (folder, name) = f.rsplit_once('/').unwrap_or(("", f));
            (folder.to_owned(), name.trim_end_matches(".rs").to_owned())
        })
        .filter(|(_, s)| s != "mod" && s != "lib" && s != "tests")
        .collect();
    let pairs: Vec<String> = entries
        .iter()
        .flat_map(|(fa, a)| {
            entries
                .iter()
                .filter(move |(fb, b)| fb == fa && b != a && b.starts_with(a.as_str()))
                .map(move |(fb, b)| format!("{fa}/{a} and {fb}/{b}"))
        })
        .collect();
    assert!(pairs.is_empty(), "names that differ only by a suffix: {pairs:?}");
}

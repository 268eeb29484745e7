//! The engine's house stays navigable: the README stays a guide, and no two files' names differ
//! by a suffix alone. (That `src/README.md` names every file, and that no module reaches back to
//! one that depends on it, is held for every crate of the workspace by `tests/house.rs`.)

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

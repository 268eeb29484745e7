//! The engine's house stays navigable: its modules form no cycle (each depends only on the ones
//! below it), and `engine/src/README.md` has a row for every module and every file under
//! `pack/load/`, so the map a newcomer reads is the tree they find.

use std::collections::{BTreeMap, BTreeSet};
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

/// The top-level module a file belongs to (`graph/run.rs` → `graph`).
fn module_of(file: &str) -> String {
    file.split('/').next().unwrap().trim_end_matches(".rs").to_owned()
}

/// The top-level modules each module's code names (`crate::x`, `crate::{x, y}`), comments and
/// test-only files (`tests.rs`) aside, with the files that name each.
fn dependencies() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut deps: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in all.iter().filter(|f| !f.ends_with("tests.rs") && *f != "lib.rs") {
        let from = module_of(file);
        let text = std::fs::read_to_string(src().join(file)).unwrap();
        let mut named = BTreeSet::new();
        for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    named.extend(group.split(',').filter_map(|p| p.trim().split("::").next()).map(str::to_owned));
                } else {
                    named.insert(rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect());
                }
            }
        }
        let entry = deps.entry(from.clone()).or_default();
        for to in named.into_iter().filter(|m| !m.is_empty() && *m != from) {
            entry.entry(to).or_default().insert(file.clone());
        }
    }
    deps
}

#[test]
fn the_modules_form_no_cycle() {
    let deps = dependencies();
    // Depth-first, keeping the path: a module met again on it closes a cycle.
    fn visit(
        m: &str,
        deps: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        cycles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == m) {
            let ring: Vec<String> = path[at..].iter().chain(std::iter::once(&m.to_owned())).cloned().collect();
            let how: Vec<String> =
                ring.windows(2).map(|w| format!("{} → {} ({:?})", w[0], w[1], deps[&w[0]][&w[1]])).collect();
            cycles.push(how.join(", "));
            return;
        }
        if !done.insert(m.to_owned()) {
            return;
        }
        path.push(m.to_owned());
        for next in deps.get(m).into_iter().flat_map(|d| d.keys()) {
            if deps.contains_key(next) {
                visit(next, deps, path, done, cycles);
            }
        }
        path.pop();
    }
    let mut cycles = Vec::new();
    let mut done = BTreeSet::new();
    for m in deps.keys() {
        visit(m, &deps, &mut Vec::new(), &mut done, &mut cycles);
    }
    assert!(cycles.is_empty(), "the engine's modules form cycles:\n{}", cycles.join("\n"));
    assert!(deps.len() > 20, "the walk found the modules: {:?}", deps.keys());
}

#[test]
fn the_readme_maps_every_module() {
    let readme = std::fs::read_to_string(src().join("README.md")).unwrap();
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `")).collect();
    let first_cell = |row: &str| row.split('|').nth(1).unwrap_or("").trim().to_owned();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(src()).unwrap().map(Result::unwrap) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let wanted = if entry.path().is_dir() {
            format!("`{name}/")
        } else if name.ends_with(".rs") {
            format!("`{name}`")
        } else {
            continue;
        };
        if !rows.iter().any(|r| first_cell(r).starts_with(&wanted)) {
            missing.push(name);
        }
    }
    let load = rows.iter().find(|r| first_cell(r) == "`pack/load/`").expect("a row for pack/load/");
    for entry in std::fs::read_dir(src().join("pack/load")).unwrap().map(Result::unwrap) {
        let name = entry.file_name().to_string_lossy().trim_end_matches(".rs").to_owned();
        if name != "mod" && !load.contains(&format!("`{name}`")) {
            missing.push(format!("pack/load/{name}.rs"));
        }
    }
    assert!(missing.is_empty(), "engine/src/README.md has no row for {missing:?}");
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

//! The house of every crate in the workspace stays free of import circles: within any folder,
//! the files and subfolders (the modules beside each other) depend on each other one way only,
//! so each can be read knowing only the ones below it. The crate's top level is one such
//! folder; `store/counters.rs` and `store/sqlite.rs` are two modules of another.
//!
//! A module's references are read from its code (comments and `#[cfg(test)]` code aside):
//! `crate::a::b`, `super::a`, `self::a`, and groups of them (`crate::{a, b::c}`), each resolved to
//! the module file it names. A folder's `mod.rs` is the folder itself, which its children may
//! reach back to (it is their face to the outside, not a sibling).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::repo_root;

/// A crate's modules: each file's module path (`store::sqlite`; `store` for `store/mod.rs`; empty
/// for `lib.rs`), with its text up to its tests.
fn modules(src: &Path) -> BTreeMap<Vec<String>, String> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<Vec<String>, String>) {
        for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    parts.pop();
                }
                if parts.last().is_some_and(|p| p == "tests") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("\n#[cfg(test)]").next().unwrap_or("").to_owned();
                out.insert(parts, code);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The module paths a module's code names, each as written (`["store", "sqlite", "Thing"]`),
/// made absolute from `crate`, `super` (the module's parent, once per `super`) and `self`.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in code.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        for (at, _) in line.match_indices(|c: char| c.is_ascii_alphabetic()) {
            // Only where a path starts: not inside a longer name or path.
            if line[..at].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &line[at..];
            let (mut base, mut tail) = if let Some(t) = rest.strip_prefix("crate::") {
                (Vec::new(), t)
            } else if rest.starts_with("super::") {
                let (mut base, mut t) = (module.to_vec(), rest);
                while let Some(next) = t.strip_prefix("super::") {
                    base.pop();
                    t = next;
                }
                (base, t)
            } else if let Some(t) = rest.strip_prefix("self::") {
                (module.to_vec(), t)
            } else {
                continue;
            };
            let mut path = Vec::new();
            loop {
                if let Some(group) = tail.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for part in group.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                        let mut one = base.clone();
                        one.extend(path.iter().cloned());
                        one.extend(part.split("::").map(|p| p.trim().to_owned()));
                        out.push(one);
                    }
                    break;
                }
                let name: String = tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if name.is_empty() {
                    break;
                }
                tail = &tail[name.len()..];
                path.push(name);
                match tail.strip_prefix("::") {
                    Some(t) => tail = t,
                    None => break,
                }
            }
            if !path.is_empty() {
                base.append(&mut path);
                out.push(base);
            }
        }
    }
    out
}

/// The module a reference lands in: the longest of its prefixes that is a module.
fn resolve(reference: &[String], known: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (1..=reference.len()).rev().map(|n| reference[..n].to_vec()).find(|m| known.contains(m))
}

/// The import circles among the modules of one crate: for each folder, its children's
/// dependencies on each other (through any file inside them), searched for a cycle.
fn circles(src: &Path) -> Vec<String> {
    let modules = modules(src);
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let folders: BTreeSet<Vec<String>> =
        known.iter().filter(|m| known.iter().any(|o| o.len() == m.len() + 1 && o.starts_with(m))).cloned().collect();
    // file → the modules it names (with the files naming them, for the message).
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, code) in &modules {
        for r in references(module, code) {
            if let Some(to) = resolve(&r, &known)
                && to != *module
            {
                edges.entry(module.clone()).or_default().insert(to);
            }
        }
    }
    let mut found = Vec::new();
    let mut levels = folders.clone();
    levels.insert(Vec::new());
    for folder in levels {
        let children: Vec<Vec<String>> =
            known.iter().filter(|m| m.len() == folder.len() + 1 && m.starts_with(&folder)).cloned().collect();
        let child_of = |m: &Vec<String>| children.iter().find(|c| m.starts_with(c)).cloned();
        // child → child, with an example of the files that make the edge.
        let mut deps: BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> = BTreeMap::new();
        for (from, tos) in &edges {
            let Some(a) = child_of(from) else { continue };
            for to in tos {
                let Some(b) = child_of(to) else { continue };
                if a != b {
                    deps.entry(a.clone())
                        .or_default()
                        .entry(b)
                        .or_insert_with(|| format!("{} names {}", from.join("::"), to.join("::")));
                }
            }
        }
        let mut done = BTreeSet::new();
        for start in &children {
            let mut path = Vec::new();
            visit(start, &deps, &mut path, &mut done, &mut found);
        }
    }
    found
}

fn visit(
    m: &Vec<String>,
    deps: &BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>>,
    path: &mut Vec<Vec<String>>,
    done: &mut BTreeSet<Vec<String>>,
    found: &mut Vec<String>,
) {
    if let Some(at) = path.iter().position(|p| p == m) {
        let ring: Vec<&Vec<String>> = path[at..].iter().chain(std::iter::once(m)).collect();
        let how: Vec<String> = ring.windows(2).map(|w| deps[w[0]][w[1]].clone()).collect();
        found.push(how.join(", "));
        return;
    }
    if !done.insert(m.clone()) {
        return;
    }
    path.push(m.clone());
    for next in deps.get(m).into_iter().flat_map(|d| d.keys()) {
        visit(next, deps, path, done, found);
    }
    path.pop();
}

fn crates() -> Vec<PathBuf> {
    ["engine/src", "host/src", "natives/src"].iter().map(|c| repo_root().join(c)).collect()
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut all = Vec::new();
    for src in crates() {
        all.extend(circles(&src).into_iter().map(|c| format!("{}: {c}", src.display())));
    }
    assert!(all.is_empty(), "import circles:\n{}", all.join("\n"));
}

/// The walk sees the references it is meant to: a circle written into a crate of two files is
/// found, through `crate::`, `super::` and a group alike.
#[test]
fn a_circle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "mod store;\nmod engine;\n");
    write("engine.rs", "use crate::store::Store;\n");
    write("store/mod.rs", "mod counters;\nmod sqlite;\npub struct Store;\n");
    write("store/counters.rs", "use super::sqlite::CAP;\n");
    write("store/sqlite.rs", "pub const CAP: u8 = 1;\nuse super::{counters::Counts};\n");
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("store::counters names store::sqlite"), "{found:?}");
    write("store/sqlite.rs", "pub const CAP: u8 = 1;\n");
    write("engine.rs", "use crate::store::Store;\n// crate::engine::x in a comment is no reference\n");
    write("store/mod.rs", "mod counters;\nmod sqlite;\npub struct Store;\nfn f() { crate::engine::go() }\n");
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "the top level's circle: {found:?}");
    assert!(found[0].contains("engine names store") && found[0].contains("store names engine"), "{found:?}");
}

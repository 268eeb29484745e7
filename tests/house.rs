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
/// for `lib.rs`), with its code up to its tests (`#[cfg(test)] mod ...`), comments removed.
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
                let code = text.split("\n#[cfg(test)]\nmod ").next().unwrap_or("");
                let code: Vec<&str> = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
                out.insert(parts, code.join("\n"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// The paths of a use tree (`a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`), from the start
/// of `text` (a path, maybe followed by other code).
fn use_tree(text: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut rest = text.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            // The group, up to its matching brace, split at its own commas.
            let (mut depth, mut end) = (1, group.len());
            for (i, c) in group.char_indices() {
                depth += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
            let inner = &group[..end];
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        parts.push(&inner[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            parts.push(&inner[start..]);
            return parts
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .flat_map(|p| {
                    use_tree(p).into_iter().map(|tail| prefix.iter().cloned().chain(tail).collect()).collect::<Vec<_>>()
                })
                .collect();
        }
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            break;
        }
        rest = rest[name.len()..].trim_start();
        prefix.push(name);
        match rest.strip_prefix("::") {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    if prefix.is_empty() { Vec::new() } else { vec![prefix] }
}

/// The module paths a module's code names, each absolute (`["store", "sqlite", "Thing"]`), from
/// `crate::`, `super::` (the module's parent, once per `super`) and `self::`.
fn references(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(|c: char| c.is_ascii_alphabetic()) {
        // Only where a path starts: not inside a longer name or path.
        if code[..at].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at..];
        let (base, tail) = if let Some(t) = rest.strip_prefix("crate::") {
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
        out.extend(use_tree(tail).into_iter().map(|p| base.iter().cloned().chain(p).collect()));
    }
    out
}

/// What each module re-exports (`pub use error::ApiError;` in `server`): (module, name) → the path
/// it stands for, absolute.
fn reexports(
    modules: &BTreeMap<Vec<String>, String>,
    known: &BTreeSet<Vec<String>>,
) -> BTreeMap<(Vec<String>, String), Vec<String>> {
    let mut out = BTreeMap::new();
    for (module, code) in modules {
        for statement in code.split(';') {
            let statement = statement.trim();
            let Some(tree) =
                ["pub use ", "pub(crate) use ", "pub(super) use "].iter().find_map(|p| statement.strip_prefix(p))
            else {
                continue;
            };
            for path in use_tree(tree) {
                // `crate::`/`super::`/`self::` paths are absolute already; a bare one names a child.
                let absolute: Vec<String> = match path.first().map(String::as_str) {
                    Some("crate") => path[1..].to_vec(),
                    Some("self") => module.iter().cloned().chain(path[1..].iter().cloned()).collect(),
                    Some("super") => {
                        let ups = path.iter().take_while(|p| *p == "super").count();
                        let base = &module[..module.len().saturating_sub(ups)];
                        base.iter().cloned().chain(path[ups..].iter().cloned()).collect()
                    }
                    _ => module.iter().cloned().chain(path.iter().cloned()).collect(),
                };
                // Another crate's item (`pub use serde::Serialize`) is no module of this one.
                let internal = match path[0].as_str() {
                    "crate" | "self" | "super" => true,
                    _ => known.contains(&absolute[..=module.len()].to_vec()),
                };
                if internal && let Some(name) = path.last() {
                    out.insert((module.clone(), name.clone()), absolute);
                }
            }
        }
    }
    out
}

/// The module a reference lands in: the longest of its prefixes that is a module, through any
/// re-export on the way (`crate::Error` is `error`'s).
fn resolve(
    from: &[String],
    reference: &[String],
    known: &BTreeSet<Vec<String>>,
    through: &BTreeMap<(Vec<String>, String), Vec<String>>,
) -> Option<Vec<String>> {
    let mut r = reference.to_vec();
    for _ in 0..8 {
        let module = (0..=r.len()).rev().map(|n| r[..n].to_vec()).find(|m| known.contains(m))?;
        // The crate's face (`crate::Error`) is followed to where the item lives; a folder's own
        // face (its `mod.rs`'s re-exports) is its children's to share, and names the folder.
        let face = !module.is_empty() && from.len() > module.len() && from.starts_with(&module);
        match r.get(module.len()).filter(|_| !face).and_then(|next| through.get(&(module.clone(), next.clone()))) {
            Some(target) if *target != r[..=module.len()] => {
                r = target.iter().cloned().chain(r[module.len() + 1..].iter().cloned()).collect();
            }
            _ => return (!module.is_empty()).then_some(module),
        }
    }
    None
}

/// The import circles among the modules of one crate: for each folder, its children's
/// dependencies on each other (through any file inside them), searched for a cycle.
fn circles(src: &Path) -> Vec<String> {
    let modules = modules(src);
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    let through = reexports(&modules, &known);
    let folders: BTreeSet<Vec<String>> =
        known.iter().filter(|m| known.iter().any(|o| o.len() == m.len() + 1 && o.starts_with(m))).cloned().collect();
    // file → the modules it names (with the files naming them, for the message).
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, code) in &modules {
        for r in references(module, code) {
            if let Some(to) = resolve(module, &r, &known, &through)
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
    [
        "engine/src",
        "engine/lab/src",
        "host/src",
        "host/server/src",
        "host/lsp/src",
        "natives/src",
        "python/src",
        "node/src",
    ]
    .iter()
    .map(|c| repo_root().join(c))
    .collect()
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
    write("store/sqlite.rs", "pub const CAP: u8 = 1;\nuse super::{\n    counters::Counts,\n};\n");
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "a group over lines: {found:?}");
    assert!(found[0].contains("store::counters names store::sqlite"), "{found:?}");
    // Through the crate's face: `crate::Counts` is `store::counters`'s, so `engine` names `store`.
    write("store/sqlite.rs", "pub const CAP: u8 = 1;\n");
    write("lib.rs", "mod store;\nmod engine;\npub use store::counters::Counts;\n");
    write("engine.rs", "fn f(c: crate::Counts) {}\n");
    write("store/mod.rs", "mod counters;\nmod sqlite;\npub struct Store;\nfn f() { crate::engine::go() }\n");
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "through a re-export: {found:?}");
    write("store/mod.rs", "mod counters;\nmod sqlite;\npub struct Store;\n");
    write("lib.rs", "mod store;\nmod engine;\n");
    write("store/sqlite.rs", "pub const CAP: u8 = 1;\n");
    write("engine.rs", "use crate::store::Store;\n// crate::engine::x in a comment is no reference\n");
    write("store/mod.rs", "mod counters;\nmod sqlite;\npub struct Store;\nfn f() { crate::engine::go() }\n");
    let found = circles(dir.path());
    assert_eq!(found.len(), 1, "the top level's circle: {found:?}");
    assert!(found[0].contains("engine names store") && found[0].contains("store names engine"), "{found:?}");
}

/// Every `.rs` file under `dir`, as paths relative to `src`.
fn files(dir: &Path, src: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            files(&path, src, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The files of `src` its `README.md` table does not name: a row of a file's own, or the row of
/// a folder it is in that names it (by its path under that folder, with or without `.rs`; a
/// folder's `mod.rs` is the folder's row itself).
fn unmapped(src: &Path) -> Vec<String> {
    let readme = std::fs::read_to_string(src.join("README.md")).unwrap_or_default();
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `")).collect();
    let first_cell = |row: &str| row.split('|').nth(1).unwrap_or("").trim().trim_matches('`').to_owned();
    let named = |row: &str, name: &str| row.contains(&format!("`{name}`")) || row.contains(&format!("`{name}.rs`"));
    let mut all = Vec::new();
    files(src, src, &mut all);
    all.into_iter()
        .filter(|file| {
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
            !own && !in_folder
        })
        .collect()
}

/// The map a newcomer reads is the tree they find: the engine's, the lab's, the binary's, the
/// server's and the language server's `src/README.md` name every file of their crate.
#[test]
fn every_crate_maps_its_files() {
    // Every crate with a map: the natives' and the packages' few files are their own.
    let mapped: Vec<PathBuf> = crates().into_iter().filter(|c| c.join("README.md").is_file()).collect();
    assert_eq!(mapped.len(), 5, "engine, lab, binary, server and language server: {mapped:?}");
    for src in mapped {
        let missing = unmapped(&src);
        assert!(missing.is_empty(), "{}/README.md does not name {missing:?}", src.display());
    }
    // The check reads what it should: a file no row names is found.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "| `lib.rs` | the crate |\n| `store/` | `memory.rs` |\n").unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    for f in ["lib.rs", "store/mod.rs", "store/memory.rs", "store/sqlite.rs"] {
        std::fs::write(dir.path().join(f), "").unwrap();
    }
    assert_eq!(unmapped(dir.path()), ["store/sqlite.rs"]);
}

/// What `cargo ARGS --locked` prints, run in the repository by the cargo running the tests: offline
/// first (the build fetched what it reads), then with the registry when a cache lacks an entry.
fn cargo(args: &[&str]) -> Vec<u8> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let run = |offline: bool| {
        let mut cmd = std::process::Command::new(&cargo);
        cmd.args(args).arg("--locked").current_dir(repo_root());
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().unwrap()
    };
    let out = Some(run(true)).filter(|o| o.status.success()).unwrap_or_else(|| run(false));
    assert!(out.status.success(), "cargo {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// The workspace's crates, each with the workspace crates it depends on (normal dependencies),
/// from `cargo metadata`.
fn workspace_deps() -> BTreeMap<String, BTreeSet<String>> {
    let out = cargo(&["metadata", "--format-version", "1", "--no-deps"]);
    let meta: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let ours: BTreeSet<String> = packages.iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null() && ours.contains(d["name"].as_str().unwrap()))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// The crates stand in layers, and each depends only on layers below its own: the core; the
/// natives and the lab, which drive it; the server, the language server and the packages for
/// other languages; the binary. (The test kit is for tests.)
#[test]
fn no_crate_depends_on_one_above_it() {
    let layer = |name: &str| match name {
        "ruleweave-engine" => 0,
        "ruleweave-natives" | "ruleweave-lab" | "ruleweave-testkit" => 1,
        "ruleweave-server" | "ruleweave-lsp" | "ruleweave-python" | "ruleweave-node" => 2,
        "ruleweave" => 3,
        other => panic!("a crate with no layer: {other} (give it one here)"),
    };
    let all = workspace_deps();
    assert!(all["ruleweave"].contains("ruleweave-lab"), "the dependencies were read: {all:?}");
    let mut wrong = Vec::new();
    for (name, deps) in all {
        wrong.extend(deps.iter().filter(|d| layer(d) >= layer(&name)).map(|d| format!("{name} depends on {d}")));
    }
    assert!(wrong.is_empty(), "{wrong:?}");
}

/// The packages `cargo tree` finds under `args`, by name.
fn tree(args: &[&str]) -> BTreeSet<String> {
    let args: Vec<&str> = ["tree", "--edges", "normal", "--prefix", "none"].iter().chain(args).copied().collect();
    String::from_utf8_lossy(&cargo(&args)).lines().filter_map(|l| l.split(' ').next()).map(str::to_owned).collect()
}

/// The core embeds alone: with no features it has no SQL, HTTP or lab crate in its tree, and
/// with its default ones (the SQL stores, model providers over HTTP) no server or lab crate.
#[test]
fn the_core_builds_without_sql_http_or_the_lab() {
    let bare = tree(&["-p", "ruleweave-engine", "--no-default-features"]);
    assert!(bare.contains("rhai") && bare.contains("minijinja"), "the tree was read: {bare:?}");
    let none = ["sqlx", "rusqlite", "reqwest", "hyper", "axum", "tower", "ruleweave-lab", "ruleweave"];
    let found: Vec<&&str> = none.iter().filter(|c| bare.contains(**c)).collect();
    assert!(found.is_empty(), "the bare core depends on {found:?}");
    let full = tree(&["-p", "ruleweave-engine"]);
    assert!(full.contains("sqlx") && full.contains("reqwest"), "the default features were read");
    let found: Vec<&&str> =
        ["axum", "ruleweave-lab", "ruleweave", "clap", "utoipa"].iter().filter(|c| full.contains(**c)).collect();
    assert!(found.is_empty(), "the core depends on {found:?}");
}

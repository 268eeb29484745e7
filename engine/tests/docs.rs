//! Generated documentation stays in step with the code: the host function reference and the
//! editor definitions come from the host function table, the limits reference from the limit
//! table. `UPDATE_DOCS=1` rewrites them.

mod support;

use ruleweave::{host_functions, limit_table, node_kinds};

fn reference() -> String {
    let mut out = String::from(
        "# Host functions\n\n\
         Everything a script may do beyond pure computation. Generated from the table in\n\
         `engine/src/script/host.rs` (`UPDATE_DOCS=1 cargo test --test docs` rewrites this file).\n\n\
         | function | what it does |\n| --- | --- |\n",
    );
    for f in host_functions() {
        out.push_str(&format!("| `{}` | {} |\n", f.signature.replace('|', "\\|"), f.doc.replace('|', "\\|")));
    }
    out
}

fn definitions() -> String {
    let mut out = String::from(
        "// Editor definitions for ruleweave's host functions (generated; see docs/host-functions.md).\nmodule static;\n",
    );
    for f in host_functions() {
        out.push_str(&format!("\n/// {}\nfn {};\n", f.doc, f.signature));
    }
    out
}

fn limits() -> String {
    let mut out = String::from(
        "# Limits\n\n\
         What a pack may set under `limits:` in its manifest. Each has a default and a ceiling: a value\n\
         of 0 (which would mean unlimited) or over the ceiling is refused by `check`. Generated from\n\
         the table in `engine/src/limits.rs` (`UPDATE_DOCS=1 cargo test --test docs` rewrites this file).\n\n\
         | limit | default | ceiling | what it bounds |\n| --- | --- | --- | --- |\n",
    );
    for l in limit_table() {
        out.push_str(&format!("| `{}` | {} | {} | {} |\n", l.key, l.default, l.max, l.doc));
    }
    out
}

fn kinds() -> String {
    let mut out = String::from(
        "# Node kinds\n\n\
         What a node of a pack's graph may be. A node has exactly one kind key, and only the other keys\n\
         its kind takes (and `doc`). Generated from the table in `engine/src/graph/kinds/mod.rs`\n\
         (`UPDATE_DOCS=1 cargo test --test docs` rewrites this file); docs/packs.md shows each in use.\n\n\
         | kind | other keys | what it is |\n| --- | --- | --- |\n",
    );
    for k in node_kinds() {
        let keys: Vec<String> = k.keys.iter().map(|k| format!("`{k}`")).collect();
        out.push_str(&format!("| `{}` | {} | {} |\n", k.key, keys.join(", "), k.doc));
    }
    out
}

#[test]
fn generated_docs_are_current() {
    let docs = support::repo_root().join("docs");
    for (file, text) in [
        ("host-functions.md", reference()),
        ("ruleweave.d.rhai", definitions()),
        ("limits.md", limits()),
        ("node-kinds.md", kinds()),
    ] {
        let path = docs.join(file);
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &text).unwrap();
        } else {
            let current = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(current == text, "docs/{file} is stale: run UPDATE_DOCS=1 cargo test --test docs");
        }
    }
}

#[test]
fn every_host_function_is_documented_once() {
    let mut names: Vec<&str> = host_functions().iter().map(|f| f.name).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "a host function is listed twice");
    for f in host_functions() {
        assert!(f.signature.starts_with(&format!("{}(", f.name)), "{}: signature names another function", f.name);
        assert!(!f.doc.is_empty(), "{} has no documentation", f.name);
    }
}

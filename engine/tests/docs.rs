//! Generated documentation stays in step with the code: the host function reference and the
//! editor definitions come from the host function table, the limits reference from the limit
//! table. `UPDATE_DOCS=1` rewrites them.

use crate::support;

use ruleweave::{host_functions, limit_table, manifest_schema, node_kinds, reducer_table};

fn reference() -> String {
    let mut out = String::from(
        "# Host functions\n\n\
         Everything a script may do beyond pure computation. Generated from the table in\n\
         `engine/src/script/host/mod.rs` (`UPDATE_DOCS=1 cargo test --test engine docs::` rewrites this file).\n\n\
         Scripts compile with full optimization: a call of a *pure* function (marked so below) whose\n\
         arguments are all constants is worked out once, while the pack loads. Every other function\n\
         reads the turn or something that changes, or does something, and runs each time.\n\n\
         | function | what it does |\n| --- | --- |\n",
    );
    for f in host_functions() {
        let pure = if f.volatile { "" } else { " *Pure.*" };
        out.push_str(&format!("| `{}` | {}{pure} |\n", f.signature.replace('|', "\\|"), f.doc.replace('|', "\\|")));
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
         the table in `engine/src/limits.rs` (`UPDATE_DOCS=1 cargo test --test engine docs::` rewrites this file).\n\n\
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
         (`UPDATE_DOCS=1 cargo test --test engine docs::` rewrites this file); docs/packs.md shows each in use.\n\n\
         | kind | other keys | what it is |\n| --- | --- | --- |\n",
    );
    for k in node_kinds() {
        let keys: Vec<String> = k.keys.iter().map(|k| format!("`{k}`")).collect();
        out.push_str(&format!("| `{}` | {} | {} |\n", k.key, keys.join(", "), k.doc));
    }
    out
}

fn reducers() -> String {
    let mut out = String::from(
        "# Reducers\n\n\
         How a node's update to a state field is folded in (`reducer:` on the field; `replace` when it says\n\
         none). Generated from the table in `engine/src/state/reducer.rs` (`UPDATE_DOCS=1 cargo test --test\n\
         engine docs::` rewrites this file). An update a reducer does not take fails the node, naming the field.\n\n\
         | reducer | fits fields of type | what it does |\n| --- | --- | --- |\n",
    );
    for r in reducer_table() {
        out.push_str(&format!("| `{}` | {} | {} |\n", r.reducer.as_str(), r.fits_types, r.doc));
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
        ("reducers.md", reducers()),
        ("manifest.schema.json", serde_json::to_string_pretty(&manifest_schema()).unwrap() + "\n"),
    ] {
        let path = docs.join(file);
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &text).unwrap();
        } else {
            let current = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(current == text, "docs/{file} is stale: run UPDATE_DOCS=1 cargo test --test engine docs::");
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

/// The manifest schema editors check against: every shipped manifest (and every fixture pack
/// that loads) passes it, and shapes the loader refuses are refused by it too.
#[test]
fn the_manifest_schema_accepts_every_shipped_manifest_and_refuses_bad_shapes() {
    let schema = manifest_schema();
    let validator = jsonschema::validator_for(&schema).expect("the manifest schema is a JSON Schema");
    let root = support::repo_root();
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("config")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# yaml-language-server: $schema=../docs/manifest.schema.json\n"),
            "{} lacks the schema modeline",
            path.display()
        );
        let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        checked += 1;
    }
    assert!(checked >= 5);
    let engine = ruleweave::Engine::builder(&root).build();
    let pirate = std::fs::read_to_string(root.join("config/pirate.yaml")).unwrap();
    for (what, from, to) in [
        ("an unknown top-level key", "\nstate:\n", "\nstaet: {}\nstate:\n"),
        (
            "a limit that is not a number",
            "\ninit: intake.rhai::init\n",
            "\ninit: intake.rhai::init\nlimits: {max_wall_ms: fast}\n",
        ),
        (
            "a node with two kinds",
            "      script: intake.rhai::intake\n",
            "      script: intake.rhai::intake\n      native: x\n",
        ),
        ("a route case without `to`", "      - to: END\n", "      - when: this.is_won\n"),
        (
            "an llm key on a script node",
            "      script: validate.rhai::handle_blocked\n",
            "      script: validate.rhai::handle_blocked\n      prompt: judge.j2\n",
        ),
    ] {
        assert!(pirate.contains(from), "{what}: the pirate manifest changed");
        let bad = pirate.replacen(from, to, 1);
        let doc: serde_json::Value = serde_saphyr::from_str(&bad).unwrap();
        assert!(!validator.is_valid(&doc), "the schema accepts {what}");
        let dir = support::write_root(&[("config/pirate.yaml", &bad)]);
        let refused = ruleweave::Engine::builder(dir.path()).build().packs().get("pirate").is_err();
        assert!(refused, "the loader accepts {what}");
    }
    drop(engine);
}

//! The fixture packs of `tests/packs/`: each folder is a root holding one pack.
//!
//! - `err_*` folders must fail to load; `expected.txt` holds the diagnostics, one per line as
//!   `file:line:col: detail`.
//! - the others run `inputs.yaml` turn by turn on a fresh session; `expected.jsonl` holds one line
//!   per input: the turn's output and the nodes each step ran, or the error.
//!
//! `UPDATE_FIXTURES=1 cargo test --test engine packs::` rewrites the expectations; review the diff.

use crate::support;

use std::path::Path;

use ruleweave::{Engine, Event};
use serde_json::{Value, json};

fn diagnostics(root: &Path) -> String {
    let engine = Engine::builder(root).build();
    let mut out = String::new();
    for (name, result) in engine.packs().load_all().unwrap() {
        match result {
            Ok(_) => out.push_str(&format!("{name}: loaded without error\n")),
            Err(e) => {
                for err in e.all() {
                    let origin = err.origin().map(|o| o.to_string()).unwrap_or_else(|| "?".into());
                    out.push_str(&format!("{origin}: {}\n", err.detail()));
                }
            }
        }
    }
    out
}

async fn run(root: &Path) -> String {
    let engine = Engine::builder(root).build();
    let names = engine.packs().names().unwrap();
    assert_eq!(names.len(), 1, "{}: one pack per fixture", root.display());
    let mut session = engine.open_with_id(&names[0], &Default::default(), Some("fixture".into())).await.unwrap();
    let text = std::fs::read_to_string(root.join("inputs.yaml")).unwrap();
    let inputs: Vec<Value> = serde_saphyr::from_str(&text).unwrap();
    let mut out = String::new();
    for input in inputs {
        let line = match session.turn(input).await {
            Ok(r) => json!({"turn": r.turn, "output": r.output, "steps": steps(&r.events)}),
            Err(e) => {
                json!({"turn": session.turns() + 1, "error": {"code": e.kind().code(), "message": e.to_string()}})
            }
        };
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

/// The nodes each step ran: `["1: a, b, c", "2: a2", ...]`.
fn steps(events: &[Event]) -> Vec<String> {
    let mut steps: Vec<(u32, Vec<String>)> = Vec::new();
    for e in events {
        if let Event::NodeFinished { node, step, .. } = e {
            match steps.last_mut() {
                Some((s, nodes)) if s == step => nodes.push(node.clone()),
                _ => steps.push((*step, vec![node.clone()])),
            }
        }
    }
    steps.into_iter().map(|(s, nodes)| format!("{s}: {}", nodes.join(", "))).collect()
}

#[tokio::test]
async fn fixture_packs() {
    let update = std::env::var_os("UPDATE_FIXTURES").is_some();
    let mut dirs: Vec<_> = std::fs::read_dir(support::fixtures()).unwrap().flatten().map(|e| e.path()).collect();
    dirs.sort();
    let mut failures = Vec::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (actual, file) = if name.starts_with("err_") {
            (diagnostics(dir), "expected.txt")
        } else {
            (run(dir).await, "expected.jsonl")
        };
        let path = dir.join(file);
        if update {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        if expected != actual {
            failures.push(format!("{name}:\n--- expected ({file})\n{expected}--- actual\n{actual}"));
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) differ:\n\n{}", failures.len(), failures.join("\n"));
}

/// An option's range and length are declared once in the manifest: the loader refuses a range
/// on the wrong type and a default outside it; a session's options are checked against them,
/// every problem named at once.
#[tokio::test]
async fn option_ranges_are_declared_once_and_checked_by_the_engine() {
    let pack = |options: &str| {
        format!(
            "options:\n{options}\nstate:\n  n: {{type: int}}\ngraph:\n  nodes:\n    a: {{script: a.rhai::step}}\n  edges: [START -> a, a -> END]\n"
        )
    };
    let root = support::write_root(&[
        (
            "config/bad.yaml",
            &pack(
                "  n: {type: string, min: 1}\n  r: {type: int, default: 0, min: 1, max: 5}\n  t: {type: bool, min_length: 2}",
            ),
        ),
        ("scripts/bad/a.rhai", "fn step() { #{} }"),
    ]);
    let e = ruleweave::Engine::builder(root.path()).build().packs().get("bad").unwrap_err();
    let all: Vec<String> = e.all().map(|e| e.detail().to_owned()).collect();
    assert_eq!(
        all,
        [
            "option `n`: min and max are for a number option, and this one is a string",
            "the default of option `r` does not fit it: it is 0, not between 1 and 5",
            "option `t`: min_length is for a text option, and this one is a bool",
        ]
    );
    let root = support::write_root(&[
        (
            "config/good.yaml",
            &pack(
                "  r: {type: int, default: 2, min: 1, max: 5}\n  t: {type: string, default: hello, min_length: 3}\n  f: {type: float, default: 0.5, max: 1}",
            ),
        ),
        ("scripts/good/a.rhai", "fn step() { #{} }"),
    ]);
    let engine = ruleweave::Engine::builder(root.path()).build();
    let opts = |v: serde_json::Value| v.as_object().unwrap().clone();
    engine.open("good", &opts(serde_json::json!({"r": 5, "t": "  abc  ", "f": 1.0}))).await.unwrap();
    let e = engine.open("good", &opts(serde_json::json!({"r": 6, "t": " ab ", "f": 1.5}))).await.unwrap_err();
    assert_eq!(
        e.detail(),
        "the options have 3 problem(s):\n- option `r` is 6, not between 1 and 5\n- option `t` is \"ab\", shorter than 3 \
         characters (its min_length)\n- option `f` is 1.5, more than 1"
    );
    let e = engine.open("good", &opts(serde_json::json!({"r": 0}))).await.unwrap_err();
    assert_eq!(e.detail(), "option `r` is 0, not between 1 and 5");
}

//! The conformance cases (`tests/conformance/*.yaml`) on the Rust engine. Each case names a pack,
//! its options, the session's id (which seeds its randomness) and the inputs; what it expects —
//! each turn's reply and status line, and the SHA-256 of the final state as canonical JSON — is
//! what the Python and Node packages must give too (`python/tests/`, `node/test/`). With
//! `UPDATE_CONFORMANCE=1` this test writes the expectations from what the engine does now.
//!
//! Canonical JSON, the same in all three languages: object keys sorted, no blank space, strings
//! as JSON escapes them, a number that is a whole number written as an integer and any other
//! rounded to 9 decimals with trailing zeros dropped (so `0.1` and `2` are the same everywhere).

use crate::support;

use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;

/// The line after which a case's expectations are generated.
const MARKER: &str = "# expected (UPDATE_CONFORMANCE=1 cargo test conformance writes this)";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    pack: String,
    #[serde(default)]
    options: serde_json::Map<String, Value>,
    id: String,
    inputs: Vec<Value>,
    /// Keys left out of the hash wherever they are in the state (times the clock gives).
    #[serde(default)]
    volatile: Vec<String>,
    expect: Option<Expect>,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    turns: Vec<Shown>,
    state_sha256: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Shown {
    reply: Option<String>,
    status: Option<String>,
}

/// `v` as canonical JSON (see the module's documentation).
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&v.to_string()),
        Value::Number(n) => match n.as_i64().or_else(|| n.as_u64().map(|u| u as i64)) {
            Some(i) => {
                let _ = write!(out, "{i}");
            }
            None => {
                let f = n.as_f64().unwrap_or(0.0);
                if f.fract() == 0.0 && f.abs() < 1e15 {
                    let _ = write!(out, "{}", f as i64);
                } else {
                    let fixed = format!("{f:.9}");
                    out.push_str(fixed.trim_end_matches('0').trim_end_matches('.'));
                }
            }
        },
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&fields[k], out);
            }
            out.push('}');
        }
    }
}

/// `v` without the keys named `volatile`, at any depth.
fn without(v: &mut Value, volatile: &[String]) {
    match v {
        Value::Object(fields) => {
            fields.retain(|k, _| !volatile.contains(k));
            fields.values_mut().for_each(|x| without(x, volatile));
        }
        Value::Array(items) => items.iter_mut().for_each(|x| without(x, volatile)),
        _ => {}
    }
}

/// The SHA-256 of `state` without its `volatile` keys, as canonical JSON, in hex.
fn state_hash(mut state: Value, volatile: &[String]) -> String {
    without(&mut state, volatile);
    let mut text = String::new();
    canonical(&state, &mut text);
    sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Plays `case` on the Rust engine: what each turn showed, and the final state's hash.
async fn play(case: &Case) -> Expect {
    let engine = ruleweave_natives::register(ruleweave::Engine::builder(support::repo_root()))
        .store(Arc::new(ruleweave::store::MemoryStore::new()))
        .build();
    let mut session = engine.open_with_id(&case.pack, &case.options, Some(case.id.clone())).await.unwrap();
    let mut turns = Vec::new();
    for input in &case.inputs {
        let input = session.input_from(input.clone()).unwrap();
        let r = session.turn(input).await.unwrap_or_else(|e| panic!("{}: {e}", case.id));
        turns.push(Shown { reply: r.display.reply, status: r.display.status });
    }
    Expect { turns, state_sha256: state_hash(session.state(), &case.volatile) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_conformance_case_passes_on_the_rust_engine() {
    let dir = support::repo_root().join("tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let packs: Vec<String> = files.iter().map(|f| f.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for pack in ["debate", "designer", "interview", "party", "pirate"] {
        assert!(packs.iter().any(|p| p.starts_with(pack)), "a conformance case of the {pack}: {packs:?}");
    }
    let update = std::env::var_os("UPDATE_CONFORMANCE").is_some();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let case: Case = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let got = play(&case).await;
        // The same case twice: the same texts and hash (nothing of the clock or the process).
        assert_eq!(play(&case).await, got, "{}: the same inputs, the same game", file.display());
        if update {
            let kept = text.split(MARKER).next().unwrap().trim_end();
            let expect = serde_saphyr::to_string(&serde_json::json!({"expect": got})).unwrap();
            std::fs::write(&file, format!("{kept}\n\n{MARKER}\n{expect}")).unwrap();
            continue;
        }
        let expected =
            case.expect.unwrap_or_else(|| panic!("{}: no expectations (UPDATE_CONFORMANCE=1)", file.display()));
        assert_eq!(got, expected, "{}", file.display());
    }
}

#[test]
fn canonical_json_is_the_same_in_every_language() {
    let mut out = String::new();
    canonical(&serde_json::json!({"b": [1, 2.0, 0.1, 1.0e-7, -3.25], "a": "x\n\"y\"", "c": null}), &mut out);
    assert_eq!(out, r#"{"a":"x\n\"y\"","b":[1,2,0.1,0.0000001,-3.25],"c":null}"#);
}

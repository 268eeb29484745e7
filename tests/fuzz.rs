//! Fuzz targets that stay: mutated manifests, scripts and templates for the pack loader, mutated
//! model replies for a turn, mutated JSON bodies for the HTTP API. Property-based (proptest, on
//! the stable toolchain), seeded from `tests/fuzz/corpus/`; each case must end in a result or a
//! clear error, never a panic or a 5xx.
//!
//! `RULEWEAVE_FUZZ_CASES` sets the cases per target (48 by default; CI runs more). A failure
//! prints the input that broke it, shrunk.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use proptest::prelude::*;
use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, Provider, TokenSink, Usage};
use ruleweave::{Engine, ErrorKind};
use serde_json::Value;
use tower::ServiceExt;

fn cases() -> u32 {
    std::env::var("RULEWEAVE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

fn fuzz_dir() -> PathBuf {
    support::repo_root().join("tests/fuzz")
}

/// The seed inputs of one corpus folder.
fn corpus(kind: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(fuzz_dir().join("corpus").join(kind)).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// Tokens that mean something to YAML, JSON, Rhai or Jinja, or to a number parser.
const TOKENS: &[&str] = &[
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "&a ",
    "*a",
    "[",
    "]",
    "{",
    "}",
    ":",
    ": ",
    "\n",
    "\n  ",
    "\"",
    "'",
    "\\",
    "0",
    "-1",
    "1e309",
    "18446744073709551616",
    "%ff",
    "\u{0}",
    "ü",
    "fn ",
    "this.",
    "loop {",
    "#{",
    "->",
    ",",
    "null",
    "true",
    "~",
    "<<: *a",
    "!!binary ",
    "---\n",
    "\t",
];

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, usize),
    Delete(usize, usize),
    Repeat(usize, usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, t)| Mutation::Insert(at, t)),
        (any::<usize>(), 1usize..40).prop_map(|(at, n)| Mutation::Delete(at, n)),
        (any::<usize>(), 1usize..40, 1usize..6).prop_map(|(at, n, times)| Mutation::Repeat(at, n, times)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(mut bytes: Vec<u8>, edits: &[Mutation]) -> Vec<u8> {
    for edit in edits {
        let len = bytes.len();
        let at = |i: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *edit {
            Mutation::Flip(i, bits) if len > 0 => bytes[i % len] ^= bits,
            Mutation::Flip(..) => {}
            Mutation::Insert(i, t) => {
                let i = at(i);
                bytes.splice(i..i, TOKENS[t].bytes());
            }
            Mutation::Delete(i, n) => {
                let i = at(i);
                bytes.drain(i..(i + n).min(len));
            }
            Mutation::Repeat(i, n, times) => {
                let i = at(i);
                let piece: Vec<u8> = bytes[i..(i + n).min(len)].to_vec();
                for _ in 0..times {
                    bytes.splice(i..i, piece.iter().copied());
                }
            }
            Mutation::Truncate(i) => bytes.truncate(at(i)),
        }
    }
    bytes
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Loads the pack with one of its files replaced by `bytes`; when it loads, plays a turn.
fn load_and_play(root: &Path, file: &str, bytes: &[u8], rt: &tokio::runtime::Runtime) -> Result<(), TestCaseError> {
    let pristine = fuzz_dir().join("pack").join(file);
    std::fs::write(root.join(file), bytes).unwrap();
    let engine = Engine::builder(root).store(Arc::new(ruleweave::store::MemoryStore::new())).build();
    let outcome = match engine.packs().get("game") {
        Err(e) => {
            prop_assert!(!e.detail().is_empty());
            prop_assert!(e.all().all(|e| e.kind() != ErrorKind::Internal), "a bug while loading: {e}");
            Ok(())
        }
        Ok(_) => rt.block_on(async {
            match engine.open("game", &Default::default()).await {
                Err(e) => prop_assert_ne!(e.kind(), ErrorKind::Internal, "{}", e),
                Ok(mut s) => {
                    for text in ["Ahoy, treasure!", "ahoy again"] {
                        if let Err(e) = s.turn(serde_json::json!({"text": text})).await {
                            prop_assert_ne!(e.kind(), ErrorKind::Internal, "{}", e);
                        }
                    }
                }
            }
            Ok(())
        }),
    };
    std::fs::copy(pristine, root.join(file)).unwrap();
    outcome
}

fn loader_case(kind: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let seeds = corpus(kind);
    (0..seeds.len(), prop::collection::vec(mutation(), 0..6))
        .prop_map(move |(i, edits)| mutate(seeds[i].clone(), &edits))
}

#[test]
fn the_loader_takes_any_manifest_script_or_template() {
    let root = tempfile::tempdir().unwrap();
    support::copy_tree(&fuzz_dir().join("pack"), root.path());
    let rt = runtime();
    for (kind, file) in
        [("manifest", "config/game.yaml"), ("script", "scripts/game/game.rhai"), ("template", "prompts/game/judge.j2")]
    {
        let mut runner = proptest::test_runner::TestRunner::new(config());
        let result = runner.run(&loader_case(kind), |bytes| load_and_play(root.path(), file, &bytes, &rt));
        if let Err(e) = result {
            panic!("{kind} ({file}): {e}");
        }
    }
}

/// A model that answers every request with the same text.
struct Says(String);

impl Provider for Says {
    fn name(&self) -> &str {
        "says"
    }

    fn complete<'a>(
        &'a self,
        r: &'a LlmRequest,
        _: Option<TokenSink>,
    ) -> BoxFuture<'a, ruleweave::Result<LlmResponse>> {
        let reply =
            LlmResponse { content: self.0.clone(), model: r.model.clone(), usage: Usage::default(), attempts: 1 };
        Box::pin(std::future::ready(Ok(reply)))
    }
}

proptest! {
    #![proptest_config(config())]

    /// The judge and the reply node have fallbacks (an empty reply is a failed call): whatever a
    /// model says, the turn goes on.
    #[test]
    fn a_turn_takes_any_model_reply(
        seed in 0..corpus("reply").len(),
        edits in prop::collection::vec(mutation(), 0..8),
    ) {
        let reply = String::from_utf8_lossy(&mutate(corpus("reply")[seed].clone(), &edits)).into_owned();
        let engine = Engine::builder(fuzz_dir().join("pack"))
            .store(Arc::new(ruleweave::store::MemoryStore::new()))
            .provider(Arc::new(Says(reply.clone())))
            .build();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut s = engine.open("game", &Default::default()).await.unwrap();
            let r = s.turn(serde_json::json!({"text": "Ahoy, treasure!"})).await;
            prop_assert!(r.is_ok(), "reply {reply:?}: {:?}", r.err());
            Ok(())
        })?;
    }
}

#[test]
fn the_api_takes_any_body() {
    let rt = runtime();
    let engine = Engine::builder(fuzz_dir().join("pack")).store(Arc::new(ruleweave::store::MemoryStore::new())).build();
    let state = Arc::new(ruleweave_host::server::AppState::new(engine, Default::default()));
    let app = ruleweave_host::server::app(state);
    let send = |app: &axum::Router, path: String, body: Vec<u8>| {
        let request = Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        rt.block_on(async {
            let response = app.clone().oneshot(request).await.unwrap();
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 22).await.unwrap();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null))
        })
    };
    let (status, created) = send(&app, "/v1/sessions".into(), br#"{"pack": "game"}"#.to_vec());
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let seeds = corpus("body");
    let strategy = (0..seeds.len(), prop::collection::vec(mutation(), 0..8), 0..4usize)
        .prop_map(move |(i, edits, route)| (mutate(seeds[i].clone(), &edits), route));
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let result = runner.run(&strategy, |(body, route)| {
        let path = match route {
            0 => "/v1/sessions".to_owned(),
            1 => format!("/v1/sessions/{id}/turns"),
            2 => "/v1/chat/completions".to_owned(),
            _ => format!("/v1/sessions/{id}/fork"),
        };
        let (status, json) = send(&app, path, body.clone());
        prop_assert!(!status.is_server_error(), "{status} for {:?}: {json}", String::from_utf8_lossy(&body));
        if !status.is_success() {
            prop_assert!(json["error"]["code"].is_string(), "{status} without a JSON error: {json}");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// `ruleweave lsp` on mutated buffers of the three languages: each change is checked (its
/// diagnostics come back, for that version), and completion, hover, definition and references
/// anywhere in it answer with a result or a protocol error, never the server's own failure.
#[test]
fn the_language_server_takes_any_buffer() {
    let dir = tempfile::tempdir().unwrap();
    support::copy_tree(&fuzz_dir().join("pack"), dir.path());
    let root = dir.path().canonicalize().unwrap();
    let mut s = crate::lsp::Raw::start(&root);
    let init = serde_json::json!({"processId": null, "rootUri": crate::lsp::uri_of(&root), "capabilities": {}});
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}));
    s.response(0);
    let id = std::cell::Cell::new(1);
    let version = std::cell::Cell::new(1);
    // Fewer cases than the loader's: each is a round trip through a process and a whole check.
    let config = ProptestConfig { cases: cases().min(200), failure_persistence: None, ..ProptestConfig::default() };
    for (kind, file) in
        [("manifest", "config/game.yaml"), ("script", "scripts/game/game.rhai"), ("template", "prompts/game/judge.j2")]
    {
        let uri = crate::lsp::uri_of(&root.join(file));
        s.open(&uri, &std::fs::read_to_string(root.join(file)).unwrap());
        let mut runner = proptest::test_runner::TestRunner::new(config.clone());
        let s = std::cell::RefCell::new(&mut s);
        let result = runner.run(&(loader_case(kind), any::<usize>()), |(bytes, at)| {
            let mut s = s.borrow_mut();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            version.set(version.get() + 1);
            let v = version.get();
            s.change(&uri, v, &text);
            s.until("the change's diagnostics", |m| {
                m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri && m["params"]["version"] == v
            });
            let lines: Vec<&str> = text.lines().collect();
            let line = if lines.is_empty() { 0 } else { at % lines.len() };
            let character = lines.get(line).map_or(0, |l| at % (l.encode_utf16().count() + 1));
            for method in ["textDocument/completion", "textDocument/hover", "textDocument/definition", "textDocument/references"] {
                id.set(id.get() + 1);
                let id = id.get();
                let position = serde_json::json!({"line": line, "character": character});
                let params = serde_json::json!({"textDocument": {"uri": uri}, "position": position, "context": {"includeDeclaration": true}});
                s.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
                let r = s.response(id);
                prop_assert!(r["error"]["code"] != -32603, "{method} failed inside the server at {line}:{character}: {r}");
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("{kind} ({file}): {e}");
        }
    }
}

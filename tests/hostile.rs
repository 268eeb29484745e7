//! The hostile set (`tests/hostile/`): packs a careless or hostile author might ship, run through
//! `check`, `run` and `serve` under a memory bound. Each must end as `cases.yaml` says — a clear
//! error or a bounded result — and never in a crash, a runaway process or a file read from
//! outside the root.

use crate::support;

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{get, json_lines, post, repo_root, ruleweave_bounded, start_cmd, stderr, stdout};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    load: Option<String>,
    #[serde(default)]
    turns: Vec<Turn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    input: String,
    code: Option<String>,
    says: Option<String>,
    output: Option<Value>,
}

const SECRET: &str = "a secret outside the pack root";

/// A copy of `tests/hostile/` with two links out of the root added (a manifest and a template,
/// both pointing at a file holding [`SECRET`]), and the cases, the link cases among them.
fn hostile_root() -> (tempfile::TempDir, tempfile::TempDir, BTreeMap<String, Case>) {
    let source = repo_root().join("tests/hostile");
    let root = tempfile::tempdir().unwrap();
    support::copy_tree(&source, root.path());
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.yaml");
    std::fs::write(&secret, format!("# {SECRET}\ngraph: {{nodes: {{}}, edges: []}}\n")).unwrap();
    std::os::unix::fs::symlink(&secret, root.path().join("config/linked_manifest.yaml")).unwrap();
    let linked = root.path().join("config/linked_template.yaml");
    std::fs::copy(root.path().join("config/template_bomb.yaml"), &linked).unwrap();
    std::fs::create_dir_all(root.path().join("prompts/linked_template")).unwrap();
    std::fs::create_dir_all(root.path().join("scripts/linked_template")).unwrap();
    std::fs::copy(
        root.path().join("scripts/template_bomb/standin.rhai"),
        root.path().join("scripts/linked_template/standin.rhai"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, root.path().join("prompts/linked_template/bomb.j2")).unwrap();
    let text = std::fs::read_to_string(source.join("cases.yaml")).unwrap();
    let mut cases: BTreeMap<String, Case> = serde_saphyr::from_str(&text).unwrap();
    let outside_root = "is a link to a file outside the pack root".to_owned();
    cases.insert("linked_manifest".into(), Case { load: Some(outside_root.clone()), turns: vec![] });
    cases.insert("linked_template".into(), Case { load: Some(outside_root), turns: vec![] });
    (root, outside, cases)
}

/// Fails the test when the process crashed rather than exited (a signal, a panic's 101).
fn ended_cleanly(out: &std::process::Output, what: &str) {
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{what} crashed ({:?}); stderr:\n{}",
        out.status,
        stderr(out).chars().take(4000).collect::<String>()
    );
}

#[test]
fn check_refuses_each_bad_pack_with_its_reason_and_reads_nothing_outside() {
    let (root, _outside, cases) = hostile_root();
    let out = ruleweave_bounded(root.path()).arg("check").output().unwrap();
    ended_cleanly(&out, "check");
    assert_eq!(out.status.code(), Some(1), "some packs are refused");
    let (summary, diagnostics) = (stdout(&out), stderr(&out));
    assert!(!diagnostics.contains(SECRET), "a diagnostic showed a file outside the root:\n{diagnostics}");
    for (name, case) in &cases {
        match &case.load {
            Some(says) => {
                assert!(summary.contains(&format!("FAILED  {name} (")), "{name} should be refused:\n{summary}");
                assert!(diagnostics.contains(says.as_str()), "{name} should say `{says}`:\n{diagnostics}");
            }
            None => assert!(summary.contains(&format!("ok      {name} (")), "{name} should load:\n{summary}"),
        }
    }
}

#[test]
fn run_ends_every_turn_with_a_clear_error_or_a_bounded_result() {
    let (root, _outside, cases) = hostile_root();
    for (name, case) in cases.iter().filter(|(_, c)| !c.turns.is_empty()) {
        let inputs: Vec<Value> = case.turns.iter().map(|t| json!(t.input)).collect();
        let file = root.path().join(format!("{name}.inputs.json"));
        std::fs::write(&file, serde_json::to_string(&inputs).unwrap()).unwrap();
        let out = ruleweave_bounded(root.path()).args(["run", name, "--input"]).arg(&file).output().unwrap();
        ended_cleanly(&out, name);
        let lines = json_lines(&out);
        assert_eq!(lines.len(), case.turns.len(), "{name}: one line per input:\n{}", stderr(&out));
        for (turn, line) in case.turns.iter().zip(&lines) {
            expect(name, turn, line.get("error"), &line["output"]);
        }
    }
}

fn expect(name: &str, turn: &Turn, error: Option<&Value>, output: &Value) {
    match (&turn.code, &turn.output) {
        (Some(code), _) => {
            let error = error.unwrap_or_else(|| panic!("{name} `{}`: expected {code}, got {output}", turn.input));
            assert_eq!(error["code"], json!(code), "{name}: {error}");
            let says = turn.says.as_deref().unwrap_or_default();
            assert!(error["message"].as_str().unwrap().contains(says), "{name} should say `{says}`: {error}");
        }
        (None, Some(want)) => {
            assert!(error.is_none(), "{name} `{}` failed: {error:?}", turn.input);
            for (k, v) in want.as_object().unwrap() {
                assert_eq!(&output[k], v, "{name} `{}`: output.{k} in {output}", turn.input);
            }
        }
        (None, None) => panic!("{name}: a turn expects a `code` or an `output`"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_survives_every_case_and_reports_the_refused_packs() {
    let (root, _outside, cases) = hostile_root();
    let mut cmd = ruleweave_bounded(root.path());
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"]);
    let server = start_cmd(cmd);
    for (name, case) in &cases {
        let (status, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": name})).await;
        if case.load.is_some() {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{name}: {created}");
            assert_eq!(created["error"]["code"], "invalid_pack", "{name}: {created}");
            assert!(!created.to_string().contains(SECRET), "{created}");
            continue;
        }
        assert_eq!(status, StatusCode::CREATED, "{name}: {created}");
        let turns = format!("{}/v1/sessions/{}/turns", server.url, created["id"].as_str().unwrap());
        for turn in &case.turns {
            let (status, body) = post(&turns, json!({"input": {"text": turn.input}})).await;
            assert_ne!(status, StatusCode::SERVICE_UNAVAILABLE, "{name}: the server went away: {body}");
            expect(name, turn, body.get("error"), &body["output"]);
        }
    }
    let health = get(&format!("{}/healthz", server.url)).await;
    assert_eq!(health["status"], "ok", "the server survived every case");
    let packs = get(&format!("{}/v1/packs", server.url)).await;
    let refused = packs["packs"].as_array().unwrap().iter().filter(|p| p["status"] == "error").count();
    assert_eq!(refused, cases.values().filter(|c| c.load.is_some()).count());
    assert!(!packs.to_string().contains(SECRET));
}

// ---- what a client can send the server ------------------------------------------------------------

mod client {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::time::Duration;

    use reqwest::StatusCode;
    use ruleweave::values::Map;
    use ruleweave::{Engine, NodeContext};
    use serde_json::{Value, json};

    use super::support::{counter_root, get, http, post, serve, start, write_root};

    fn memory(root: &std::path::Path) -> Engine {
        Engine::builder(root).store(Arc::new(ruleweave::store::MemoryStore::new())).build()
    }

    async fn metrics(url: &str) -> String {
        http().get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pack_names_cannot_forge_metrics_or_grow_them() {
        let root = counter_root();
        let s = serve(memory(root.path()), None, 4 << 20).await;
        let forged = "x\"} 1\nfake_injected_metric{a=\"b";
        let (status, body) = post(&format!("{}/v1/sessions", s.url), json!({"pack": forged})).await;
        assert_eq!((status, &body["error"]["code"]), (StatusCode::NOT_FOUND, &json!("not_found")), "{body}");
        for i in 0..5 {
            let huge = format!("{i}{}", "a".repeat(1 << 20));
            let (status, body) = post(&format!("{}/v1/sessions", s.url), json!({"pack": huge})).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "a huge name is not found, not a 500");
            assert!(
                body.to_string().len() < 400,
                "the error does not repeat the name: {} bytes",
                body.to_string().len()
            );
        }
        for i in 0..50 {
            let (status, _) = post(&format!("{}/v1/sessions", s.url), json!({"pack": format!("random-{i}")})).await;
            assert_eq!(status, StatusCode::NOT_FOUND);
        }
        let packs = get(&format!("{}/v1/packs", s.url)).await;
        assert_eq!(packs["packs"].as_array().unwrap().len(), 1, "names that are no pack are not kept: {packs}");
        let text = metrics(&s.url).await;
        assert!(!text.lines().any(|l| l.starts_with("fake_injected_metric")), "{text}");
        assert!(text.len() < 20_000, "names sent by clients are not labels ({} bytes)", text.len());
        assert!(text.contains(r#"ruleweave_errors_total{pack="unknown",code="not_found"} 56"#), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_path_that_is_not_an_id_gets_a_json_error() {
        let root = counter_root();
        let s = serve(memory(root.path()), None, 1 << 20).await;
        let r = http().get(format!("{}/v1/sessions/%ff", s.url)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_path", "{body}");
    }

    /// What a server answers to `request`, written as is on a new connection (read to its end).
    async fn raw_request(addr: &str, request: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(10), conn.read_to_end(&mut out))
            .await
            .expect("the server answers and closes")
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_a_token_only_loopback_hosts_are_answered() {
        let root = counter_root();
        let open = serve(memory(root.path()), None, 1 << 20).await;
        let r = http().get(format!("{}/v1/packs", open.url)).header("host", "evil.example").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "host_not_allowed");
        let r = http().get(&open.url).header("host", "rebound.attacker.test:8080").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "the console too");
        let r = http().get(format!("{}/v1/packs", open.url)).header("host", "localhost:8080").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        // A loopback address with more after it is another host, read as an authority whole.
        for host in ["[::1].evil.example", "[::1]evil.example:80"] {
            let r = http().get(format!("{}/v1/packs", open.url)).header("host", host).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{host}");
        }
        // A request line naming another host (absolute form) is refused though `Host` is this one.
        let addr = open.url.trim_start_matches("http://").to_owned();
        let said = raw_request(
            &addr,
            "GET http://evil.example/v1/packs HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(said.starts_with("HTTP/1.1 403"), "{said}");
        assert!(said.contains("host_not_allowed"), "{said}");
        let said = raw_request(
            &addr,
            "GET http://localhost/v1/packs HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(said.starts_with("HTTP/1.1 200"), "{said}");

        // With a token the name does not matter (the token guards), and its scheme is case-blind.
        let guarded = serve(memory(root.path()), Some("a-token-long-enough-1"), 1 << 20).await;
        let r = http()
            .get(format!("{}/v1/packs", guarded.url))
            .header("host", "game.example")
            .header("authorization", "bearer a-token-long-enough-1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_turn_is_a_json_error_an_sse_error_and_a_counted_one() {
        let root = write_root(&[(
            "config/fragile.yaml",
            "state:\n  n: {type: int, reducer: add}\ninput:\n  text: {type: string, required: true}\noutput: [n]\ngraph:\n  nodes:\n    fragile: {native: fragile}\n  edges:\n    - START -> fragile\n    - fragile -> END\n",
        )]);
        let fragile = |ctx: &NodeContext<'_>| -> ruleweave::Result<Map> {
            let text = ctx.input().get("text").map(|t| t.to_string()).unwrap_or_default();
            assert!(text != "boom", "a bug in a native node");
            let mut m = Map::new();
            m.insert("n".into(), 1.into());
            Ok(m)
        };
        let engine = Engine::builder(root.path())
            .store(Arc::new(ruleweave::store::MemoryStore::new()))
            .native_node("fragile", fragile)
            .build();
        let s = serve(engine, None, 1 << 20).await;
        let (_, created) = post(&format!("{}/v1/sessions", s.url), json!({"pack": "fragile"})).await;
        let turns = format!("{}/v1/sessions/{}/turns", s.url, created["id"].as_str().unwrap());
        let (status, body) = post(&turns, json!({"input": {"text": "boom"}})).await;
        assert_eq!((status, &body["error"]["code"]), (StatusCode::INTERNAL_SERVER_ERROR, &json!("internal_error")));
        let r = http()
            .post(&turns)
            .header("accept", "text/event-stream")
            .json(&json!({"input": {"text": "boom"}}))
            .send()
            .await
            .unwrap();
        let stream = r.text().await.unwrap();
        assert!(stream.contains("event: error"), "the stream ends with an error event: {stream}");
        assert!(stream.contains("panicked: a bug in a native node"), "{stream}");
        let text = metrics(&s.url).await;
        assert!(text.contains(r#"ruleweave_errors_total{pack="fragile",code="internal_error"} 2"#), "{text}");
        let (status, body) = post(&turns, json!({"input": {"text": "fine"}})).await;
        assert_eq!((status, &body["output"]["n"]), (StatusCode::OK, &json!(1)), "{body}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_model_calls_of_failed_turns_are_counted() {
        use super::support::mock_llm::{MockLlm, Reply, judged};
        let mock = MockLlm::start();
        mock.judge(judged(10)).chat(Reply::Status(500, "down".into()));
        let config = ruleweave::llm::OpenAiConfig {
            base_url: mock.base_url.clone(),
            retry: ruleweave::llm::RetryPolicy { max_retries: 0, ..Default::default() },
            ..Default::default()
        };
        let provider = Arc::new(ruleweave::llm::OpenAi::new(config).unwrap());
        let engine = Engine::builder(super::repo_root())
            .store(Arc::new(ruleweave::store::MemoryStore::new()))
            .provider(provider)
            .build();
        let s = serve(engine, None, 1 << 20).await;
        // A debater whose model fails fails the turn (the debate passes a model's failure on).
        let (_, created) =
            post(&format!("{}/v1/sessions", s.url), json!({"pack": "debate", "options": {"rounds": 1}})).await;
        let turns = format!("{}/v1/sessions/{}/turns", s.url, created["id"].as_str().unwrap());
        let (status, body) = post(&turns, json!({"input": "start"})).await;
        assert_eq!((status, &body["error"]["code"]), (StatusCode::BAD_GATEWAY, &json!("llm_error")), "{body}");
        let text = metrics(&s.url).await;
        for line in [
            r#"ruleweave_llm_calls_total{pack="debate",provider="openai",outcome="error"} 1"#,
            r#"ruleweave_errors_total{pack="debate",code="llm_error"} 1"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in\n{text}");
        }
    }

    /// What a raw connection reads until the server answers or closes (bounded at 10 s).
    fn exchange(url: &str, request: &[u8]) -> String {
        let addr = url.trim_start_matches("http://");
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        conn.write_all(request).unwrap();
        let mut got = Vec::new();
        match conn.read_to_end(&mut got) {
            Ok(_) => {}
            Err(e) if got.starts_with(b"HTTP/1.1") => drop(e),
            Err(e) => panic!("the server neither answered nor closed within 10 s: {e}"),
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    #[test]
    fn slow_clients_are_cut_off_and_oversized_bodies_refused_unread() {
        let root = counter_root();
        let server =
            start(root.path(), "memory", &[("RULEWEAVE_HEADER_TIMEOUT", "300ms"), ("RULEWEAVE_BODY_TIMEOUT", "300ms")]);
        // Headers that never end: the connection is closed.
        let got = exchange(&server.url, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: 1");
        assert!(!got.contains("200 OK"), "{got}");
        // A body that never ends: 408.
        let got = exchange(
            &server.url,
            b"POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pack\"",
        );
        assert!(got.starts_with("HTTP/1.1 408"), "{got}");
        assert!(got.contains("request_timeout"), "{got}");
        // A body announced over the limit: 413 before a byte of it is sent.
        let got = exchange(
            &server.url,
            b"POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n",
        );
        assert!(got.starts_with("HTTP/1.1 413"), "{got}");
        assert!(got.contains("payload_too_large"), "{got}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn spinning_scripts_stall_neither_health_nor_other_packs() {
        let root = write_root(&[
            (
                "config/spin.yaml",
                "limits: {max_wall_ms: 3000, max_operations: 100000000}\nstate:\n  n: {type: int}\ninput:\n  text: {type: string, required: true}\noutput: [n]\ngraph:\n  nodes:\n    spin: {script: spin.rhai::spin}\n  edges:\n    - START -> spin\n    - spin -> END\n",
            ),
            ("scripts/spin/spin.rhai", "fn spin() { let x = 0; loop { x += 1; } }"),
            (
                "config/counter.yaml",
                "state:\n  n: {type: int, reducer: add}\ninput:\n  text: {type: string, required: true}\noutput: [n]\ngraph:\n  nodes:\n    count: {script: count.rhai::count}\n  edges:\n    - START -> count\n    - count -> END\n",
            ),
            ("scripts/counter/count.rhai", "fn count() { #{ n: 1 } }"),
        ]);
        let server = start(root.path(), "memory", &[("RULEWEAVE_TURNS_PER_PACK", "2")]);
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut spins = Vec::new();
        // The sessions first: opening one is pack work too, in the pack's slots.
        let mut ids = Vec::new();
        for _ in 0..4 {
            let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "spin"})).await;
            ids.push(created["id"].as_str().unwrap().to_owned());
        }
        for id in ids {
            let turns = format!("{}/v1/sessions/{id}/turns", server.url);
            let started_tx = started_tx.clone();
            spins.push(tokio::spawn(async move {
                let mut r = http()
                    .post(&turns)
                    .header("accept", "text/event-stream")
                    .json(&json!({"input": {"text": "spin"}}))
                    .send()
                    .await
                    .unwrap();
                let mut seen = String::new();
                while let Some(chunk) = r.chunk().await.unwrap() {
                    seen.push_str(&String::from_utf8_lossy(&chunk));
                    if seen.contains("event: node_started") {
                        let _ = started_tx.send(());
                        seen.clear();
                    }
                }
            }));
        }
        // Both of the pack's slots are spinning.
        for _ in 0..2 {
            tokio::time::timeout(Duration::from_secs(30), started.recv()).await.expect("the spins started");
        }
        let health = get(&format!("{}/healthz", server.url)).await;
        let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "counter"})).await;
        let (status, counted) = post(
            &format!("{}/v1/sessions/{}/turns", server.url, created["id"].as_str().unwrap()),
            json!({"input": {"text": "one"}}),
        )
        .await;
        let still_spinning = spins.iter().filter(|s| !s.is_finished()).count();
        assert_eq!(health["status"], "ok");
        assert_eq!((status, &counted["output"]["n"]), (StatusCode::OK, &json!(1)));
        assert_eq!(still_spinning, 4, "health and the other pack answered while every spin still ran");
        for s in spins {
            s.await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_database_file_fails_turns_and_health() {
        let root = counter_root();
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("gone.db");
        let server = start(root.path(), &format!("sqlite://{}", db.display()), &[]);
        let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "counter"})).await;
        let turns = format!("{}/v1/sessions/{}/turns", server.url, created["id"].as_str().unwrap());
        let (status, _) = post(&turns, json!({"input": {"text": "kept"}})).await;
        assert_eq!(status, StatusCode::OK);
        for f in ["gone.db", "gone.db-wal", "gone.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(f));
        }
        let (status, body) = post(&turns, json!({"input": {"text": "lost"}})).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (StatusCode::SERVICE_UNAVAILABLE, &json!("store_error")),
            "{body}"
        );
        assert!(body["error"]["message"].as_str().unwrap().contains("was deleted or replaced"), "{body}");
        let r = http().get(format!("{}/healthz", server.url)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let health: Value = r.json().await.unwrap();
        assert_eq!(health["status"], "unhealthy", "{health}");
    }
}

/// `run pirate` under the memory bound against `mock`, the judge's reply capped at 64 KiB.
fn run_capped(mock: &support::mock_llm::MockLlm) -> std::process::Output {
    let (_dir, file) = support::temp_file("moves.json", r#"["Ahoy, captain! I bring word from the governor."]"#);
    ruleweave_bounded(&repo_root())
        .args(["run", "pirate", "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_RETRIES", "0")
        .env("RULEWEAVE_LLM_MAX_REPLY_BYTES", "65536")
        .output()
        .unwrap()
}

/// A model server that answers 200 and never stops sending, or says its reply is larger than the
/// cap: the call fails at the cap (refused before a byte is read when `Content-Length` says so),
/// the judge's fallback scores the turn, and the process stays under its memory bound.
#[test]
fn a_reply_past_the_cap_fails_its_call_and_the_fallback_answers() {
    use support::mock_llm::{MockLlm, Reply};
    for (reply, says) in [(Reply::Endless, "went on past it"), (Reply::Huge(1_000_000), "says it is")] {
        let mock = MockLlm::start();
        mock.judge(reply).chat(Reply::Content("Arr, go on.".into()));
        let out = run_capped(&mock);
        let lines = json_lines(&out);
        assert_eq!(lines.len(), 1, "{}", stderr(&out));
        let merit = &lines[0]["output"]["merit_breakdown"];
        assert_eq!(merit["source"], "fallback", "{merit}");
        let reason = merit["reason"].as_str().unwrap();
        assert!(reason.contains(says) && reason.contains("65536 bytes"), "{reason}");
        assert_eq!(lines[0]["output"]["pirate_response"], "Arr, go on.");
        let notes = lines[0]["display"]["notes"].as_array().unwrap();
        assert!(notes.iter().any(|n| n.as_str().unwrap().contains("falling back")), "a person is told: {notes:?}");
    }
}

/// A stream that never ends is cut at the cap; one that closes without `[DONE]` or a
/// `finish_reason` is no whole reply: either fails the debater's call, and the turn with it
/// (the debate has no fallback for a speech), and nothing of it is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_past_the_cap_or_cut_short_is_no_reply() {
    use support::mock_llm::{MockLlm, Reply};
    for (reply, says) in [
        (Reply::Endless, "streamed on past it"),
        (Reply::Truncated("PHASE 3 - REFINEMENT:\nA speech cut".into()), "the stream ended before the reply did"),
    ] {
        let mock = MockLlm::start();
        mock.chat(reply);
        let server = start_cmd({
            let mut cmd = ruleweave_bounded(&repo_root());
            cmd.args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
                .env("OPENAI_API_KEY", "sk-test")
                .env("OPENAI_BASE_URL", &mock.base_url)
                .env("RULEWEAVE_LLM_RETRIES", "0")
                .env("RULEWEAVE_LLM_MAX_REPLY_BYTES", "65536");
            cmd
        });
        let (_, created) = post(
            &format!("{}/v1/sessions", server.url),
            json!({"pack": "debate", "options": {"rounds": 1, "fact_check": "off"}}),
        )
        .await;
        let id = created["id"].as_str().unwrap();
        let r = support::http()
            .post(format!("{}/v1/sessions/{id}/turns", server.url))
            .header("accept", "text/event-stream")
            .json(&json!({"input": "start"}))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        let error = text.lines().skip_while(|l| *l != "event: error").nth(1).unwrap_or_else(|| panic!("{text}"));
        assert!(error.contains(says), "{error}");
        let session = get(&format!("{}/v1/sessions/{id}", server.url)).await;
        assert_eq!((session["turns"].as_u64(), &session["state"]["transcript"]), (Some(0), &json!([])), "nothing kept");
    }
}

/// A `ruleweave.toml` in the root (a pack folder cloned from someone else) cannot send the
/// user's keys elsewhere: with a key set, the file's base URLs are ignored, said so, and the
/// banner names where each key goes. Without a key (a local server), the file's URL serves.
#[test]
fn a_file_in_the_root_does_not_redirect_a_key() {
    use support::mock_llm::{MockLlm, Reply};
    let mock = MockLlm::start();
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let toml = format!("[llm]\nbase_url = \"{}\"\n[providers.groq]\nbase_url = \"{}\"\n", mock.base_url, mock.base_url);
    std::fs::write(root.path().join("ruleweave.toml"), toml).unwrap();
    // No turn is played: the banner alone says where the keys would go.
    let out = support::run_with_stdin(
        {
            let mut cmd = support::ruleweave(root.path());
            cmd.args(["play", "pirate", "--store", "memory", "--no-watch"])
                .env("OPENAI_API_KEY", "sk-mine")
                .env("GROQ_API_KEY", "gsk-mine");
            cmd
        },
        "",
    );
    let text = stdout(&out);
    assert!(
        text.contains(
            "keys: OPENAI_API_KEY → https://api.openai.com/v1, GROQ_API_KEY → https://api.groq.com/openai/v1"
        ),
        "{text}"
    );
    assert!(text.contains("ruleweave.toml sends OPENAI to") && text.contains("but OPENAI_API_KEY is set"), "{text}");
    assert!(text.contains("ruleweave.toml sends GROQ to"), "{text}");
    assert!(mock.seen().is_empty());

    // A keyless local server named in the file is used: nothing secret goes there.
    mock.judge(Reply::Content(r#"{"total_score": 10}"#.into())).chat(Reply::Content("Arr.".into()));
    let (_dir, file) = support::temp_file("moves.json", r#"["Ahoy!"]"#);
    let out = support::ruleweave(root.path())
        .args(["run", "pirate", "--input"])
        .arg(&file)
        .env("RULEWEAVE_LLM", "openai")
        .output()
        .unwrap();
    assert_eq!(json_lines(&out)[0]["output"]["pirate_response"], "Arr.", "{}", stderr(&out));
    assert!(mock.seen().iter().all(|s| s.authorization.is_none()), "no key was sent");
}

/// For every provider the host knows and every variable that may hold its key (its own, and an
/// alias: Google's for Gemini), a base URL in the root's `ruleweave.toml` is not where the key
/// goes: the banner names the real endpoint, says the file's is not used, and the file's server
/// hears nothing.
#[test]
fn no_file_in_the_root_redirects_any_providers_key() {
    use support::mock_llm::MockLlm;
    let mock = MockLlm::start();
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let providers = [
        ("OPENAI", "https://api.openai.com/v1"),
        ("ANTHROPIC", "https://api.anthropic.com"),
        ("TAVILY", "https://api.tavily.com"),
        ("GROQ", "https://api.groq.com/openai/v1"),
        ("GEMINI", "https://generativelanguage.googleapis.com/v1beta/openai"),
        ("OPENROUTER", "https://openrouter.ai/api/v1"),
        ("TOGETHER", "https://api.together.xyz/v1"),
        ("MISTRAL", "https://api.mistral.ai/v1"),
    ];
    let mut checked = 0;
    for (provider, endpoint) in providers {
        let section = if provider == "OPENAI" {
            "llm".to_owned()
        } else {
            format!("providers.{}", provider.to_ascii_lowercase())
        };
        std::fs::write(root.path().join("ruleweave.toml"), format!("[{section}]\nbase_url = \"{}\"\n", mock.base_url))
            .unwrap();
        let own = format!("{provider}_API_KEY");
        let aliases = ruleweave::llm::key_alias(provider).into_iter().map(str::to_owned);
        for var in std::iter::once(own).chain(aliases) {
            let out = support::run_with_stdin(
                {
                    let mut cmd = support::ruleweave(root.path());
                    cmd.args(["play", "pirate", "--store", "memory", "--no-watch"]).env(&var, "a-secret-key");
                    cmd
                },
                "",
            );
            let text = stdout(&out);
            assert!(text.contains(&format!("{var} → {endpoint}")), "{provider} by {var}: {text}");
            assert!(
                text.contains(&format!("ruleweave.toml sends {provider} to {}, but {var} is set", mock.base_url)),
                "{provider} by {var}: {text}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, providers.len() + 1, "every provider, and Gemini's alias");
    assert!(mock.seen().is_empty(), "the file's server heard nothing");
}

/// The console cannot be framed, sniffed, or made to run a script it does not carry (its policy
/// allows its own inline script by hash and fetches from this server only); the browser test plays
/// every pack under that policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_page_says_what_it_may_run() {
    let server = support::start(&repo_root(), "memory", &[]);
    let r = support::http().get(format!("{}/", server.url)).send().await.unwrap();
    let h = r.headers().clone();
    let policy = h["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("script-src 'sha256-") && policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(policy.contains("connect-src 'self'") && policy.starts_with("default-src 'none'"), "{policy}");
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(r.text().await.unwrap().contains("id=\"conversation\""));
}

/// `ruleweave test` reads and `--bless` rewrites only the root's own files: a case that is a link
/// to a file elsewhere is refused, its lines never printed, the file never rewritten.
#[test]
fn test_refuses_a_case_that_links_out_of_the_root() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate", "tests/pirate"]);
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("notes.yaml");
    let text = format!("name: {SECRET}\nturns:\n- input: hi\n  expect: {{merit_score: 99}}\n");
    std::fs::write(&secret, &text).unwrap();
    std::os::unix::fs::symlink(&secret, root.path().join("tests/pirate/linked.yaml")).unwrap();
    for args in [&["test", "pirate"][..], &["test", "pirate", "--bless"]] {
        let out = support::ruleweave(root.path()).args(args).output().unwrap();
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!out.status.success(), "{all}");
        assert!(all.contains("linked.yaml is a link"), "{all}");
        assert!(!all.contains(SECRET), "{all}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), text, "never rewritten");
}

/// What a client chooses that the operator's key pays for: a text option past its cap is refused
/// at the session's start (a 50,000-character persona would ride along in every prompt), and a
/// model the pack does not name is refused unless the operator allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_choose_what_the_operators_key_pays_for() {
    use support::mock_llm::{MockLlm, Reply};
    let mock = MockLlm::start();
    for _ in 0..4 {
        mock.chat(Reply::Content(
            "PHASE 1 - REFLECTION:\nx\nPHASE 2 - CRITIQUE:\ny\nPHASE 3 - REFINEMENT:\nA speech.".into(),
        ));
    }
    let env = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", mock.base_url.as_str()),
        ("RULEWEAVE_ALLOWED_MODELS", "gpt-4o-mini"),
    ];
    let server = support::start(&repo_root(), "memory", &env);
    let url = &server.url;
    let persona = "a very long persona ".repeat(2_500);
    let (status, body) =
        post(&format!("{url}/v1/sessions"), json!({"pack": "debate", "options": {"pro_persona": persona}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("the most a session may give is 1000"), "{body}");

    // A model outside the allow-list is refused as the session is made (422 naming it and what is
    // allowed), over REST and the chat face alike, never at its first turn.
    let options = json!({"rounds": 1, "fact_check": "off", "pro_model": "o1-pro"});
    let (status, body) = post(&format!("{url}/v1/sessions"), json!({"pack": "debate", "options": options})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let said = body["error"]["message"].as_str().unwrap();
    assert!(
        said.starts_with("option `pro_model`: model `o1-pro` is not one this host lets a session choose"),
        "{said}"
    );
    assert!(said.contains("allowed by its operator: gpt-4o-mini"), "{said}");
    let chat = json!({"model": "debate", "messages": [{"role": "user", "content": "start"}], "metadata": {"pro_model": "o1-pro"}});
    let (status, body) = post(&format!("{url}/v1/chat/completions"), chat).await;
    assert!(status.is_client_error(), "the chat face refuses it too: {body}");
    assert!(body.to_string().contains("model `o1-pro` is not one this host lets a session choose"), "{body}");
    assert!(mock.seen().iter().all(|s| s.body["model"] != "o1-pro"), "never asked");

    // A model the operator allows, and the pack's own, play.
    let options = json!({"rounds": 1, "fact_check": "off", "pro_model": "gpt-4o-mini"});
    let (_, created) = post(&format!("{url}/v1/sessions"), json!({"pack": "debate", "options": options})).await;
    let id = created["id"].as_str().unwrap();
    let (status, body) = post(&format!("{url}/v1/sessions/{id}/turns"), json!({"input": "start"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let models: Vec<String> = mock.seen().iter().filter_map(|s| s.body["model"].as_str().map(str::to_owned)).collect();
    assert!(models.iter().any(|m| m == "gpt-4o-mini") && models.iter().any(|m| m == "gpt-4o"), "{models:?}");
}

/// A read does not wait for a running turn: while the captain's model hangs, `GET
/// /v1/sessions/{id}` answers at once with what the store last committed; once the turn is
/// recorded, with that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_does_not_wait_for_a_running_turn() {
    use support::mock_llm::{MockLlm, Reply};
    let mock = MockLlm::start();
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.judge(Reply::Content(r#"{"total_score": 10}"#.into()))
        .chat(Reply::Gated(gate.clone(), Box::new(Reply::Content("At last, arr.".into()))));
    let env = [("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", mock.base_url.as_str())];
    let server = support::start(&repo_root(), "memory", &env);
    let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "pirate"})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let turns = format!("{}/v1/sessions/{id}/turns", server.url);
    let turn = tokio::spawn(async move { post(&turns, json!({"input": "Ahoy!"})).await });
    mock.wait_seen(2).await; // the judge answered; the captain's call hangs at the gate
    let read =
        tokio::time::timeout(std::time::Duration::from_secs(10), get(&format!("{}/v1/sessions/{id}", server.url)))
            .await
            .expect("the read answers while the turn runs");
    assert_eq!(read["turns"], 0, "{read}");
    gate.notify_one();
    let (status, body) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    let after = get(&format!("{}/v1/sessions/{id}", server.url)).await;
    assert_eq!((after["turns"].as_u64(), &after["display"]["reply"]), (Some(1), &json!("At last, arr.")));
}

/// `limits.max_llm_ms` is a deadline: a model that never answers is cut off when the turn's model
/// time is spent, not when the client's own timeout (a minute) runs out.
#[test]
fn the_turns_model_time_is_a_deadline() {
    use support::mock_llm::{MockLlm, Reply};
    let mock = MockLlm::start();
    mock.judge(Reply::Hang);
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let manifest = root.path().join("config/pirate.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}\nlimits:\n  max_llm_ms: 300\n")).unwrap();
    let (_dir, file) = support::temp_file("moves.json", r#"["Ahoy, captain!"]"#);
    let out = support::ruleweave(root.path())
        .args(["run", "pirate", "--input"])
        .arg(&file)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env("RULEWEAVE_LLM_TIMEOUT_MS", "600000")
        .env("RULEWEAVE_LLM_RETRIES", "0")
        .output()
        .unwrap();
    let line = json_lines(&out).remove(0);
    assert!(line.to_string().contains("limits.max_llm_ms"), "{line}");
}

/// One client cannot fill the server's connections with idle event streams: past
/// `streams_per_client` it gets 429, and a stream it closes frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_keeps_a_bounded_number_of_event_streams() {
    use crate::lobby::Follower;
    let root = crate::lobby::party_root("30s");
    let server = support::start(
        root.path(),
        "memory",
        &[("RULEWEAVE_STREAMS_PER_CLIENT", "2"), ("RUST_LOG", "warn,ruleweave_server=debug")],
    );
    let events = format!("{}/v1/events", server.url);
    let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "party"})).await;
    let follow = format!("{}/v1/sessions/{}/events", server.url, created["id"].as_str().unwrap());
    let first = Follower::open(&events).await;
    let mut second = Follower::open(&follow).await;
    second.next_named("state").await;
    let refused = support::http().get(&events).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("streams_per_client"), "{body}");
    // Other requests still go through.
    assert_eq!(get(&format!("{}/healthz", server.url)).await["status"], "ok");

    drop(first);
    // The server learns the stream closed when its connection does, and says so in its log.
    server.wait_for_line("an event stream closed");
    let r = support::http().get(&events).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the closed stream's place is free again");
}

/// A follower's stream ends when its session is deleted: it does not follow a session that is
/// gone for as long as the client keeps it open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stream_closes_with_its_session() {
    use crate::lobby::Follower;
    let root = crate::lobby::party_root("30s");
    let server = support::start(root.path(), "memory", &[]);
    let (_, created) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "party"})).await;
    let session = format!("{}/v1/sessions/{}", server.url, created["id"].as_str().unwrap());
    let mut follower = Follower::open(&format!("{session}/events")).await;
    follower.next_named("state").await;
    let deleted = support::http().delete(&session).send().await.unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_eq!(follower.next().await.map(|(name, _)| name), None, "the stream ends with its session");
}

/// The running batches of simulated games `/metrics` counts.
async fn simulations_running(url: &str) -> u64 {
    let text = support::http().get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    let line = text.lines().find(|l| l.starts_with("ruleweave_simulations_running ")).expect(&text);
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Hanging up does not make room for another batch: a flood of simulate requests whose clients
/// leave at once leaves at most one batch running, and that one stops at its next game once its
/// client has gone; the server then takes a batch again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_hung_up_simulations_runs_one_batch_at_most() {
    let server = support::start(
        &repo_root(),
        "memory",
        &[("RULEWEAVE_SIMULATE_TURNS", "1000000"), ("RUST_LOG", "warn,ruleweave_server=info")],
    );
    let simulate = format!("{}/v1/packs/pirate/simulate", server.url);
    // Each client asks for a long batch, then leaves before it could end.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let impatient = reqwest::Client::builder().timeout(std::time::Duration::from_millis(300)).build().unwrap();
    for _ in 0..8 {
        let r = impatient.post(&simulate).json(&json!({"games": 200})).send().await;
        assert!(r.is_err() || r.unwrap().status() == StatusCode::TOO_MANY_REQUESTS, "a batch this long answers late");
        assert!(simulations_running(&server.url).await <= 1, "more than one batch runs");
    }
    // Every batch that started stops once its client has left (the server says so for each;
    // on a slow machine one may end before the next client asks, so several may start, one at a
    // time), and then the server's place for a batch is free.
    let (mut started, mut stopped) = (0, 0);
    loop {
        let line = server.wait_for_line("a batch of simulated games");
        if line.contains("started") {
            started += 1;
        } else {
            assert!(line.contains("stopped: its client left"), "{line}");
            stopped += 1;
        }
        assert!(stopped <= started && started - stopped <= 1, "{started} started, {stopped} stopped");
        // A batch counts itself before it says it started: the gauge reads 0 only between them.
        if stopped == started && simulations_running(&server.url).await == 0 {
            break;
        }
    }
    let (status, body) = post(&simulate, json!({"games": 1, "players": ["liar"]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Simulate's page writes every text a client sent as text (its seed, its players' names), goes
/// out with the console's headers (no framing, no script), and a seed is no place for a payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulates_page_escapes_what_a_client_sent_and_is_never_framed() {
    let server = support::start(&repo_root(), "memory", &[]);
    let simulate = format!("{}/v1/packs/pirate/simulate", server.url);
    let seed = "<script>alert('seed')</script><img src=x onerror=alert(1)>";
    let r = support::http()
        .post(&simulate)
        .header("accept", "text/html")
        .json(&json!({"games": 1, "players": ["liar"], "seed": seed}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let h = r.headers().clone();
    let policy = h["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'none'") && policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(!policy.contains("script-src"), "the page runs no script: {policy}");
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["x-content-type-options"], "nosniff");
    let page = r.text().await.unwrap();
    assert!(!page.contains("<script") && !page.contains("<img"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert('seed')&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"),
        "the seed, as text"
    );
    let (status, body) = post(&simulate, json!({"games": 1, "seed": "x".repeat(900_000)})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("`seed` is at most 200 characters"), "{body}");
}

//! The HTTP API through a real client and socket: every route, the SSE stream, errors, the token,
//! metrics, and turns racing on one session. Servers start in-process on free ports.

use crate::support;

use std::sync::Arc;

use reqwest::StatusCode;
use ruleweave::Engine;
use ruleweave::store::{self, Store};
use serde_json::{Value, json};
use support::mock_llm::{MockLlm, Reply, judged};
use support::{counter_root, http, repo_root, serve};

async fn memory_engine(root: &std::path::Path) -> Engine {
    Engine::builder(root).store(Arc::new(store::MemoryStore::new())).build()
}

async fn post(url: &str, body: Value) -> (StatusCode, Value) {
    let r = http().post(url).json(&body).send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn get(url: &str) -> (StatusCode, Value) {
    let r = http().get(url).send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The SSE events of a streamed turn, as (event name, data).
async fn stream_turn(url: &str, input: Value) -> Vec<(String, Value)> {
    let r = http().post(url).header("accept", "text/event-stream").json(&json!({"input": input})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let text = r.text().await.unwrap();
    ruleweave_testkit::sse::events(&text)
        .into_iter()
        .filter(|e| !e.name.is_empty())
        .map(|e| (e.name, serde_json::from_str(&e.data).unwrap()))
        .collect()
}

async fn the_whole_api(store: Arc<dyn Store>) {
    let engine = Engine::builder(repo_root()).store(store).build();
    let s = serve(engine, None, 1 << 20).await;
    let base = &s.url;

    let (status, packs) = get(&format!("{base}/v1/packs")).await;
    assert_eq!(status, StatusCode::OK);
    let pirate = packs["packs"].as_array().unwrap().iter().find(|p| p["name"] == "pirate").unwrap().clone();
    assert_eq!(pirate["status"], "ok");
    assert_eq!(pirate["version"].as_str().unwrap().len(), 12);
    assert_eq!(pirate["options"]["difficulty"]["values"], json!(["easy", "medium", "hard"]));

    let (status, created) =
        post(&format!("{base}/v1/sessions"), json!({"pack": "pirate", "options": {"difficulty": "easy"}})).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["pack"], "pirate");
    assert_eq!(created["state"]["difficulty"], "easy");
    assert_eq!(created["state"]["game_id"], id);

    let (status, turn) =
        post(&format!("{base}/v1/sessions/{id}/turns"), json!({"input": {"message": "Ahoy, I sailed in your crew!"}}))
            .await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    let keys: Vec<&str> = turn.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["checkpoint", "display", "output", "state", "turn"]);
    assert_eq!(turn["display"]["reply"], turn["output"]["pirate_response"]);
    assert_eq!(turn["turn"], 1);
    assert!(turn["output"]["pirate_response"].as_str().unwrap().len() > 10);
    assert_eq!(turn["state"]["conversation_history"].as_array().unwrap().len(), 2);

    // The same turn, streamed: node events, the stand-in's tokens, the result last.
    let events =
        stream_turn(&format!("{base}/v1/sessions/{id}/turns"), json!({"message": "Please, my family is starving."}))
            .await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"node_started"));
    assert!(names.contains(&"token") && names.contains(&"llm") && names.contains(&"route"), "{names:?}");
    let (last, result) = events.last().unwrap();
    assert_eq!(last, "result");
    assert_eq!(result["turn"], 2);
    let tokens: String = events
        .iter()
        .filter(|(n, d)| n == "token" && d["node"] == "generate_response")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(tokens, result["output"]["pirate_response"].as_str().unwrap(), "the reply streamed whole");

    let (status, got) = get(&format!("{base}/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (got["id"].as_str(), got["pack"].as_str(), got["turns"].as_u64()),
        (Some(id.as_str()), Some("pirate"), Some(2))
    );
    assert_eq!(got["state"], result["state"]);

    let (status, cps) = get(&format!("{base}/v1/sessions/{id}/checkpoints")).await;
    assert_eq!(status, StatusCode::OK);
    let kinds: Vec<(u64, &str)> = cps["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["seq"].as_u64().unwrap(), c["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [(0, "start"), (1, "turn"), (2, "turn")]);
    assert_eq!(cps["checkpoints"][1]["pack_version"], pirate["version"]);
    let written = cps["checkpoints"][1]["created_at"].as_str().unwrap();
    assert!(written.len() == 24 && written.as_bytes()[10] == b'T' && written.ends_with('Z'), "RFC 3339: {written}");

    let (status, fork) = post(&format!("{base}/v1/sessions/{id}/fork"), json!({"checkpoint": 1})).await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    assert_ne!(fork["id"], json!(id));
    assert_eq!(fork["state"]["conversation_history"], turn["state"]["conversation_history"], "the state after turn 1");
    let fork_id = fork["id"].as_str().unwrap();
    assert_eq!(fork["state"]["game_id"], fork_id, "the fork's own game id, from init");

    // The listing, newest first a page at a time, finds both (other tests may add pirates).
    let (mut seen, mut cursor, mut last) = (Vec::new(), None::<String>, None::<String>);
    for _ in 0..200 {
        let page_url = match &cursor {
            Some(c) => format!("{base}/v1/sessions?pack=pirate&limit=2&before={c}"),
            None => format!("{base}/v1/sessions?pack=pirate&limit=2"),
        };
        let (status, page) = get(&page_url).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for s in page["sessions"].as_array().unwrap() {
            assert_eq!(s["pack"], "pirate");
            let at = s["created_at"].as_str().unwrap().to_owned();
            assert!(last.as_ref().is_none_or(|l| *l >= at), "newest first");
            last = Some(at);
            seen.push(s["id"].as_str().unwrap().to_owned());
        }
        match page["next"].as_str() {
            Some(next) if !(seen.contains(&id) && seen.iter().any(|s| s == fork_id)) => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    assert!(seen.contains(&id) && seen.iter().any(|s| s == fork_id), "{seen:?}");
    let (status, body) = get(&format!("{base}/v1/sessions?limit=0")).await;
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("limit is 1 to 500, not 0"))
    );
    let (status, body) = get(&format!("{base}/v1/sessions?limit=abc")).await;
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("the query does not fit (pack, limit, before): limit: not a whole number")
        )
    );
    let (_, forked_turn) =
        post(&format!("{base}/v1/sessions/{fork_id}/turns"), json!({"input": {"message": "Another way."}})).await;
    assert_eq!(forked_turn["turn"], 2);

    let r = http().delete(format!("{base}/v1/sessions/{id}")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let (status, body) = get(&format!("{base}/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");

    // A mistyped pack: a 404 that names the packs there are, without file system error text.
    let (status, body) = post(&format!("{base}/v1/sessions"), json!({"pack": "piratee"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("there is no pack `piratee` (did you mean `pirate`? packs: "), "{message}");
    assert!(!message.contains("os error"), "{message}");
    // ... and the mistyped name is not kept as a pack.
    let (_, packs) = get(&format!("{base}/v1/packs")).await;
    let names: Vec<&str> = packs["packs"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(!names.contains(&"piratee"), "{names:?}");

    let (status, health) = get(&format!("{base}/healthz")).await;
    assert_eq!((status, health["status"].as_str()), (StatusCode::OK, Some("ok")));
    let metrics = http().get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"ruleweave_turns_total{pack="pirate",outcome="ok"} 3"#), "{metrics}");
    assert!(
        metrics.contains(r#"ruleweave_llm_calls_total{pack="pirate",provider="standin",outcome="ok"} 6"#),
        "{metrics}"
    );
    assert!(metrics.contains("ruleweave_llm_tokens_total"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_api_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    the_whole_api(store::open(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_api_in_postgres() {
    let Some(url) = support::postgres() else { return };
    the_whole_api(store::open(&url).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_stream_a_real_models_tokens() {
    let mock = MockLlm::start();
    mock.judge(judged(21)).chat(Reply::Content("Arr, who goes there, stranger?".into()));
    let config = ruleweave::llm::OpenAiConfig { base_url: mock.base_url.clone(), ..Default::default() };
    let provider = Arc::new(ruleweave::llm::OpenAi::new(config).unwrap());
    let engine = Engine::builder(repo_root()).provider(provider).build();
    let s = serve(engine, None, 1 << 20).await;
    let (_, created) = post(&format!("{}/v1/sessions", s.url), json!({"pack": "pirate"})).await;
    let id = created["id"].as_str().unwrap();
    let events = stream_turn(&format!("{}/v1/sessions/{id}/turns", s.url), json!({"message": "Ahoy!"})).await;
    let pieces: Vec<&str> = events
        .iter()
        .filter(|(n, d)| n == "token" && d["node"] == "generate_response")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), "Arr, who goes there, stranger?");
    assert_eq!(events.last().unwrap().1["output"]["merit_score"], 21);
    assert!(mock.seen_kind("chat")[0]["stream"] == json!(true), "the server asked the model to stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors_and_change_nothing() {
    let s = serve(memory_engine(&repo_root()).await, None, 4096).await;
    let base = &s.url;
    let raw = |path: &str, body: &str, ctype: Option<&str>| {
        let mut r = http().post(format!("{base}{path}")).body(body.to_owned());
        if let Some(t) = ctype {
            r = r.header("content-type", t);
        }
        r.send()
    };
    let expect = |r: reqwest::Response, status: StatusCode, code: &'static str| async move {
        assert_eq!(r.status(), status);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().len() > 10, "{body}");
        body
    };
    expect(
        raw("/v1/sessions", "{\"pack\": ", Some("application/json")).await.unwrap(),
        StatusCode::BAD_REQUEST,
        "invalid_json",
    )
    .await;
    expect(
        raw("/v1/sessions", "{\"pack\": 3}", Some("application/json")).await.unwrap(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_request",
    )
    .await;
    expect(
        raw("/v1/sessions", "{\"pack\": \"pirate\"}", None).await.unwrap(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    let big = format!("{{\"pack\": \"pirate\", \"options\": {{\"x\": \"{}\"}}}}", "a".repeat(10_000));
    expect(
        raw("/v1/sessions", &big, Some("application/json")).await.unwrap(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    )
    .await;
    let (status, body) = post(&format!("{base}/v1/sessions"), json!({"pack": "no-such-pack"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    let (status, body) =
        post(&format!("{base}/v1/sessions"), json!({"pack": "pirate", "options": {"difficulty": "insane"}})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")));
    let (status, _) = post(&format!("{base}/v1/sessions/nope/turns"), json!({"input": {"message": "hi"}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, created) =
        post(&format!("{base}/v1/sessions"), json!({"pack": "pirate", "options": {"difficulty": "easy"}})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let turns = format!("{base}/v1/sessions/{id}/turns");
    for (input, code) in [
        (json!({}), "invalid_input"),
        (json!({"message": 42}), "invalid_input"),
        (json!({"message": "x".repeat(2001)}), "invalid_input"),
    ] {
        let (status, body) = post(&turns, json!({"input": input})).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some(code)), "{body}");
    }
    let (status, _) = post(&turns, json!({"message": "the input key is missing"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let r = http().post(&turns).header("content-type", "application/json").body("[]").send().await.unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        r#"the body does not fit: expected an object {"input": ...}, not a list at line 1 column 2"#,
        "in words, not serde's"
    );
    let (status, body) = post(&turns, json!({})).await;
    assert_eq!(
        (status, body["error"]["message"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("the body does not fit: `input` is missing at line 1 column 2"))
    );
    let (_, unchanged) = get(&format!("{base}/v1/sessions/{id}")).await;
    assert_eq!(unchanged["turns"], 0, "nothing changed");

    // Win the game, then a move gets 409 and changes nothing.
    for m in [
        "Ahoy captain! I am your old shipmate from the crew, don't you remember me? We sailed together to Tortuga.",
        "You are the greatest and most legendary pirate of the seven seas, I truly admire your courage and your famous ship.",
        "Please, my family is starving and sick, the treasure could save my little daughter who is dying of fever.",
    ] {
        post(&turns, json!({"input": {"message": m}})).await;
    }
    let (_, won) = get(&format!("{base}/v1/sessions/{id}")).await;
    assert_eq!(won["state"]["is_won"], true, "{won}");
    let (status, body) = post(&turns, json!({"input": {"message": "and more"}})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "session_finished");
    assert!(body["error"]["message"].as_str().unwrap().contains("won and over"));
    let (_, after) = get(&format!("{base}/v1/sessions/{id}")).await;
    assert_eq!(after["state"], won["state"]);

    let (status, body) = get(&format!("{base}/nowhere")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    let r = http().put(format!("{base}/v1/sessions")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = post(&format!("{base}/v1/sessions/{id}/fork"), json!({"checkpoint": 99})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A bare string is the text of a one-text-field pack, over HTTP as in `run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_string_is_a_turns_text() {
    let s = serve(memory_engine(&repo_root()).await, None, 1 << 20).await;
    let (_, created) = post(&format!("{}/v1/sessions", s.url), json!({"pack": "pirate"})).await;
    let id = created["id"].as_str().unwrap();
    let (status, turn) = post(&format!("{}/v1/sessions/{id}/turns", s.url), json!({"input": "Ahoy, captain!"})).await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    assert_eq!(turn["state"]["conversation_history"][0]["content"], "Ahoy, captain!");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_the_api_but_not_health() {
    let s = serve(memory_engine(&repo_root()).await, Some("s3cret"), 1 << 20).await;
    let r = http().get(format!("{}/v1/packs", s.url)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "unauthorized");
    let r = http().get(format!("{}/v1/packs", s.url)).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http().get(format!("{}/metrics", s.url)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http().get(format!("{}/v1/packs", s.url)).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(http().get(format!("{}/healthz", s.url)).send().await.unwrap().status(), StatusCode::OK);
    assert!(http().get(&s.url).send().await.unwrap().text().await.unwrap().contains("ruleweave console"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_turns_on_one_session() {
    let root = counter_root();
    let dir = tempfile::tempdir().unwrap();
    let store = store::open(&format!("sqlite://{}", dir.path().join("c.db").display())).await.unwrap();
    let s = serve(Engine::builder(root.path()).store(store).build(), None, 1 << 20).await;
    let (_, created) = post(&format!("{}/v1/sessions", s.url), json!({"pack": "counter"})).await;
    let turns = format!("{}/v1/sessions/{}/turns", s.url, created["id"].as_str().unwrap());
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let turns = turns.clone();
            tokio::spawn(async move { post(&turns, json!({"input": {"text": format!("t{i}")}})).await })
        })
        .collect();
    let mut numbers = Vec::new();
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        numbers.push(body["turn"].as_u64().unwrap());
    }
    numbers.sort();
    assert_eq!(numbers, (1..=100).collect::<Vec<_>>());
    let (_, got) = get(turns.trim_end_matches("/turns")).await;
    assert_eq!((got["turns"].as_u64(), got["state"]["n"].as_u64()), (Some(100), Some(100)));
    assert_eq!(got["state"]["log"].as_array().unwrap().len(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_packs_are_listed_with_their_diagnostics() {
    let s = serve(memory_engine(&repo_root().join("tests/packs/err_unknown_edge")).await, None, 1 << 20).await;
    let (_, packs) = get(&format!("{}/v1/packs", s.url)).await;
    let game = &packs["packs"][0];
    assert_eq!((game["name"].as_str(), game["status"].as_str()), (Some("game"), Some("error")));
    assert_eq!(game["diagnostics"][0]["file"], "config/game.yaml");
    assert_eq!(
        (game["diagnostics"][0]["line"].as_u64(), game["diagnostics"][0]["column"].as_u64()),
        (Some(8), Some(14)),
        "on the node that does not exist"
    );
    let (status, body) = post(&format!("{}/v1/sessions", s.url), json!({"pack": "game"})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "invalid_pack");
}

/// docs/api.md's table of errors, as (code → REST status, chat status): the server holds the
/// table to its own (a unit test), and this test holds both faces to the table.
fn documented_statuses() -> std::collections::HashMap<String, (u16, u16)> {
    let doc = std::fs::read_to_string(repo_root().join("docs/api.md")).unwrap();
    let table =
        doc.split("<!-- errors (generated) -->").nth(1).unwrap().split("<!-- end of errors -->").next().unwrap();
    table
        .lines()
        .filter_map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((code.to_owned(), (cells.get(2)?.parse().ok()?, cells.get(3)?.parse().ok()?)))
        })
        .collect()
}

/// Each kind of error a request can cause answers its documented status on the JSON API and on
/// the chat face alike: the same failure, asked both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_error_answers_its_documented_status_on_both_faces() {
    let table = documented_statuses();
    assert!(table.len() > 20, "the documented table: {table:?}");
    let root = support::write_root(&[
        (
            "config/table.yaml",
            "state:\n  n: {type: int, reducer: add}\n  done: {type: bool}\ninput:\n  text: {type: string, required: true}\noutput: [n]\nfinish: {when: done, message: Over.}\ngraph:\n  nodes:\n    count: {script: count.rhai::count}\n  edges:\n    - START -> count\n    - count -> END\n",
        ),
        (
            "scripts/table/count.rhai",
            r#"fn count() { if input().text == "boom" { throw "the script blew up"; } #{ n: 1, done: input().text == "stop" } }"#,
        ),
    ]);
    let s = serve(memory_engine(root.path()).await, None, 1 << 20).await;
    let base = &s.url;
    let (status, opened) = post(&format!("{base}/v1/sessions"), json!({"pack": "table"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let id = opened["id"].as_str().unwrap().to_owned();
    let finished =
        post(&format!("{base}/v1/sessions"), json!({"pack": "table"})).await.1["id"].as_str().unwrap().to_owned();
    assert_eq!(post(&format!("{base}/v1/sessions/{finished}/turns"), json!({"input": "stop"})).await.0, StatusCode::OK);

    let send = |path: String, body: String| async move {
        let r = http().post(format!("{base}{path}")).header("content-type", "application/json").body(body).send().await;
        let r = r.unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        (status, body["error"]["code"].as_str().unwrap_or_default().to_owned(), body)
    };
    let turn =
        |session: &str, input: Value| (format!("/v1/sessions/{session}/turns"), json!({"input": input}).to_string());
    let chat = |session: &str, message: &str| {
        let body = json!({"model": "table", "messages": [{"role": "user", "content": message}], "metadata": {"session": session}});
        ("/v1/chat/completions".to_owned(), body.to_string())
    };
    // (the code, the request on the JSON API, the same on the chat face)
    let cases = [
        (
            "invalid_json",
            (format!("/v1/sessions/{id}/turns"), "{\"input\": ".to_owned()),
            ("/v1/chat/completions".to_owned(), "{\"model\": ".to_owned()),
        ),
        (
            "invalid_request",
            (format!("/v1/sessions/{id}/turns"), "{\"inptu\": 1}".to_owned()),
            ("/v1/chat/completions".to_owned(), "{\"modle\": \"table\"}".to_owned()),
        ),
        ("invalid_input", turn(&id, json!({"nope": 1})), chat(&id, "{\"nope\": 1}")),
        ("not_found", turn("0123456789abcdef", json!("hi")), chat("0123456789abcdef", "hi")),
        ("session_finished", turn(&finished, json!("again")), chat(&finished, "again")),
        ("script_error", turn(&id, json!("boom")), chat(&id, "boom")),
    ];
    for (code, rest, on_chat) in cases {
        let (rest_status, chat_status) = table[code];
        for (face, (path, body), want) in [("REST", rest, rest_status), ("chat", on_chat, chat_status)] {
            let (status, got, answered) = send(path.clone(), body).await;
            assert_eq!((status, got.as_str()), (want, code), "{face} {path}: {answered}");
            assert!(answered["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answered}");
        }
    }
    // And what only the chat face can be asked.
    let model = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}).to_string();
    for (code, body) in [("model_not_found", model("nopack")), ("invalid_model", model("table:loud"))] {
        let (status, got, answered) = send("/v1/chat/completions".into(), body).await;
        assert_eq!((status, got.as_str()), (table[code].1, code), "{answered}");
    }
    // Nothing a failure touched changed: the session counted only what was played.
    assert_eq!(get(&format!("{base}/v1/sessions/{id}")).await.1["turns"], 0);
}

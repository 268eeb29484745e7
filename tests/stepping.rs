//! Stepping through a turn over HTTP, on both SQL stores: a break before the pirate's reply node
//! holds the turn with the judge's score in and no reply yet; an edit at the pause is a
//! checkpoint of kind `edit` the rest of the turn sees; the pause survives a restart (SQLite) and
//! the other replica goes on with it (PostgreSQL); a fork with a patch leaves the original's
//! history as it was; bad requests are refused by name and change nothing.
//!
//! The model server's replies are queued once the servers listen: a server finishes other
//! sessions' interrupted turns as it starts (a shared test database has some), and those calls
//! would take them. Only the calls that mention this test's move are counted.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::mock_llm::{MockLlm, Reply, judged};
use crate::support::{Process, http, post, repo_root, start};

fn serve(store: &str, mock: &MockLlm) -> Process {
    start(&repo_root(), store, &[("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &mock.base_url)])
}

async fn patch(url: &str, body: Value) -> (StatusCode, Value) {
    let r = http().patch(url).json(&body).send().await.unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

async fn get(url: &str) -> Value {
    crate::support::get(url).await
}

/// The kinds of a session's checkpoints, oldest first.
async fn kinds(base: &str, id: &str) -> Vec<String> {
    let list = get(&format!("{base}/v1/sessions/{id}/checkpoints")).await;
    list["checkpoints"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap().to_owned()).collect()
}

/// A pirate turn held before its reply node on `a`, edited and resumed on `b` (the same server
/// after a restart, or another replica): what a designer's stepping does, end to end.
async fn held_edited_resumed(a: &str, b: impl AsyncFnOnce() -> String, mock: &MockLlm) {
    let (_, created) = post(&format!("{a}/v1/sessions"), json!({"pack": "pirate"})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let turns = format!("{a}/v1/sessions/{id}/turns");

    // Bad breakpoints are refused by name before anything runs.
    let (status, body) = post(&turns, json!({"input": MOVE, "break": {"before": ["generate_respons"]}})).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("(did you mean `generate_response`?)"), "{body}");
    assert_eq!(kinds(a, &id).await, ["start"], "nothing ran");
    assert!(ours(mock).is_empty());

    let (status, held) = post(&turns, json!({"input": MOVE, "break": {"before": ["generate_response"]}})).await;
    assert_eq!(status, 200, "{held}");
    assert_eq!(
        held["paused"],
        json!({"before": "generate_response", "next": ["generate_response"]}),
        "exactly where, as a pause point says it"
    );
    assert_eq!(held["held"], true);
    assert_eq!((&held["turn"], &held["state"]["merit_score"]), (&json!(1), &json!(30)), "the judge's score is in");
    assert_eq!(held["state"]["pirate_response"], "", "no reply yet");
    assert_eq!(ours(mock), ["judge"], "only the judge was asked");

    // A new turn waits for this one; nothing else is paused to resume once it is done.
    let (status, busy) = post(&turns, json!({"input": "again"})).await;
    assert_eq!(status, 409, "{busy}");
    assert!(busy["error"]["message"].as_str().unwrap().contains("held at a breakpoint before generate_response"));

    let b = b().await;
    let state = format!("{b}/v1/sessions/{id}/state");
    let shown = get(&format!("{b}/v1/sessions/{id}")).await;
    assert_eq!((&shown["paused"]["before"], &shown["held"]), (&json!("generate_response"), &json!(true)), "{shown}");
    for (bad, says) in [
        (json!({"set": {"merit_scor": 95}}), "`merit_scor` is not a state field (did you mean `merit_score`?)"),
        (json!({"set": {"merit_score": 95, "is_won": "yes"}}), "`is_won` is a bool, not a string"),
        (
            json!({"set": {"conversation_history": [{"role": "user", "content": "Ahoy"}, 7]}}),
            "`conversation_history[1]` is an int, but the items of `conversation_history` are a map",
        ),
        (json!({"set": {}}), "the edit sets no fields"),
        (json!({"sett": {}}), "`sett` is not a field here"),
    ] {
        let (status, body) = patch(&state, bad).await;
        assert_eq!(status, 422, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(says), "{body}");
    }
    assert_eq!(kinds(&b, &id).await, ["start", "break"], "nothing of a bad edit was recorded");
    let (status, edited) = patch(&state, json!({"set": {"merit_score": 95, "merit_has_earned_it": true}})).await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!((&edited["checkpoint"], &edited["state"]["merit_score"]), (&json!(2), &json!(95)));
    assert_eq!(kinds(&b, &id).await, ["start", "break", "edit"]);
    // What the edit leaves behind: the judge's breakdown still tells of the old score; the nodes
    // still to run have never run, so nothing is known to be written again.
    let derived = edited["derived"].as_array().unwrap();
    assert!(
        derived.contains(&json!({"field": "merit_breakdown", "from": "merit_score", "by": "merit_check"})),
        "{edited}"
    );
    assert_eq!(edited["recomputed_next"], json!([]), "{edited}");
    let listed = get(&format!("{b}/v1/sessions/{id}/checkpoints")).await;
    let edit = listed["checkpoints"].as_array().unwrap().iter().find(|c| c["kind"] == "edit").unwrap().clone();
    assert_eq!(edit["turn"], 1, "an edit while turn 1 is held is listed under turn 1: {edit}");

    // One step, streamed: the reply node's events, then the pause, then the result.
    let streamed = http()
        .post(format!("{b}/v1/sessions/{id}/resume"))
        .header("Accept", "text/event-stream")
        .json(&json!({"break": {"step": true}}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<&str> = streamed.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    assert_eq!(events.first(), Some(&"node_started"), "{streamed}");
    assert_eq!(events[events.len() - 2..], ["paused", "result"], "{streamed}");
    let paused = streamed.lines().skip_while(|l| *l != "event: paused").nth(1).unwrap();
    let paused: Value = serde_json::from_str(paused.trim_start_matches("data: ")).unwrap();
    let want =
        json!({"type": "paused", "before": "validate_response", "next": ["validate_response"], "breakpoint": true});
    assert_eq!(paused, want);

    let (status, done) = post(&format!("{b}/v1/sessions/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{done}");
    assert!(done.get("paused").is_none(), "{done}");
    assert_eq!((&done["turn"], &done["output"]["merit_score"]), (&json!(1), &json!(95)), "the rest saw the edit");
    assert_eq!(done["output"]["pirate_response"], "Arrr, never.");
    assert_eq!(kinds(&b, &id).await, ["start", "break", "edit", "break", "turn"]);
    let (status, nothing) = post(&format!("{b}/v1/sessions/{id}/resume"), json!({})).await;
    assert_eq!(status, 409, "{nothing}");
    assert!(nothing["error"]["message"].as_str().unwrap().contains("is not paused"), "{nothing}");

    // A fork from turn 1 with a patch; the original's checkpoints stay as they were.
    let before = get(&format!("{b}/v1/sessions/{id}/checkpoints")).await;
    let fork = format!("{b}/v1/sessions/{id}/fork");
    let (status, forked) = post(&fork, json!({"checkpoint": 4, "set": {"merit_score": 7}})).await;
    assert_eq!(status, 201, "{forked}");
    assert_eq!(forked["state"]["merit_score"], 7);
    assert_ne!(forked["id"], json!(id));
    let (status, refused) = post(&fork, json!({"checkpoint": 1, "set": {"merit_score": 7}})).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("in the middle of a turn"), "{refused}");
    let (status, refused) = post(&fork, json!({"checkpoint": 4, "set": {"nope": 1}})).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(get(&format!("{b}/v1/sessions/{id}/checkpoints")).await, before, "the original is untouched");
}

/// This test's move (its requests to the model server are told apart by it).
const MOVE: &str = "Ahoy! A stepping test's move.";

/// The kinds of the model calls that mention this test's move, in order.
fn ours(mock: &MockLlm) -> Vec<&'static str> {
    mock.seen().into_iter().filter(|s| s.body.to_string().contains("stepping test")).map(|s| s.kind).collect()
}

/// The replies of one stepped turn: the judge's 30, the captain's refusal.
fn queue(mock: &MockLlm) {
    mock.judge(judged(30)).chat(Reply::Content("Arrr, never.".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_turn_survives_a_restart_on_sqlite() {
    let mock = MockLlm::start();
    let db = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", db.path().join("s.db").display());
    let first = serve(&store, &mock);
    queue(&mock);
    let url = first.url.clone();
    let mut slot = Some(first);
    let restarted = std::cell::RefCell::new(None);
    held_edited_resumed(
        &url,
        async || {
            let mut first = slot.take().unwrap();
            first.terminate();
            assert!(first.exit_status().success());
            let again = serve(&store, &mock);
            let url = again.url.clone();
            *restarted.borrow_mut() = Some(again);
            url
        },
        &mock,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_replica_goes_on_with_a_held_turn() {
    let Some(pg) = crate::support::postgres() else { return };
    let mock = MockLlm::start();
    let (a, b) = (serve(&pg, &mock), serve(&pg, &mock));
    queue(&mock);
    held_edited_resumed(&a.url, async || b.url.clone(), &mock).await;
}

/// An edit while a turn plays is refused, on the replica playing it and on another one; the turn
/// goes on untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_while_a_turn_plays_is_refused() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let mock = MockLlm::start();
    let db = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", db.path().join("s.db").display());
    let store = crate::support::postgres().unwrap_or(sqlite);
    let a = serve(&store, &mock);
    let b = store.starts_with("postgres").then(|| serve(&store, &mock));
    mock.judge(Reply::Gated(gate.clone(), Box::new(judged(30)))).chat(Reply::Content("Arr.".into()));
    let replicas: Vec<&str> = std::iter::once(&a).chain(&b).map(|p| p.url.as_str()).collect();
    let (_, created) = post(&format!("{}/v1/sessions", a.url), json!({"pack": "pirate"})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let turns = format!("{}/v1/sessions/{id}/turns", a.url);
    let turn = tokio::spawn(async move { post(&turns, json!({"input": MOVE})).await });
    mock.wait_seen_with("stepping test").await;
    for url in replicas {
        let (status, body) = patch(&format!("{url}/v1/sessions/{id}/state"), json!({"set": {"merit_score": 1}})).await;
        assert_eq!(status, 409, "{url}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("is playing"), "{body}");
    }
    gate.notify_one();
    let (status, done) = turn.await.unwrap();
    assert_eq!((status.as_u16(), &done["output"]["merit_score"]), (200, &json!(30)), "{done}");
    assert_eq!(kinds(&a.url, &id).await, ["start", "turn"]);
}

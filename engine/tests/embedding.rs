//! The axum example of `docs/embedding.md` (`engine/examples/axum_server.rs`), driven as a client
//! would: a game opened, a move streamed as server-sent events, errors as statuses, and an edit
//! of the pack live on the next move.

use crate::support;

#[allow(dead_code)]
#[path = "../examples/axum_server.rs"]
mod example;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use ruleweave::Engine;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn send(app: &axum::Router, path: &str, body: Value) -> (StatusCode, String) {
    let request = Request::post(path).header("content-type", "application/json").body(Body::from(body.to_string()));
    let response = app.clone().oneshot(request.unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22).await.unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The `data:` of each server-sent event, by its name.
fn events(text: &str) -> Vec<(String, Value)> {
    ruleweave_testkit::sse::events(text).into_iter().map(|e| (e.name, serde_json::from_str(&e.data).unwrap())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_axum_example_plays_streams_and_reloads() {
    let root = support::copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let store = ruleweave::store::open("memory").await.unwrap();
    let engine = Engine::builder(root.path()).store(store).build();
    let app = example::app(engine.clone());

    let (status, body) = send(&app, "/games", json!({"pack": "pirate", "options": {"difficulty": "easy"}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();

    let (status, body) = send(&app, &format!("/games/{id}/moves"), json!({"message": "Ahoy, captain!"})).await;
    assert_eq!(status, StatusCode::OK);
    let streamed = events(&body);
    assert!(streamed.iter().any(|(n, e)| n == "event" && e["type"] == "llm"), "{body}");
    assert!(streamed.iter().any(|(n, e)| n == "event" && e["type"] == "token"), "the reply streams: {body}");
    let (last, result) = streamed.last().unwrap();
    assert_eq!(last, "result");
    assert_eq!(result["turn"], 1);
    assert!(result["output"]["pirate_response"].as_str().unwrap().len() > 10);

    let (status, _) = send(&app, "/games/nope/moves", json!({"message": "hi"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(&app, "/games", json!({"pack": "no-such-pack"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An edit that loads is live on the next move of the same session.
    let watcher = ruleweave::Watcher::start(engine.packs()).unwrap();
    let mut reloads = engine.packs().subscribe();
    support::edit(root.path(), "config/pirate.yaml", "close_margin: 5", "close_margin: 6");
    let reloaded = tokio::time::timeout(std::time::Duration::from_secs(30), reloads.recv()).await.unwrap().unwrap();
    assert_eq!(reloaded.status, ruleweave::ReloadStatus::Reloaded);
    let (_, body) = send(&app, &format!("/games/{id}/moves"), json!({"message": "I sailed in your crew."})).await;
    let (_, result) = events(&body).pop().unwrap();
    assert_eq!(result["turn"], 2, "{body}");
    assert_eq!(engine.session(&id).await.unwrap().lock().await.pack().version(), reloaded.version.unwrap());
    drop(watcher);
}

//! What one session may keep: its state is at most `max_state_bytes` as JSON, checked on every
//! write (a turn, an edit, a fork with a patch), and a write past it keeps nothing.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};

async fn send(method: reqwest::Method, url: &str, body: Value) -> (StatusCode, Value) {
    let r = support::http().request(method, url).json(&body).send().await.unwrap();
    (r.status(), r.json().await.unwrap_or(Value::Null))
}

fn refused_for_size(status: StatusCode, body: &Value) {
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "state_too_large", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("4096 bytes") && message.contains("max_state_bytes"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_past_its_cap_is_refused_on_every_write_and_keeps_nothing() {
    use reqwest::Method;
    let root = support::counter_root();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("q.db").display());
    let server = support::start(root.path(), &store, &[("RULEWEAVE_MAX_STATE_BYTES", "4096")]);
    let base = &server.url;
    let (_, made) = support::post(&format!("{base}/v1/sessions"), json!({"pack": "counter"})).await;
    let id = made["id"].as_str().unwrap();
    let session = format!("{base}/v1/sessions/{id}");

    // A turn that keeps the state under the cap is played; the one that would take it past is
    // refused, and the session is as it was.
    let (status, body) = support::post(&format!("{session}/turns"), json!({"input": {"text": "a".repeat(3000)}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = support::post(&format!("{session}/turns"), json!({"input": {"text": "b".repeat(2000)}})).await;
    refused_for_size(status, &body);
    let (_, now) = send(Method::GET, &session, Value::Null).await;
    assert_eq!((now["turns"].as_u64(), now["state"]["n"].as_u64()), (Some(1), Some(1)), "{now}");
    assert_eq!(now["state"]["log"].as_array().unwrap().len(), 1);

    // An edit, and a fork with a patch, past the cap: refused, nothing kept.
    let big = json!({"set": {"log": ["c".repeat(5000)]}});
    let (status, body) = send(Method::PATCH, &format!("{session}/state"), big.clone()).await;
    refused_for_size(status, &body);
    let (status, body) =
        support::post(&format!("{session}/fork"), json!({"checkpoint": 1, "set": {"log": ["c".repeat(5000)]}})).await;
    refused_for_size(status, &body);
    let (_, listed) = send(Method::GET, &format!("{base}/v1/sessions"), Value::Null).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
    let (_, now) = send(Method::GET, &session, Value::Null).await;
    assert_eq!(now["state"]["log"], json!(["a".repeat(3000)]));

    // Under the cap, each of them still writes.
    let (status, body) = send(Method::PATCH, &format!("{session}/state"), json!({"set": {"log": []}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = support::post(&format!("{session}/turns"), json!({"input": {"text": "b".repeat(2000)}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

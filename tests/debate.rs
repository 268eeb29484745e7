//! The debate pack through the binary and the server: Tavily's protocol (a local server speaking
//! its `POST /search`, failing as real ones do), speeches streamed token by token over SSE and in
//! `play`, a debate killed mid-round resuming without repeating a finished search, and a paused
//! debate continued on another replica.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post as route_post;
use serde_json::{Value, json};
use support::{get, http, json_lines, post, repo_root, ruleweave, run_with_stdin, start, stderr, stdout, temp_file};

/// What the search server has seen, and how it answers.
#[derive(Default)]
struct Seen {
    queries: Vec<String>,
    bodies: Vec<Value>,
    auth: Vec<Option<String>>,
    /// Fail the first this many requests with a 500.
    fail_first: usize,
    /// Answer only this many requests; later ones never get an answer.
    answer_at_most: Option<usize>,
}

/// A local server speaking Tavily's `POST /search`.
struct Tavily {
    url: String,
    seen: Arc<Mutex<Seen>>,
    count: tokio::sync::watch::Sender<usize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

type Shared = (Arc<Mutex<Seen>>, tokio::sync::watch::Sender<usize>);

async fn search(
    State((seen, count)): State<Shared>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> axum::response::Response {
    let (n, fail, hang) = {
        let mut s = seen.lock().unwrap();
        s.bodies.push(body.0.clone());
        s.auth.push(headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned));
        let n = s.bodies.len();
        (n, n <= s.fail_first, s.answer_at_most.is_some_and(|m| n > m))
    };
    count.send_replace(n);
    if fail {
        return (StatusCode::INTERNAL_SERVER_ERROR, r#"{"detail": {"error": "overloaded"}}"#).into_response();
    }
    if hang {
        std::future::pending::<()>().await;
    }
    let query = body.0["query"].as_str().unwrap_or_default().to_owned();
    seen.lock().unwrap().queries.push(query.clone());
    axum::Json(json!({
        "query": query,
        "results": [
            {"title": "Labour market report", "url": "https://example.org/a", "content": format!("On {query}: data."), "score": 0.9},
            {"title": "Survey", "url": "https://example.org/b", "content": "More data.", "score": 0.7},
        ],
        "response_time": 0.4,
    }))
    .into_response()
}

impl Tavily {
    fn start(fail_first: usize, answer_at_most: Option<usize>) -> Self {
        let seen = Arc::new(Mutex::new(Seen { fail_first, answer_at_most, ..Seen::default() }));
        let count = tokio::sync::watch::channel(0).0;
        let app = Router::new().route("/search", route_post(search)).with_state((seen.clone(), count.clone()));
        let (addr, stop) = support::mock_llm::serve_router(app);
        Tavily { url: format!("http://{addr}"), seen, count, _stop: stop }
    }

    async fn wait_seen(&self, n: usize) {
        let mut rx = self.count.subscribe();
        let ok = tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|c| *c >= n)).await;
        assert!(ok.is_ok_and(|r| r.is_ok()), "the search server never saw {n} requests");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fact_checker_searches_tavily_and_retries_its_failures() {
    let tavily = Tavily::start(1, None);
    let (_dir, file) = temp_file("moves.json", r#"["start"]"#);
    let out = ruleweave(&repo_root())
        .args(["run", "debate", "--events", "--set", "rounds=1", "--input"])
        .arg(&file)
        .env("TAVILY_API_KEY", "tvly-test")
        .env("TAVILY_BASE_URL", &tavily.url)
        .env("RULEWEAVE_LLM_RETRIES", "1")
        .env("RULEWEAVE_LLM_BACKOFF_MS", "1")
        .output()
        .unwrap();
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{}", stderr(&out));
    let o = &lines[0]["output"];
    assert_eq!(o["is_debate_complete"], json!(true), "{}", lines[0]);
    let seen = tavily.seen.lock().unwrap();
    let logs = o["fact_check_logs"].as_array().unwrap();
    assert_eq!(seen.queries.len(), logs.len(), "one search per claim");
    assert_eq!(seen.bodies.len(), logs.len() + 1, "the 500 was retried");
    assert!(seen.auth.iter().all(|a| a.as_deref() == Some("Bearer tvly-test")));
    assert_eq!(seen.bodies[0]["max_results"], json!(3));
    assert_eq!(logs[0]["sources"], json!(["https://example.org/a", "https://example.org/b"]));
    let events = lines[0]["events"].as_array().unwrap();
    let searches: Vec<&Value> = events.iter().filter(|e| e["type"] == "search").collect();
    assert_eq!(searches.len(), logs.len());
    assert!(searches.iter().all(|e| e["engine"] == "tavily" && e["results"] == 2 && e.get("error").is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speeches_stream_token_by_token_over_sse() {
    let server = start(&repo_root(), "memory", &[]);
    let (_, created) =
        post(&format!("{}/v1/sessions", server.url), json!({"pack": "debate", "options": {"rounds": 1}})).await;
    let id = created["id"].as_str().unwrap();
    let body = http()
        .post(format!("{}/v1/sessions/{id}/turns", server.url))
        .header("accept", "text/event-stream")
        .json(&json!({"input": "start"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut tokens = String::new();
    let mut result = Value::Null;
    for e in ruleweave_testkit::sse::events(&body) {
        let v: Value = serde_json::from_str(&e.data).unwrap();
        if e.name == "token" && v["node"] == "speak" {
            tokens.push_str(v["text"].as_str().unwrap());
        }
        if e.name == "result" {
            result = v;
        }
    }
    let first = result["output"]["transcript"][0]["speech"].as_str().unwrap().to_owned();
    assert!(tokens.contains("PHASE 3 - REFINEMENT:"), "the raw reply streams: {tokens}");
    assert!(tokens.contains(&first), "the speech arrives as tokens before the result");
}

#[test]
fn play_streams_the_speeches() {
    let out = run_with_stdin(
        {
            let mut c = ruleweave(&repo_root());
            c.args(["play", "debate", "--set", "rounds=1", "--set", "fact_check=off"]);
            c
        },
        "start\n",
    );
    let text = stdout(&out);
    // Each speech streams under its speaker; the reflection and critique are the debater's notes.
    assert!(text.contains("pro › Surveys where \"Artificial intelligence"), "{text}");
    assert!(text.contains("\ncon › Surveys where"), "{text}");
    assert!(!text.contains("PHASE"), "{text}");
    // Streamed as the reply says it, so the reply is not printed a second time.
    assert_eq!(text.matches("62 percent").count(), 1, "{text}");
    assert!(text.contains("winner:"), "{text}");
}

/// A script's warning reaches the player once, as the turn's note under the speech, not also
/// as a log line in the middle of the terminal.
#[test]
fn play_says_a_scripts_warning_once_as_a_note() {
    let out = run_with_stdin(
        {
            let mut c = ruleweave(&repo_root());
            c.args(["play", "debate", "--set", "rounds=1"]);
            c
        },
        "start\n",
    );
    let text = stdout(&out);
    assert!(text.contains("(judge: pro's speech stands with 1 claim(s) found false"), "{text}");
    let log = support::stderr(&out);
    assert!(!log.contains("WARN"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debate_killed_mid_round_resumes_without_repeating_a_finished_search() {
    let db = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", db.path().join("debate.db").display());
    // The first server's searches: the first speech's three claims are answered, then nothing.
    let first = Tavily::start(0, Some(3));
    let env = [("TAVILY_API_KEY", "tvly-test"), ("TAVILY_BASE_URL", first.url.as_str())];
    let server = start(&repo_root(), &store, &env);
    let (_, created) =
        post(&format!("{}/v1/sessions", server.url), json!({"pack": "debate", "options": {"rounds": 2}})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let url = format!("{}/v1/sessions/{id}/turns", server.url);
    let turn = tokio::spawn(async move { post(&url, json!({"input": "start"})).await });
    first.wait_seen(4).await;
    drop(server); // SIGKILL, while the second speech's claims are being searched
    let (status, _) = turn.await.unwrap();
    assert_ne!(status, StatusCode::OK);
    let answered = first.seen.lock().unwrap().queries.clone();
    assert_eq!(answered.len(), 3);

    // Restarted: the interrupted turn is finished from its last step before the server listens.
    let second = Tavily::start(0, None);
    let env = [("TAVILY_API_KEY", "tvly-test"), ("TAVILY_BASE_URL", second.url.as_str())];
    let server = start(&repo_root(), &store, &env);
    let got = get(&format!("{}/v1/sessions/{id}", server.url)).await;
    assert_eq!(got["state"]["is_debate_complete"], json!(true), "{got}");
    let logs = got["state"]["fact_check_logs"].as_array().unwrap();
    let resumed = second.seen.lock().unwrap().queries.len();
    assert_eq!(
        resumed + answered.len(),
        logs.len(),
        "every claim searched once: none of the three answered before the crash again"
    );
    assert_eq!(got["state"]["transcript"].as_array().unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_debate_continues_on_another_replica() {
    let Some(pg) = support::postgres() else { return };
    let a = start(&repo_root(), &pg, &[]);
    let b = start(&repo_root(), &pg, &[]);
    let (status, created) = post(
        &format!("{}/v1/sessions", a.url),
        json!({"pack": "debate", "options": {"rounds": 2, "pause": "rounds", "fact_check": "off"}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap();
    let (status, first) = post(&format!("{}/v1/sessions/{id}/turns", a.url), json!({"input": "start"})).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["paused"], json!({"after": "round_transition", "next": ["moderator"]}));
    assert_eq!(first["output"]["current_round"], json!(1));
    let on_b = get(&format!("{}/v1/sessions/{id}", b.url)).await;
    assert_eq!(on_b["paused"]["next"], json!(["moderator"]), "{on_b}");
    let (status, second) = post(&format!("{}/v1/sessions/{id}/turns", b.url), json!({"input": "continue"})).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second.get("paused"), None);
    assert_eq!(second["output"]["is_debate_complete"], json!(true));
    assert_eq!(second["output"]["transcript"].as_array().unwrap().len(), 4);
    let (status, over) = post(&format!("{}/v1/sessions/{id}/turns", a.url), json!({"input": "continue"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{over}");
}

/// A model the player chose for a side is the one asked, whichever provider answers: with no
/// Gemini key the side against falls back to the default provider and is still asked for the
/// chosen model; the pack's own default for the side (Gemini's model) is what falls back to the
/// profile's. Each side's reflection and critique stay in the transcript.
#[test]
fn a_sides_chosen_model_is_kept_when_its_provider_is_not_set_up() {
    use support::mock_llm::{MockLlm, Reply};
    let mock = MockLlm::start();
    let speech = |side: &str| {
        format!(
            "PHASE 1 - REFLECTION:\nWhat the {side} side must show.\n\nPHASE 2 - CRITIQUE:\nThe {side} side's weak points.\n\nPHASE 3 - REFINEMENT:\nThe {side} side says its piece plainly and well."
        )
    };
    mock.chat(Reply::Content(speech("pro"))).chat(Reply::Content(speech("con")));
    mock.judge(Reply::Content(r#"{"winner": "pro", "reasoning": "clearer"}"#.into()));
    let (_dir, file) = temp_file("moves.json", r#"["start"]"#);
    let run = |con_model: Option<&str>| {
        let mut cmd = ruleweave(&repo_root());
        cmd.args(["run", "debate", "--set", "rounds=1", "--set", "fact_check=off", "--input"]).arg(&file);
        if let Some(m) = con_model {
            cmd.args(["--set", &format!("con_model={m}")]);
        }
        cmd.env("OPENAI_API_KEY", "sk-test").env("OPENAI_BASE_URL", &mock.base_url).env("RULEWEAVE_LLM_RETRIES", "0");
        cmd.output().unwrap()
    };
    let out = run(Some("mistral-large-latest"));
    assert!(out.status.success(), "{}", stderr(&out));
    let speeches: Vec<String> = mock
        .seen_kind("chat")
        .iter()
        .filter(|b| b["max_tokens"] == json!(1500) || b["max_completion_tokens"] == json!(1500))
        .map(|b| b["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(speeches, ["gpt-4o", "mistral-large-latest"], "the side against is asked for the model chosen for it");
    let line = &json_lines(&out)[0];
    let transcript = line["state"]["transcript"].as_array().unwrap();
    assert_eq!(transcript.len(), 2, "{line}");
    for (t, side) in transcript.iter().zip(["pro", "con"]) {
        assert_eq!(t["reflection"], format!("What the {side} side must show."), "{t}");
        assert_eq!(t["critique"], format!("The {side} side's weak points."), "{t}");
    }
    assert_eq!(transcript[1]["model"], "mistral-large-latest");
}

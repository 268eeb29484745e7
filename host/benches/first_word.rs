//! Time to the first word the audience sees, over HTTP: a debate's speech streamed to a client of
//! a real `ruleweave serve` (this process serves it on a free port, SQLite store), through the
//! turn's event stream (`POST /v1/sessions/{id}/turns`, `speech` events) and through the chat
//! face (`POST /v1/chat/completions`, `stream: true`). The debater model is native: it streams its
//! speech's heading (`PHASE 3 - REFINEMENT:`, which the pack shows nothing of) after a time to
//! first token, then a word every 20 ms; every other call answers at once. What is measured is
//! the server's share: from the request leaving the client to the first word arriving, minus
//! the model's own time from its call to that word.
//!
//! `cargo bench -p ruleweave --bench first_word` (20 debates each way); `-- --json` prints one JSON
//! line for `bench/run.sh`. `cargo test --benches` plays two.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, TokenSink, Usage};
use ruleweave::store::SqliteStore;
use ruleweave::{Engine, Provider, Result};
use ruleweave_host::server::{self, AppState, Settings};
use serde_json::{Value, json};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const HEADING: &str = "PHASE 1 - REFLECTION:\nThey cite one study.\n\nPHASE 3 - REFINEMENT:\n";
const SPEECH: &str = "Productivity rose by 14 percent in support teams, and wages followed within two years.";

/// The debater streams; the others answer at once. Remembers, for each speech, when it was asked
/// and when it sent the speech's first word.
struct Debater {
    first_token: Duration,
    marks: Mutex<Vec<(Instant, Instant)>>,
}

impl Provider for Debater {
    fn name(&self) -> &str {
        "native"
    }

    fn complete<'a>(&'a self, r: &'a LlmRequest, tokens: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(async move {
            let asked = Instant::now();
            let content = match r.profile.as_str() {
                "debater" => {
                    let start = tokio::time::Instant::now();
                    tokio::time::sleep_until(start + self.first_token).await;
                    if let Some(sink) = &tokens {
                        sink(HEADING);
                        for (k, word) in SPEECH.split_inclusive(' ').enumerate() {
                            tokio::time::sleep_until(
                                start + self.first_token + Duration::from_millis(20 * (k as u64 + 1)),
                            )
                            .await;
                            if k == 0 {
                                self.marks.lock().unwrap().push((asked, Instant::now()));
                            }
                            sink(word);
                        }
                    }
                    format!("{HEADING}{SPEECH}")
                }
                "judge" => r#"{"winner": "pro", "reason": "Better sourced."}"#.to_owned(),
                _ => r#"{"claims": []}"#.to_owned(),
            };
            Ok(LlmResponse { content, model: r.model.clone(), usage: Usage::default(), attempts: 1 })
        })
    }
}

/// Reads a streamed response to its end; returns when `first` found the first visible word in an
/// SSE `data:` line. (To the end, so the next debate does not overlap this one.)
async fn first_word(mut response: reqwest::Response, first: impl Fn(&str, &str) -> bool) -> Instant {
    let mut buffer = Vec::new();
    let mut event = String::new();
    let mut seen = None;
    while let Some(chunk) = response.chunk().await.unwrap() {
        let now = Instant::now();
        if seen.is_some() {
            continue;
        }
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let line = String::from_utf8(line).unwrap();
            let line = line.trim_end();
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim().to_owned();
            } else if let Some(data) = line.strip_prefix("data:")
                && seen.is_none()
                && first(&event, data.trim())
            {
                seen = Some(now);
            }
        }
    }
    seen.expect("the stream ended without a visible word")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = !args.iter().any(|a| a == "--bench");
    let as_json = args.iter().any(|a| a == "--json");
    let debates = if quick { 2 } else { 20 };
    let first_token = Duration::from_millis(if quick { 5 } else { 200 });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Debater { first_token, marks: Mutex::default() });
    let (api, chat) = rt.block_on(async {
        let root = ruleweave_testkit::repo_root();
        let store = SqliteStore::open(&format!("sqlite://{}", dir.path().join("first.db").display())).await.unwrap();
        let engine = Engine::builder(root).store(Arc::new(store)).provider(model.clone()).build();
        let state = Arc::new(AppState::new(engine, Settings::default()));
        state.load_packs();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(server::serve(state, listener));
        let client = reqwest::Client::new();
        let options = json!({"rounds": 1, "fact_check": "off"});
        let server_share = |sent: Instant, seen: Instant| {
            let (asked, said) = *model.marks.lock().unwrap().last().expect("the debater spoke");
            (seen - sent).saturating_sub(said - asked)
        };
        let mut api = Vec::new();
        for _ in 0..debates {
            let created: Value = client
                .post(format!("{url}/v1/sessions"))
                .json(&json!({"pack": "debate", "options": options}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let id = created["id"].as_str().unwrap();
            let sent = Instant::now();
            let response = client
                .post(format!("{url}/v1/sessions/{id}/turns"))
                .header("accept", "text/event-stream")
                .json(&json!({"input": "start"}))
                .send()
                .await
                .unwrap();
            let seen = first_word(response, |event, data| {
                event == "speech"
                    && serde_json::from_str::<Value>(data)
                        .is_ok_and(|d| d["text"].as_str().is_some_and(|t| !t.trim().is_empty()))
            })
            .await;
            api.push(server_share(sent, seen));
        }
        let mut chat = Vec::new();
        for _ in 0..debates {
            let sent = Instant::now();
            let response = client
                .post(format!("{url}/v1/chat/completions"))
                .json(&json!({"model": "debate:rounds=1:fact_check=off", "stream": true,
                              "messages": [{"role": "user", "content": "start"}]}))
                .send()
                .await
                .unwrap();
            let seen = first_word(response, |_, data| {
                serde_json::from_str::<Value>(data).is_ok_and(|d| {
                    d["choices"][0]["delta"]["content"].as_str().is_some_and(|t| t.chars().any(char::is_alphanumeric))
                })
            })
            .await;
            chat.push(server_share(sent, seen));
        }
        (api, chat)
    });
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let summary = |mut xs: Vec<Duration>| {
        xs.sort();
        (ms(&xs[xs.len() / 2]), ms(xs.last().unwrap()))
    };
    let (api_median, api_max) = summary(api);
    let (chat_median, chat_max) = summary(chat);
    if as_json {
        let line = json!({"bench": "first_word", "debates": debates, "first_token_ms": ms(&first_token),
            "api_median_ms": api_median, "api_max_ms": api_max, "chat_median_ms": chat_median, "chat_max_ms": chat_max});
        println!("{line}");
    } else {
        println!(
            "time to the first word, the server's share ({debates} debates, the model's {:.0} ms to its first word taken out):",
            ms(&first_token) + 20.0
        );
        println!("  turn event stream (speech): median {api_median:.2} ms, worst {api_max:.2} ms");
        println!("  chat face (stream: true):   median {chat_median:.2} ms, worst {chat_max:.2} ms");
    }
}

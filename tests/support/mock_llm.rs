//! A local server speaking OpenAI's Chat Completions protocol, failing the way real ones do.
//!
//! Replies are queued per kind of request: `judge` for requests in JSON mode (they carry
//! `response_format`), `chat` for the others, `embeddings` for `/v1/embeddings` (where any
//! `Content` reply means "answer": each input gets the vector set for it with `vector`, else its
//! letter counts, and the data come back in reverse order, as the protocol's `index` allows).
//! Every request is recorded with its headers.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with a completion whose message content is this text.
    Content(String),
    /// This status with this body (and `Retry-After: 0` for 429).
    Status(u16, String),
    /// 200 with this raw body (malformed on purpose).
    Raw(String),
    /// Wait, then answer.
    Slow(Duration, Box<Reply>),
    /// 429 with this `Retry-After` header, as written.
    RetryAfter(String),
    /// Never answers (the client's timeout is the only way out).
    Hang,
    /// Answers once the test opens the gate.
    Gated(Arc<tokio::sync::Notify>, Box<Reply>),
    /// Answers once the watched value is true (and at once after): a gate any number of
    /// requests wait at, whenever each arrives.
    Until(tokio::sync::watch::Receiver<bool>, Box<Reply>),
    /// 200, and a body that never ends: JSON that never closes, or, to a streaming request,
    /// chunks of text forever.
    Endless,
    /// 200 with a valid completion of this many bytes, its `Content-Length` saying so.
    Huge(usize),
    /// To a streaming request: this text in chunks, then the stream closes without `[DONE]` or a
    /// `finish_reason` (a connection cut mid-reply).
    Truncated(String),
}

/// A recorded request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub kind: &'static str,
    pub body: Value,
    pub authorization: Option<String>,
    pub headers: HeaderMap,
}

impl Seen {
    fn new(kind: &'static str, body: &Value, headers: &HeaderMap) -> Self {
        let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
        Seen { kind, body: body.clone(), authorization, headers: headers.clone() }
    }
}

struct Inner {
    judge: VecDeque<Reply>,
    chat: VecDeque<Reply>,
    messages: VecDeque<Reply>,
    embeddings: VecDeque<Reply>,
    vectors: HashMap<String, Vec<f32>>,
    seen: Vec<Seen>,
    /// How many requests have arrived, for tests to wait on.
    count: tokio::sync::watch::Sender<usize>,
    /// Chat Completions requests waiting for their answer now, and the most there ever were.
    in_flight: usize,
    most_in_flight: usize,
    /// What answers a judge request when none is queued (`judged(10)` when `None`).
    judge_by: Option<Answerer>,
}

/// A judge of the test's own: the request's body in, the reply's content out.
pub type Answerer = Arc<dyn Fn(Value) -> futures_util::future::BoxFuture<'static, Reply> + Send + Sync>;

impl Default for Inner {
    fn default() -> Self {
        Inner {
            judge: VecDeque::new(),
            chat: VecDeque::new(),
            messages: VecDeque::new(),
            embeddings: VecDeque::new(),
            vectors: HashMap::new(),
            seen: Vec::new(),
            count: tokio::sync::watch::channel(0).0,
            in_flight: 0,
            most_in_flight: 0,
            judge_by: None,
        }
    }
}

/// The running server; stops when dropped.
pub struct MockLlm {
    pub base_url: String,
    inner: Arc<Mutex<Inner>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// Serves `app` on a free local port from a thread of its own; returns its address and a sender
/// that stops it when dropped.
pub fn serve_router(app: Router) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    (addr, stop)
}

impl MockLlm {
    pub fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/v1/messages", post(messages))
            .route("/v1/embeddings", post(embeddings))
            .with_state(inner.clone());
        let (addr, stop) = serve_router(app);
        MockLlm { base_url: format!("http://{addr}/v1"), inner, _stop: stop }
    }

    pub fn judge(&self, reply: Reply) -> &Self {
        self.inner.lock().unwrap().judge.push_back(reply);
        self
    }

    /// Answers every judge request no queued reply answers with `answer` (given the body).
    pub fn judge_by(&self, answer: Answerer) -> &Self {
        self.inner.lock().unwrap().judge_by = Some(answer);
        self
    }

    pub fn chat(&self, reply: Reply) -> &Self {
        self.inner.lock().unwrap().chat.push_back(reply);
        self
    }

    /// Queues a reply for `/v1/embeddings` (without one, it answers).
    pub fn embedding(&self, reply: Reply) -> &Self {
        self.inner.lock().unwrap().embeddings.push_back(reply);
        self
    }

    /// The vector `/v1/embeddings` gives `text`.
    pub fn vector(&self, text: &str, vector: &[f32]) -> &Self {
        self.inner.lock().unwrap().vectors.insert(text.to_owned(), vector.to_vec());
        self
    }

    /// Queues a reply for the Anthropic Messages API (`/v1/messages`).
    pub fn message(&self, reply: Reply) -> &Self {
        self.inner.lock().unwrap().messages.push_back(reply);
        self
    }

    /// The server's root, for `ANTHROPIC_BASE_URL` (which has no `/v1`).
    pub fn root_url(&self) -> String {
        self.base_url.trim_end_matches("/v1").to_owned()
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().seen.clone()
    }

    /// Waits (at most 30 s) until `n` requests have arrived.
    pub async fn wait_seen(&self, n: usize) {
        let mut count = self.inner.lock().unwrap().count.subscribe();
        let reached = tokio::time::timeout(Duration::from_secs(30), count.wait_for(|c| *c >= n)).await;
        assert!(reached.is_ok_and(|r| r.is_ok()), "the model server never saw {n} requests");
    }

    /// Waits (at most 30 s) until a request whose body mentions `text` has arrived: a test's own
    /// call among others a server makes (finishing another session's turn as it starts).
    pub async fn wait_seen_with(&self, text: &str) {
        let mut count = self.inner.lock().unwrap().count.subscribe();
        let inner = self.inner.clone();
        let seen = |_: &usize| inner.lock().unwrap().seen.iter().any(|s| s.body.to_string().contains(text));
        let reached = tokio::time::timeout(Duration::from_secs(30), count.wait_for(seen)).await;
        assert!(reached.is_ok_and(|r| r.is_ok()), "the model server never saw a request with {text:?}");
    }

    /// The most Chat Completions requests that were waiting for their answer at once.
    pub fn most_in_flight(&self) -> usize {
        self.inner.lock().unwrap().most_in_flight
    }

    /// The requests of one kind (`judge` or `chat`).
    pub fn seen_kind(&self, kind: &str) -> Vec<Value> {
        self.seen().into_iter().filter(|s| s.kind == kind).map(|s| s.body).collect()
    }
}

/// A judge reply with this total.
pub fn judged(total: i64) -> Reply {
    Reply::Content(
        json!({"total_score": total, "strategy_variety": 10, "conversation_depth": 10, "creativity": 10, "persistence": 5})
            .to_string(),
    )
}

async fn complete(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap, body: String) -> Response {
    let body: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad JSON: {e}")).into_response(),
    };
    let kind = if body.get("response_format").is_some() { "judge" } else { "chat" };
    let reply = {
        let mut inner = inner.lock().unwrap();
        inner.seen.push(Seen::new(kind, &body, &headers));
        inner.in_flight += 1;
        inner.most_in_flight = inner.most_in_flight.max(inner.in_flight);
        inner.count.send_replace(inner.seen.len());
        let queue = if kind == "judge" { &mut inner.judge } else { &mut inner.chat };
        match queue.pop_front() {
            Some(reply) => Ok(reply),
            None if kind == "judge" => Err(inner.judge_by.clone()),
            None => Ok(Reply::Content("Arrr, no.".into())),
        }
    };
    let reply = match reply {
        Ok(reply) => reply,
        Err(Some(judge)) => judge(body.clone()).await,
        Err(None) => judged(10),
    };
    let streaming = body["stream"] == json!(true);
    let answered = answer(reply, &body, streaming).await;
    inner.lock().unwrap().in_flight -= 1;
    answered
}

/// A text's letter counts, a-z: a vector a test can predict.
pub fn letter_counts(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; 26];
    for c in text.to_ascii_lowercase().bytes().filter(u8::is_ascii_lowercase) {
        v[usize::from(c - b'a')] += 1.0;
    }
    v
}

async fn embeddings(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap, body: String) -> Response {
    let body: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad JSON: {e}")).into_response(),
    };
    let (reply, vectors) = {
        let mut inner = inner.lock().unwrap();
        inner.seen.push(Seen::new("embeddings", &body, &headers));
        inner.count.send_replace(inner.seen.len());
        (inner.embeddings.pop_front().unwrap_or(Reply::Content(String::new())), inner.vectors.clone())
    };
    let reply = delayed(reply).await;
    let Some(input) = body["input"].as_array() else {
        return (StatusCode::BAD_REQUEST, "input must be a list").into_response();
    };
    match reply {
        Reply::Content(_) => {
            let data: Vec<Value> = input
                .iter()
                .enumerate()
                .rev()
                .map(|(i, t)| {
                    let t = t.as_str().unwrap_or("");
                    let v = vectors.get(t).cloned().unwrap_or_else(|| letter_counts(t));
                    json!({"object": "embedding", "index": i, "embedding": v})
                })
                .collect();
            let tokens: usize = input.iter().map(|t| t.as_str().unwrap_or("").split_whitespace().count()).sum();
            axum::Json(json!({
                "object": "list", "data": data, "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }))
            .into_response()
        }
        other => answer(other, &body, false).await,
    }
}

async fn messages(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap, body: String) -> Response {
    let body: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad JSON: {e}")).into_response(),
    };
    let reply = {
        let mut inner = inner.lock().unwrap();
        inner.seen.push(Seen::new("messages", &body, &headers));
        inner.count.send_replace(inner.seen.len());
        inner.messages.pop_front().unwrap_or_else(|| Reply::Content("Arrr.".into()))
    };
    let reply = delayed(reply).await;
    let model = body["model"].as_str().unwrap_or("unknown").to_owned();
    match reply {
        Reply::Content(text) if body["stream"] == json!(true) => {
            let mut sse = String::new();
            let start = json!({"type": "message_start", "message": {"model": model, "usage": {"input_tokens": 13, "output_tokens": 1}}});
            sse.push_str(&format!("event: message_start\ndata: {start}\n\n"));
            for piece in text.split_inclusive(' ') {
                let d =
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}});
                sse.push_str(&format!("event: content_block_delta\ndata: {d}\n\n"));
            }
            let end =
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}});
            sse.push_str(&format!(
                "event: message_delta\ndata: {end}\n\nevent: message_stop\ndata: {{\"type\": \"message_stop\"}}\n\n"
            ));
            Response::builder().header("content-type", "text/event-stream").body(Body::from(sse)).unwrap()
        }
        Reply::Content(text) => axum::Json(json!({
            "id": "msg_test", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 13, "output_tokens": 5},
        }))
        .into_response(),
        Reply::Status(code, text) => {
            let body = json!({"type": "error", "error": {"type": "test", "message": text}}).to_string();
            Response::builder().status(StatusCode::from_u16(code).unwrap()).body(Body::from(body)).unwrap()
        }
        Reply::Raw(text) => Response::builder().body(Body::from(text)).unwrap(),
        Reply::RetryAfter(after) => {
            Response::builder().status(429).header("retry-after", after).body(Body::empty()).unwrap()
        }
        Reply::Slow(..) | Reply::Gated(..) | Reply::Until(..) | Reply::Hang => unreachable!("delayed() waited"),
        other => panic!("the Messages API mock does not play {other:?}"),
    }
}

/// Waits as a `Slow`, `Gated` or `Hang` reply says, then gives the reply to send.
async fn delayed(mut reply: Reply) -> Reply {
    loop {
        reply = match reply {
            Reply::Slow(wait, next) => {
                tokio::time::sleep(wait).await;
                *next
            }
            Reply::Gated(gate, next) => {
                gate.notified().await;
                *next
            }
            Reply::Until(mut open, next) => {
                let _ = open.wait_for(|o| *o).await;
                *next
            }
            Reply::Hang => std::future::pending().await,
            other => return other,
        }
    }
}

async fn answer(reply: Reply, request: &Value, streaming: bool) -> Response {
    let reply = delayed(reply).await;
    let model = request["model"].as_str().unwrap_or("unknown").to_owned();
    match reply {
        Reply::Content(text) if streaming => {
            let mut sse = String::new();
            for piece in text.split_inclusive(' ') {
                let chunk = json!({"model": model, "choices": [{"index": 0, "delta": {"content": piece}}]});
                sse.push_str(&format!("data: {chunk}\n\n"));
            }
            let usage = json!({"model": model, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}});
            sse.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
            Response::builder().header("content-type", "text/event-stream").body(Body::from(sse)).unwrap()
        }
        Reply::Content(text) => axum::Json(json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }))
        .into_response(),
        Reply::Status(code, text) => {
            let status = StatusCode::from_u16(code).unwrap();
            let body = json!({"error": {"message": text, "type": "test"}}).to_string();
            let mut resp = Response::builder().status(status).header("content-type", "application/json");
            if code == 429 {
                resp = resp.header("retry-after", "0");
            }
            resp.body(Body::from(body)).unwrap()
        }
        Reply::Raw(text) => {
            Response::builder().header("content-type", "application/json").body(Body::from(text)).unwrap()
        }
        Reply::RetryAfter(after) => {
            let body = json!({"error": {"message": "Rate limit reached", "type": "requests"}}).to_string();
            Response::builder().status(429).header("retry-after", after).body(Body::from(body)).unwrap()
        }
        Reply::Endless if streaming => {
            let chunk = json!({"model": model, "choices": [{"index": 0, "delta": {"content": "and on "}}]});
            let line = axum::body::Bytes::from(format!("data: {chunk}\n\n"));
            let forever = futures_util::stream::repeat_with(move || Ok::<_, std::io::Error>(line.clone()));
            Response::builder().header("content-type", "text/event-stream").body(Body::from_stream(forever)).unwrap()
        }
        Reply::Endless => {
            let head = futures_util::stream::once(async {
                Ok::<_, std::io::Error>(axum::body::Bytes::from("{\"choices\": ["))
            });
            let more = futures_util::stream::repeat_with(|| Ok(axum::body::Bytes::from_static(b"{\"x\": 1}, ")));
            let body = futures_util::StreamExt::chain(head, more);
            Response::builder().header("content-type", "application/json").body(Body::from_stream(body)).unwrap()
        }
        Reply::Huge(bytes) => {
            let text = "x".repeat(bytes.saturating_sub(200));
            let body = json!({"model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]});
            axum::Json(body).into_response()
        }
        Reply::Truncated(text) => {
            let mut sse = String::new();
            for piece in text.split_inclusive(' ') {
                let chunk = json!({"model": model, "choices": [{"index": 0, "delta": {"content": piece}}]});
                sse.push_str(&format!("data: {chunk}\n\n"));
            }
            Response::builder().header("content-type", "text/event-stream").body(Body::from(sse)).unwrap()
        }
        Reply::Slow(..) | Reply::Gated(..) | Reply::Until(..) | Reply::Hang => unreachable!("delayed() waited"),
    }
}

/// A "real judge" that disagrees with the pirate's stand-in on purpose: its `total_score` is the
/// stand-in judge's on the same prompt plus `shift`, with a little noise (-1, 0 or +1, from the
/// prompt's hash: the same prompt, the same answer), its parts as the stand-in gave them.
pub fn shifted_judge(shift: i64) -> Answerer {
    let engine = ruleweave::Engine::builder(super::repo_root()).build();
    let standin = engine.packs().get("pirate").unwrap().standin().expect("the pirate's stand-in");
    Arc::new(move |body: Value| {
        let standin = standin.clone();
        Box::pin(async move {
            let messages: Vec<ruleweave::llm::Message> = serde_json::from_value(body["messages"].clone()).unwrap();
            let prompt = messages.last().map(|m| m.content.clone()).unwrap_or_default();
            let request = ruleweave::llm::LlmRequest {
                provider: None,
                default_model: None,
                profile: "judge".into(),
                model: body["model"].as_str().unwrap_or("").into(),
                messages,
                temperature: None,
                max_tokens: None,
                json: true,
                schema: None,
            };
            let answer = standin.complete(&request, None).await.unwrap();
            let mut judged: Value = serde_json::from_str(&answer.content).unwrap();
            // FNV-1a of the prompt: the same prompt, the same noise.
            let fnv =
                prompt.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
            let noise = fnv % 3;
            let total = judged["total_score"].as_i64().unwrap() + shift + noise as i64 - 1;
            judged["total_score"] = json!(total);
            Reply::Content(judged.to_string())
        })
    })
}

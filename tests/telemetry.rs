//! Traces an operator can open. In memory: the spans of a pirate turn (model calls to the local
//! model server) and of a debate round (calls from script threads, searches), every attribute
//! name checked, the tree checked, the `traceparent` the model server saw, and prompts only when
//! asked for. Then through a real observability server: Arize Phoenix (a virtualenv `.ci/run`
//! makes; `RULEWEAVE_TEST_PHOENIX` names its command) receives what `ruleweave serve` exports over
//! OTLP and the test reads it back from Phoenix's REST API. And a collector that never answers
//! slows no turn: its spans are dropped and counted in `/metrics`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::SpanId;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use ruleweave::llm::{OpenAi, OpenAiConfig};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::mock_llm::{MockLlm, Reply, judged};
use crate::support::{self, repo_root, start};

/// The attribute names of each kind of span, as an operator's tools read them.
const TURN: &[&str] = &["pack", "pack.version", "session.id", "turn", "outcome", "openinference.span.kind"];
const NODE: &[&str] = &["node", "step", "kind", "after", "openinference.span.kind"];
const MODEL_CALL: &[&str] = &[
    "node",
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "openinference.span.kind",
    "llm.model_name",
    "llm.token_count.prompt",
    "llm.token_count.completion",
];
const SEARCH: &[&str] = &[
    "node",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "search.engine",
    "search.results",
    "openinference.span.kind",
];
/// What only `RULEWEAVE_TRACE_CONTENT=1` (the builder's `trace_content`) adds to a model call.
const CONTENT: &[&str] = &["gen_ai.input.messages", "gen_ai.output.messages", "input.value", "output.value"];

fn attr<'a>(s: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
    s.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| &kv.value)
}

fn names(s: &SpanData) -> BTreeSet<&str> {
    s.attributes.iter().map(|kv| kv.key.as_str()).collect()
}

/// Plays `play` on an engine of `build`'s making with a scoped subscriber that keeps every span.
fn traced(build: impl FnOnce() -> ruleweave::Engine, play: impl AsyncFnOnce(&ruleweave::Engine)) -> Vec<SpanData> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let subscriber = tracing_subscriber::registry().with(ruleweave_host::telemetry::layer(&provider));
    tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let engine = build();
        rt.block_on(play(&engine));
    });
    provider.force_flush().unwrap();
    exporter.get_finished_spans().unwrap()
}

fn openai(mock: &MockLlm) -> Arc<OpenAi> {
    let config =
        OpenAiConfig { api_key: Some("test-key".into()), base_url: mock.base_url.clone(), ..Default::default() };
    Arc::new(OpenAi::new(config).unwrap())
}

/// A pirate turn against the local model server, and the spans it left.
fn pirate_turn(content: bool) -> (Vec<SpanData>, MockLlm) {
    let mock = MockLlm::start();
    mock.judge(judged(30)).chat(Reply::Content("Arrr, words are wind, landlubber.".into()));
    let provider = openai(&mock);
    let spans = traced(
        || ruleweave::Engine::builder(repo_root()).provider(provider).trace_content(content).build(),
        async |engine| {
            let mut s = engine.open("pirate", json!({"difficulty": "easy"}).as_object().unwrap()).await.unwrap();
            s.turn(json!({"message": "Ahoy, captain! I brought rum and a map of the reef."})).await.unwrap();
        },
    );
    (spans, mock)
}

#[test]
fn a_turns_spans_tell_its_story_with_the_genai_conventions() {
    let (spans, mock) = pirate_turn(false);
    let turns: Vec<&SpanData> = spans.iter().filter(|s| s.name.starts_with("turn ")).collect();
    assert_eq!(turns.len(), 1, "{:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    let turn = turns[0];
    assert_eq!(turn.name, "turn pirate");
    for key in TURN {
        assert!(attr(turn, key).is_some(), "the turn span has no `{key}`: {:?}", names(turn));
    }
    assert_eq!(attr(turn, "pack").unwrap().as_str(), "pirate");
    assert_eq!(attr(turn, "outcome").unwrap().as_str(), "played");
    assert_eq!(attr(turn, "turn").unwrap(), &opentelemetry::Value::I64(1));

    let nodes: Vec<&SpanData> = spans.iter().filter(|s| s.name.starts_with("node ")).collect();
    let node_names: Vec<String> = nodes.iter().map(|n| attr(n, "node").unwrap().as_str().into_owned()).collect();
    assert_eq!(node_names[0], "intake", "{node_names:?}");
    assert!(node_names.contains(&"merit_check".to_owned()), "{node_names:?}");
    for n in &nodes {
        assert_eq!(n.parent_span_id, turn.span_context.span_id(), "{} is not the turn's child", n.name);
        assert_eq!(n.span_context.trace_id(), turn.span_context.trace_id());
        for key in NODE {
            assert!(attr(n, key).is_some(), "{} has no `{key}`: {:?}", n.name, names(n));
        }
    }
    // The judge's node ran after the intake, and says so.
    let merit = nodes.iter().find(|n| attr(n, "node").unwrap().as_str() == "merit_check").unwrap();
    assert_eq!(attr(merit, "after").unwrap().as_str(), "intake");

    let calls: Vec<&SpanData> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert_eq!(calls.len(), 2, "the judge and the captain");
    for c in &calls {
        for key in MODEL_CALL {
            assert!(attr(c, key).is_some(), "{} has no `{key}`: {:?}", c.name, names(c));
        }
        for key in CONTENT {
            assert!(attr(c, key).is_none(), "{} holds `{key}` though content was not asked for", c.name);
        }
        let parent = nodes.iter().find(|n| n.span_context.span_id() == c.parent_span_id);
        assert!(parent.is_some(), "{} is not a node's child", c.name);
        assert_eq!(attr(c, "gen_ai.operation.name").unwrap().as_str(), "chat");
        assert_eq!(attr(c, "gen_ai.provider.name").unwrap().as_str(), "openai");
        assert_eq!(attr(c, "gen_ai.usage.input_tokens").unwrap(), &opentelemetry::Value::I64(11));
        assert_eq!(attr(c, "gen_ai.usage.output_tokens").unwrap(), &opentelemetry::Value::I64(7));
        assert_eq!(attr(c, "gen_ai.response.finish_reasons").unwrap().as_str(), "[\"stop\"]");
        assert_eq!(attr(c, "openinference.span.kind").unwrap().as_str(), "LLM");
    }
    let judge = calls.iter().find(|c| attr(c, "node").unwrap().as_str() == "merit_check").unwrap();
    let model = attr(judge, "gen_ai.request.model").unwrap().as_str().into_owned();
    assert_eq!(judge.name, format!("chat {model}"));

    // Each request the model server saw carried its call's span as the parent.
    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        let header = request.headers.get("traceparent").expect("a model call carries traceparent").to_str().unwrap();
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts[1], turn.span_context.trace_id().to_string(), "{header}");
        assert!(calls.iter().any(|c| c.span_context.span_id().to_string() == parts[2]), "{header}: no call's span");
    }
}

#[test]
fn prompts_and_replies_are_in_spans_only_when_asked_for() {
    let (spans, _mock) = pirate_turn(true);
    let calls: Vec<&SpanData> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert_eq!(calls.len(), 2);
    let captain = calls.iter().find(|c| attr(c, "node").unwrap().as_str() != "merit_check").unwrap();
    for key in CONTENT {
        assert!(attr(captain, key).is_some(), "no `{key}` with content asked for: {:?}", names(captain));
    }
    let output = attr(captain, "gen_ai.output.messages").unwrap().as_str().into_owned();
    let output: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["content"], "Arrr, words are wind, landlubber.");
    let input = attr(captain, "gen_ai.input.messages").unwrap().as_str().into_owned();
    assert!(input.contains("I brought rum and a map of the reef"), "{input}");
}

#[test]
fn a_debate_rounds_calls_from_script_threads_and_its_searches_are_its_nodes_children() {
    let spans = traced(
        || ruleweave::Engine::builder(repo_root()).build(),
        async |engine| {
            let options = json!({"rounds": 1, "fact_check": "standard"});
            let mut s = engine.open("debate", options.as_object().unwrap()).await.unwrap();
            s.turn(json!("start")).await.unwrap();
        },
    );
    let by_id: HashMap<SpanId, &SpanData> = spans.iter().map(|s| (s.span_context.span_id(), s)).collect();
    let node_of = |s: &SpanData| by_id.get(&s.parent_span_id).map(|p| attr(p, "node").unwrap().as_str().into_owned());
    let speeches: Vec<&SpanData> =
        spans.iter().filter(|s| s.name.starts_with("chat ") && attr(s, "node").unwrap().as_str() == "speak").collect();
    assert_eq!(speeches.len(), 2, "pro and con speak");
    for s in &speeches {
        // Made from the script's own thread, still the node's child.
        assert_eq!(node_of(s).as_deref(), Some("speak"));
    }
    let searches: Vec<&SpanData> = spans.iter().filter(|s| s.name == "execute_tool search").collect();
    assert!(!searches.is_empty(), "the claims were searched");
    for s in &searches {
        for key in SEARCH {
            assert!(attr(s, key).is_some(), "the search has no `{key}`: {:?}", names(s));
        }
        assert_eq!(node_of(s).as_deref(), Some("verify"));
        assert_eq!(attr(s, "openinference.span.kind").unwrap().as_str(), "TOOL");
    }
    // One trace: every span shares the turn's trace id.
    let trace: BTreeSet<String> = spans.iter().map(|s| s.span_context.trace_id().to_string()).collect();
    assert_eq!(trace.len(), 1);
    // The route taken is on the node that took it.
    let judge = spans.iter().find(|s| s.name == "node judge").unwrap();
    assert!(attr(judge, "route").is_some(), "{:?}", names(judge));
}

/// Where `RULEWEAVE_TEST_PHOENIX` says Phoenix's command is (CI must have it).
fn phoenix_command() -> Option<String> {
    support::needed("RULEWEAVE_TEST_PHOENIX", "CI must read traces back from Phoenix", "Phoenix did not run")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Phoenix server on free ports, in a directory of its own; stopped when dropped.
struct Phoenix {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Phoenix {
    fn start(command: &str) -> Phoenix {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut child = std::process::Command::new(command)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for out in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        // Its first start migrates a new database: up to two minutes on a slow machine.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line.contains("Application startup complete") => break,
                Ok(_) => {}
                Err(_) => panic!("Phoenix did not start"),
            }
        }
        std::thread::spawn(move || while rx.recv().is_ok() {});
        Phoenix { child, url: format!("http://127.0.0.1:{port}"), _dir: dir }
    }

    /// Every span of `project`, read back through the REST API.
    async fn spans(&self, project: &str) -> Vec<Value> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/projects/{project}/spans?limit=1000", self.url);
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let response = support::http().get(&url).send().await.unwrap();
            if response.status() == 404 {
                return all;
            }
            let page: Value = response.json().await.unwrap();
            all.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return all,
            }
        }
    }

    /// The spans of `project` once `enough` holds for them (Phoenix writes what it receives in
    /// batches of its own): polled, for at most 60 s.
    async fn spans_when(&self, project: &str, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self.spans(project).await;
            if enough(&spans) {
                return spans;
            }
            if Instant::now() >= deadline {
                let projects = support::get(&format!("{}/v1/projects", self.url)).await;
                let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
                panic!("Phoenix never had the spans; {project} has {names:?}; the projects: {projects}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn phoenix_attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    // Phoenix answers with the attributes flat (`"gen_ai.request.model": ...`).
    &span["attributes"][key]
}

/// A new session of `pack` (with `options`, unless null) on `server`: where its turns are posted.
async fn new_session(server: &support::Process, pack: &str, options: Value) -> String {
    let mut body = json!({"pack": pack});
    if !options.is_null() {
        body["options"] = options;
    }
    let (status, created) = support::post(&format!("{}/v1/sessions", server.url), body).await;
    assert_eq!(status, 201, "{created}");
    format!("{}/v1/sessions/{}/turns", server.url, created["id"].as_str().unwrap())
}

/// Posts a pirate move to `turns`, with a caller's `traceparent` when given; it must succeed.
async fn post_turn(turns: &str, message: &str, traceparent: Option<String>) {
    let mut request = support::http().post(turns).json(&json!({"input": {"message": message}}));
    if let Some(t) = traceparent {
        request = request.header("traceparent", t);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

/// Plays a pirate turn (continuing the caller's trace) and a debate round on `server`.
async fn play(server: &support::Process, trace: &str) {
    let turns = new_session(server, "pirate", Value::Null).await;
    let message = "Ahoy, captain! I brought rum and a map of the reef.";
    post_turn(&turns, message, Some(format!("00-{trace}-00f067aa0ba902b7-01"))).await;
    let turns = new_session(server, "debate", json!({"rounds": 1, "fact_check": "off"})).await;
    let (status, body) = support::post(&turns, json!({"input": "start"})).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phoenix_receives_a_served_turns_trace_and_an_operator_can_read_it_back() {
    let Some(command) = phoenix_command() else { return };
    let phoenix = Phoenix::start(&command);
    let mock = MockLlm::start();
    // A trace id per server: Phoenix keeps a trace in the project that first saw it.
    let runs = [
        ("ruleweave-test", false, "4bf92f3577b34da6a3ce929d0e0e4736"),
        ("ruleweave-content", true, "5c0a3f3577b34da6a3ce929d0e0e4737"),
    ];
    for (project, content, trace) in runs {
        let attributes = format!("openinference.project.name={project}");
        let mut env = vec![
            ("OPENAI_API_KEY", "test-key"),
            ("OPENAI_BASE_URL", mock.base_url.as_str()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url.as_str()),
            ("OTEL_SERVICE_NAME", "ruleweave-ci"),
            ("OTEL_RESOURCE_ATTRIBUTES", attributes.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ];
        if content {
            env.push(("RULEWEAVE_TRACE_CONTENT", "1"));
        }
        let mut server = start(&repo_root(), "memory", &env);
        play(&server, trace).await;
        // Stopping flushes what is queued.
        server.terminate();
        assert!(server.exit_status().success());

        let spans = phoenix
            .spans_when(project, |s| {
                s.iter().filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("turn "))).count() >= 2
            })
            .await;
        let by_id: HashMap<&str, &Value> =
            spans.iter().map(|s| (s["context"]["span_id"].as_str().unwrap(), s)).collect();
        let parent = |s: &Value| s["parent_id"].as_str().and_then(|p| by_id.get(p).copied());
        let named = |prefix: &str| -> Vec<&Value> {
            spans.iter().filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix))).collect()
        };

        // The pirate's turn continues the caller's trace: request → turn → node → model call.
        let pirate = named("turn pirate");
        assert_eq!(pirate.len(), 1);
        let pirate = pirate[0];
        assert_eq!(pirate["context"]["trace_id"], trace);
        let request = parent(pirate).expect("the turn's parent is its HTTP request");
        assert_eq!(request["name"], "POST /v1/sessions/{id}/turns");
        assert_eq!(request["parent_id"], "00f067aa0ba902b7", "the caller's span");
        assert_eq!(phoenix_attr(request, "http.response.status_code"), 200);
        let calls: Vec<&Value> = named("chat ").into_iter().filter(|c| c["context"]["trace_id"] == trace).collect();
        assert_eq!(calls.len(), 2, "the judge and the captain");
        for c in &calls {
            let node = parent(c).expect("a call's parent is its node");
            assert!(node["name"].as_str().unwrap().starts_with("node "), "{}", node["name"]);
            assert_eq!(parent(node).unwrap()["name"], "turn pirate");
            assert_eq!(phoenix_attr(c, "gen_ai.usage.input_tokens"), 11);
            assert_eq!(phoenix_attr(c, "gen_ai.usage.output_tokens"), 7);
            let model = phoenix_attr(c, "gen_ai.request.model").as_str().unwrap();
            assert_eq!(c["name"].as_str().unwrap(), format!("chat {model}"));
            assert_eq!(phoenix_attr(c, "gen_ai.input.messages").is_null(), !content, "prompts only when asked for");
        }

        // The debate's round: its speeches under `speak`, the verdict under `decide`.
        let debate = named("turn debate");
        assert_eq!(debate.len(), 1);
        let debate_trace = debate[0]["context"]["trace_id"].as_str().unwrap();
        assert_ne!(debate_trace, trace, "a turn with no caller's trace starts its own");
        let in_debate: Vec<&Value> = spans
            .iter()
            .filter(|s| s["context"]["trace_id"] == debate_trace && s["name"].as_str().unwrap().starts_with("chat "))
            .collect();
        let under: Vec<String> =
            in_debate.iter().map(|c| parent(c).unwrap()["name"].as_str().unwrap().to_owned()).collect();
        assert_eq!(under.iter().filter(|n| *n == "node speak").count(), 2, "{under:?}");
        assert!(under.contains(&"node decide".to_owned()), "{under:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_slows_no_turn_and_its_spans_are_counted_as_dropped() {
    // Accepts connections and never answers a byte.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = held.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().map_while(Result::ok) {
            h.lock().unwrap().push(conn);
        }
    });
    let server = start(
        &repo_root(),
        "memory",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "8"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4"),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    );
    let turns = new_session(&server, "pirate", Value::Null).await;
    for m in ["Ahoy!", "I have gold.", "Tell me of the reef.", "Your ship is fine.", "Rum?", "A map for a map?"] {
        post_turn(&turns, m, None).await;
    }
    let metrics = support::http().get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    let spans = |outcome: &str| -> u64 {
        let line = format!("ruleweave_trace_spans_total{{outcome=\"{outcome}\"}}");
        let found = metrics.lines().find(|l| l.starts_with(&line));
        found
            .unwrap_or_else(|| panic!("no {outcome} spans counted:\n{metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(spans("dropped") > 0, "{metrics}");
    // No export has ended (the collector holds them, for up to a minute) and every turn has: the
    // turns did not wait for one.
    assert_eq!(spans("failed"), 0, "{metrics}");
    assert_eq!(spans("exported"), 0, "{metrics}");
    assert!(!held.lock().unwrap().is_empty(), "the exporter did try the collector");
}

/// A collector that answers every OTLP/HTTP export with 200 and passes each body on: the JSON
/// an `http/json` exporter sends (or what it could not read).
fn recording_collector() -> (String, std::sync::mpsc::Receiver<Result<Value, String>>) {
    use std::io::{BufRead as _, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming().map_while(Result::ok) {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                // One request after another on the connection, as the exporter keeps it alive.
                loop {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let (name, value) = line.split_once(':').unwrap_or((&line, ""));
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap();
                        }
                        // Only a body of a stated length is read here: say so rather than
                        // misread one.
                        if ["transfer-encoding", "expect", "content-encoding"]
                            .iter()
                            .any(|h| name.eq_ignore_ascii_case(h))
                        {
                            let _ = tx.send(Err(format!("an export this collector cannot read: {line}")));
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    // Passed on before the answer, so exports arrive in the order they were sent.
                    let export = serde_json::from_slice(&body).map_err(|e| format!("an export that is no JSON: {e}"));
                    let _ = tx.send(export);
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if conn.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (endpoint, rx)
}

/// The trace id and name of every span in an OTLP/JSON export.
fn exported_spans(export: &Value) -> Vec<(String, String)> {
    let mut spans = Vec::new();
    for resource in export["resourceSpans"].as_array().into_iter().flatten() {
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                let id = span["traceId"].as_str().unwrap_or_default().to_ascii_lowercase();
                spans.push((id, span["name"].as_str().unwrap_or_default().to_owned()));
            }
        }
    }
    spans
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_out_trace_is_not_sent_and_a_callers_sampled_one_is() {
    // No new trace is kept (a ratio of 0), a caller's sampled one always is. The sampler's name
    // in mixed case, as the specification allows for its values: the SDK's own reading of the
    // variable would not know it and trace everything.
    let (endpoint, exports) = recording_collector();
    let server = start(
        &repo_root(),
        "memory",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_TRACES_SAMPLER", "ParentBased_TraceIdRatio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    );
    let turns = new_session(&server, "pirate", Value::Null).await;
    let unsampled = "5b8efff798038103d269b633813fc60c";
    let sampled = "4bf92f3577b34da6a3ce929d0e0e4736";
    post_turn(&turns, "Ahoy!", None).await;
    post_turn(&turns, "I have gold.", Some(format!("00-{unsampled}-00f067aa0ba902b7-00"))).await;
    post_turn(&turns, "Tell me of the reef.", None).await;
    post_turn(&turns, "A map for a map?", Some(format!("00-{sampled}-00f067aa0ba902b7-01"))).await;

    // The exports arrive in the order the spans ended: once the sampled request's span (its
    // trace's root, the last to end) is in, any span of the turns before it would have been too.
    let root = "POST /v1/sessions/{id}/turns";
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while !seen.iter().any(|(id, name): &(String, String)| id == sampled && name == root) {
        let left = deadline.saturating_duration_since(Instant::now());
        match exports.recv_timeout(left) {
            Ok(export) => seen.extend(exported_spans(&export.unwrap())),
            Err(_) => panic!("the sampled request's trace never reached the collector; it had {seen:?}"),
        }
    }
    let names: BTreeSet<&str> = seen.iter().map(|(_, n)| n.as_str()).collect();
    assert!(names.contains("turn pirate") && names.contains("node merit_check"), "{names:?}");
    let strays: Vec<&(String, String)> = seen.iter().filter(|(id, _)| id != sampled).collect();
    assert!(strays.is_empty(), "spans of traces the sampler dropped were sent: {strays:?}");

    // A sampler the process cannot honour stops it before it does anything.
    let out = support::ruleweave(&repo_root())
        .arg("check")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_TRACES_SAMPLER", "XRay")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: OTEL_TRACES_SAMPLER=XRay: expected parentbased_always_on"), "{stderr}");
}

/// A caller's `traceparent` goes on to the model calls; its `tracestate` (its vendors' data)
/// reaches neither the model provider nor the collector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_tracestate_goes_no_further() {
    use support::mock_llm::{MockLlm, Reply};
    let mock = MockLlm::start();
    mock.judge(Reply::Content(r#"{"total_score": 10}"#.into())).chat(Reply::Content("Arr.".into()));
    let (endpoint, exports) = recording_collector();
    let server = start(
        &repo_root(),
        "memory",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
            ("RULEWEAVE_LLM", "openai"),
            ("OPENAI_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", &mock.base_url),
        ],
    );
    let turns = new_session(&server, "pirate", Value::Null).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = support::http()
        .post(&turns)
        .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
        .header("tracestate", "callersvendor=the-callers-secret")
        .json(&json!({"input": {"message": "Ahoy!"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let seen = mock.seen();
    assert!(!seen.is_empty());
    for request in &seen {
        let parent = request.headers.get("traceparent").expect("the trace goes on").to_str().unwrap();
        assert!(parent.contains(trace), "{parent}");
        let state = request.headers.get("tracestate").map_or("", |v| v.to_str().unwrap());
        assert!(state.is_empty(), "the caller's tracestate went to the provider: {state}");
    }
    let root = "POST /v1/sessions/{id}/turns";
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut exported = Vec::new();
    while !exported.iter().any(|e: &Value| exported_spans(e).iter().any(|(id, name)| id == trace && name == root)) {
        let left = deadline.saturating_duration_since(Instant::now());
        exported.push(exports.recv_timeout(left).expect("the trace reached the collector").unwrap());
    }
    let all = serde_json::to_string(&exported).unwrap();
    assert!(!all.contains("the-callers-secret"), "the caller's tracestate went to the collector");
}

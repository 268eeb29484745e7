//! The runtime as an embedding program sees it: cancelled turns, native nodes, live events.

use crate::support;

use std::sync::{Arc, Mutex};

use ruleweave::values::{Dynamic, Map};
use ruleweave::{Engine, ErrorKind, Event, NodeContext};
use serde_json::json;
use support::{Silent, write_root};

const TALKER: &str = r#"
llm:
  chat: {model: m}
standin: standin.rhai::respond
state:
  log: {type: list, reducer: append}
  reply: {type: string}
input:
  text: {type: string, required: true}
output: [log, reply]
graph:
  nodes:
    note: {script: note.rhai::note}
    talk: {llm: chat, prompt: ask.j2, into: reply}
  edges:
    - START -> note
    - note -> talk
    - talk -> END
"#;

fn talker() -> tempfile::TempDir {
    write_root(&[
        ("config/talker.yaml", TALKER),
        ("scripts/talker/note.rhai", "fn note() { #{ log: input().text } }"),
        ("scripts/talker/standin.rhai", "fn respond(r) { `you said: ${r.messages[-1].content}` }"),
        ("prompts/talker/ask.j2", "{{ log[-1] }}"),
    ])
}

#[tokio::test]
async fn a_cancelled_turn_leaves_the_session_as_it_was() {
    let root = talker();
    let silent = Arc::new(Silent::default());
    let engine = Engine::builder(root.path()).provider(silent.clone()).build();
    let mut s = engine.open("talker", &Default::default()).await.unwrap();
    // `note` has run and appended to the log when the model call hangs and the turn is dropped.
    tokio::select! {
        r = s.turn(json!({"text": "hello"})) => panic!("the turn should hang: {r:?}"),
        () = silent.asked.notified() => {}
    }
    assert_eq!(s.state(), json!({"log": [], "reply": ""}));
    assert_eq!(s.turns(), 0);
}

#[tokio::test]
async fn events_stream_live_in_order_with_the_stand_in_labelled() {
    let root = talker();
    let engine = Engine::builder(root.path()).build();
    let mut s = engine.open("talker", &Default::default()).await.unwrap();
    let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = seen.clone();
    let r = s
        .turn_with_events(
            json!({"text": "ahoy there"}),
            Arc::new(move |e: &Event| sink.lock().unwrap().push(e.clone())),
        )
        .await
        .unwrap();
    assert_eq!(r.output["reply"], "you said: ahoy there");
    let seen = seen.lock().unwrap();
    let tokens: String = seen
        .iter()
        .filter_map(|e| match e {
            Event::Token { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tokens, "you said: ahoy there", "the stand-in streams its reply");
    let kinds: Vec<&str> = seen
        .iter()
        .filter(|e| !matches!(e, Event::Token { .. }))
        .map(|e| match e {
            Event::NodeStarted { .. } => "started",
            Event::NodeFinished { .. } => "finished",
            Event::Llm(l) => {
                assert!(l.standin, "the stand-in is labelled as one");
                assert_eq!(l.provider, "standin");
                "llm"
            }
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["started", "finished", "started", "llm", "finished"]);
    // The result carries the same events, without the tokens.
    assert_eq!(r.events.len(), kinds.len());
}

const WAITER: &str = "state:\n  heard: {type: bool}\noutput: [heard]\ngraph:\n  nodes:\n    wait: {native: wait}\n  edges:\n    - START -> wait\n    - wait -> END\n";

/// A node that blocks its thread until another task of the caller's runtime signals it.
fn waiter(signal: std::sync::mpsc::Receiver<()>) -> impl ruleweave::NativeNode {
    let signal = Mutex::new(signal);
    move |_: &NodeContext<'_>| -> ruleweave::Result<Map> {
        let heard = signal.lock().unwrap().recv_timeout(std::time::Duration::from_secs(20)).is_ok();
        Ok(Map::from_iter([("heard".into(), Dynamic::from_bool(heard))]))
    }
}

/// `Session::turn` plays on the engine's threads: on a runtime of one thread, a task the turn
/// waits for still runs while the turn's node blocks (played on the caller's thread, the node
/// would wait for it in vain).
#[tokio::test(flavor = "current_thread")]
async fn a_turn_leaves_the_callers_runtime_free() {
    let root = write_root(&[("config/waiter.yaml", WAITER)]);
    let (tx, rx) = std::sync::mpsc::channel();
    let engine = Engine::builder(root.path()).native_node("wait", waiter(rx)).build();
    let mut s = engine.open("waiter", &Default::default()).await.unwrap();
    let signal = tokio::spawn(async move { tx.send(()).unwrap() });
    let out = s.turn(json!({})).await.unwrap().output;
    assert_eq!(out, json!({"heard": true}), "the other task ran while the turn played");
    signal.await.unwrap();
}

/// `Session::blocking_turn` plays on the caller's own thread, with no hand-off: the node runs
/// on the thread that called it.
#[test]
fn a_blocking_turn_plays_on_the_callers_thread() {
    let root = write_root(&[(
        "config/here.yaml",
        "state:\n  thread: {type: string}\noutput: [thread]\ngraph:\n  nodes:\n    here: {native: here}\n  edges:\n    - START -> here\n    - here -> END\n",
    )]);
    let here = |_: &NodeContext<'_>| -> ruleweave::Result<Map> {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        Ok(Map::from_iter([("thread".into(), Dynamic::from(name))]))
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let engine = Engine::builder(root.path()).native_node("here", here).build();
    let mut s = rt.block_on(engine.open("here", &Default::default())).unwrap();
    let caller = std::thread::current().name().unwrap_or("").to_owned();
    let _entered = rt.enter();
    let out = s.blocking_turn(json!({})).unwrap().output;
    assert_eq!(out, json!({"thread": caller}));
    // Handed off, it runs on one of the engine's threads instead.
    let out = rt.block_on(s.turn(json!({}))).unwrap().output;
    assert_eq!(out, json!({"thread": "ruleweave-blocking"}));
}

#[tokio::test]
async fn native_nodes_are_registered_by_the_embedding_program() {
    let root = write_root(&[(
        "config/counter.yaml",
        "state:\n  n: {type: int}\n  label: {type: string}\ninput:\n  by: {type: int, default: 1}\noutput: [n, label]\ngraph:\n  nodes:\n    bump: {native: bump}\n  edges:\n    - START -> bump\n    - bump -> END\n",
    )]);
    let bump = |ctx: &NodeContext<'_>| -> ruleweave::Result<Map> {
        let n = ctx.get("n").and_then(|v| v.as_int().ok()).unwrap_or(0);
        let by = ctx.input().get("by").and_then(|v| v.as_int().ok()).unwrap_or(1);
        let mut m = Map::new();
        m.insert("n".into(), Dynamic::from_int(n + by));
        m.insert("label".into(), Dynamic::from(format!("counted to {}", n + by)));
        Ok(m)
    };
    let engine = Engine::builder(root.path()).native_node("bump", bump).build();
    let mut s = engine.open("counter", &Default::default()).await.unwrap();
    s.turn(json!({})).await.unwrap();
    let out = s.turn(json!({"by": 5})).await.unwrap().output;
    assert_eq!(out, json!({"n": 6, "label": "counted to 6"}));

    // Without the registration the pack does not load, and says why.
    let e = Engine::builder(root.path()).build().packs().get("counter").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Pack);
    assert!(e.detail().contains("native node `bump` is not registered by this host"), "{e}");
}

#[tokio::test]
async fn a_panic_inside_a_turn_is_an_error_and_the_turn_is_undone() {
    let root = write_root(&[
        (
            "config/fragile.yaml",
            "state:\n  log: {type: list, reducer: append}\ninput:\n  text: {type: string, required: true}\noutput: [log]\ngraph:\n  nodes:\n    note: {script: note.rhai::note}\n    fragile: {native: fragile}\n  edges:\n    - START -> note\n    - note -> fragile\n    - fragile -> END\n",
        ),
        ("scripts/fragile/note.rhai", "fn note() { #{ log: input().text } }"),
    ]);
    let fragile = |ctx: &NodeContext<'_>| -> ruleweave::Result<Map> {
        let text = ctx.input().get("text").map(|t| t.to_string()).unwrap_or_default();
        assert!(text != "boom", "a bug in a native node");
        Ok(Map::new())
    };
    let engine = Engine::builder(root.path()).native_node("fragile", fragile).build();
    let mut s = engine.open("fragile", &Default::default()).await.unwrap();
    s.turn(json!({"text": "one"})).await.unwrap();
    let e = s.turn(json!({"text": "boom"})).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
    assert!(e.detail().contains("panicked: a bug in a native node"), "{e}");
    assert_eq!(s.state(), json!({"log": ["one"]}), "the note of the failed turn is undone");
    let r = s.turn(json!({"text": "two"})).await.unwrap();
    assert_eq!((r.turn, r.output), (2, json!({"log": ["one", "two"]})));
}

/// A script may take the state whole: count its fields, list them, write it out, copy it and
/// change the copy. (Rhai panics when it measures a list or map with a shared value inside; the
/// state's lists and maps are plain, so these are ordinary operations, not a bug in the turn.)
#[tokio::test]
async fn a_script_may_measure_list_and_copy_the_whole_state() {
    let root = write_root(&[
        (
            "config/whole.yaml",
            "state:\n  log: {type: list, reducer: append}\n  meta: {type: map, reducer: merge, default: {a: [1, 2]}}\n  seen: {type: string}\ninput:\n  text: {type: string, required: true}\noutput: [log, seen]\ngraph:\n  nodes:\n    note: {script: note.rhai::note}\n    look: {script: note.rhai::look}\n  edges:\n    - START -> note\n    - note -> look\n    - look -> END\n",
        ),
        (
            "scripts/whole/note.rhai",
            r#"fn note() { #{ log: input().text } }
fn look() {
    let copy = this;
    copy.log.push("not in the state");
    let j = parse_json(to_json(this));
    #{ seen: `${this.len()} fields ${this.keys()}, ${this.values().len()} values, log ${j.log}, copy ${copy.log.len()}, meta ${this.meta.a.len()}` }
}"#,
        ),
    ]);
    let engine = Engine::builder(root.path()).build();
    let mut s = engine.open("whole", &Default::default()).await.unwrap();
    s.turn(json!({"text": "one"})).await.unwrap();
    let r = s.turn(json!({"text": "two"})).await.unwrap();
    assert_eq!(
        r.output,
        json!({"log": ["one", "two"], "seen": "3 fields [\"log\", \"meta\", \"seen\"], 3 values, log [\"one\", \"two\"], copy 3, meta 2"})
    );
}

/// A model that answers once the test lets it.
struct Held {
    asked: tokio::sync::Notify,
    answer: tokio::sync::Semaphore,
}

impl ruleweave::Provider for Held {
    fn name(&self) -> &str {
        "held"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ruleweave::llm::LlmRequest,
        _: Option<ruleweave::llm::TokenSink>,
    ) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<ruleweave::llm::LlmResponse>> {
        Box::pin(async move {
            self.asked.notify_one();
            self.answer.acquire().await.unwrap().forget();
            Ok(ruleweave::llm::LlmResponse {
                content: "late".into(),
                model: request.model.clone(),
                usage: Default::default(),
                attempts: 1,
            })
        })
    }
}

/// A turn dropped while a script waits for a model on its thread: the session is as it was,
/// though the script still runs (it has its own copy of the state, not the session's).
#[tokio::test]
async fn a_turn_dropped_while_a_script_waits_for_a_model_leaves_the_session_as_it_was() {
    let root = write_root(&[
        (
            "config/talker.yaml",
            &TALKER.replace("talk: {llm: chat, prompt: ask.j2, into: reply}", "talk: {script: talk.rhai::talk}"),
        ),
        ("scripts/talker/note.rhai", "fn note() { #{ log: input().text } }"),
        ("scripts/talker/talk.rhai", "fn talk() { #{ reply: llm(\"chat\", this.log[-1]) } }"),
        ("scripts/talker/standin.rhai", "fn respond(r) { \"unused\" }"),
    ]);
    let held = Arc::new(Held { asked: Default::default(), answer: tokio::sync::Semaphore::new(0) });
    let engine = Engine::builder(root.path()).provider(held.clone()).build();
    let mut s = engine.open("talker", &Default::default()).await.unwrap();
    tokio::select! {
        r = s.turn(json!({"text": "hello"})) => panic!("the turn should wait for the model: {r:?}"),
        () = held.asked.notified() => {}
    }
    assert_eq!(s.state(), json!({"log": [], "reply": ""}), "`note` is undone");
    assert_eq!(s.turns(), 0);
    held.answer.add_permits(2);
    let again = tokio::time::timeout(std::time::Duration::from_secs(20), s.turn(json!({"text": "again"})));
    let r = again.await.expect("the next turn never finished").unwrap();
    assert_eq!(r.output, json!({"log": ["again"], "reply": "late"}));
}

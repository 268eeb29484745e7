//! `map:` on an llm node: one call per item, at most `concurrency` at once, results folded in item
//! order whatever order the calls finish in, each item's failure its own fallback's (or the whole
//! turn's), events naming the item, the Mermaid drawing saying so. The model here answers only
//! when the test lets it, so what is in flight at any moment is known, not timed.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, TokenSink, Usage};
use ruleweave::{Engine, Error, ErrorKind, Event, Provider, Result};
use serde_json::{Value, json};
use support::write_root;
use tokio::sync::{Semaphore, watch};

const MANIFEST: &str = r#"
name: mapper
llm:
  m: {model: gpt-4o-mini}
input:
  n: {type: int, default: 3}
state:
  items: {type: list}
  got: {type: list, reducer: append}
  total: {type: int, reducer: add}
graph:
  nodes:
    setup: {script: m.rhai::setup}
    each:
      llm: m
      prompt: each.j2
      map: {over: m.rhai::items, concurrency: CONCURRENCY}
      then: m.rhai::got
      FALLBACK
  edges: [START -> setup, setup -> each, each -> END]
"#;

const SCRIPT: &str = r#"
fn setup() {
    let items = [];
    for i in 0..input().n {
        items.push(`item-${i}`);
    }
    #{items: items, got: [], total: 0}
}
fn items() { this.items }
fn got(reply, item) { #{got: [`${item}=${reply}`], total: 1} }
fn failed(why, item) { #{got: [`${item}=fallback`]} }
"#;

fn root(concurrency: usize, fallback: bool) -> tempfile::TempDir {
    let manifest = MANIFEST
        .replace("CONCURRENCY", &concurrency.to_string())
        .replace("FALLBACK", if fallback { "fallback: m.rhai::failed" } else { "" });
    write_root(&[
        ("config/mapper.yaml", &manifest),
        ("scripts/mapper/m.rhai", SCRIPT),
        ("prompts/mapper/each.j2", "ITEM {{ vars.item }} AT {{ vars.index }}"),
    ])
}

/// What the model has seen: calls arrived, calls answered, the most in flight at once.
#[derive(Default, Clone, Copy, Debug)]
struct Seen {
    arrived: usize,
    answered: usize,
    in_flight: usize,
    max_in_flight: usize,
}

/// A model that answers item `k` only once the test adds a permit to `gates[k]` (or to
/// `gates[0]` for every item, when there is one gate); it fails the items in `fail`.
struct Gated {
    gates: Vec<Arc<Semaphore>>,
    fail: Vec<usize>,
    seen: watch::Sender<Seen>,
    order: Mutex<Vec<usize>>,
}

impl Gated {
    fn new(gates: usize, fail: Vec<usize>) -> Arc<Self> {
        Arc::new(Gated {
            gates: (0..gates).map(|_| Arc::new(Semaphore::new(0))).collect(),
            fail,
            seen: watch::channel(Seen::default()).0,
            order: Mutex::new(Vec::new()),
        })
    }

    async fn wait(&self, what: &str, until: impl Fn(&Seen) -> bool) {
        let mut rx = self.seen.subscribe();
        let ok = tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|s| until(s))).await;
        assert!(ok.is_ok(), "the model never saw {what}: {:?}", *self.seen.borrow());
    }
}

impl Provider for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    fn complete<'a>(&'a self, request: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(async move {
            let prompt = &request.messages.last().unwrap().content;
            let k: usize = prompt.rsplit(' ').next().unwrap().parse().unwrap();
            self.seen.send_modify(|s| {
                s.arrived += 1;
                s.in_flight += 1;
                s.max_in_flight = s.max_in_flight.max(s.in_flight);
            });
            let gate = &self.gates[if self.gates.len() == 1 { 0 } else { k }];
            let permit = tokio::time::timeout(Duration::from_secs(20), gate.acquire()).await;
            permit.expect("the test never let the model answer").unwrap().forget();
            self.order.lock().unwrap().push(k);
            self.seen.send_modify(|s| {
                s.in_flight -= 1;
                s.answered += 1;
            });
            if self.fail.contains(&k) {
                return Err(Error::new(ErrorKind::Llm, "HTTP 500 from the model"));
            }
            Ok(LlmResponse {
                content: format!("reply-{k}"),
                model: request.model.clone(),
                usage: Usage::default(),
                attempts: 1,
            })
        })
    }
}

async fn play(engine: Engine, n: i64) -> Result<(Value, Vec<Event>)> {
    let mut s = engine.open("mapper", &serde_json::Map::new()).await?;
    let r = s.turn(json!({"n": n})).await?;
    Ok((s.state(), r.events))
}

#[tokio::test]
async fn results_fold_in_item_order_whatever_order_the_calls_finish_in() {
    let dir = root(3, true);
    let model = Gated::new(3, vec![]);
    let engine = Engine::builder(dir.path()).provider(model.clone()).build();
    let turn = tokio::spawn(play(engine, 3));
    model.wait("three calls at once", |s| s.arrived == 3).await;
    for (k, done) in [(2, 1), (1, 2), (0, 3)] {
        model.gates[k].add_permits(1);
        model.wait("an answer", |s| s.answered == done).await;
    }
    let (state, events) = turn.await.unwrap().unwrap();
    assert_eq!(*model.order.lock().unwrap(), [2, 1, 0], "the calls finished last to first");
    assert_eq!(state["got"], json!(["item-0=reply-0", "item-1=reply-1", "item-2=reply-2"]));
    assert_eq!(state["total"], json!(3), "`add` folds every item's update");
    let llm_nodes: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Llm(l) => Some(l.node.clone()),
            _ => None,
        })
        .collect();
    let mut sorted = llm_nodes.clone();
    sorted.sort();
    assert_eq!(sorted, ["each[0]", "each[1]", "each[2]"], "events say which item each call was");
}

#[tokio::test]
async fn no_more_calls_are_in_flight_than_the_concurrency_allows() {
    let dir = root(2, true);
    let model = Gated::new(1, vec![]);
    let engine = Engine::builder(dir.path()).provider(model.clone()).build();
    let turn = tokio::spawn(play(engine, 5));
    model.wait("two calls at once", |s| s.arrived == 2).await;
    for done in 1..=5 {
        model.gates[0].add_permits(1);
        model.wait("an answer", |s| s.answered == done).await;
    }
    let (state, _) = turn.await.unwrap().unwrap();
    assert_eq!(model.seen.borrow().max_in_flight, 2);
    assert_eq!(state["got"].as_array().unwrap().len(), 5);
    assert_eq!(state["got"][4], json!("item-4=reply-4"));
}

#[tokio::test]
async fn a_failed_item_takes_its_own_fallback() {
    let dir = root(4, true);
    let model = Gated::new(1, vec![1]);
    model.gates[0].add_permits(10);
    let engine = Engine::builder(dir.path()).provider(model.clone()).build();
    let (state, events) = play(engine, 3).await.unwrap();
    assert_eq!(state["got"], json!(["item-0=reply-0", "item-1=fallback", "item-2=reply-2"]));
    assert_eq!(state["total"], json!(2));
    let warned = events.iter().any(|e| {
        matches!(e, Event::Log { node, message, .. } if node == "each[1]" && message.contains("falling back to m.rhai::failed"))
    });
    assert!(warned, "the fallback is logged against its item");
}

#[tokio::test]
async fn a_failed_item_without_a_fallback_fails_the_turn_whole() {
    let dir = root(4, false);
    let model = Gated::new(1, vec![1]);
    model.gates[0].add_permits(10);
    let engine = Engine::builder(dir.path()).provider(model.clone()).build();
    let mut s = engine.open("mapper", &serde_json::Map::new()).await.unwrap();
    let before = s.state();
    let err = s.turn(json!({"n": 3})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Llm);
    assert!(err.to_string().contains("item 1 of m.rhai::items"), "{err}");
    assert_eq!(s.state(), before, "nothing of the failed turn is kept");
}

#[tokio::test]
async fn an_empty_list_makes_no_calls() {
    let dir = root(2, true);
    let model = Gated::new(1, vec![]);
    let engine = Engine::builder(dir.path()).provider(model.clone()).build();
    let (state, _) = play(engine, 0).await.unwrap();
    assert_eq!(state["got"], json!([]));
    assert_eq!(model.seen.borrow().arrived, 0);
}

#[test]
fn the_drawing_shows_the_map() {
    let dir = root(2, true);
    let engine = Engine::builder(dir.path()).build();
    let mermaid = engine.packs().get("mapper").unwrap().mermaid();
    assert!(mermaid.contains("llm: m × each of m.rhai::items (≤2 at once)"), "{mermaid}");
}

#[test]
fn a_bad_map_is_refused_at_load() {
    let dir = root(0, true);
    let err = Engine::builder(dir.path()).build().packs().get("mapper").unwrap_err().to_string();
    assert!(err.contains("map.concurrency is 0; it must be 1 to 64"), "{err}");
    let bad = write_root(&[
        (
            "config/mapper.yaml",
            &MANIFEST.replace("CONCURRENCY", "2").replace("FALLBACK", "").replace("m.rhai::got", "m.rhai::items"),
        ),
        ("scripts/mapper/m.rhai", SCRIPT),
        ("prompts/mapper/each.j2", "{{ vars.item }}"),
    ]);
    let err = Engine::builder(bad.path()).build().packs().get("mapper").unwrap_err().to_string();
    assert!(err.contains("`m.rhai::items` must be a function of 2 parameter(s)"), "then gets (reply, item): {err}");
}

/// A script map node whose items call models runs them at the same time too, each on its own
/// copy of the state: all three read it while all three wait for the model.
#[tokio::test]
async fn script_items_read_the_state_while_they_wait_at_the_same_time() {
    let manifest = MANIFEST.replace(
        "      llm: m\n      prompt: each.j2\n      map: {over: m.rhai::items, concurrency: CONCURRENCY}\n      then: m.rhai::got\n      FALLBACK\n",
        "      script: m.rhai::each\n      map: {over: m.rhai::items, concurrency: 3}\n",
    );
    assert!(manifest.contains("m.rhai::each"));
    let each = "fn each(item) {\n    let before = this.items.len();\n    let reply = llm(\"m\", `ITEM ${item} AT ${item.sub_string(5)}`);\n    #{got: [`${item}=${reply} of ${before}/${this.items.len()}`], total: 1}\n}\n";
    let dir = write_root(&[
        ("config/mapper.yaml", &manifest.replace("script: m.rhai::each", "script: each.rhai::each")),
        ("scripts/mapper/m.rhai", SCRIPT),
        ("scripts/mapper/each.rhai", each),
    ]);
    let model = Gated::new(1, vec![]);
    let engine = Engine::builder(dir.path()).provider(model.clone()).build();
    let turn = tokio::spawn(play(engine, 3));
    model.wait("three calls at once", |s| s.arrived == 3).await;
    model.gates[0].add_permits(3);
    let (state, _) = turn.await.unwrap().unwrap();
    assert_eq!(state["got"], json!(["item-0=reply-0 of 3/3", "item-1=reply-1 of 3/3", "item-2=reply-2 of 3/3"]));
    assert_eq!(state["total"], json!(3));
}

//! A whole debate of the shipped pack (3 rounds, strict fact checking) with instant models and an
//! instant search engine, kept in the memory store, which the pack checkpoints after every step:
//! the engine's cost per debate and per node step, to set beside LangGraph's debate graph
//! (`bench/langgraph/debate_bench.py --mode memory`, MemorySaver, a checkpoint per step).
//!
//! `cargo bench -p ruleweave-engine --bench debate`.

use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::search::SearchChoice;
use ruleweave::{Engine, Event};
use serde_json::{Map, Value, json};

#[path = "support/debate_answers.rs"]
mod answers;
use answers::{Answers, Found};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn engine() -> Engine {
    let root = ruleweave_testkit::repo_root();
    Engine::builder(root).provider(Arc::new(Answers::default())).search(SearchChoice::Engine(Arc::new(Found))).build()
}

async fn debate(engine: &Engine, options: &Map<String, Value>) -> Vec<Event> {
    let mut s = engine.open("debate", options).await.unwrap();
    let r = s.turn(json!("start")).await.unwrap();
    assert_eq!(r.output["is_debate_complete"], json!(true));
    // Gone from the store, as the baseline deletes each debate's thread.
    engine.delete(s.id()).await.unwrap();
    r.events
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let engine = engine();
    let options: Map<String, Value> = json!({"rounds": 3, "fact_check": "strict"}).as_object().unwrap().clone();
    let events = rt.block_on(debate(&engine, &options));
    let steps = events.iter().filter(|e| matches!(e, Event::NodeStarted { .. })).count();
    let calls = events.iter().filter(|e| matches!(e, Event::Llm(_) | Event::Search { .. })).count();
    let start = Instant::now();
    let n = 50;
    for _ in 0..n {
        rt.block_on(debate(&engine, &options));
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    eprintln!(
        "debate: {steps} node steps and {calls} model and search calls per debate; {per:.0} µs per debate, {:.1} µs per step",
        per / steps as f64
    );
    let mut g = c.benchmark_group("debate (3 rounds, strict, instant models, memory store)");
    g.sample_size(30);
    g.bench_function("whole debate", |b| b.to_async(&rt).iter(|| debate(&engine, &options)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! A playtest on a real model, its latency the model's: 200 pirate games by the liar with the
//! judge on a Chat Completions server this process runs on a free port, each answer 50 ms late,
//! at `--concurrency 16` (a game per call in flight, on however few cores). The floor is the
//! calls' latency shared by 16: `calls × 50 ms / 16`; the target is at most 1.3 times it. The
//! judge's 10 never lets the liar win, so every game plays its 20 turns: 4,000 calls, a 12.5 s
//! floor.
//!
//! `cargo bench -p ruleweave --bench real_models` (ten runs; it prints each run's ratio to the
//! floor); `cargo test --benches` plays 16 games once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::llm::{NamedProviders, Provider};
use ruleweave::{Engine, LlmChoice};
use ruleweave_lab::simulate::{self, Plan, Rules};
use ruleweave_lab::spend::{Limits, Spend, metered};
use serde_json::{Value, json};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LATENCY: Duration = Duration::from_millis(50);
const CONCURRENCY: usize = 16;

/// A judge 50 ms late, scoring every transcript 10.
async fn judge(body: String) -> axum::Json<Value> {
    tokio::time::sleep(LATENCY).await;
    let model = serde_json::from_str::<Value>(&body).ok().and_then(|b| b["model"].as_str().map(str::to_owned));
    let verdict =
        json!({"total_score": 10, "strategy_variety": 5, "conversation_depth": 2, "creativity": 2, "persistence": 1});
    axum::Json(json!({
        "id": "bench", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": verdict.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, Router::new().route("/v1/chat/completions", post(judge))).await });
    let games = if std::env::args().any(|a| a == "--bench") { 200 } else { 16 };
    let root = ruleweave_testkit::repo_root();
    let vars = BTreeMap::from([("OPENAI_API_KEY", "sk-bench".to_owned()), ("OPENAI_BASE_URL", base)]);
    let named = NamedProviders::from_vars(move |k| vars.get(k).cloned()).waiting_out_rate_limits();
    let openai: Arc<dyn Provider> = named.get("openai").unwrap();
    let mut group = c.benchmark_group("real models");
    group.sample_size(10).measurement_time(Duration::from_secs(1));
    group.bench_function(format!("pirate/{games} games, judge 50 ms late, concurrency {CONCURRENCY}"), |b| {
        b.iter_custom(|iterations| {
            let mut took = Duration::ZERO;
            for _ in 0..iterations {
                let spend = Spend::new(Limits::default(), BTreeMap::new(), None);
                let chosen = BTreeMap::from([("judge".to_owned(), openai.clone())]);
                let llm: LlmChoice = metered(chosen, &spend, |_| CONCURRENCY);
                let engine = ruleweave_natives::register(Engine::builder(&root)).llm(llm).build();
                let engine = engine.with_params("pirate", Default::default()).unwrap();
                let pack = engine.packs().get("pirate").unwrap();
                let players = simulate::players(&engine, &pack, &["liar".to_owned()]).unwrap();
                let options = serde_json::Map::from_iter([("difficulty".to_owned(), json!("medium"))]);
                let plan = Plan {
                    pack: "pirate".into(),
                    games,
                    first: 0,
                    seed: "bench".into(),
                    jobs: CONCURRENCY,
                    spec: pack.simulate().clone(),
                    record: false,
                    spend: Some(spend.clone()),
                };
                let never = std::sync::atomic::AtomicBool::new(false);
                let rules = Rules { engine: &engine, options: &options };
                let started = Instant::now();
                let played = simulate::play(rt.handle(), &plan, &players, &rules, &BTreeMap::new(), &|| {}, &never);
                let elapsed = started.elapsed();
                assert!(played.iter().all(|p| p.error.is_none()));
                let calls = spend.spent().calls;
                let floor = LATENCY.as_secs_f64() * calls as f64 / CONCURRENCY as f64;
                eprintln!(
                    "{games} games, {calls} judge calls in {:.2} s: {:.2} × the floor of {:.2} s",
                    elapsed.as_secs_f64(),
                    elapsed.as_secs_f64() / floor,
                    floor
                );
                took += elapsed;
            }
            took
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

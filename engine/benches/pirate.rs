//! One pirate turn through the engine with a model that answers instantly, so only the engine is
//! timed: the same graph, user messages and paths as `bench/langgraph/pirate_bench.py`.
//!
//! The model answers from fixed cycles (`support/pirate_answers.rs`) that exercise the same
//! paths as the baseline's without winning. Each sample is a 20-turn conversation.
//!
//! `cargo bench -p ruleweave-engine --bench pirate`; per-node means print once to stderr.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ruleweave::{Engine, Event};
use serde_json::json;

#[path = "support/pirate_answers.rs"]
mod answers;
use answers::InstantModel;

/// The allocator the `ruleweave` binary uses, so the bench times what the product runs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The player's messages of the LangGraph baseline (`pirate_bench.py`), one per line; the load
/// generator plays the same ones.
fn user_messages() -> Vec<&'static str> {
    include_str!("../../tests/data/pirate_messages.txt").lines().collect()
}

const TURNS: usize = 20;

/// How long the thread idles before each turn in the `idle` bench.
const IDLE: Duration = Duration::from_micros(300);

use ruleweave_testkit::repo_root;

/// How a conversation's turns are played.
#[derive(Clone, Copy)]
enum Caller {
    /// On the calling thread (`Session::blocking_turn`): a synchronous caller's turn, as the
    /// baseline's `invoke` is, and as simulated games and Python's `turn` play.
    Thread,
    /// Handed to the engine's threads and back (`Session::turn`): an async caller's turn, as
    /// the server's is.
    Async,
}

/// Plays one 20-turn conversation; returns the time spent in turns and every turn's events.
/// With `idle`, the thread sleeps that long before each turn, outside the timed region, as a
/// server's thread waits for its next request.
fn conversation(
    rt: &tokio::runtime::Runtime,
    engine: &Engine,
    model: &InstantModel,
    keep_events: bool,
    idle: Option<Duration>,
    caller: Caller,
) -> (Duration, Vec<Event>) {
    model.reset();
    let options = json!({"difficulty": "medium"});
    let mut session = rt.block_on(engine.open("pirate", options.as_object().unwrap())).unwrap();
    let mut events = Vec::new();
    let messages = user_messages();
    let mut elapsed = Duration::ZERO;
    let _runtime = rt.enter();
    for t in 0..TURNS {
        if let Some(idle) = idle {
            std::thread::sleep(idle);
        }
        let input = json!({"message": messages[t % messages.len()]});
        let start = Instant::now();
        let r = match caller {
            Caller::Thread => session.blocking_turn(input),
            Caller::Async => rt.block_on(session.turn(input)),
        }
        .unwrap();
        // The result is dropped inside the timed region, as a caller done with it would.
        if keep_events {
            events.extend(r.events);
        } else {
            drop(r);
        }
        elapsed += start.elapsed();
    }
    assert!(!session.is_finished(), "the bench conversation must not end the game");
    // Outside the timed region, as the baseline deletes its threads: keep the store bounded.
    rt.block_on(engine.delete(session.id())).unwrap();
    (elapsed, events)
}

/// Mean wall time per node over a few conversations, printed once.
fn report_nodes(rt: &tokio::runtime::Runtime, engine: &Engine, model: &InstantModel) {
    let mut per_node: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut steps = 0u64;
    for _ in 0..200 {
        let (_, events) = conversation(rt, engine, model, true, None, Caller::Thread);
        for e in events {
            if let Event::NodeFinished { node, duration_us, .. } = e {
                let entry = per_node.entry(node).or_default();
                entry.0 += duration_us;
                entry.1 += 1;
                steps += 1;
            }
        }
    }
    let turns = 200 * TURNS as u64;
    eprintln!(
        "pirate: {:.2} node steps per turn; mean µs per node (from events, µs resolution):",
        steps as f64 / turns as f64
    );
    for (node, (total, n)) in per_node {
        eprintln!("  {node:<18} {:>6.2} µs  ({n} runs)", total as f64 / n as f64);
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let model = Arc::new(InstantModel::default());
    let engine = Engine::builder(repo_root()).provider(model.clone()).build();
    engine.packs().get("pirate").unwrap();
    report_nodes(&rt, &engine, &model);

    let mut group = c.benchmark_group("pirate");
    group.throughput(Throughput::Elements(TURNS as u64));
    group.bench_function("turn (20-turn conversation, in memory)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += conversation(&rt, &engine, &model, false, None, Caller::Thread).0;
            }
            total
        })
    });
    // The same turns from an async caller: each handed to the engine's threads and back, as the
    // server's are. The difference is the hand-off.
    group.bench_function("turn (20-turn conversation, in memory, handed off by an async caller)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += conversation(&rt, &engine, &model, false, None, Caller::Async).0;
            }
            total
        })
    });
    // The same turns, each after the thread has slept 0.3 ms (only the turns are timed): what a
    // turn costs when its thread was idle before it, as a server's is between requests. On a
    // virtual machine whose idle CPUs halt, the caches and predictors it finds are cold.
    group.bench_function("turn (20-turn conversation, in memory, 0.3 ms idle before each)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += conversation(&rt, &engine, &model, false, Some(IDLE), Caller::Thread).0;
            }
            total
        })
    });

    // The same conversations recorded in SQLite (WAL, synchronous=NORMAL), as `ruleweave serve`
    // keeps them by default; BENCH_SYNCHRONOUS=full (or off, extra) measures another durability.
    let db = tempfile::tempdir().unwrap();
    let synchronous = std::env::var("BENCH_SYNCHRONOUS").unwrap_or_else(|_| "normal".into());
    let url = format!("sqlite://{}?synchronous={synchronous}", db.path().join("bench.db").display());
    let store = rt.block_on(ruleweave::store::open(&url)).unwrap();
    let persisted = Engine::builder(repo_root()).provider(model.clone()).store(store).build();
    group.bench_function("turn (20-turn conversation, SQLite)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += conversation(&rt, &persisted, &model, false, None, Caller::Thread).0;
            }
            total
        })
    });
    group.finish();

    // The pack's own stand-in model (a Rhai script playing judge and captain), as `ruleweave
    // serve` runs it with no API key and as the load benchmark measures it. Games end when the
    // captain yields (after 6-7 turns on these messages), so a sample is one whole game.
    let standin = Engine::builder(repo_root()).build();
    let mut group = c.benchmark_group("pirate (stand-in model)");
    group.bench_function("game (until the captain yields, in memory)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let options = json!({"difficulty": "hard"});
                let mut session = rt.block_on(standin.open("pirate", options.as_object().unwrap())).unwrap();
                let _runtime = rt.enter();
                let start = Instant::now();
                for message in user_messages().iter().cycle().take(TURNS) {
                    if session.blocking_turn(json!({"message": message})).unwrap().finished {
                        break;
                    }
                }
                total += start.elapsed();
                rt.block_on(standin.delete(session.id())).unwrap();
            }
            total
        })
    });
    group.finish();

    // The floor: three trivial script nodes, what a turn costs with (almost) nothing to do.
    // Sessions of 100 turns, deleted outside the timed region, so the store stays small.
    let floor = Engine::builder(repo_root().join("tests/packs/floor")).build();
    let mut group = c.benchmark_group("floor");
    group.throughput(Throughput::Elements(100));
    group.bench_function("turn (3 trivial script nodes, in memory)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut session = rt.block_on(floor.open("floor", &Default::default())).unwrap();
                let _runtime = rt.enter();
                let start = Instant::now();
                for _ in 0..100 {
                    session.blocking_turn(json!({})).unwrap();
                }
                total += start.elapsed();
                rt.block_on(floor.delete(session.id())).unwrap();
            }
            total
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(8));
    targets = bench
}
criterion_main!(benches);

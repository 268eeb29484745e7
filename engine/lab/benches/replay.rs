//! Replaying after an edit: 100 recorded 20-turn pirate sessions (played on the stand-in model and
//! read back from the store), replayed on the pack with the recorded answers, every turn's state
//! compared with the recording.
//!
//! `cargo bench -p ruleweave-lab --bench replay`.

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::Engine;
use ruleweave_lab::replay::{Fallback, Recording, Replayer};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LINES: &[&str] = &[
    "Ahoy, captain! I sailed with your crew off Tortuga.",
    "I am the harbour master's daughter, and I bring word from the governor.",
    "Your old quartermaster sent me; he said you'd know the signal.",
    "I have a map that shows where the navy will strike next.",
    "Remember the storm of '09? I was the cabin boy who saved your parrot.",
];

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let root = ruleweave_testkit::repo_root();
    let engine = Engine::builder(&root).build();
    let recordings: Vec<Recording> = rt.block_on(async {
        let mut out = Vec::new();
        for s in 0..100 {
            let mut session = engine.open("pirate", json!({"difficulty": "hard"}).as_object().unwrap()).await.unwrap();
            for t in 0..20 {
                let line = format!("{} ({s}.{t})", LINES[(s + t) % LINES.len()]);
                if session.turn(json!({"message": line})).await.is_err() {
                    break;
                }
            }
            out.push(Recording::from_store(&engine, session.id()).await.unwrap());
        }
        out
    });
    let turns: usize = recordings.iter().map(|r| r.turns.len()).sum();
    let replayer = Replayer::new(&engine, "pirate", Fallback::Fail).unwrap();
    let start = Instant::now();
    let changed = rt.block_on(async {
        let mut changed = 0;
        for r in &recordings {
            changed += replayer.replay(r).await.unwrap().iter().filter(|d| !d.is_same()).count();
        }
        changed
    });
    eprintln!("replay: 100 sessions, {turns} turns, {changed} changed, once: {:?}", start.elapsed());
    assert_eq!(changed, 0, "an unchanged pack replays every turn as recorded");
    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    g.bench_function(format!("100 pirate sessions ({turns} turns)"), |b| {
        b.to_async(&rt).iter(|| async {
            for r in &recordings {
                replayer.replay(r).await.unwrap();
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

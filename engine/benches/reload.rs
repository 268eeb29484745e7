//! Save-to-live latency: a file written → the first turn that runs on the new version.
//!
//! A session plays turns back to back on a copy of `tests/reload/` while the bench saves a new
//! `marker` parameter (written aside and renamed over, as editors save); a sample ends with the
//! first turn whose pack version differs. That spans the watcher's debounce, the rebuild and the
//! swap. The target is 200 ms. Criterion reports the mean; the median and p99 of every
//! save are printed at the end.

#[path = "support/turn_here.rs"]
mod turn_here;
use turn_here::turn_here;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use ruleweave::Engine;
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/support/mod.rs"]
mod support;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let root = support::copy_root("reload");
    let config = root.path().join("config/marker.yaml");
    let original = std::fs::read_to_string(&config).unwrap();
    let engine = Engine::builder(root.path()).build();
    let mut session = rt.block_on(engine.open("marker", &Default::default())).unwrap();
    let _watcher = ruleweave::Watcher::start(engine.packs()).unwrap();
    let samples = Mutex::new(Vec::new());
    let mut marker = 1;

    let mut group = c.benchmark_group("reload");
    group.sampling_mode(SamplingMode::Flat).sample_size(20).measurement_time(Duration::from_secs(20));
    group.bench_function("save to first turn on the new version (marker.yaml)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                marker += 1;
                let before = session.pack().version().to_owned();
                let tmp = config.with_extension("tmp~");
                std::fs::write(&tmp, original.replace("marker: 1", &format!("marker: {marker}"))).unwrap();
                let saved = Instant::now();
                std::fs::rename(&tmp, &config).unwrap();
                loop {
                    let turn = turn_here(&rt, &mut session, json!({})).unwrap();
                    if turn.pack_version != before {
                        assert_eq!(turn.output["first"], json!(marker));
                        break;
                    }
                    assert!(saved.elapsed() < Duration::from_secs(10), "the save never went live");
                }
                let took = saved.elapsed();
                samples.lock().unwrap().push(took);
                total += took;
            }
            total
        })
    });
    group.finish();

    let mut all = samples.into_inner().unwrap();
    all.sort();
    let at = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize];
    eprintln!(
        "save to live over {} saves: median {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        all.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        all[all.len() - 1].as_secs_f64() * 1e3
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);

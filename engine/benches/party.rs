//! The party pack: its pool query alone on a 1,000-question table (filter on four columns,
//! ordered by three keys, limit 5, with every row's times_used counted), and a whole round
//! (answers in, next question out) on the stand-in model beside a pirate turn on its stand-in.
//!
//! `cargo bench -p ruleweave-engine --bench party`.

#[path = "support/turn_here.rs"]
mod turn_here;
use turn_here::turn_here;

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ruleweave::Engine;
use ruleweave::values::Map;
use serde_json::{Value, json};

#[path = "support/party_round.rs"]
mod party_round;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use ruleweave_testkit::repo_root;

/// A copy of the party pack whose pool holds 1,000 questions: 50 per language and intensity.
fn thousand_questions() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_root();
    for sub in ["scripts/party", "prompts/party"] {
        ruleweave_testkit::copy_tree(&repo.join(sub), &dir.path().join(sub));
    }
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::copy(repo.join("config/party.yaml"), dir.path().join("config/party.yaml")).unwrap();
    let mut pool = String::new();
    for (language, form) in [("en", "Never have I ever"), ("pl", "Nigdy nie")] {
        for intensity in 1..=10 {
            for n in 0..50 {
                pool.push_str(&format!(
                    "- {{id: {language}-{intensity}-{n}, language: {language}, intensity: {intensity}, is_nsfw: {}, text: \"{form} done thing {n} of level {intensity}\"}}\n",
                    intensity >= 8
                ));
            }
        }
    }
    std::fs::create_dir_all(dir.path().join("data/party")).unwrap();
    std::fs::write(dir.path().join("data/party/questions.yaml"), pool).unwrap();
    dir
}

fn map(v: Value) -> Map {
    rhai::serde::to_dynamic(v).unwrap().cast::<Map>()
}

fn query_bench(c: &mut Criterion) {
    let root = thousand_questions();
    let engine = Engine::builder(root.path()).build();
    let pack = engine.packs().get("party").unwrap();
    let table = pack.table("questions").unwrap();
    assert_eq!(table.len(), 1000);
    // Every row has been used 0-4 times, as after a few hundred lobbies.
    let counted: Vec<(String, String, i64)> = ["en", "pl"]
        .iter()
        .flat_map(|l| (1..=10).flat_map(move |i| (0..50).map(move |n| (format!("{l}-{i}-{n}"), (n * 7 + i) % 5))))
        .map(|(key, n)| (key, "times_used".to_owned(), n as i64))
        .collect();
    let counts = table.counts(counted);
    // Round 8 of a lobby: deeper, intensity 3-5, target 4; seven questions asked so far.
    let used: Vec<String> = (0..7).map(|n| format!("en-{}-{n}", 1 + n % 5)).collect();
    let query = map(json!({
        "where": {
            "language": "en",
            "intensity": {"between": [3, 5]},
            "is_nsfw": false,
            "active": true,
            "id": {"not_in": used},
        },
        "order": [{"near": "intensity", "to": 4}, "times_used", "random"],
        "limit": 5,
    }));
    let found = table.query(&query, Some(&counts), 7).unwrap();
    assert_eq!(found.len(), 5);
    let mut group = c.benchmark_group("party pool");
    group.bench_function("query (1,000 rows: 4 filters, 3-key order, limit 5)", |b| {
        let mut salt = 0u64;
        b.iter(|| {
            salt += 1;
            table.query(&query, Some(&counts), salt).unwrap()
        })
    });
    group.finish();
}

/// Twenty rounds of a six-player lobby, the table's boldness rising and falling.
fn answers() -> Vec<Value> {
    let haves = [3, 4, 6, 6, 5, 6, 6, 1, 0, 0, 2, 4, 5, 6, 6, 3, 2, 6, 6, 6];
    haves.into_iter().map(party_round::round).collect()
}

fn round_bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let engine = Engine::builder(repo_root()).build();
    engine.packs().get("party").unwrap();
    engine.packs().get("pirate").unwrap();
    let rounds = answers();
    // The last answers finish the lobby (no next question): the 19 before them are timed.
    let timed = rounds.len() - 1;
    let mut group = c.benchmark_group("round beside a pirate turn (stand-in model, in memory)");
    group.throughput(Throughput::Elements(timed as u64));
    group.bench_function("party round (answers in, next question out; a 20-round lobby)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let options = json!({"nsfw": true});
                let mut session = rt.block_on(engine.open("party", options.as_object().unwrap())).unwrap();
                turn_here(&rt, &mut session, json!({})).unwrap();
                let start = Instant::now();
                for input in &rounds[..timed] {
                    turn_here(&rt, &mut session, input.clone()).unwrap();
                }
                total += start.elapsed();
                rt.block_on(engine.delete(session.id())).unwrap();
            }
            total
        })
    });
    let messages: Vec<&str> = include_str!("../../tests/data/pirate_messages.txt").lines().collect();
    group.bench_function("pirate turn (judge, captain, validator; a game until he yields)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut turns = 0u64;
            let mut elapsed = Duration::ZERO;
            while turns < iters * timed as u64 {
                let options = json!({"difficulty": "hard"});
                let mut session = rt.block_on(engine.open("pirate", options.as_object().unwrap())).unwrap();
                let start = Instant::now();
                for m in messages.iter().cycle().take(timed) {
                    turns += 1;
                    if turn_here(&rt, &mut session, json!({"message": m})).unwrap().finished {
                        break;
                    }
                }
                elapsed += start.elapsed();
                rt.block_on(engine.delete(session.id())).unwrap();
            }
            // Scaled to `timed` turns per iteration, as the party sample is.
            total += elapsed.mul_f64((iters * timed as u64) as f64 / turns as f64);
            total
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(6));
    targets = query_bench, round_bench
}
criterion_main!(benches);

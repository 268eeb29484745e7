//! The live outcomes report over 100,000 finished pirate games on SQLite: a strict control and a
//! lenient variant (a fifth of the players), each game's outcome and merit score in its row. The
//! store counts the games by variant and outcome and ranks the merit within each variant, in
//! SQL. The target is under a second.
//!
//! `cargo bench -p ruleweave --bench outcomes`; `cargo test --benches` reports once.

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::Engine;
use ruleweave::store::{OutcomeQuery, Sql};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const GAMES: u64 = 100_000;

/// 100,000 games as live play leaves them: opened a millisecond apart, each ended.
const FILL: &str = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999) \
    INSERT INTO outcomes (session, pack, version, variant, player, outcome, tracked, turns, created_at, finished_at) \
    SELECT 'game-' || i, 'pirate', 'bench', CASE WHEN i % 5 = 0 THEN 'lenient' ELSE 'strict' END, 'player-' || i, \
    CASE WHEN (i * 7919) % 100 < 30 THEN 'won_score' WHEN (i * 7919) % 100 < 60 THEN 'blocked' ELSE 'continue' END, \
    '{\"merit_score\": ' || ((i * 31) % 100) || '}', 1 + i % 20, 1000 + i, 2000 + i FROM n";

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The pirate with an experiment: a lenient medium threshold for a fifth of the players.
    let repo = ruleweave_testkit::repo_root();
    for part in ["config/pirate.yaml", "scripts/pirate", "prompts/pirate"] {
        ruleweave_testkit::copy_tree(&repo.join(part), &dir.path().join(part));
    }
    let manifest = dir.path().join("config/pirate.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let experiment = "experiment:\n  name: medium\n  variants:\n    strict: {weight: 80}\n    \
                      lenient: {weight: 20, params: {thresholds.medium: 55}}\n";
    std::fs::write(&manifest, format!("{text}{experiment}")).unwrap();
    let url = format!("sqlite://{}", dir.path().join("outcomes.db").display());
    let store = rt.block_on(ruleweave::store::open(&url)).unwrap();
    let Some(Sql::Sqlite(pool)) = store.sql() else { panic!("a SQLite store") };
    rt.block_on(sqlx::query(FILL).execute(pool)).unwrap();
    let engine = Engine::builder(dir.path()).store(store.clone()).build();
    let pack = engine.packs().get("pirate").unwrap();
    let rows = store.outcomes().unwrap();
    let query = OutcomeQuery { pack: "pirate", since: None, until: None, version: None };

    let started = Instant::now();
    let report = rt.block_on(ruleweave_lab::outcomes::report(rows, &pack, query)).unwrap();
    let took = started.elapsed();
    let counted: u64 = report.variants.iter().map(|v| v.finished).sum();
    assert_eq!(counted, GAMES);
    // The merit's spread as the database ranked it, against the same games ranked here.
    for v in &report.variants {
        let lenient = v.name.as_deref() == Some("lenient");
        let mut merits: Vec<f64> =
            (0..GAMES).filter(|i| (i % 5 == 0) == lenient).map(|i| ((i * 31) % 100) as f64).collect();
        merits.sort_by(f64::total_cmp);
        let n = merits.len();
        let at = |rank: usize| Some(merits[rank - 1]);
        let s = v.tracked["merit_score"];
        assert_eq!((s.median, s.p10, s.p90), (at(n.div_ceil(2)), at(n.div_ceil(10)), at((9 * n).div_ceil(10))));
    }
    println!(
        "outcomes report, {GAMES} finished games on SQLite: {:.0} ms (target under 1,000 ms)",
        took.as_secs_f64() * 1e3
    );

    let mut group = c.benchmark_group("outcomes");
    group.sample_size(10);
    group.bench_function("report, 100,000 finished games, SQLite", |b| {
        b.iter(|| rt.block_on(ruleweave_lab::outcomes::report(rows, &pack, query)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

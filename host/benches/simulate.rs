//! `ruleweave simulate` at the size a designer runs after every save: 1,000 pirate games of up to
//! 20 turns (500 each for the flatterer and the liar) and 10,000 party rounds (250 games of 20
//! rounds for each of its two tables), on the stand-in model, a game per core at once, as the
//! command plays them.
//!
//! `cargo bench -p ruleweave --bench simulate`.

use std::collections::BTreeMap;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ruleweave::Engine;
use ruleweave_lab::simulate::{self, Batch, Plan, Rules, tune};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use ruleweave_testkit::repo_root;

/// Plays `games` for each of `players` of `pack`; returns the games and turns played, to check the
/// bench played what it says.
fn batch(
    rt: &tokio::runtime::Runtime,
    engine: &Engine,
    pack: &str,
    players: [&str; 2],
    games: u32,
    set: &[(&str, &str)],
) -> (u64, f64) {
    let pack = engine.packs().get(pack).unwrap();
    let mut options = serde_json::Map::new();
    for (k, v) in set {
        options.insert((*k).to_owned(), pack.option_from_str(k, v).unwrap());
    }
    let players = simulate::players(engine, &pack, &players.map(String::from)).unwrap();
    let plan = Plan {
        pack: pack.name().to_owned(),
        games,
        first: 0,
        seed: "bench".into(),
        jobs: std::thread::available_parallelism().map_or(1, usize::from),
        spec: pack.simulate().clone(),
        record: false,
        spend: None,
    };
    let rules = Rules { engine, options: &options };
    let never = std::sync::atomic::AtomicBool::new(false);
    let played = simulate::play(rt.handle(), &plan, &players, &rules, &BTreeMap::new(), &|| {}, &never);
    let report = simulate::report(&plan, &played);
    assert!(report.players.iter().all(|p| p.error.is_none()), "{report:?}");
    let games = report.players.iter().map(|p| p.games as u64).sum();
    let median_turns = report.players.iter().map(|p| p.turns.median.unwrap_or(0.0)).sum::<f64>();
    (games, median_turns)
}

fn benches(c: &mut Criterion) {
    // `cargo test --benches` runs each bench once, unoptimised, to keep it from rotting: a few
    // games then, the full batch under `cargo bench`.
    let scale = if std::env::args().any(|a| a == "--bench") { 1 } else { 100 };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    // Each run on a fresh engine, its packs loaded: an engine keeps its stand-in's answers, and a
    // run that repeats the last one's games would find every answer kept.
    let fresh = |root: &std::path::Path, pack: &str| {
        let engine = rt.block_on(ruleweave_host::standin_engine(root)).unwrap();
        engine.packs().get(pack).unwrap();
        engine
    };
    let root = repo_root();
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10).measurement_time(Duration::from_secs(60)).warm_up_time(Duration::from_secs(1));
    group.bench_function("pirate/1000 games", |b| {
        b.iter_batched(
            || fresh(&root, "pirate"),
            |engine| {
                assert_eq!(
                    batch(&rt, &engine, "pirate", ["flatterer", "liar"], 500 / scale, &[("difficulty", "medium")]).0,
                    2 * u64::from(500 / scale)
                )
            },
            BatchSize::PerIteration,
        );
    });
    // The same games with players that read the game's `view` (a line added to each that names
    // it): the display is then rendered for them every turn, which it is not for the shipped ones.
    let looking = tempfile::tempdir().unwrap();
    for dir in ["config/pirate.yaml", "scripts/pirate", "scripts/lib", "prompts/pirate"] {
        ruleweave_testkit::copy_tree(&repo_root().join(dir), &looking.path().join(dir));
    }
    for player in ["flatterer", "liar"] {
        let path = looking.path().join(format!("scripts/pirate/players/{player}.rhai"));
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replacen("fn play(view, state) {", "fn play(view, state) {\n    let _shown = view.reply;", 1);
        std::fs::write(&path, text).unwrap();
    }
    group.bench_function("pirate/1000 games, players that read the view", |b| {
        b.iter_batched(
            || fresh(looking.path(), "pirate"),
            |engine| {
                assert_eq!(
                    batch(&rt, &engine, "pirate", ["flatterer", "liar"], 500 / scale, &[("difficulty", "medium")]).0,
                    2 * u64::from(500 / scale)
                )
            },
            BatchSize::PerIteration,
        );
    });
    // A party game is its opening and then a round a turn: 21 turns for 20 rounds.
    group.bench_function("party/10000 rounds", |b| {
        b.iter_batched(
            || fresh(&root, "party"),
            |engine| {
                assert_eq!(
                    batch(&rt, &engine, "party", ["brave", "shy"], 250 / scale, &[("max_rounds", "20")]),
                    (2 * u64::from(250 / scale), 42.0)
                )
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();

    // Asking for the value: a sweep of the pirate's medium threshold over nine values, 1,000
    // games of the liar at each, and `tune` finding the threshold at which the liar wins 30% ± 5%
    // of games on medium (or saying why no integer does), as the command line runs them.
    let mut group = c.benchmark_group("tune");
    group.sample_size(10).measurement_time(Duration::from_secs(60)).warm_up_time(Duration::from_secs(1));
    let options = serde_json::Map::from_iter([("difficulty".to_owned(), serde_json::json!("medium"))]);
    let batch = Batch {
        pack: "pirate".into(),
        games: 1000 / scale,
        players: vec!["liar".into()],
        seed: "bench".into(),
        options: options.clone(),
        jobs: None,
        prices: BTreeMap::new(),
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    group.bench_function("pirate/sweep of 9 values, 1000 games each", |b| {
        let ranges = vec!["thresholds.medium=52..60".parse().unwrap()];
        let sweep = tune::Sweep { batch: batch.clone(), ranges };
        b.iter_batched(
            || fresh(&root, "pirate"),
            |engine| assert_eq!(tune::sweep(rt.handle(), &engine, &sweep, &|| {}, &never).unwrap().len(), 9),
            BatchSize::PerIteration,
        );
    });
    group.bench_function("pirate/tune the medium threshold to 30% ± 5%", |b| {
        let request = tune::Tune {
            pack: "pirate".into(),
            vary: "thresholds.medium=40..80".parse().unwrap(),
            target: tune::Target::parse("liar:won_*=0.3", 0.05).unwrap(),
            seed: "bench".into(),
            options: options.clone(),
            games_max: tune::GAMES_MAX / scale as u32,
            budget: 40_000 / scale as u64,
            jobs: None,
            spend: None,
        };
        b.iter_batched(
            || fresh(&root, "pirate"),
            |engine| {
                let answer = tune::tune(rt.handle(), &engine, &request, &|_| {}, &never).unwrap();
                if scale == 1 {
                    eprintln!(
                        "tune: {} = {} found {} ({} games): {:?}",
                        answer.param, answer.value, answer.found, answer.games_played, answer.why
                    );
                }
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(simulate_benches, benches);
criterion_main!(simulate_benches);

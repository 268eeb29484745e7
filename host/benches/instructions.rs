//! Instruction counts of the paths this project holds to its speed, under Valgrind's Callgrind
//! through gungraun: a count does not move with the machine's load, so a change that makes a
//! turn 3% dearer shows as 3% on any machine, where wall time swings by more than that from one
//! hour to the next.
//!
//! Each benchmark sets up outside the count (an engine, a session played to where the measured
//! part starts) and counts its work alone with Callgrind's client requests: instrumentation starts
//! off (`--instr-atstart=no`), is switched on around the work and off after it, and covers every
//! thread meanwhile (a store's writer, the engine's turn threads, simulate's players). Each
//! reports instructions and estimated cycles.
//!
//! `bench/gate.sh` builds and runs them and compares the instructions with the baselines in
//! `bench/instructions.json` (it fails past 3% more); by hand:
//!
//! ```sh
//! cargo install gungraun-runner --version 0.20.0   # the harness's runner, matching the library
//! cargo bench -p ruleweave --features instructions --bench instructions
//! ```

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use gungraun::client_requests::callgrind;
use gungraun::{Callgrind, EntryPoint, LibraryBenchmarkConfig, library_benchmark, library_benchmark_group, main};
use ruleweave::Engine;
use ruleweave_lab::simulate::{self, Plan, Rules};
use serde_json::json;

#[path = "../../engine/benches/support/pirate_answers.rs"]
mod answers;
use answers::InstantModel;

/// The allocator the `ruleweave` binary uses, so the counts are the product's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The player's messages of the LangGraph baseline, as every pirate bench plays them.
const MESSAGES: &str = include_str!("../../tests/data/pirate_messages.txt");

/// Turns played before the counted one: the engine's caches (compiled templates, keyword sets,
/// thread pools) are warm, as in a server that has run a while.
const WARM_TURNS: usize = 12;

/// Counts what `work` does, and nothing before or after it.
fn counted<T>(work: impl FnOnce() -> T) -> T {
    callgrind::start_instrumentation();
    let out = work();
    callgrind::stop_instrumentation();
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

fn message(turn: usize) -> serde_json::Value {
    let lines: Vec<&str> = MESSAGES.lines().collect();
    json!({"message": lines[turn % lines.len()]})
}

/// The repository's root: the five shipped packs.
fn root() -> std::path::PathBuf {
    ruleweave_testkit::repo_root()
}

/// An engine on `store` whose models answer at once (only the engine is counted).
fn instant_engine(rt: &tokio::runtime::Runtime, store: &str) -> Engine {
    let store = rt.block_on(ruleweave::store::open(store)).expect("the store opens");
    Engine::builder(root()).provider(Arc::new(InstantModel::default())).store(store).build()
}

/// One pirate turn (the 13th of a conversation) on `store`, played on the calling thread.
fn pirate_turn(store: &str) -> u64 {
    let rt = runtime();
    let engine = instant_engine(&rt, store);
    let options = json!({"difficulty": "medium"});
    let mut session = rt.block_on(engine.open("pirate", options.as_object().unwrap())).unwrap();
    let _entered = rt.enter();
    for turn in 0..WARM_TURNS {
        session.blocking_turn(message(turn)).unwrap();
    }
    let played = counted(|| session.blocking_turn(message(WARM_TURNS)).unwrap());
    played.turn
}

#[library_benchmark]
fn pirate_turn_in_memory() -> u64 {
    black_box(pirate_turn("memory"))
}

// The store's writer thread and SQLite's own work are counted; the commit's `fsync` is a system
// call, which Callgrind does not count (it counts instructions in user space).
#[library_benchmark]
fn pirate_turn_on_sqlite() -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("turns.db").display());
    black_box(pirate_turn(&store))
}

// One pirate turn through the server's router in this process (no socket): the key check, the
// body read and parsed, the turn handed to the engine's threads and back, the answer written.
#[library_benchmark]
fn http_turn() -> usize {
    use axum::body::Body;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    let rt = runtime();
    let engine = instant_engine(&rt, "memory");
    let state = Arc::new(ruleweave_host::server::AppState::new(engine, Default::default()));
    let app = ruleweave_host::server::app(state);
    let request = |path: String, body: serde_json::Value| {
        axum::http::Request::post(path)
            .header("content-type", "application/json")
            .header("host", "localhost")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let call = |path: String, body: serde_json::Value| {
        let app = app.clone();
        rt.block_on(async move {
            let response = app.oneshot(request(path, body)).await.unwrap();
            assert!(response.status().is_success(), "{}", response.status());
            response.into_body().collect().await.unwrap().to_bytes()
        })
    };
    let opened = call("/v1/sessions".into(), json!({"pack": "pirate", "options": {"difficulty": "medium"}}));
    let id = serde_json::from_slice::<serde_json::Value>(&opened).unwrap()["id"].as_str().unwrap().to_owned();
    let turns = format!("/v1/sessions/{id}/turns");
    for turn in 0..WARM_TURNS {
        call(turns.clone(), json!({"input": message(turn)}));
    }
    let answered = counted(|| call(turns.clone(), json!({"input": message(WARM_TURNS)})));
    black_box(answered.len())
}

/// `games` games per player of `players` on the pirate pack's stand-ins, one at a time (one job:
/// the same order every run); the games played.
fn simulated(players: &[&str], games: u32) -> u64 {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let engine = rt.block_on(ruleweave_host::standin_engine(&root())).unwrap();
    let pack = engine.packs().get("pirate").unwrap();
    let mut options = serde_json::Map::new();
    options.insert("difficulty".into(), json!("medium"));
    let players: Vec<String> = players.iter().map(|p| (*p).to_owned()).collect();
    let players = simulate::players(&engine, &pack, &players).unwrap();
    let plan = Plan {
        pack: "pirate".into(),
        games,
        first: 0,
        seed: "instructions".into(),
        jobs: 1,
        spec: pack.simulate().clone(),
        record: false,
        spend: None,
    };
    let rules = Rules { engine: &engine, options: &options };
    let never = std::sync::atomic::AtomicBool::new(false);
    let played = counted(|| simulate::play(rt.handle(), &plan, &players, &rules, &BTreeMap::new(), &|| {}, &never));
    let report = simulate::report(&plan, &played);
    assert!(report.players.iter().all(|p| p.error.is_none()), "{report:?}");
    report.players.iter().map(|p| p.games as u64).sum()
}

// One simulated game of the pirate pack: the flatterer, who never wins, plays all 20 turns.
#[library_benchmark]
fn simulated_game() -> u64 {
    black_box(simulated(&["flatterer"], 1))
}

// What one value of a tune costs: 100 games of the liar, as tune plays them at a value.
#[library_benchmark]
fn tune_evaluation() -> u64 {
    black_box(simulated(&["liar"], 100))
}

// The five shipped packs loaded and checked, as `serve` and `check` load them.
#[library_benchmark]
fn load_five_packs() -> usize {
    let engine = Engine::builder(root()).build();
    let loaded = counted(|| engine.packs().load_all().unwrap());
    assert!(loaded.iter().all(|(_, r)| r.is_ok()), "a pack did not load");
    black_box(loaded.len())
}

library_benchmark_group!(
    name = paths;
    benchmarks = pirate_turn_in_memory, pirate_turn_on_sqlite, http_turn, simulated_game, tune_evaluation,
        load_five_packs
);

main!(
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::with_args(["--instr-atstart=no"]).entry_point(EntryPoint::None));
    library_benchmark_groups = paths
);

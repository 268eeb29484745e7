//! The turn the Python and Node packages play, played from Rust: a pirate session on its stand-in
//! model in memory, each turn given as a line a person typed and its state read after it, as
//! `Session.turn` does in both packages. `bench/bindings.py` and `bench/bindings.js` time the same
//! turns through the packages; `bench/bindings.sh` runs the three back to back, and the
//! difference per turn is what a binding costs.
//!
//! `cargo bench -p ruleweave --bench bindings`.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

use ruleweave_testkit::repo_root;

/// A game's most turns here; the captain usually ends it sooner. (No `#[global_allocator]`: the
/// packages' native modules use the system's, as a module loaded into another program does.)
const TURNS: usize = 20;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let engine = rt.block_on(ruleweave_host::standin_engine(&repo_root())).unwrap();
    engine.packs().get("pirate").unwrap();
    let messages: Vec<String> =
        include_str!("../../tests/data/pirate_messages.txt").lines().map(str::to_owned).collect();
    let options = json!({"difficulty": "hard"});

    let mut group = c.benchmark_group("bindings");
    // On this thread, as Python's synchronous `turn` and Node's `turnSync` play it; awaited, as
    // an async caller's `Session::turn` plays it (handed to the engine's threads and back, as
    // Node's awaited `turn` is).
    for (name, awaited) in [
        ("pirate turn (stand-in model, in memory), from Rust", false),
        ("pirate turn (stand-in model, in memory), from Rust, awaited", true),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                // `iters` turns, in games of up to 20 turns (a game the captain ends starts again).
                let mut total = Duration::ZERO;
                let mut played = 0;
                while played < iters {
                    let mut session = rt.block_on(engine.open("pirate", options.as_object().unwrap())).unwrap();
                    for message in messages.iter().cycle().take(TURNS) {
                        if played == iters {
                            break;
                        }
                        let start = Instant::now();
                        let input = session.input_from(Value::String(message.clone())).unwrap();
                        let turn = if awaited {
                            rt.block_on(session.turn(input)).unwrap()
                        } else {
                            let _runtime = rt.enter();
                            session.blocking_turn(input).unwrap()
                        };
                        let turn = (turn, session.state());
                        let finished = turn.0.finished;
                        drop(turn);
                        total += start.elapsed();
                        played += 1;
                        if finished {
                            break;
                        }
                    }
                    rt.block_on(engine.delete(session.id())).unwrap();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(8));
    targets = bench
}
criterion_main!(benches);

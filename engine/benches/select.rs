//! The selector's machinery, scripted against native, on the interviewer's worked example
//! (`tests/select/`: 5 candidates, 1 veto and 6 weighted scorers that look their raw scores up in
//! a table). The scorers do almost nothing, so this is the worst case for the ratio: it times what
//! calling a Rhai scorer costs over calling a Rust one, and the pipeline around them. The
//! interview pack's scorers, which do real work, are not written yet.

use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::Engine;
use ruleweave::{ScorerImpl, Selection};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../../tests/select/natives.rs"]
mod worked;

fn bench(c: &mut Criterion) {
    let root = ruleweave_testkit::repo_root().join("tests/select");
    let engine = worked::natives(Engine::builder(root)).build();
    let mut sel = Selection::new(&engine, "worked", "next", &json!({}), 0).unwrap();
    let mut group = c.benchmark_group("selection (worked example: 5 candidates, 1 veto + 6 weighted)");
    group.bench_function("scripted", |b| b.iter(|| sel.run(Some(ScorerImpl::Script)).unwrap()));
    group.bench_function("native", |b| b.iter(|| sel.run(Some(ScorerImpl::Native)).unwrap()));
    group.finish();
    let mut group = c.benchmark_group("one scorer over 5 candidates (depth_breadth_balance)");
    group.bench_function("scripted", |b| {
        b.iter(|| sel.run_scorer("depth_breadth_balance", ScorerImpl::Script).unwrap())
    });
    group.bench_function("native", |b| b.iter(|| sel.run_scorer("depth_breadth_balance", ScorerImpl::Native).unwrap()));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

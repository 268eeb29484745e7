//! The selector's machinery, scripted against native, on seed 001's worked example
//! (`tests/select/`: 5 candidates, 1 veto and 6 weighted scorers that look their raw scores up in
//! a table). The scorers do almost nothing, so this is the worst case for the ratio: it times what
//! calling a Rhai scorer costs over calling a Rust one, and the pipeline around them. The
//! interview pack's scorers, which do real work, are not written yet.

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::select::{ScorerImpl, Selection};
use ruleweave::values::{Dynamic, Map};
use ruleweave::{Engine, ScorerContext, ScorerOutput};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn raw(key: &str, scorer: &str) -> f64 {
    match (key, scorer) {
        ("deepen", _) => 0.85,
        ("broaden", "coverage_gap" | "engagement") => 1.2,
        ("broaden", "ambiguity" | "novelty") => 1.0,
        ("broaden", "depth_breadth_balance") => 0.6,
        ("broaden", _) => 0.4,
        ("synthesis", _) => 0.95,
        _ => 1.1,
    }
}

fn key(ctx: &ScorerContext<'_>) -> String {
    let id = ctx.strategy_id().to_string();
    match ctx.focus.get("element") {
        Some(e) if id == "cover_element" => format!("{id}/{e}"),
        _ => id,
    }
}

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/select");
    let engine = Engine::builder(root)
        .native_scorer("table", |ctx: &ScorerContext<'_>| {
            let name = ctx.params.get("name").map(|n| n.to_string()).unwrap_or_default();
            Ok(ScorerOutput {
                score: raw(&key(ctx), &name),
                reasoning: format!("the table's {name}"),
                ..Default::default()
            })
        })
        .native_scorer("table_veto", |ctx: &ScorerContext<'_>| {
            let k = key(ctx);
            let vetoed = ctx.state["vetoed"].clone().into_array().unwrap_or_default();
            let mut signals = Map::new();
            signals.insert("key".into(), k.clone().into());
            Ok(ScorerOutput {
                veto: vetoed.iter().any(|v| v.to_string() == k),
                reasoning: format!("the test vetoes {}", Dynamic::from_array(vetoed.clone())),
                signals,
                ..Default::default()
            })
        })
        .build();
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

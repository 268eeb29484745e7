//! The worked example's table scorers and its `uncovered` focus generator in Rust
//! (`tests/select/config/worked.yaml`), shared by `engine/tests/select.rs` and
//! `engine/benches/select.rs`.

use ruleweave::values::{Dynamic, Map};
use ruleweave::{EngineBuilder, FocusContext, ScorerContext, ScorerOutput};

/// How many times the native `uncovered` has run (tests check which generator ran).
pub static UNCOVERED_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The raw values of `config/worked.yaml`'s table, for the native twins.
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
    match ctx.focus.get("element_id") {
        Some(e) if id == "cover_element" => format!("{id}/{e}"),
        _ => id,
    }
}

/// An engine with native twins of the pack's table scorers and of `focus.rhai::uncovered`.
pub fn natives(builder: EngineBuilder) -> EngineBuilder {
    builder
        .native_focus("uncovered", |ctx: &FocusContext<'_>| {
            UNCOVERED_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let uncovered = ctx.state["uncovered"].clone().into_array().unwrap_or_default();
            Ok(uncovered
                .into_iter()
                .map(|e| {
                    let mut f = Map::new();
                    f.insert("focus_type".into(), "coverage".into());
                    f.insert("focus_description".into(), format!("Cover the element {e}").into());
                    f.insert("element_id".into(), e);
                    f
                })
                .collect())
        })
        .native_scorer("table", |ctx: &ScorerContext<'_>| {
            let name = ctx.params.get("name").map(|n| n.to_string()).unwrap_or_default();
            Ok(ScorerOutput {
                raw_score: raw(&key(ctx), &name),
                reasoning: format!("the table's {name}"),
                ..Default::default()
            })
        })
        .native_scorer("table_veto", |ctx: &ScorerContext<'_>| {
            let k = key(ctx);
            let vetoed = ctx.state["vetoed"].clone().into_array().unwrap_or_default();
            let shown = Dynamic::from_array(vetoed.clone()).to_string();
            let mut signals = Map::new();
            signals.insert("key".into(), k.clone().into());
            Ok(ScorerOutput {
                is_veto: vetoed.iter().any(|v| v.to_string() == k),
                reasoning: format!("the test vetoes {shown}"),
                signals,
                ..Default::default()
            })
        })
}

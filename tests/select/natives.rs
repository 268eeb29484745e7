//! The worked example's table scorers in Rust (`tests/select/config/worked.yaml`), shared by
//! `engine/tests/select.rs` and `engine/benches/select.rs`.

use ruleweave::values::{Dynamic, Map};
use ruleweave::{EngineBuilder, ScorerContext, ScorerOutput};

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

/// An engine with native twins of the pack's table scorers.
pub fn natives(builder: EngineBuilder) -> EngineBuilder {
    builder
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

//! A native node: a step written in Rust that a manifest uses as `native: <name>`.
//!
//! `cargo run -p ruleweave-engine --example native_node`

use ruleweave::values::{Dynamic, Map};
use ruleweave::{Engine, NodeContext};
use serde_json::json;

const MANIFEST: &str = r#"
state:
  rolls: {type: list, reducer: append}
  total: {type: int, reducer: add}
input:
  dice: {type: int, default: 2}
output: [rolls, total]
graph:
  nodes:
    roll: {native: roll_dice}
  edges:
    - START -> roll
    - roll -> END
"#;

/// Rolls `dice` six-sided dice from a tiny deterministic generator seeded by the turn's state.
fn roll_dice(ctx: &NodeContext<'_>) -> ruleweave::Result<Map> {
    let dice = ctx.input().get("dice").and_then(|d| d.as_int().ok()).unwrap_or(2);
    let mut seed = ctx.get("total").and_then(|t| t.as_int().ok()).unwrap_or(7) as u64 + 1;
    let mut sum = 0;
    for _ in 0..dice {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        sum += (seed >> 33) as i64 % 6 + 1;
    }
    let mut updates = Map::new();
    updates.insert("rolls".into(), Dynamic::from_int(sum));
    updates.insert("total".into(), Dynamic::from_int(sum));
    Ok(updates)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = tempfile::tempdir()?;
    std::fs::create_dir_all(root.path().join("config"))?;
    std::fs::write(root.path().join("config/dice.yaml"), MANIFEST)?;

    let engine = Engine::builder(root.path()).native_node("roll_dice", roll_dice).build();
    let mut game = engine.open("dice", &Default::default()).await?;
    for dice in [2, 3, 1] {
        let turn = game.turn(json!({ "dice": dice })).await?;
        println!("rolled {dice}: {}", turn.output);
    }
    Ok(())
}

//! The designer's graph builder, scripted (Rhai) against native (Rust), on the same 6-scene
//! design: 18 mechanics, 6 of them nested children, every trigger kind. Both take the design as
//! JSON and return the plan as JSON, so both pay the same conversions.

use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::{Engine, ScriptCall};
use ruleweave_natives::designer::build_game_graph;
use serde_json::{Value, json};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Six scenes of three mechanics each; every scene's first mechanic has a child.
fn design() -> Value {
    let triggers = ["completion", "score_threshold", "user_choice", "time_elapsed"];
    let labels = ["Left Atrium", "Right Atrium", "Left Ventricle", "Right Ventricle"];
    let scenes: Vec<Value> = (0..6)
        .map(|s| {
            let mechanics: Vec<Value> = (0..2)
                .map(|k| {
                    let mut m = json!({
                        "mechanic_type": if k == 0 { "drag_drop" } else { "click_to_identify" },
                        "instruction_text": "Drag each label to the correct chamber.",
                        "zone_labels_used": labels,
                        "content_brief": {"generation_goal": "Labels for the four chambers", "key_concepts": labels},
                        "expected_item_count": 4,
                        "points_per_item": 10,
                        "advance_trigger": triggers[(s + k) % 4],
                        "advance_trigger_value": if (s + k) % 4 == 1 { json!(0.75) } else { Value::Null },
                        "is_timed": k == 1,
                        "time_limit_seconds": if k == 1 { json!(60) } else { Value::Null },
                        "children": null,
                    });
                    if k == 0 {
                        m["children"] = json!([{
                            "mechanic_type": "click_to_identify", "instruction_text": "Now the valves.",
                            "zone_labels_used": ["Left Atrium"], "content_brief": {"generation_goal": "Valves"},
                            "expected_item_count": 2, "points_per_item": 5, "advance_trigger": "completion",
                            "advance_trigger_value": null, "is_timed": false, "time_limit_seconds": null, "children": null,
                        }]);
                    }
                    m
                })
                .collect();
            json!({
                "title": format!("Scene {s}"), "learning_goal": "Name the chambers.", "narrative_intro": "",
                "zone_labels": labels, "needs_diagram": true,
                "image_spec": {"description": "A heart", "must_include_structures": labels},
                "mechanics": mechanics, "transition_to_next": "score_gate", "transition_min_score_pct": 0.6,
            })
        })
        .collect();
    json!({
        "title": "Heart Anatomy", "subject": "Biology", "difficulty": "beginner", "estimated_duration_minutes": 20,
        "narrative_intro": "In we go.", "completion_message": "Done.", "all_zone_labels": labels,
        "distractor_labels": [], "label_hierarchy": null, "scenes": scenes,
    })
}

fn bench(c: &mut Criterion) {
    let root = ruleweave_testkit::repo_root();
    let engine = Engine::builder(root).build();
    let scripted = ScriptCall::new(&engine, "designer", "builder.rhai::build_game_graph", 1).unwrap();
    let design = design();
    let args = [design.clone()];
    assert_eq!(scripted.call(&args).unwrap(), build_game_graph(&design).unwrap());
    let mut g = c.benchmark_group("designer/build_game_graph (6 scenes, 18 mechanics)");
    g.bench_function("scripted", |b| b.iter(|| scripted.call(&args).unwrap()));
    g.bench_function("native", |b| b.iter(|| build_game_graph(&design).unwrap()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

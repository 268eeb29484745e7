//! The designer's graph builder on the four worked examples of its design (fields the examples
//! leave out filled with neutral values), scripted and native; then the two held equal over
//! generated designs.

use std::sync::OnceLock;

use proptest::prelude::*;
use ruleweave::{Engine, ScriptCall};
use ruleweave_natives::designer::{DesignError, build_game_graph};
use serde_json::{Value, json};

fn builder() -> &'static ScriptCall {
    static CALL: OnceLock<ScriptCall> = OnceLock::new();
    CALL.get_or_init(|| {
        let root = ruleweave_testkit::repo_root();
        let engine = Engine::builder(root).build();
        ScriptCall::new(&engine, "designer", "builder.rhai::build_game_graph", 1).unwrap()
    })
}

/// Both builders' plans of `design`, asserted equal.
fn plan(design: &Value) -> Value {
    let scripted = builder().call(std::slice::from_ref(design)).unwrap();
    let native = build_game_graph(design).unwrap();
    assert_eq!(scripted, native, "the Rhai builder and its twin disagree");
    scripted
}

/// A design whose required fields the example left out get neutral values.
fn filled(mut design: Value) -> Value {
    let d = design.as_object_mut().unwrap();
    for (k, v) in [
        ("title", json!("Example")),
        ("subject", json!("Biology")),
        ("difficulty", json!("beginner")),
        ("estimated_duration_minutes", json!(10)),
        ("narrative_intro", json!("")),
        ("completion_message", json!("")),
        ("all_zone_labels", json!([])),
    ] {
        d.entry(k).or_insert(v);
    }
    for scene in d["scenes"].as_array_mut().unwrap() {
        let s = scene.as_object_mut().unwrap();
        s.entry("learning_goal").or_insert(json!(""));
        s.entry("zone_labels").or_insert(json!([]));
        s.entry("needs_diagram").or_insert(json!(false));
        for m in s["mechanics"].as_array_mut().unwrap() {
            fill_mechanic(m);
        }
    }
    design
}

fn fill_mechanic(m: &mut Value) {
    let o = m.as_object_mut().unwrap();
    o.entry("instruction_text").or_insert(json!("Play."));
    o.entry("content_brief").or_insert(json!({"generation_goal": "Items"}));
    if let Some(children) = o.get_mut("children").and_then(Value::as_array_mut) {
        for c in children {
            fill_mechanic(c);
        }
    }
}

/// `(id, type, max_score, is_terminal, parent)` of each mechanic of scene `i`.
fn mechanics(plan: &Value, i: usize) -> Vec<(String, String, i64, bool, Option<String>)> {
    plan["scenes"][i]["mechanics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mechanic_id"].as_str().unwrap().to_owned(),
                m["mechanic_type"].as_str().unwrap().to_owned(),
                m["max_score"].as_i64().unwrap(),
                m["is_terminal"].as_bool().unwrap(),
                m["parent_mechanic_id"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// `from → to (trigger, value)` of each connection of scene `i`.
fn connections(plan: &Value, i: usize) -> Vec<String> {
    plan["scenes"][i]["mechanic_connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let value = if c["trigger_value"].is_null() { String::new() } else { format!(", {}", c["trigger_value"]) };
            format!(
                "{} → {} ({}{value})",
                c["from_mechanic_id"].as_str().unwrap(),
                c["to_mechanic_id"].as_str().unwrap(),
                c["trigger"].as_str().unwrap()
            )
        })
        .collect()
}

fn m(
    id: &str,
    ty: &str,
    max: i64,
    terminal: bool,
    parent: Option<&str>,
) -> (String, String, i64, bool, Option<String>) {
    (id.into(), ty.into(), max, terminal, parent.map(str::to_owned))
}

#[test]
fn example_1_simple_sequential() {
    let chambers = ["Left Ventricle", "Right Ventricle", "Left Atrium", "Right Atrium"];
    let p = plan(&filled(json!({
        "title": "Heart Anatomy",
        "scenes": [{
            "title": "Label the Heart",
            "zone_labels": chambers,
            "needs_diagram": true,
            "image_spec": {"description": "Cross-section of human heart", "must_include_structures": chambers},
            "mechanics": [
                {"mechanic_type": "drag_drop", "instruction_text": "Drag each label to the correct chamber.",
                 "zone_labels_used": chambers, "content_brief": {"generation_goal": "Labels for 4 heart chambers"},
                 "expected_item_count": 4, "advance_trigger": "completion"},
                {"mechanic_type": "click_to_identify", "instruction_text": "Click the chamber described.",
                 "zone_labels_used": chambers,
                 "content_brief": {"generation_goal": "Functional prompts for 4 chambers", "prompt_style": "function"},
                 "expected_item_count": 4}
            ]
        }]
    })));
    assert_eq!(
        mechanics(&p, 0),
        [m("s1_m1", "drag_drop", 40, false, None), m("s1_m2", "click_to_identify", 40, true, None)]
    );
    assert_eq!(
        connections(&p, 0),
        ["scene_start → s1_m1 (auto)", "s1_m1 → s1_m2 (completion)", "s1_m2 → scene_end (completion)"]
    );
    let s = &p["scenes"][0];
    assert_eq!(
        (&s["scene_id"], &s["starting_mechanic_id"], &s["scene_max_score"]),
        (&json!("scene_1"), &json!("s1_m1"), &json!(80))
    );
    assert_eq!(s["transition_to_next"], Value::Null, "the only scene is the last");
    assert_eq!(p["total_max_score"], json!(80));
    assert_eq!(p["title"], json!("Heart Anatomy"));
}

#[test]
fn example_2_hierarchical() {
    let p = plan(&filled(json!({
        "scenes": [{
            "title": "Body Systems",
            "zone_labels": ["Heart", "Lungs", "Brain", "Left Ventricle", "Right Ventricle", "Bronchi", "Alveoli"],
            "mechanics": [{
                "mechanic_type": "drag_drop",
                "instruction_text": "Label the major organs.",
                "zone_labels_used": ["Heart", "Lungs", "Brain"],
                "content_brief": {"generation_goal": "Labels for 3 major organs"},
                "expected_item_count": 3,
                "advance_trigger": "completion",
                "children": [
                    {"mechanic_type": "click_to_identify", "instruction_text": "Now identify the parts of the heart.",
                     "zone_labels_used": ["Left Ventricle", "Right Ventricle"],
                     "content_brief": {"generation_goal": "Prompts for heart sub-parts"},
                     "expected_item_count": 2, "advance_trigger": "completion"},
                    {"mechanic_type": "click_to_identify", "instruction_text": "Now identify the parts of the lungs.",
                     "zone_labels_used": ["Bronchi", "Alveoli"],
                     "content_brief": {"generation_goal": "Prompts for lung sub-parts"},
                     "expected_item_count": 2}
                ]
            }]
        }]
    })));
    assert_eq!(
        mechanics(&p, 0),
        [
            m("s1_m1", "drag_drop", 30, false, None),
            m("s1_m2", "click_to_identify", 20, false, Some("s1_m1")),
            m("s1_m3", "click_to_identify", 20, true, Some("s1_m1")),
        ]
    );
    assert_eq!(
        connections(&p, 0),
        [
            "scene_start → s1_m1 (auto)",
            "s1_m1 → s1_m2 (parent_completion)",
            "s1_m2 → s1_m3 (completion)",
            "s1_m3 → scene_end (completion)",
        ]
    );
    assert_eq!(p["scenes"][0]["starting_mechanic_id"], json!("s1_m1"));
    assert_eq!(p["scenes"][0]["scene_max_score"], json!(70));
}

#[test]
fn example_3_score_gated_and_timed() {
    let p = plan(&filled(json!({
        "scenes": [{
            "title": "Speed Round",
            "mechanics": [
                {"mechanic_type": "drag_drop", "instruction_text": "Label as many parts as you can!",
                 "expected_item_count": 8, "is_timed": true, "time_limit_seconds": 60,
                 "advance_trigger": "score_threshold", "advance_trigger_value": 0.75},
                {"mechanic_type": "sequencing", "instruction_text": "Now sequence the process.", "expected_item_count": 5}
            ]
        }]
    })));
    assert_eq!(mechanics(&p, 0), [m("s1_m1", "drag_drop", 80, false, None), m("s1_m2", "sequencing", 50, true, None)]);
    let first = &p["scenes"][0]["mechanics"][0];
    assert_eq!((&first["is_timed"], &first["time_limit_seconds"]), (&json!(true), &json!(60)));
    assert_eq!(
        connections(&p, 0),
        ["scene_start → s1_m1 (auto)", "s1_m1 → s1_m2 (score_threshold, 0.75)", "s1_m2 → scene_end (completion)"]
    );
    assert_eq!(p["scenes"][0]["scene_max_score"], json!(130));
}

#[test]
fn example_4_multi_scene_with_content_only_mechanics() {
    let p = plan(&filled(json!({
        "scenes": [
            {"title": "Learn the Parts", "needs_diagram": true,
             "mechanics": [{"mechanic_type": "drag_drop", "expected_item_count": 6}], "transition_to_next": "auto"},
            {"title": "Test Your Memory", "needs_diagram": false,
             "mechanics": [{"mechanic_type": "memory_match", "expected_item_count": 6}],
             "transition_to_next": "score_gate", "transition_min_score_pct": 0.6},
            {"title": "Clinical Scenario", "needs_diagram": false,
             "mechanics": [{"mechanic_type": "branching_scenario", "expected_item_count": 4}]}
        ]
    })));
    assert_eq!(mechanics(&p, 0), [m("s1_m1", "drag_drop", 60, true, None)]);
    assert_eq!(mechanics(&p, 1), [m("s2_m1", "memory_match", 60, true, None)]);
    assert_eq!(mechanics(&p, 2), [m("s3_m1", "branching_scenario", 40, true, None)]);
    let ids: Vec<&Value> = p["scenes"].as_array().unwrap().iter().map(|s| &s["scene_id"]).collect();
    assert_eq!(ids, [&json!("scene_1"), &json!("scene_2"), &json!("scene_3")]);
    assert_eq!(p["scenes"][0]["transition_to_next"], json!({"transition_type": "auto", "min_score_pct": null}));
    assert_eq!(p["scenes"][1]["transition_to_next"], json!({"transition_type": "score_gate", "min_score_pct": 0.6}));
    assert_eq!(p["scenes"][2]["transition_to_next"], Value::Null, "the final scene has no transition");
    assert_eq!(connections(&p, 2), ["scene_start → s3_m1 (auto)", "s3_m1 → scene_end (completion)"]);
    assert_eq!(p["total_max_score"], json!(160));
}

#[test]
fn a_scene_without_mechanics_is_an_error_in_both() {
    let design = filled(json!({"scenes": [{"title": "Empty", "mechanics": []}]}));
    assert!(
        builder().call(std::slice::from_ref(&design)).unwrap_err().to_string().contains("scene 1 has no mechanics")
    );
    let refused = build_game_graph(&design).unwrap_err();
    assert_eq!(
        (refused.to_string(), refused),
        ("scene 1 has no mechanics".to_owned(), DesignError::NoMechanics { scene: 1 })
    );
}

const TYPES: &[&str] = &["drag_drop", "click_to_identify", "sequencing", "memory_match", "branching_scenario"];
const TRIGGERS: &[&str] = &["completion", "score_threshold", "user_choice", "time_elapsed"];

fn mechanic(depth: u32) -> BoxedStrategy<Value> {
    let leaf = (
        prop::sample::select(TYPES),
        1i64..20,
        prop::option::of(1i64..30),
        prop::option::of(prop::sample::select(TRIGGERS)),
        prop::option::of(prop::sample::select(&[0.5, 0.75, 0.8][..])),
        prop::option::of((any::<bool>(), prop::option::of(10i64..120))),
    )
        .prop_map(|(ty, count, points, trigger, value, timed)| {
            let mut m = json!({
                "mechanic_type": ty, "instruction_text": "Play.", "content_brief": {"generation_goal": "g"},
                "expected_item_count": count, "zone_labels_used": ["A"],
            });
            if let Some(p) = points {
                m["points_per_item"] = json!(p);
            }
            if let Some(t) = trigger {
                m["advance_trigger"] = json!(t);
            }
            if let Some(v) = value {
                m["advance_trigger_value"] = json!(v);
            }
            if let Some((is_timed, secs)) = timed {
                m["is_timed"] = json!(is_timed);
                m["time_limit_seconds"] = json!(secs);
            }
            m
        });
    if depth == 0 {
        return leaf.boxed();
    }
    (leaf, prop::option::of(prop::collection::vec(mechanic(depth - 1), 0..3)))
        .prop_map(|(mut m, children)| {
            if let Some(c) = children {
                m["children"] = json!(c);
            }
            m
        })
        .boxed()
}

fn design() -> impl Strategy<Value = Value> {
    let scene = (
        prop::collection::vec(mechanic(2), 1..4),
        prop::option::of(prop::sample::select(&["auto", "button", "score_gate"][..])),
        prop::option::of(prop::sample::select(&[0.5, 0.6][..])),
    )
        .prop_map(|(mechanics, transition, pct)| {
            let mut s = json!({"title": "S", "learning_goal": "", "zone_labels": ["A"], "needs_diagram": true, "mechanics": mechanics});
            if let Some(t) = transition {
                s["transition_to_next"] = json!(t);
            }
            if let Some(p) = pct {
                s["transition_min_score_pct"] = json!(p);
            }
            s
        });
    prop::collection::vec(scene, 1..7).prop_map(|scenes| filled(json!({"scenes": scenes})))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_twin_builds_what_the_script_builds(design in design()) {
        let scripted = builder().call(std::slice::from_ref(&design)).unwrap();
        let native = build_game_graph(&design).unwrap();
        prop_assert_eq!(scripted, native);
    }
}

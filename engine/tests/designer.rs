//! The designer pack: the validate-and-retry loop (a design wrong twice then right, wrong three
//! times, a reply that breaks the schema), each kind of validator issue, a builder bug falling
//! back to a sequential graph, and the blueprint's mapping, with the designer model's replies
//! given in order and every other model failing (so their fallbacks answer).

use crate::support;

use ruleweave::{Engine, ErrorKind, Event};
use serde_json::{Value, json};
use support::{Canned, copy_of, engine, repo_root};

/// Example 1 of the design document, whole: two mechanics on a heart diagram.
fn heart() -> Value {
    let chambers = ["Left Ventricle", "Right Ventricle", "Left Atrium", "Right Atrium"];
    json!({
        "title": "Heart Anatomy",
        "subject": "Biology",
        "difficulty": "beginner",
        "estimated_duration_minutes": 10,
        "narrative_intro": "Inside the heart.",
        "completion_message": "Well done.",
        "all_zone_labels": chambers,
        "scenes": [{
            "title": "Label the Heart",
            "learning_goal": "Name the four chambers.",
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
    })
}

/// The heart design with a label its scene does not have.
fn with_aorta() -> Value {
    let mut d = heart();
    d["scenes"][0]["mechanics"][1]["zone_labels_used"] = json!(["Left Ventricle", "Aorta"]);
    d
}

const AORTA: &str = "Mechanic s1_m2 references zone label 'Aorta' not in scene zone_labels. This is a game designer error — retry game_designer.";

async fn ask(engine: &Engine, input: Value) -> ruleweave::Result<ruleweave::TurnResult> {
    let mut s = engine.open("designer", &serde_json::Map::new()).await.unwrap();
    s.turn(input).await
}

/// The designer model's requests: the last user message of each.
fn designer_prompts(canned: &Canned) -> Vec<String> {
    canned.asked("designer").iter().map(|r| r.messages.last().unwrap().content.clone()).collect()
}

#[tokio::test]
async fn a_design_wrong_twice_then_right_takes_three_designer_calls() {
    let canned = Canned::new();
    canned.reply("designer", with_aorta().to_string()).reply("designer", with_aorta().to_string());
    canned.reply("designer", heart().to_string());
    let r = ask(&engine(&canned), json!({"question": "the chambers of the heart"})).await.unwrap();
    let o = &r.output;
    assert_eq!(o["status"], json!("complete"));
    assert_eq!(o["attempts"], json!(3));
    assert_eq!(
        o["validation"],
        json!({"passed": true, "score": 1.0, "issues": [], "is_builder_bug": false, "is_design_issue": false})
    );
    let prompts = designer_prompts(&canned);
    assert_eq!(prompts.len(), 3);
    assert!(!prompts[0].contains("Your design has these issues"), "the first request has no feedback");
    for p in &prompts[1..] {
        assert!(p.contains("Your design has these issues:") && p.contains(AORTA), "feedback names the issue: {p}");
        assert!(p.contains("Please fix them in your next attempt."));
    }
    assert_eq!(o["plan"]["total_max_score"], json!(80));
}

#[tokio::test]
async fn a_design_wrong_three_times_is_rejected_after_two_retries() {
    let canned = Canned::new();
    for _ in 0..4 {
        canned.reply("designer", with_aorta().to_string());
    }
    let r = ask(&engine(&canned), json!({"question": "the chambers of the heart"})).await.unwrap();
    let o = &r.output;
    assert_eq!(o["status"], json!("design_rejected"));
    assert_eq!(o["attempts"], json!(3));
    assert_eq!(canned.asked("designer").len(), 3, "two retries, not more");
    assert_eq!(o["validation"]["issues"], json!([AORTA]));
    assert_eq!((&o["validation"]["is_design_issue"], &o["validation"]["score"]), (&json!(true), &json!(0.9)));
    assert_eq!(o["blueprint"], Value::Null);
    assert!(canned.asked("writer").is_empty(), "no content for a rejected design");
}

#[tokio::test]
async fn a_reply_that_breaks_the_schema_is_sent_back_with_the_errors() {
    let canned = Canned::new();
    let mut broken = heart();
    broken["difficulty"] = json!("expert");
    broken["scenes"][0]["mechanics"][0]["expected_item_count"] = json!(0);
    canned.reply("designer", broken.to_string()).reply("designer", heart().to_string());
    let r = ask(&engine(&canned), json!({"question": "the chambers of the heart"})).await.unwrap();
    assert_eq!(r.output["status"], json!("complete"));
    assert_eq!(r.output["attempts"], json!(1), "a schema retry is part of one designer run");
    let asked = canned.asked("designer");
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].schema.as_ref().map(|s| s.name.as_str()), Some("design"));
    let m = &asked[1].messages;
    assert_eq!(m[m.len() - 2].role, "assistant");
    assert_eq!(m[m.len() - 2].content, broken.to_string(), "the broken reply goes back as it was");
    let feedback = &m[m.len() - 1].content;
    assert!(feedback.starts_with("Your reply does not match the JSON Schema `design`:"), "{feedback}");
    assert!(feedback.contains("/difficulty: "), "{feedback}");
    assert!(
        feedback.contains("/scenes/0/mechanics/0/expected_item_count: 0 is less than the minimum of 1"),
        "{feedback}"
    );
    // The schema's defaults are filled in before the builder sees the design.
    assert_eq!(r.output["design"]["scenes"][0]["mechanics"][0]["points_per_item"], json!(10));
    assert_eq!(r.output["design"]["scenes"][0]["transition_to_next"], json!("auto"));
}

#[tokio::test]
async fn a_reply_that_never_matches_the_schema_fails_the_turn() {
    let canned = Canned::new();
    for _ in 0..3 {
        canned.reply("designer", "Here is a lovely game about hearts! {\"title\": 5}");
    }
    let engine = engine(&canned);
    let mut s = engine.open("designer", &serde_json::Map::new()).await.unwrap();
    let before = s.state();
    let err = s.turn(json!({"question": "hearts"})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Llm);
    assert!(err.to_string().contains("does not match the JSON Schema `design`"), "{err}");
    assert_eq!(canned.asked("designer").len(), 3, "the first call and two retries");
    assert_eq!(s.state(), before, "the failed turn is undone");
}

/// A design given with the input: no designer model, the validator's verdict as it is.
async fn given(design: Value) -> (Value, Canned) {
    let canned = Canned::new();
    let r = ask(&engine(&canned), json!({"design": design})).await.unwrap();
    let canned = std::sync::Arc::try_unwrap(canned).ok().unwrap();
    (r.output, canned)
}

#[tokio::test]
async fn a_given_design_skips_the_designer_and_builds() {
    let (o, canned) = given(heart()).await;
    assert_eq!(o["status"], json!("complete"));
    assert_eq!(o["attempts"], json!(0));
    assert!(canned.asked("designer").is_empty() && canned.asked("analyzer").is_empty());
    assert_eq!(o["plan"]["scenes"][0]["starting_mechanic_id"], json!("s1_m1"));
}

#[tokio::test]
async fn each_kind_of_design_issue_is_found() {
    let mut no_diagram = heart();
    no_diagram["scenes"][0]["needs_diagram"] = json!(false);
    let mut empty_brief = heart();
    empty_brief["scenes"][0]["mechanics"][0]["content_brief"]["generation_goal"] = json!("  ");
    // A diagram mechanic that names no zones is no issue: it plays on the scene's.
    empty_brief["scenes"][0]["mechanics"][1]["zone_labels_used"] = json!([]);
    let cases = [
        (with_aorta(), vec![AORTA.to_owned()]),
        (
            no_diagram,
            vec![
                "Mechanic s1_m1 is drag_drop (needs diagram) but scene has needs_diagram=False. This is a game designer error — retry game_designer.".to_owned(),
                "Mechanic s1_m2 is click_to_identify (needs diagram) but scene has needs_diagram=False. This is a game designer error — retry game_designer.".to_owned(),
            ],
        ),
        (
            empty_brief,
            vec![
                "Mechanic s1_m1 has an empty content brief (generation_goal). This is a game designer error — retry game_designer.".to_owned(),
            ],
        ),
    ];
    for (design, issues) in cases {
        let (o, _) = given(design).await;
        let v = &o["validation"];
        assert_eq!(v["issues"], json!(issues));
        assert_eq!(v["score"], json!(1.0 - 0.1 * issues.len() as f64));
        assert_eq!(
            (&v["passed"], &v["is_design_issue"], &v["is_builder_bug"]),
            (&json!(false), &json!(true), &json!(false))
        );
        assert_eq!(o["status"], json!("design_rejected"), "a given design cannot be retried");
    }
}

#[tokio::test]
async fn a_design_that_breaks_the_schema_is_refused_with_every_problem() {
    let canned = Canned::new();
    let err = ask(&engine(&canned), json!({"design": {"title": "", "scenes": []}})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Input);
    let text = err.to_string();
    assert!(text.contains("the design does not match the GameDesignDocument schema"), "{text}");
    assert!(text.contains("/title: \"\" is shorter than 1 character"), "{text}");
    assert!(text.contains("/scenes: [] has less than 1 item"), "{text}");
    assert!(text.contains("\"subject\" is a required property"), "{text}");
}

#[tokio::test]
async fn a_builder_bug_falls_back_to_a_sequential_graph_and_is_never_retried() {
    let root = copy_of(&["config/designer.yaml", "scripts/designer", "prompts/designer", "schemas/designer"]);
    let builder = root.path().join("scripts/designer/builder.rhai");
    let source = std::fs::read_to_string(&builder).unwrap();
    // The bug: the first mechanic of every scene is marked terminal as well.
    let buggy = source.replace(
        "mechanics[-1].is_terminal = true;",
        "mechanics[-1].is_terminal = true;\n        mechanics[0].is_terminal = true;",
    );
    assert_ne!(buggy, source);
    std::fs::write(&builder, buggy).unwrap();
    let canned = Canned::new();
    canned.reply("designer", heart().to_string());
    let engine = Engine::builder(root.path()).provider(canned.clone()).build();
    let r = ask(&engine, json!({"question": "the chambers of the heart"})).await.unwrap();
    let o = &r.output;
    assert_eq!(o["validation"]["issues"], json!(["BUG IN BUILDER: scene scene_1 has 2 terminals"]));
    assert_eq!(o["validation"]["is_builder_bug"], json!(true));
    assert_eq!(canned.asked("designer").len(), 1, "a builder bug is not the designer's to fix");
    assert_eq!(o["plan_source"], json!("sequential_fallback"));
    let terminals: Vec<&Value> =
        o["plan"]["scenes"][0]["mechanics"].as_array().unwrap().iter().map(|m| &m["is_terminal"]).collect();
    assert_eq!(terminals, [&json!(false), &json!(true)]);
    assert_eq!(o["status"], json!("complete"));
    let logged = r.events.iter().any(|e| matches!(e, Event::Log { level, message, .. } if level == "warn" && message.contains("using a sequential graph")));
    assert!(logged, "the fallback is logged");
}

#[tokio::test]
async fn the_blueprint_maps_the_plan() {
    // Example 2's hierarchy (with a label hierarchy for the heart) and example 3's timed gate.
    let labels = ["Heart", "Lungs", "Brain", "Left Ventricle", "Right Ventricle", "Bronchi", "Alveoli"];
    let mech = |ty: &str, used: &[&str], n: i64| {
        json!({"mechanic_type": ty, "instruction_text": "Play.", "zone_labels_used": used,
               "content_brief": {"generation_goal": "Items"}, "expected_item_count": n})
    };
    let mut parent = mech("drag_drop", &["Heart", "Lungs", "Brain"], 3);
    parent["children"] = json!([
        mech("click_to_identify", &["Left Ventricle", "Right Ventricle"], 2),
        mech("click_to_identify", &["Bronchi", "Alveoli"], 2)
    ]);
    let mut timed = mech("drag_drop", &["Heart"], 8);
    timed["is_timed"] = json!(true);
    timed["time_limit_seconds"] = json!(60);
    timed["advance_trigger"] = json!("score_threshold");
    timed["advance_trigger_value"] = json!(0.75);
    let design = json!({
        "title": "Body Systems", "subject": "Biology", "difficulty": "beginner", "estimated_duration_minutes": 15,
        "narrative_intro": "", "completion_message": "", "all_zone_labels": labels,
        "label_hierarchy": {"Heart": ["Left Ventricle", "Right Ventricle"]},
        "scenes": [
            {"title": "Body Systems", "learning_goal": "", "zone_labels": labels, "needs_diagram": true, "mechanics": [parent],
             "transition_to_next": "score_gate", "transition_min_score_pct": 0.6},
            {"title": "Speed Round", "learning_goal": "", "zone_labels": ["Heart"], "needs_diagram": true,
             "mechanics": [timed, mech("sequencing", &[], 5)]}
        ]
    });
    let (o, _) = given(design).await;
    assert_eq!(o["status"], json!("complete"), "{:#}", o["validation"]);
    let bp = &o["blueprint"];
    let s1 = &bp["scenes"][0];
    assert_eq!(s1["startingMode"], json!("drag_drop"));
    assert_eq!(
        s1["modeTransitions"],
        json!([
            {"from_mode": "drag_drop", "to_mode": "click_to_identify", "from_id": "s1_m1", "to_id": "s1_m2", "trigger": "parent_completion"},
            {"from_mode": "click_to_identify", "to_mode": "click_to_identify", "from_id": "s1_m2", "to_id": "s1_m3", "trigger": "completion"}
        ])
    );
    // The heart's parts by the label hierarchy; the lungs' by their place among the children.
    assert_eq!(
        s1["zoneGroups"],
        json!([
            {"parentZoneId": "zone_heart", "childZoneIds": ["zone_left_ventricle", "zone_right_ventricle"], "parentMechanicId": "s1_m1", "childMechanicId": "s1_m2"},
            {"parentZoneId": "zone_lungs", "childZoneIds": ["zone_bronchi", "zone_alveoli"], "parentMechanicId": "s1_m1", "childMechanicId": "s1_m3"}
        ])
    );
    let s2 = &bp["scenes"][1];
    assert_eq!((&s2["timedChallengeWrappedMode"], &s2["timeLimitSeconds"]), (&json!("drag_drop"), &json!(60)));
    assert_eq!(s2["modeTransitions"][0]["trigger"], json!("score_threshold"));
    assert_eq!(s2["modeTransitions"][0]["trigger_value"], json!(0.75));
    assert_eq!(
        bp["sceneTransitions"],
        json!([{"from": "scene_1", "to": "scene_2", "type": "score_gate", "condition": {"min_score_pct": 0.6}}])
    );
    assert_eq!(bp["totalMaxScore"], json!(70 + 130));
    assert_eq!(o["blueprint_validation"], json!({"passed": true, "issues": []}));
    // No writer or illustrator answered here: every mechanic and diagram is a marked placeholder.
    assert_eq!(s1["mechanics"][0]["placeholderContent"], json!(true));
    assert_eq!(s1["mechanics"][0]["items"].as_array().unwrap().len(), 3);
    assert_eq!(s1["diagram"]["placeholderZones"], json!(true));
    assert_eq!(s1["diagram"]["zones"].as_array().unwrap().len(), labels.len());
}

#[tokio::test]
async fn the_stand_in_makes_a_whole_game_for_any_question() {
    let engine = Engine::builder(repo_root()).build();
    let mut s = engine.open("designer", &serde_json::Map::new()).await.unwrap();
    let r = s.turn(json!("photosynthesis in plants")).await.unwrap();
    let o = &r.output;
    assert_eq!(o["status"], json!("complete"));
    assert_eq!(o["validation"]["passed"], json!(true));
    assert_eq!(o["blueprint_validation"]["passed"], json!(true));
    assert_eq!(o["plan"]["scenes"].as_array().unwrap().len(), 2);
    assert_eq!(o["blueprint"]["scenes"][0]["mechanics"][0]["placeholderContent"], json!(false));
    let phases: Vec<&String> = o["tokens"].as_object().unwrap().keys().collect();
    assert_eq!(phases, ["assets", "content", "design", "understanding"]);
    assert_eq!(o["tokens"]["content"]["calls"], json!(4), "one content call per mechanic");
    assert!(o["tokens"]["design"]["completion_tokens"].as_i64().unwrap() > 0);
}

/// Content for a heart mechanic with `n` items on its chambers.
fn content(n: usize) -> String {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"prompt": format!("Chamber {i}?"), "answer": "Left Atrium", "zone_label": "Left Atrium"}))
        .collect();
    json!({"items": items, "feedback": {"correct": "Yes!", "incorrect": "No."}}).to_string()
}

#[tokio::test]
async fn content_that_fails_its_checks_is_rewritten_for_that_mechanic_only() {
    let canned = Canned::new();
    // Two mechanics, asked in item order: the first writes 3 items where 4 are expected.
    canned.reply("writer", content(3)).reply("writer", content(4)).reply("writer", content(4));
    let r = ask(&engine(&canned), json!({"design": heart()})).await.unwrap();
    let asked = canned.asked("writer");
    assert_eq!(asked.len(), 3, "two mechanics, then the one that failed");
    let retry = &asked[2].messages.last().unwrap().content;
    assert!(retry.contains("Mechanic s1_m1: drag_drop"), "{retry}");
    assert!(
        retry.contains("Your last content for this mechanic had these problems:\n- expected 4 items, got 3"),
        "{retry}"
    );
    let s = &r.output["blueprint"]["scenes"][0];
    for m in s["mechanics"].as_array().unwrap() {
        assert_eq!(m["items"].as_array().unwrap().len(), 4, "{m}");
        assert_eq!(m["placeholderContent"], json!(false));
    }
}

/// The design examples 3 (score-gated and timed) and 4 (three scenes, two without a diagram),
/// as written: only the fields their excerpts leave out are filled in (titles, goals, briefs;
/// no zone labels anywhere). Both pass the validator and build the plans the examples give.
#[tokio::test]
async fn the_design_examples_three_and_four_build_as_written() {
    let whole = |scenes: Value| {
        let mut scenes = scenes;
        for scene in scenes.as_array_mut().unwrap() {
            scene["learning_goal"] = json!("Learn it.");
            scene["zone_labels"] = json!([]);
            if scene.get("needs_diagram").is_none() {
                scene["needs_diagram"] = json!(true);
            }
            for m in scene["mechanics"].as_array_mut().unwrap() {
                m["content_brief"] = json!({"generation_goal": "Items for it"});
                if m.get("instruction_text").is_none() {
                    m["instruction_text"] = json!("Play.");
                }
            }
        }
        json!({"title": "Heart", "subject": "Biology", "difficulty": "beginner", "estimated_duration_minutes": 10,
               "narrative_intro": "", "completion_message": "", "all_zone_labels": [], "scenes": scenes})
    };
    let three = whole(json!([{"title": "Speed Round", "mechanics": [
        {"mechanic_type": "drag_drop", "instruction_text": "Label as many parts as you can!", "expected_item_count": 8,
         "is_timed": true, "time_limit_seconds": 60, "advance_trigger": "score_threshold", "advance_trigger_value": 0.75},
        {"mechanic_type": "sequencing", "instruction_text": "Now sequence the process.", "expected_item_count": 5}]}]));
    let (o, _) = given(three).await;
    assert_eq!((&o["status"], &o["validation"]["passed"]), (&json!("complete"), &json!(true)), "{:#}", o["validation"]);
    let s1 = &o["plan"]["scenes"][0];
    let mechanics: Vec<(String, i64, bool)> = s1["mechanics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (m["mechanic_id"].as_str().unwrap().to_owned(), m["max_score"].as_i64().unwrap(), m["is_terminal"] == true)
        })
        .collect();
    assert_eq!(mechanics, [("s1_m1".to_owned(), 80, false), ("s1_m2".to_owned(), 50, true)]);
    assert_eq!(s1["mechanics"][0]["time_limit_seconds"], 60);
    let gate =
        s1["mechanic_connections"].as_array().unwrap().iter().find(|c| c["from_mechanic_id"] == "s1_m1").unwrap();
    assert_eq!(
        (&gate["to_mechanic_id"], &gate["trigger"], &gate["trigger_value"]),
        (&json!("s1_m2"), &json!("score_threshold"), &json!(0.75))
    );

    let four = whole(json!([
        {"title": "Learn the Parts", "needs_diagram": true, "mechanics": [{"mechanic_type": "drag_drop", "expected_item_count": 6}], "transition_to_next": "auto"},
        {"title": "Test Your Memory", "needs_diagram": false, "mechanics": [{"mechanic_type": "memory_match", "expected_item_count": 6}],
         "transition_to_next": "score_gate", "transition_min_score_pct": 0.6},
        {"title": "Clinical Scenario", "needs_diagram": false, "mechanics": [{"mechanic_type": "branching_scenario", "expected_item_count": 4}]}
    ]));
    let (o, _) = given(four).await;
    assert_eq!((&o["status"], &o["validation"]["passed"]), (&json!("complete"), &json!(true)), "{:#}", o["validation"]);
    let scores: Vec<i64> = o["plan"]["scenes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["mechanics"][0]["max_score"].as_i64().unwrap())
        .collect();
    assert_eq!(scores, [60, 60, 40]);
    assert_eq!(o["plan"]["total_max_score"], 160);
    assert_eq!(
        o["blueprint"]["sceneTransitions"],
        json!([{"from": "scene_1", "to": "scene_2", "type": "auto", "condition": null},
               {"from": "scene_2", "to": "scene_3", "type": "score_gate", "condition": {"min_score_pct": 0.6}}])
    );
}

/// The designer model is told the document's fields, every mechanic type the schema allows and
/// what the game client can play (capability_spec), with an example that is itself a design
/// that builds: an endpoint that ignores the schema still knows what to write.
#[tokio::test]
async fn the_designer_prompts_say_what_to_write() {
    let canned = Canned::new();
    canned.reply("designer", heart().to_string());
    ask(&engine(&canned), json!({"question": "the chambers of the heart"})).await.unwrap();
    let asked = canned.asked("designer");
    let system = &asked[0].messages[0].content;
    let user = &asked[0].messages.last().unwrap().content;
    let schema: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo_root().join("schemas/designer/design.yaml")).unwrap())
            .unwrap();
    for ty in schema["$defs"]["mechanic"]["properties"]["mechanic_type"]["enum"].as_array().unwrap() {
        let ty = ty.as_str().unwrap();
        assert!(system.contains(ty), "the system prompt names {ty}");
        assert!(user.contains(&format!("- {ty}: ")), "capability_spec tells what {ty} is");
    }
    for field in [
        "estimated_duration_minutes",
        "all_zone_labels",
        "needs_diagram",
        "zone_labels_used",
        "content_brief",
        "expected_item_count",
        "advance_trigger",
    ] {
        assert!(system.contains(field), "the system prompt names {field}");
    }
    assert!(user.contains("WHAT THE GAME CLIENT CAN PLAY (capability_spec)"), "{user}");
    let example: Value = serde_json::from_str(system.split("For example:\n").nth(1).unwrap()).unwrap();
    let (o, _) = given(example).await;
    assert_eq!(o["status"], "complete", "{:#}", o["validation"]);
}

/// Content that still fails its checks after its retries goes into the blueprint marked: the
/// output's `content_issues`, the mechanic's `contentIssues`, a note in the turn. The diagram
/// says the game client supplies its image, and what the image must show.
#[tokio::test]
async fn content_that_never_passes_is_marked_and_the_diagram_says_whose_image_it_is() {
    let canned = Canned::new();
    for _ in 0..4 {
        canned.reply("writer", content(3));
    }
    let r = ask(&engine(&canned), json!({"design": heart()})).await.unwrap();
    let o = &r.output;
    assert_eq!(o["content_issues"]["s1_m1"], json!(["expected 4 items, got 3"]));
    let m = &o["blueprint"]["scenes"][0]["mechanics"][0];
    assert_eq!(m["contentIssues"], json!(["expected 4 items, got 3"]));
    assert!(
        r.display.notes.iter().any(|n| n.contains("s1_m1's content still fails its checks")),
        "{:?}",
        r.display.notes
    );
    let diagram = &o["blueprint"]["scenes"][0]["diagram"];
    assert_eq!(diagram["imageSuppliedBy"], "client");
    assert_eq!(diagram["mustInclude"], json!(["Left Ventricle", "Right Ventricle", "Left Atrium", "Right Atrium"]));
}

//! The scoring pipeline on the interviewer's worked example (`tests/select/`): final scores, the winner,
//! vetoes, phases, scripted and native scorers agreeing, and a strategy added by YAML alone.

use crate::support;

use std::path::{Path, PathBuf};

use ruleweave::{Breakdown, Engine, Event, ScorerImpl, Selection};
use serde_json::{Value, json};

fn root() -> PathBuf {
    ruleweave_testkit::repo_root().join("tests/select")
}

/// A copy of the worked example to edit: its directory, its manifest's path and text.
fn worked_copy() -> (tempfile::TempDir, PathBuf, String) {
    let dir = support::copy_root("select");
    let config = dir.path().join("config/worked.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap();
    (dir, config, yaml)
}

#[path = "../../tests/select/natives.rs"]
mod worked;

/// An engine with native twins of the pack's table scorers.
fn engine(root: &Path) -> Engine {
    worked::natives(Engine::builder(root)).build()
}

fn finals(breakdown: &Breakdown) -> Vec<(String, Value)> {
    breakdown
        .candidates
        .iter()
        .map(|c| {
            let label = match c.focus["element_id"].as_str() {
                Some(e) => format!("{}/{e}", c.strategy),
                None => c.strategy.clone(),
            };
            let total = c.final_score.map_or(Value::Null, |f| json!((f * 1000.0).round() / 1000.0));
            (label, total)
        })
        .collect()
}

#[tokio::test]
async fn the_worked_example_picks_the_highest_final_score_ties_to_the_first() {
    let engine = engine(&root());
    let mut s = engine.open("worked", &Default::default()).await.unwrap();
    let turn = s.turn(json!({})).await.unwrap();
    let breakdown = turn
        .events
        .iter()
        .find_map(|e| match e {
            Event::Decision { node, breakdown } if node == "choose" => Some(breakdown.clone()),
            _ => None,
        })
        .expect("a decision event");
    assert_eq!((breakdown.phase.as_str(), breakdown.turn_count), ("exploratory", 3));
    // The design's table: 0.68, 1.08, 1.21, 1.21, 0.29 (0.285 unrounded).
    assert_eq!(
        finals(&breakdown),
        [
            ("deepen".to_owned(), json!(0.68)),
            ("broaden".to_owned(), json!(1.08)),
            ("cover_element/taste".to_owned(), json!(1.21)),
            ("cover_element/texture".to_owned(), json!(1.21)),
            ("synthesis".to_owned(), json!(0.285)),
        ]
    );
    // cover_element + taste wins: the highest final score, and generated before texture.
    assert_eq!(breakdown.winner, Some(2));
    let decision = &turn.output["decision"];
    assert_eq!(
        (&decision["strategy"]["id"], &decision["focus"]["element_id"]),
        (&json!("cover_element"), &json!("taste"))
    );
    assert_eq!(decision["strategy"]["prompt_hint"], "Ask about an element not yet covered.");

    // Candidate #2, (broaden, open), scorer by scorer as the design walks through it.
    let broaden = &breakdown.candidates[1];
    let r = |x: f64| (x * 1000.0).round() / 1000.0;
    let contributions: Vec<(String, f64, f64, f64)> = broaden
        .scores
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| (s.scorer.clone(), r(s.raw_score), r(s.weight), r(s.contribution)))
        .collect();
    let expected = [
        ("coverage_gap", 1.2, 0.2, 0.24),
        ("ambiguity", 1.0, 0.15, 0.15),
        ("depth_breadth_balance", 0.6, 0.2, 0.12),
        ("engagement", 1.2, 0.15, 0.18),
        ("strategy_diversity", 0.4, 0.15, 0.06),
        ("novelty", 1.0, 0.15, 0.15),
    ];
    assert_eq!(contributions, expected.map(|(a, b, c, d)| (a.to_owned(), b, c, d)));
    assert!((broaden.scorer_sum.unwrap() - 0.90).abs() < 1e-9);
    assert_eq!(broaden.phase_multiplier, Some(1.2));
    assert!(!broaden.vetoes[0].is_veto);
}

#[test]
fn scripted_and_native_scorers_decide_identically() {
    let engine = engine(&root());
    for state in [json!({}), json!({"vetoed": ["cover_element/taste", "deepen"]}), json!({"turn_count": 5})] {
        let mut sel = Selection::new(&engine, "worked", "next", &state, 0).unwrap();
        let scripted = sel.run(Some(ScorerImpl::Script)).unwrap();
        let native = sel.run(Some(ScorerImpl::Native)).unwrap();
        assert_eq!(scripted, native, "state {state}");
    }
}

#[test]
fn vetoes_reject_and_phases_multiply_only_the_strategies_they_name() {
    let engine = engine(&root());
    // A veto rejects its candidate with the reason; the tie now goes to texture.
    let mut sel = Selection::new(&engine, "worked", "next", &json!({"vetoed": ["cover_element/taste"]}), 0).unwrap();
    let b = sel.run(None).unwrap();
    assert_eq!(b.winner, Some(3));
    let taste = &b.candidates[2];
    assert_eq!((taste.vetoed, &taste.vetoes[0].signals["key"]), (true, &json!("cover_element/taste")));
    assert!(taste.final_score.is_none() && taste.scores.is_none(), "a vetoed candidate is not scored");

    // Turn 5 is focused: deepen × 1.3 = 1.105 beats cover_element's unmultiplied 1.10.
    let mut sel = Selection::new(&engine, "worked", "next", &json!({"turn_count": 5}), 0).unwrap();
    let b = sel.run(None).unwrap();
    assert_eq!(b.phase, "focused");
    assert_eq!(finals(&b)[0], ("deepen".to_owned(), json!(1.105)));
    assert_eq!(finals(&b)[2], ("cover_element/taste".to_owned(), json!(1.1)));
    assert_eq!(b.winner, Some(0));

    // Turn 10 and on is closing (the last phase lasts the rest).
    let mut sel = Selection::new(&engine, "worked", "next", &json!({"turn_count": 40}), 0).unwrap();
    assert_eq!(sel.run(None).unwrap().phase, "closing");

    // Everything vetoed: no winner, an empty decision.
    let all = json!({"vetoed": ["deepen", "broaden", "cover_element/taste", "cover_element/texture", "synthesis"]});
    let mut sel = Selection::new(&engine, "worked", "next", &all, 0).unwrap();
    assert_eq!(sel.run(None).unwrap().winner, None);

    // Each scorer alone, both ways.
    let mut sel = Selection::new(&engine, "worked", "next", &json!({}), 0).unwrap();
    for imp in [ScorerImpl::Script, ScorerImpl::Native] {
        assert_eq!(sel.run_scorer("depth_breadth_balance", imp).unwrap(), [0.85, 0.6, 1.1, 1.1, 0.95]);
    }
}

/// A batch scorer (`batch: true`) gets every candidate still in the running in one call and
/// returns one result each: the decision is the one the same scorers make a candidate at a time,
/// scripted or native, and a result list of the wrong shape is an error that says so.
#[test]
fn batch_scorers_take_every_candidate_in_one_call_and_decide_the_same() {
    let (dir, config, yaml) = worked_copy();
    let batch = yaml
        .replace("script: table.rhai::raw,", "script: table.rhai::raw_all, batch: true,")
        .replace("script: table.rhai::veto,", "script: table.rhai::veto_all, batch: true,");
    assert_eq!(batch.matches("batch: true").count(), 7);
    std::fs::write(&config, &batch).unwrap();
    let batch_engine = engine(dir.path());
    let one_by_one = engine(&root());
    for state in [json!({}), json!({"vetoed": ["cover_element/taste", "deepen"]}), json!({"turn_count": 5})] {
        let mut a = Selection::new(&batch_engine, "worked", "next", &state, 0).unwrap();
        let mut b = Selection::new(&one_by_one, "worked", "next", &state, 0).unwrap();
        let scripted = a.run(Some(ScorerImpl::Script)).unwrap();
        assert_eq!(scripted, b.run(Some(ScorerImpl::Script)).unwrap(), "state {state}");
        assert_eq!(scripted, a.run(Some(ScorerImpl::Native)).unwrap(), "state {state}");
    }
    // One scorer alone, over every candidate, as the benches time it.
    let mut a = Selection::new(&batch_engine, "worked", "next", &json!({}), 0).unwrap();
    let mut b = Selection::new(&one_by_one, "worked", "next", &json!({}), 0).unwrap();
    assert_eq!(a.run_scorer("novelty", ScorerImpl::Script).unwrap(), [0.85, 1.0, 1.1, 1.1, 0.95]);
    assert_eq!(b.run_scorer("novelty", ScorerImpl::Script).unwrap(), [0.85, 1.0, 1.1, 1.1, 0.95]);
    // Everything vetoed: the weighted scorers are not called with an empty list.
    let all = json!({"vetoed": ["deepen", "broaden", "cover_element/taste", "cover_element/texture", "synthesis"]});
    let mut sel = Selection::new(&batch_engine, "worked", "next", &all, 0).unwrap();
    assert_eq!(sel.run(Some(ScorerImpl::Script)).unwrap().winner, None);

    let table = dir.path().join("scripts/worked/table.rhai");
    let rhai = std::fs::read_to_string(&table).unwrap();
    let cases = [
        (
            "    out\n}\n\nfn veto_all",
            "    out.pop();\n    out\n}\n\nfn veto_all",
            "scorer `coverage_gap`: table.rhai::raw_all got 5 candidates and returned 4 results",
        ),
        (
            "    out\n}\n\nfn veto_all",
            "    1.0\n}\n\nfn veto_all",
            "scorer `coverage_gap`: table.rhai::raw_all is a batch scorer: it returns a list with one result per candidate",
        ),
        (
            "out.push(this.veto(c, params));",
            "out.push(2);",
            "a veto returns a bool or #{is_veto, ...}; this one returned an int",
        ),
    ];
    for (from, to, says) in cases {
        assert!(rhai.contains(from), "{from}");
        std::fs::write(&table, rhai.replacen(from, to, 1)).unwrap();
        let engine = engine(dir.path());
        let err = Selection::new(&engine, "worked", "next", &json!({}), 0)
            .unwrap()
            .run(Some(ScorerImpl::Script))
            .unwrap_err();
        assert!(err.detail().contains(says), "{to}: {err}");
        assert_eq!(err.origin().unwrap().file, "scripts/worked/table.rhai", "{err}");
    }
    // A bad result names its scorer and its candidate.
    std::fs::write(&table, rhai.replacen("out.push(this.veto(c, params));", "out.push(2);", 1)).unwrap();
    let broken = engine(dir.path());
    let err =
        Selection::new(&broken, "worked", "next", &json!({}), 0).unwrap().run(Some(ScorerImpl::Script)).unwrap_err();
    assert!(err.to_string().contains("scorer `listed`: table.rhai::veto_all, result 0 (candidate deepen)"), "{err}");
    std::fs::write(&table, &rhai).unwrap();

    // `batch: true` with nothing to call once is refused at load, at the scorer.
    std::fs::write(
        &config,
        batch.replace(
            "script: table.rhai::veto_all, batch: true, native: table_veto",
            "batch: true, native: table_veto",
        ),
    )
    .unwrap();
    let err = engine(dir.path()).packs().load("worked").unwrap_err();
    assert!(err.to_string().contains("scorer `listed` says `batch: true` but has no script to call once"), "{err}");
    assert_eq!(err.origin().unwrap().line, 36, "{err}");
}

/// A strategy's `focus_native:` twin makes its focuses when the run (or the selector's `impl`)
/// asks for native, and the selection comes out the same; a twin that cannot run is refused at
/// load, at its line.
#[test]
fn a_native_focus_generator_makes_the_same_candidates_as_its_script() {
    let (dir, config, yaml) = worked_copy();
    let twinned =
        yaml.replace("focus: focus.rhai::uncovered}", "focus: focus.rhai::uncovered, focus_native: uncovered}");
    std::fs::write(&config, &twinned).unwrap();
    let twins = engine(dir.path());
    let mut sel = Selection::new(&twins, "worked", "next", &json!({"uncovered": ["texture", "taste"]}), 0).unwrap();
    assert_eq!(sel.strategies()[2], ("cover_element".to_owned(), true, true));
    let runs = || worked::UNCOVERED_RUNS.load(std::sync::atomic::Ordering::Relaxed);
    let scripted = sel.run(Some(ScorerImpl::Script)).unwrap();
    assert_eq!(runs(), 0, "the script made the focuses");
    let native = sel.run(Some(ScorerImpl::Native)).unwrap();
    assert_eq!(runs(), 1, "the twin made the focuses");
    assert_eq!(scripted, native);
    let elements: Vec<&Value> =
        native.candidates.iter().map(|c| &c.focus["element_id"]).filter(|e| !e.is_null()).collect();
    assert_eq!(elements, [&json!("texture"), &json!("taste")]);
    assert_eq!(sel.run_generators(Some(ScorerImpl::Native)).unwrap(), 5);

    // Refused at load: a twin of `focus: open`, and one this host lacks when the selector asks
    // for native.
    let open = twinned.replace("focus: open}", "focus: open, focus_native: uncovered}");
    std::fs::write(&config, &open).unwrap();
    let err = engine(dir.path()).packs().load("worked").unwrap_err();
    assert!(
        err.to_string().contains("strategy `broaden`: `focus: open` has no generator for `focus_native` to twin"),
        "{err}"
    );
    let line = open.lines().position(|l| l.contains("id: broaden")).unwrap() + 1;
    assert_eq!(err.origin().unwrap().line as usize, line, "{err}");
    let lacking = twinned
        .replace("focus_native: uncovered}", "focus_native: nowhere}")
        .replace("    vetoes:", "    impl: native\n    vetoes:");
    std::fs::write(&config, &lacking).unwrap();
    let err = engine(dir.path()).packs().load("worked").unwrap_err();
    assert!(err.to_string().contains("native focus generator `nowhere` is not registered by this host"), "{err}");
}

/// No dead ends: when every candidate is vetoed the selector's `fallback` answers and the
/// breakdown says so; a multiplier of 0 makes a strategy unavailable in that phase (it cannot win
/// because the others were vetoed); a profile naming a disabled strategy is a warning at its line.
#[test]
fn the_fallback_answers_when_everything_is_vetoed_and_a_zero_multiplier_turns_a_strategy_off() {
    let (dir, config, yaml) = worked_copy();
    let yaml = yaml
        .replace("    phase_profiles:\n", "    fallback: broaden\n    phase_profiles:\n")
        .replace("exploratory: {deepen: 0.8,", "exploratory: {synthesis: 0, deepen: 0.8,")
        .replace("synthesis: 0.3}", "}");
    std::fs::write(&config, &yaml).unwrap();
    let engine = Engine::builder(dir.path()).build();
    let all = json!({"vetoed": ["deepen", "broaden", "cover_element/taste", "cover_element/texture", "synthesis"]});
    let mut sel = Selection::new(&engine, "worked", "next", &all, 0).unwrap();
    let b = sel.run(None).unwrap();
    assert_eq!(b.unavailable, ["synthesis"], "exploratory turns synthesis off");
    assert!(b.candidates.iter().all(|c| c.strategy != "synthesis"));
    assert_eq!(b.candidates[b.winner.unwrap()].strategy, "broaden", "the fallback answers");
    assert_eq!(b.fallback.as_deref(), Some("every candidate was vetoed: the fallback strategy `broaden` answers"));
    let event = serde_json::to_value(&b).unwrap();
    assert_eq!(event["unavailable"], json!(["synthesis"]));
    // In the focused phase synthesis is a candidate again (and vetoed like the rest).
    let focused = json!({"turn_count": 5, "vetoed": all["vetoed"]});
    let b = Selection::new(&engine, "worked", "next", &focused, 0).unwrap().run(None).unwrap();
    assert!(b.unavailable.is_empty() && b.candidates.iter().any(|c| c.strategy == "synthesis"));
    // Nothing vetoed: no fallback note.
    let b = Selection::new(&engine, "worked", "next", &json!({}), 0).unwrap().run(None).unwrap();
    assert_eq!((b.fallback, b.winner), (None, Some(2)), "cover_element/taste wins as in the worked example");

    // A fallback that names no strategy is refused; a profile naming a disabled one is a warning.
    std::fs::write(&config, yaml.replace("fallback: broaden", "fallback: ease")).unwrap();
    let err = Engine::builder(dir.path()).build().packs().load("worked").unwrap_err();
    assert!(err.detail().contains("falls back to `ease`, which is no strategy"), "{err}");
    // Nor may the fallback be one a phase turns off: it would answer where it is unavailable.
    std::fs::write(&config, yaml.replace("fallback: broaden", "fallback: synthesis")).unwrap();
    let err = Engine::builder(dir.path()).build().packs().load("worked").unwrap_err();
    assert!(
        err.detail().contains(
            "falls back to `synthesis`, which phase `exploratory` turns off (multiplier 0); the fallback must be \
             available in every phase"
        ),
        "{err}"
    );
    let disabled =
        yaml.replace("      - {id: synthesis, prompt_hint", "      - {id: synthesis, enabled: false, prompt_hint");
    std::fs::write(&config, disabled).unwrap();
    let pack = Engine::builder(dir.path()).build().packs().load("worked").unwrap();
    let warning = &pack.warnings()[0];
    assert!(warning.detail().contains("phase profile `exploratory` sets `synthesis`, which is disabled"), "{warning}");
    assert_eq!(warning.origin().unwrap().file, "config/worked.yaml");
}

#[test]
fn a_strategy_is_a_yaml_entry_and_a_focus_script() {
    let (dir, config, yaml) = worked_copy();
    let yaml = yaml
        .replace(
            "      - {id: synthesis,",
            "      - {id: contrast, prompt_hint: Offer a counter-example., focus: focus.rhai::contrast}\n      - {id: synthesis,",
        )
        .replace("exploratory: {deepen: 0.8,", "exploratory: {contrast: 1.5, deepen: 0.8,")
        .replace(
            "    synthesis: {coverage_gap: 0.95",
            "    contrast: {coverage_gap: 1, ambiguity: 1, depth_breadth_balance: 1, engagement: 1, strategy_diversity: 1, novelty: 1}\n    synthesis: {coverage_gap: 0.95",
        );
    std::fs::write(&config, yaml).unwrap();
    let focus = dir.path().join("scripts/worked/focus.rhai");
    let mut script = std::fs::read_to_string(&focus).unwrap();
    script.push_str("\nfn contrast(strategy) {\n    [#{ focus_type: \"contrast\", node_id: this.nodes[0], focus_description: `Contrast ${this.nodes[0]}` }]\n}\n");
    std::fs::write(&focus, script).unwrap();

    let engine = Engine::builder(dir.path()).build();
    let mut sel = Selection::new(&engine, "worked", "next", &json!({}), 0).unwrap();
    let b = sel.run(None).unwrap();
    let contrast = &b.candidates[4];
    // Every focus carries the five keys; the engine filled those the generator left out.
    assert_eq!(
        (contrast.strategy.as_str(), &contrast.focus),
        (
            "contrast",
            &json!({"focus_type": "contrast", "node_id": "node_milk", "element_id": null,
                    "focus_description": "Contrast node_milk", "confidence": 1.0})
        )
    );
    assert_eq!(finals(&b)[4].1, json!(1.5));
    assert_eq!(b.winner, Some(4), "the new strategy wins with its phase boost");

    // A phase profile naming a strategy the selector does not have is refused at its line.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("focused: {deepen: 1.3}", "focused: {deepen: 1.3, bridge: 2}"),
    )
    .unwrap();
    let err = Engine::builder(dir.path()).build().packs().load("worked").unwrap_err();
    assert!(err.detail().contains("sets `bridge`, which is not a strategy"), "{err}");
    let origin = err.origin().unwrap();
    assert_eq!((origin.file.as_str(), origin.line), ("config/worked.yaml", 35), "{err}");
}

#[test]
fn scorers_and_focuses_that_break_the_contract_are_errors_not_silent_scores() {
    let dir = support::copy_root("select");
    let config = dir.path().join("config/worked.yaml");
    let table = dir.path().join("scripts/worked/table.rhai");
    let focus = dir.path().join("scripts/worked/focus.rhai");
    let (yaml, rhai, focus_rhai) = (
        std::fs::read_to_string(&config).unwrap(),
        std::fs::read_to_string(&table).unwrap(),
        std::fs::read_to_string(&focus).unwrap(),
    );
    let run = |table_src: &str, focus_src: &str| {
        std::fs::write(&table, table_src).unwrap();
        std::fs::write(&focus, focus_src).unwrap();
        let engine = Engine::builder(dir.path()).build();
        Selection::new(&engine, "worked", "next", &json!({}), 0).unwrap().run(Some(ScorerImpl::Script))
    };
    // A weighted scorer returning a bool, a veto returning a number, maps missing their key.
    let cases = [
        (
            "#{ raw_score: param",
            "return true; #{ raw_score: param",
            "a weighted scorer returns a number or #{raw_score, ...}; this one returned a bool",
        ),
        (
            "#{ is_veto: this.vetoed",
            "return 1.5; #{ is_veto: this.vetoed",
            "a veto returns a bool or #{is_veto, ...}; this one returned a float",
        ),
        (
            "#{ raw_score: param(\"raw\")",
            "#{ points: param(\"raw\")",
            "this one returned a map without a numeric `raw_score`",
        ),
        (
            "#{ is_veto: this.vetoed.contains(k)",
            "#{ no: this.vetoed.contains(k)",
            "this one returned a map without a bool `is_veto`",
        ),
    ];
    for (from, to, says) in cases {
        let err = run(&rhai.replacen(from, to, 1), &focus_rhai).map(|_| ()).expect_err(to);
        assert!(err.detail().contains(says), "{to}: {err}");
    }
    // The shorter names `score` and `veto` say the same.
    let short = rhai.replacen("#{ raw_score:", "#{ score:", 1).replacen("#{ is_veto:", "#{ veto:", 1);
    let (a, b) = (run(&short, &focus_rhai).unwrap(), run(&rhai, &focus_rhai).unwrap());
    assert_eq!(serde_json::to_value(a.candidates).unwrap(), serde_json::to_value(b.candidates).unwrap());
    // A focus without a description, named with its generator's place.
    let err = run(&rhai, &focus_rhai.replace("focus_description: `Deepen: ${node}`", "label: node")).unwrap_err();
    assert!(
        err.detail().contains("focus.rhai::recent_node returned a focus without a string `focus_description`"),
        "{err}"
    );
    // The older key is named as such.
    let err = run(&rhai, &focus_rhai.replace("focus_description: `Deepen", "description: `Deepen")).unwrap_err();
    assert!(
        err.detail().contains("returned a focus with `description`: the focus's text is `focus_description`"),
        "{err}"
    );
    // A confidence out of [0, 1].
    let err =
        run(&rhai, &focus_rhai.replace("focus_type: \"depth\",", "focus_type: \"depth\", confidence: 3,")).unwrap_err();
    assert!(err.detail().contains("`confidence` is not a number in [0, 1]"), "{err}");
    assert_eq!(err.origin().unwrap().file, "scripts/worked/focus.rhai", "{err}");
    std::fs::write(&focus, &focus_rhai).unwrap();
    std::fs::write(&table, &rhai).unwrap();

    // Refused at load: two scorers with one id, no strategies, a focus that is neither.
    let broken =
        yaml.replace("{id: ambiguity, weight", "{id: coverage_gap, weight").replace("focus: open}", "focus: opne}");
    std::fs::write(&config, broken).unwrap();
    let err = Engine::builder(dir.path()).build().packs().load("worked").unwrap_err();
    let text: String = err.all().map(|e| format!("{e}\n")).collect();
    assert!(text.contains("has two scorers with id `coverage_gap`"), "{text}");
    assert!(text.contains("focus `opne` is neither `open` nor a generator"), "{text}");
    let start = yaml.find("    strategies:\n").unwrap();
    let end = yaml.find("    phase_profiles:").unwrap();
    let none = format!("{}    strategies: []\n{}", &yaml[..start], &yaml[end..]).replace("    phase_profiles:\n      exploratory: {deepen: 0.8, broaden: 1.2, cover_element: 1.1, synthesis: 0.3}\n      focused: {deepen: 1.3}\n      closing: {synthesis: 1.2, broaden: 0.2}\n", "");
    std::fs::write(&config, none).unwrap();
    let err = Engine::builder(dir.path()).build().packs().load("worked").unwrap_err();
    assert!(err.detail().contains("selector `next` needs at least one strategy"), "{err}");
}

//! The interview pack: a session on the stand-in model, and each scorer at its edges,
//! through the selector over hand-made states.

use crate::support;

use ruleweave::{Breakdown, Candidate, Selection, SimilarityKind, VetoCheck};
use ruleweave::{Engine, Event};
use serde_json::{Value, json};
use support::repo_root;

fn engine() -> Engine {
    Engine::builder(repo_root()).build()
}

/// Six signals as the model reports them for turn `turn`: the uncertainty kind, the knowledge
/// ceiling, the emotional intensity; reasoning, contradiction and concept depth neutral.
fn signals(turn: i64, uncertainty: &str, terminal: bool, intensity: f64) -> Value {
    json!({
        "source": "llm", "turn": turn,
        "uncertainty": {"kind": uncertainty, "level": 0.5},
        "reasoning": {"causal": false, "counterfactual": false, "metacognitive": false, "score": 0.0},
        "emotional": {"intensity": intensity, "trajectory": "steady"},
        "contradiction": {"detected": false, "about": ""},
        "knowledge_ceiling": {"says_dont_know": uncertainty != "none", "is_terminal": terminal},
        "concept_depth": {"level": 0.5},
    })
}

/// A strategy's `type_category` as `config/interview.yaml` declares it.
fn category(strategy: &str) -> &'static str {
    match strategy {
        "deepen" | "contrast" | "probe" => "depth",
        "reflection" => "clarification",
        "broaden" => "breadth",
        "bridge" => "peripheral",
        "cover_element" => "coverage",
        "synthesis" => "transition",
        "ease" => "rapport",
        "closing" => "closing",
        _ => "opening",
    }
}

/// A state after some answers: `answers` from the respondent, `asked` questions before them.
fn state(answers: &[&str], asked: &[&str], strategies: &[&str], extra: Value) -> Value {
    let mut history = Vec::new();
    for (i, a) in answers.iter().enumerate() {
        if let Some(q) = asked.get(i) {
            history.push(json!({"role": "interviewer", "content": q}));
        }
        history.push(json!({"role": "respondent", "content": a}));
    }
    let questions: Vec<&str> = asked.iter().take(answers.len()).copied().collect();
    let mut s = json!({
        "last_answer": answers.last().copied().unwrap_or(""),
        "questions": questions,
        "topic": "oat milk in coffee",
        "elements": ["taste", "texture", "price", "packaging", "sustainability"],
        "turn_count": answers.len(),
        "phase_clock": answers.len(),
        "conversation_history": history,
        "strategy_history": strategies,
        "category_history": strategies.iter().map(|s| category(s)).collect::<Vec<_>>(),
        "nodes": [
            {"id": "n1", "label": "coffee shop", "turn": 1},
            {"id": "n2", "label": "texture", "turn": 2},
            {"id": "n3", "label": "morning", "turn": answers.len()},
        ],
        "edges": [{"from": "n1", "to": "n3"}],
        "mentions": {"texture": 1},
    });
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

fn select(state: &Value) -> Breakdown {
    Selection::new(&engine(), "interview", "next_question", state, 0).unwrap().run(None).unwrap()
}

/// The candidate of `strategy` (and `element`, for cover_element).
fn candidate<'a>(b: &'a Breakdown, strategy: &str, element: Option<&str>) -> &'a Candidate {
    b.candidates
        .iter()
        .find(|c| c.strategy == strategy && element.is_none_or(|e| c.focus["element_id"] == e))
        .unwrap_or_else(|| panic!("no candidate {strategy} {element:?} in {b:#?}"))
}

/// What veto `scorer` said of `c` (`None` when an earlier veto ended its checks).
fn veto<'a>(c: &'a Candidate, scorer: &str) -> Option<&'a VetoCheck> {
    c.vetoes.iter().find(|v| v.scorer == scorer)
}

/// Whether veto `scorer` rejected `c`.
fn vetoed(c: &Candidate, scorer: &str) -> bool {
    veto(c, scorer).is_some_and(|v| v.is_veto)
}

fn raw(c: &Candidate, scorer: &str) -> f64 {
    c.scores.as_ref().unwrap().iter().find(|s| s.scorer == scorer).unwrap().raw_score
}

/// The interview with emotional pacing on (`pace_by_emotion`, off by default).
fn paced() -> (tempfile::TempDir, Engine) {
    let root = support::copy_of(&["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"]);
    let manifest = root.path().join("config/interview.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let paced = text.replace("  pace_by_emotion: false\n", "  pace_by_emotion: true\n");
    assert_ne!(paced, text);
    std::fs::write(&manifest, paced).unwrap();
    let engine = Engine::builder(root.path()).build();
    (root, engine)
}

const ANSWERS: [&str; 3] = [
    "I like oat milk because it tastes nutty and it foams nicely for my morning cappuccino.",
    "The texture is creamy, but the price is a bit high compared to dairy.",
    "It is fine.",
];

/// By default the phases follow the turn count alone, as the deterministic model has them:
/// the third answer is still exploratory, whatever its mood; the decision carries its `score`.
#[tokio::test]
async fn the_phase_follows_the_turn_count_by_default() {
    let engine = engine();
    let mut s = engine.open("interview", &Default::default()).await.unwrap();
    let mut phases = Vec::new();
    for a in ANSWERS {
        let r = s.turn(json!({"answer": a})).await.unwrap();
        phases.push(r.output["decision"]["phase"].as_str().unwrap().to_owned());
        let d = &r.output["decision"];
        assert!(d["score"].as_f64().is_some() && d["score"] == d["final_score"], "{d}");
    }
    assert_eq!(phases, ["exploratory", "exploratory", "exploratory"]);
    let state = s.state();
    assert_eq!(state["qualitative_signals"]["emotional"]["trajectory"], "falling");
    assert_eq!((state["turn_count"].as_i64(), state["phase_clock"].as_i64()), (Some(3), Some(3)));
}

/// The closing phase asks the closing question; the answer to it ends the interview with
/// thanks, and a further answer is refused as the interview being over. Each focus says how
/// sure its generator is of it: an unmentioned element 1, the topic at large 0.5.
#[tokio::test]
async fn the_answer_to_the_closing_question_ends_the_interview() {
    let engine = engine();
    let mut s = engine.open("interview", &Default::default()).await.unwrap();
    let answers = [
        "I like oat milk because it tastes nutty.",
        "The texture is creamy but pricey.",
        "It is fine.",
        "I drink it every morning with my partner.",
        "Sustainability matters to me because of the climate.",
        "The carton design is plain.",
        "Sometimes it separates in hot coffee.",
        "I switched from dairy two years ago.",
        "My friends prefer almond milk.",
        "The barista at my cafe recommends it.",
    ];
    let mut last = Value::Null;
    for (i, a) in answers.iter().enumerate() {
        let r = s.turn(json!({"answer": a})).await.unwrap();
        assert!(!r.finished, "turn {}", i + 1);
        let d = &r.output["decision"];
        let confidence = d["focus"]["confidence"].as_f64().unwrap();
        let expected = match d["focus"]["focus_type"].as_str().unwrap() {
            "coverage" => 1.0,
            "open" | "breadth" => 0.5,
            _ => confidence,
        };
        assert!((0.0..=1.0).contains(&confidence) && confidence == expected, "{d}");
        last = r.output;
    }
    assert_eq!(
        (last["decision"]["phase"].as_str(), last["decision"]["strategy"]["type_category"].as_str()),
        (Some("closing"), Some("closing")),
        "the tenth answer is in the closing phase: {last}"
    );
    let r = s.turn(json!({"answer": "I would pay a bit more for organic."})).await.unwrap();
    assert!(r.finished);
    assert!(r.output["question"].as_str().unwrap().starts_with("Thank you, that was the last question"));
    assert_eq!(r.display.finished.as_deref(), Some("The interview is over. Thank you for your answers."));
    let err = s.turn(json!({"answer": "One more thing."})).await.unwrap_err();
    assert_eq!(err.kind(), ruleweave::ErrorKind::Finished);
}

#[tokio::test]
async fn an_interview_on_the_stand_in_chooses_explains_and_asks() {
    let (_root, engine) = paced();
    let mut s = engine.open("interview", &Default::default()).await.unwrap();
    assert_eq!(s.state()["question"], "Let's talk about oat milk in coffee. What comes to mind first?");
    let mut decisions = Vec::new();
    for a in ANSWERS {
        let r = s.turn(json!({"answer": a})).await.unwrap();
        let b = r
            .events
            .iter()
            .find_map(|e| match e {
                Event::Decision { breakdown, .. } => Some(breakdown.clone()),
                _ => None,
            })
            .expect("every turn decides");
        let winner = &b.candidates[b.winner.unwrap()];
        assert_eq!(r.output["decision"]["strategy"]["id"], winner.strategy);
        assert!(!r.output["question"].as_str().unwrap().is_empty());
        decisions.push(b);
    }
    // Turn 1: open questions about the topic are not repeats of the opening question for sharing
    // the topic's words.
    for open in ["broaden", "ease"] {
        let c = decisions[0].candidates.iter().find(|c| c.strategy == open).unwrap();
        assert!(!c.vetoed, "{open} vetoed on turn 1: {:?}", c.vetoes);
    }
    let state = s.state();
    // Elements counted per answer that mentions them: foams and creamy are texture, nutty taste.
    assert_eq!(state["mentions"], json!({"taste": 1, "texture": 2, "price": 1}));
    assert_eq!(state["strategy_history"].as_array().unwrap().len(), 4, "the opening and three");
    assert!(state["nodes"].as_array().unwrap().len() >= 4, "{}", state["nodes"]);
    // The second turn is exploratory, where closing is off (multiplier 0). With emotional pacing
    // on, "It is fine." falls away from the answers before it (emotional trajectory falling, low intensity): the phase
    // clock moves a turn further, into the focused phase, where all nine strategies are candidates.
    assert_eq!(
        (decisions[1].phase.as_str(), decisions[1].unavailable.clone()),
        ("exploratory", vec!["closing".to_owned()])
    );
    assert_eq!(state["qualitative_signals"]["emotional"]["trajectory"], "falling");
    assert_eq!((state["turn_count"].as_i64(), state["phase_clock"].as_i64()), (Some(3), Some(4)));
    assert_eq!(decisions[2].phase, "focused");
    let strategies: std::collections::BTreeSet<&str> =
        decisions[2].candidates.iter().map(|c| c.strategy.as_str()).collect();
    assert_eq!(strategies.len(), 9, "{strategies:?}");
    // "It is fine." is short: the ambiguity scorer favours reflecting it back (1.6) over deepening
    // (1.3), but the focused phase multiplies deepen by 1.3, and concrete answers (concept depth 0)
    // lean towards depth: deepen wins, reflection second.
    let finals: Vec<(&str, f64)> =
        decisions[2].candidates.iter().filter_map(|c| Some((c.strategy.as_str(), c.final_score?))).collect();
    let reflection = finals.iter().find(|(s, _)| *s == "reflection").unwrap().1;
    assert!(finals.iter().filter(|(s, _)| *s != "deepen").all(|(_, f)| *f <= reflection), "{finals:?}");
    assert_eq!(s.state()["decision"]["strategy"]["id"], "deepen");
}

/// The stand-in takes no filler word for a concept ("Why does regular matter to you?"), and an
/// answer that closes the subject names none ("Why does whatever matter to you?").
#[tokio::test]
async fn the_stand_in_asks_about_no_filler_word() {
    let engine = engine();
    let mut s = engine.open("interview", &Default::default()).await.unwrap();
    let answers = [
        "I have it regular, it takes a while to get used to the nutty taste.",
        "Whatever, I don't know and I don't care.",
        "Honestly the carton looks cheap, something about the label.",
        "I guess it is kind of expensive lately, but whatever.",
        "I'm curious, regular milk was different.",
    ];
    for a in answers {
        s.turn(json!({"answer": a})).await.unwrap();
        let question = s.state()["question"].as_str().unwrap().to_lowercase();
        // ("different" is no concept either, but the counter-example question says it of another.)
        for filler in ["regular", "takes", "whatever", "honestly", "something", "guess", "lately", "don't", "curious"] {
            assert!(!question.contains(filler), "{question:?} asks about `{filler}` after {a:?}");
        }
    }
    let labels: Vec<String> =
        s.state()["nodes"].as_array().unwrap().iter().map(|n| n["label"].as_str().unwrap().to_owned()).collect();
    let fillers = ["regular", "takes", "whatever", "something", "curious", "different"];
    assert!(labels.iter().all(|l| !fillers.contains(&l.as_str())), "{labels:?}");
}

/// Adding a strategy of an existing kind is a YAML entry: `probe`, declared `depth`, is scored
/// as deepen is by every category-reading scorer, and the knowledge ceiling limits it too.
#[test]
fn a_new_strategy_of_an_existing_kind_needs_no_script_edit() {
    let root = support::copy_of(&["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"]);
    let config = root.path().join("config/interview.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap().replace(
        "      - {id: ease,",
        "      - {id: probe, name: Probe, type_category: depth, prompt_hint: Probe., focus: focus.rhai::recent_node}\n      - {id: ease,",
    );
    std::fs::write(&config, yaml).unwrap();
    let engine = Engine::builder(root.path()).build();
    let s = state(
        &["I like oat milk because it tastes nutty and foams.", "It is fine, maybe."],
        &["Q1", "Q2"],
        &["deepen"],
        json!({}),
    );
    let b = Selection::new(&engine, "interview", "next_question", &s, 0).unwrap().run(None).unwrap();
    let (deepen, probe) = (candidate(&b, "deepen", None), candidate(&b, "probe", None));
    for scorer in ["coverage_gap", "ambiguity", "depth_breadth_balance", "engagement"] {
        assert_eq!(raw(probe, scorer), raw(deepen, scorer), "{scorer}");
    }
    let dont_know = state(&["I don't know."], &["Q1"], &[], json!({}));
    let b = Selection::new(&engine, "interview", "next_question", &dont_know, 0).unwrap().run(None).unwrap();
    assert!(vetoed(candidate(&b, "probe", None), "knowledge_ceiling"));
}

#[test]
fn knowledge_ceiling_vetoes_digging_after_dont_know_unless_the_model_says_it_is_exploratory() {
    let dont_know = ["I don't know much about that, but I am curious about the texture."];
    let b = select(&state(&dont_know, &["What comes to mind?"], &["opening"], json!({})));
    assert!(vetoed(candidate(&b, "deepen", None), "knowledge_ceiling"));
    assert!(!vetoed(candidate(&b, "broaden", None), "knowledge_ceiling"));
    // Layer 3: this turn's LLM signal says the "don't know" is exploratory: deepen may go on.
    let llm = json!({"qualitative_signals": signals(1, "productive", false, 0.7)});
    let b = select(&state(&dont_know, &["What comes to mind?"], &["opening"], llm));
    assert!(!vetoed(candidate(&b, "deepen", None), "knowledge_ceiling"));
    let terminal = json!({"qualitative_signals": signals(1, "terminal", true, 0.1)});
    let b = select(&state(&dont_know, &["What comes to mind?"], &["opening"], terminal));
    assert!(vetoed(candidate(&b, "deepen", None), "knowledge_ceiling"));
    // Productive uncertainty overrides a ceiling the model also reported: no veto.
    let mixed = json!({"qualitative_signals": signals(1, "productive", true, 0.5)});
    let b = select(&state(&dont_know, &["What comes to mind?"], &["opening"], mixed));
    assert!(!vetoed(candidate(&b, "deepen", None), "knowledge_ceiling"));
    // A signal from an earlier turn is stale: the rules decide.
    let stale = json!({"qualitative_signals": signals(0, "none", false, 0.5)});
    let b = select(&state(&dont_know, &["What comes to mind?"], &["opening"], stale));
    assert!(vetoed(candidate(&b, "deepen", None), "knowledge_ceiling"));
}

#[test]
fn element_exhausted_and_recent_redundancy_veto_at_their_limits() {
    // The latest concept is "texture", an element: deepening on it is fine at 3 mentions, not at 4.
    let mut nodes = json!([{"id": "n1", "label": "texture", "turn": 1}]);
    let answers = ["The texture is creamy."];
    let at = |n: i64, nodes: &Value| {
        select(&state(&answers, &["Hi?"], &["opening"], json!({"mentions": {"texture": n}, "nodes": nodes})))
    };
    let c3 = at(3, &nodes);
    assert!(!vetoed(candidate(&c3, "deepen", None), "element_exhausted"));
    let c4 = at(4, &nodes);
    let v = veto(candidate(&c4, "deepen", None), "element_exhausted").unwrap();
    assert_eq!((v.is_veto, &v.signals["mentions"]), (true, &json!(4)));
    nodes[0]["label"] = json!("morning");
    assert!(!vetoed(candidate(&at(4, &nodes), "deepen", None), "element_exhausted"));

    // A focus close to a question just asked is vetoed; the same focus passes once it is old.
    let asked = ["Why does morning matter to you?"];
    let b = select(&state(&["It wakes me up."], &asked, &["deepen"], json!({})));
    let v = veto(candidate(&b, "deepen", None), "recent_redundancy").unwrap();
    assert!(v.is_veto, "{v:?}");
    assert!(v.signals["similarity"].as_f64().unwrap() > 0.45);
    let old = ["Why does morning matter to you?", "Tea?", "Milk?", "Sugar?"];
    let b = select(&state(&["It wakes me up.", "No.", "Yes.", "Two."], &old, &["deepen"], json!({})));
    assert!(!vetoed(candidate(&b, "deepen", None), "recent_redundancy"));
}

#[test]
fn weighted_scorers_at_their_edges() {
    // StrategyDiversity: broaden three times in a row gives the design's 0.4; unused 1.2.
    let s = state(
        &["a b c d e f g", "h i j k l m", "n o p q r s"],
        &["q1", "q2", "q3"],
        &["broaden", "broaden", "broaden"],
        json!({}),
    );
    let b = select(&s);
    let deepen = candidate(&b, "deepen", None);
    assert!((raw(candidate(&b, "cover_element", Some("taste")), "strategy_diversity") - 1.2).abs() < 1e-9);
    assert!((raw(candidate(&b, "broaden", None), "strategy_diversity") - 0.4).abs() < 1e-9);
    // DepthBreadthBalance: three breadth questions lean towards depth.
    assert!((raw(deepen, "depth_breadth_balance") - 1.8).abs() < 1e-9);
    // CoverageGap: 4 of 5 elements uncovered.
    assert!((raw(candidate(&b, "cover_element", Some("price")), "coverage_gap") - 1.8).abs() < 1e-9);
    assert!((raw(deepen, "coverage_gap") - 0.6).abs() < 1e-9);

    // Ambiguity and Engagement on a terse, hedging answer.
    let b = select(&state(&["maybe, I guess"], &["q1"], &["opening"], json!({})));
    assert!((raw(candidate(&b, "reflection", None), "ambiguity") - 1.6).abs() < 1e-9);
    let ease = candidate(&b, "ease", None);
    assert!((raw(ease, "engagement") - (1.6 - 3.0 / 40.0)).abs() < 1e-9);
    // Novelty: a concept from this very answer is fresh.
    assert!((raw(candidate(&b, "deepen", None), "novelty") - 1.3).abs() < 1e-9);

    // Phases: turn 10 on is closing, where closing is boosted 1.5 and wins.
    let many: Vec<String> = (0..10).map(|i| format!("answer number {i} about various things")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let b = select(&state(&many, &[], &[], json!({})));
    assert_eq!(b.phase, "closing");
    let closing = candidate(&b, "closing", None);
    assert_eq!(closing.phase_multiplier, Some(1.5));
}

/// The design's three RecentRedundancy examples: a focus that rewords a question just asked is
/// a repeat. With a real embedding model's similarities (0.92, 0.15, 0.88 in the design) and with
/// the stand-in's own vectors, the outcomes are the design's: veto, pass, veto. By words alone
/// the third is missed (they share one word): words are blind to rewordings.
#[test]
fn rewordings_are_repeats_with_a_real_models_vectors_and_with_the_stand_ins() {
    use ruleweave::text::Embeddings;
    let examples = [
        ("Explore new aspects about oat milk", "What else do you notice about oat milk?", 0.92f64, true),
        ("Deepen: why coffee helps you focus", "What else do you notice about oat milk?", 0.15, false),
        ("Tell me more about the taste", "What does oat milk taste like?", 0.88, true),
    ];
    let root = support::copy_of(&["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"]);
    let config = root.path().join("config/interview.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap().replace(
        "      - {id: ease,",
        "      - {id: probe, type_category: depth, focus: focus.rhai::probe}\n      - {id: ease,",
    );
    std::fs::write(&config, yaml).unwrap();
    let mut focus = std::fs::read_to_string(root.path().join("scripts/interview/focus.rhai")).unwrap();
    focus.push_str("\nfn probe(strategy) {\n    [");
    for (d, ..) in &examples {
        focus.push_str(&format!("#{{ focus_type: \"probe\", focus_description: \"{d}\" }}, "));
    }
    focus.push_str("]\n}\n");
    std::fs::write(root.path().join("scripts/interview/focus.rhai"), focus).unwrap();
    let engine = Engine::builder(root.path()).build();

    for (description, asked, real, repeat) in examples {
        let s = state(&["Fine."], &[asked], &["broaden"], json!({}));
        let mut sel = Selection::new(&engine, "interview", "next_question", &s, 0).unwrap();
        let probe = |b: &Breakdown| {
            b.candidates.iter().find(|c| c.focus["focus_description"] == description).unwrap().vetoes.clone()
        };
        let redundancy = |vetoes: Vec<ruleweave::VetoCheck>| {
            vetoes.into_iter().find(|v| v.scorer == "recent_redundancy").map(|v| (v.is_veto, v.signals["kind"].clone()))
        };
        // A real model's similarity: vectors at the design's angle.
        let mut e = Embeddings::new("text-embedding-3-small");
        e.insert(asked, vec![1.0f32, 0.0].into());
        e.insert(description, vec![real as f32, (1.0 - real * real).sqrt() as f32].into());
        sel.set_embeddings(Some(e));
        let b = sel.run(None).unwrap();
        assert_eq!(redundancy(probe(&b)), Some((repeat, json!("embedding"))), "{description} (real)");
        // The stand-in's own vectors.
        let e = sel.standin_embeddings().unwrap();
        assert!(e.model().ends_with("(stand-in)"), "{}", e.model());
        sel.set_embeddings(Some(e));
        let b = sel.run(None).unwrap();
        assert_eq!(redundancy(probe(&b)), Some((repeat, json!("embedding"))), "{description} (stand-in)");
    }
    // By words, "Tell me more about the taste" passes: blind to the rewording.
    let s = state(&["Fine."], &["What does oat milk taste like?"], &["broaden"], json!({}));
    let b = Selection::new(&engine, "interview", "next_question", &s, 0).unwrap().run(None).unwrap();
    let taste = b.candidates.iter().find(|c| c.focus["focus_description"] == "Tell me more about the taste").unwrap();
    assert!(!taste.vetoed, "{:?}", taste.vetoes);
}

#[test]
fn recent_redundancy_compares_meanings_when_the_selector_has_embeddings() {
    use ruleweave::ScorerImpl;
    use ruleweave::text::Embeddings;
    // The newest concept is "morning"; the question just asked means the same as deepening on
    // it but shares none of its words.
    let asked = ["What gets you going at the start of the day?"];
    let s = state(&["It wakes me up."], &asked, &["deepen"], json!({}));
    let engine = engine();
    let mut sel = Selection::new(&engine, "interview", "next_question", &s, 0).unwrap();
    let lexical = sel.run(None).unwrap();
    let v = veto(candidate(&lexical, "deepen", None), "recent_redundancy").unwrap();
    assert_eq!((v.is_veto, &v.signals["kind"]), (false, &json!("lexical")), "{v:?}");

    // What the selector embeds: every focus description, then the questions asked.
    let texts = sel.texts_to_embed().unwrap();
    assert!(texts.contains(&"why morning matters".to_owned()), "{texts:?}");
    assert_eq!(texts.last().unwrap(), asked[0]);
    let mut e = Embeddings::hashed(&texts);
    e.insert("why morning matters", vec![0.6f32, 0.8].into());
    e.insert(asked[0], vec![0.8f32, 0.6].into());
    sel.set_embeddings(Some(e));
    for imp in [ScorerImpl::Script, ScorerImpl::Native] {
        let b = sel.run(Some(imp)).unwrap();
        let v = veto(candidate(&b, "deepen", None), "recent_redundancy").unwrap();
        // cos = 0.96 > the embedding threshold 0.8 (the lexical 0.45 does not apply).
        assert_eq!((v.is_veto, &v.signals["kind"]), (true, &json!("embedding")), "{imp:?}: {v:?}");
        assert!((v.signals["similarity"].as_f64().unwrap() - 0.96).abs() < 1e-6, "{imp:?}: {v:?}");
    }
}

#[tokio::test]
async fn the_embedding_option_embeds_once_per_turn_and_falls_back_to_words() {
    let options = json!({"similarity": "embedding"});
    let decision = |r: &ruleweave::TurnResult| {
        r.events
            .iter()
            .find_map(|e| match e {
                Event::Decision { breakdown, .. } => Some(breakdown.clone()),
                _ => None,
            })
            .unwrap()
    };
    let embeds = |r: &ruleweave::TurnResult| -> Vec<ruleweave::LlmEvent> {
        r.events
            .iter()
            .filter_map(|e| match e {
                Event::Llm(l) if l.embedded.is_some() => Some(l.clone()),
                _ => None,
            })
            .collect()
    };
    // On the stand-in: hashed features, labelled as the stand-in's.
    let engine = engine();
    let mut s = engine.open("interview", options.as_object().unwrap()).await.unwrap();
    let r = s.turn(json!({"answer": "The foam on my morning coffee is lovely."})).await.unwrap();
    let b = decision(&r);
    assert_eq!(
        (b.similarity.kind, b.similarity.model.as_deref()),
        (SimilarityKind::Embedding, Some("text-embedding-3-small (stand-in)"))
    );
    let calls = embeds(&r);
    assert_eq!(calls.len(), 1, "one call per selection");
    assert!(calls[0].standin && calls[0].error.is_none());
    assert_eq!(Some(calls[0].embedded.unwrap().texts), b.similarity.texts);
    assert_eq!(b.similarity.compared_by_words, Some(0), "every pair the scorers compared had vectors");
    // The default option compares words and embeds nothing.
    let mut s = engine.open("interview", &Default::default()).await.unwrap();
    let r = s.turn(json!({"answer": "The foam on my morning coffee is lovely."})).await.unwrap();
    assert_eq!(decision(&r).similarity, ruleweave::SimilarityNote::lexical(None));
    assert!(embeds(&r).is_empty());

    // A provider without embeddings: the turn goes on, comparing words, and says why.
    let canned = support::Canned::new();
    canned.reply("interviewer", "And the taste?");
    let engine = support::engine(&canned);
    let mut s = engine.open("interview", options.as_object().unwrap()).await.unwrap();
    let r = s.turn(json!({"answer": "The foam on my morning coffee is lovely."})).await.unwrap();
    let b = decision(&r);
    assert_eq!(b.similarity.kind, SimilarityKind::Lexical);
    assert!(b.similarity.why.as_deref().unwrap().contains("no embeddings endpoint"), "{b:?}");
    assert!(embeds(&r)[0].error.is_some());
    assert_eq!(r.output["question"], "And the taste?");
}

#[test]
fn a_similarity_block_is_checked_at_its_lines() {
    let dir = support::copy_of(&["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"]);
    let config = dir.path().join("config/interview.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap();
    let line_of = |needle: &str| yaml.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1;
    let broken =
        yaml.replace("embed: embedder", "embed: embedding_model").replace("texts: [questions]", "texts: [turn_count]");
    std::fs::write(&config, broken).unwrap();
    let err = Engine::builder(dir.path()).build().packs().load("interview").unwrap_err();
    let text: String = err.all().map(|e| format!("{e}\n")).collect();
    assert!(text.contains("embeds with `embedding_model`, which is not an llm profile"), "{text}");
    assert!(text.contains(&format!("config/interview.yaml:{}", line_of("embed: embedder"))), "{text}");
    assert!(text.contains("similarity texts must be string or list fields; `turn_count` is an int"), "{text}");
    assert!(text.contains(&format!("config/interview.yaml:{}", line_of("texts: [questions]"))), "{text}");

    // `last: 0` and a condition that does not compile.
    let broken = yaml
        .replace("texts: [questions]", "texts: [questions]\n      last: 0")
        .replace(r#"when: option("similarity") == "embedding""#, r#"when: option("similarity") =="#);
    std::fs::write(&config, &broken).unwrap();
    let err = Engine::builder(dir.path()).build().packs().load("interview").unwrap_err();
    let text: String = err.all().map(|e| format!("{e}\n")).collect();
    assert!(text.contains("similarity `last` must be at least 1"), "{text}");
    let when = broken.lines().position(|l| l.contains("when: option")).unwrap() + 1;
    assert!(text.contains(&format!("it ends too early (in config/interview.yaml:{when}:36)")), "{text}");
    let last = broken.lines().position(|l| l.contains("last: 0")).unwrap() + 1;
    assert!(
        text.contains(&format!("at least 1 (leave it out for every item) (in config/interview.yaml:{last}:")),
        "{text}"
    );
    assert_eq!(err.count(), 2, "{text}");
}

#[tokio::test]
async fn a_similarity_condition_that_is_not_a_bool_fails_the_turn_at_its_line() {
    let dir = support::copy_of(&["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"]);
    let config = dir.path().join("config/interview.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap();
    let yaml = yaml.replace(r#"when: option("similarity") == "embedding""#, r#"when: option("similarity")"#);
    std::fs::write(&config, &yaml).unwrap();
    let line = yaml.lines().position(|l| l.contains(r#"when: option("similarity")"#)).unwrap() as u32 + 1;
    let engine = Engine::builder(dir.path()).build();
    let mut s = engine.open("interview", &Default::default()).await.unwrap();
    let err = s.turn(json!({"answer": "Oat milk foams well."})).await.unwrap_err();
    assert!(
        err.detail().contains(r#"selector `next_question`: similarity.when `option("similarity")` gave a string"#),
        "{err}"
    );
    let origin = err.origin().unwrap();
    assert_eq!((origin.file.as_str(), origin.line), ("config/interview.yaml", line), "{err}");
    assert_eq!(s.turns(), 0, "the failed turn changed nothing");
}

/// The pack's files, for a copy to edit.
const INTERVIEW_FILES: [&str; 4] = ["config/interview.yaml", "scripts/interview", "scripts/lib", "prompts/interview"];

/// A session stored by an older version of the pack (the conversation under `history`, no
/// migrate script) moves onto this one when a process started on the new files loads it: its
/// turns are folded by the old version's reducers (the store recorded that schema), then the
/// pack's `migrate` renames what changed; the next checkpoint holds the result.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_session_stored_on_an_older_version_is_migrated_when_loaded() {
    let dir = support::copy_of(&INTERVIEW_FILES);
    stored_on_an_older_version(&dir, &format!("sqlite://{}", dir.path().join("sessions.db").display())).await;
}

/// The same with two replicas on PostgreSQL: one on the old files writes, one started on the new
/// files loads.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_replica_on_the_new_version_migrates_what_a_replica_on_the_old_one_stored() {
    let Some(url) = support::postgres() else { return };
    let dir = support::copy_of(&INTERVIEW_FILES);
    stored_on_an_older_version(&dir, &url).await;
}

async fn stored_on_an_older_version(dir: &tempfile::TempDir, db: &str) {
    let originals: Vec<(std::path::PathBuf, String)> = walk(dir.path());
    // The older version: `history`, and nothing to migrate.
    for (path, text) in &originals {
        let old = text.replace("conversation_history", "history").replace("migrate: migrate.rhai::migrate\n", "");
        std::fs::write(path, old).unwrap();
    }
    let open = || async { Engine::builder(dir.path()).store(ruleweave::store::open(db).await.unwrap()).build() };
    let engine = open().await;
    let old_version = engine.packs().get("interview").unwrap().version().to_owned();
    let mut s = engine.open("interview", &Default::default()).await.unwrap();
    for a in ["I like the taste, it is nutty and creamy.", "The price is a bit high for me."] {
        s.turn(json!({"answer": a})).await.unwrap();
    }
    let id = s.id().to_owned();
    let before = s.state();
    assert_eq!(before["history"].as_array().unwrap().len(), 5, "the opening, two answers, two questions");
    drop((s, engine));

    for (path, text) in &originals {
        std::fs::write(path, text).unwrap();
    }
    let engine = open().await;
    assert_ne!(engine.packs().get("interview").unwrap().version(), old_version);
    let mut s = engine.resume(&id).await.unwrap();
    let state = s.state();
    assert_eq!(state["conversation_history"], before["history"], "moved by migrate, every turn's entries kept");
    assert!(state.get("history").is_none());
    assert_eq!((&state["turn_count"], &state["questions"]), (&json!(2), &before["questions"]));

    let r = s.turn(json!({"answer": "Not sure about packaging."})).await.unwrap();
    assert_eq!(r.turn, 3);
    assert_eq!(s.state()["conversation_history"].as_array().unwrap().len(), 7);
    drop((s, engine));
    // What the store now holds is on the new version: a third process reads it as it is.
    let engine = open().await;
    let s = engine.resume(&id).await.unwrap();
    assert_eq!(s.state()["conversation_history"].as_array().unwrap().len(), 7);
}

/// A session as the previous release stored it, decision under the old names (`type`, `node`,
/// `description`, `score`): loading it on this version renames them as the design names them.
#[tokio::test]
async fn a_stored_decision_moves_to_the_design_names() {
    use ruleweave::store::{Checkpoint, CheckpointKind, SessionInfo};
    let engine = engine();
    let store = engine.store().clone();
    let mut snapshot = engine.open("interview", &Default::default()).await.unwrap().state();
    let opening = snapshot["conversation_history"].clone();
    let o = snapshot.as_object_mut().unwrap();
    o.remove("conversation_history");
    o.insert("history".into(), opening.clone());
    o.insert(
        "decision".into(),
        json!({"strategy": {"id": "deepen"}, "phase": "exploratory", "score": 1.4, "fallback": false,
               "focus": {"type": "depth", "node": "n1", "label": "nutty", "description": "why nutty matters"}}),
    );
    let fields: Vec<Value> = o
        .iter()
        .map(|(k, v)| {
            let reducer = if v.is_array() && k != "elements" { "append" } else { "replace" };
            let ty = match v {
                Value::Array(_) => "list",
                Value::Object(_) => "map",
                Value::String(_) => "string",
                Value::Bool(_) => "bool",
                _ => "any",
            };
            json!({"name": k, "type": ty, "reducer": reducer, "default": Value::Null})
        })
        .collect();
    store.versions().unwrap().save_schema("interview", "an-old-version", &json!({ "fields": fields })).await.unwrap();
    let id = "stored-by-an-older-release".to_owned();
    let info = SessionInfo {
        id: id.clone(),
        pack: "interview".into(),
        pack_version: "an-old-version".into(),
        options: json!({}),
        seed: 7,
        turns: 1,
        head: 0,
        head_kind: CheckpointKind::Start,
        snapshot_seq: 0,
        finished: false,
        finished_at: None,
        created_at: 1_000,
        updated_at: 1_000,
        lobby: false,
        parent: None,
        edited_turn: None,
        variant: None,
        player: None,
    };
    let start = Checkpoint {
        seq: 0,
        turn: 1,
        kind: CheckpointKind::Start,
        step: None,
        pack_version: "an-old-version".into(),
        input: None,
        updates: Vec::new(),
        snapshot: Some(snapshot),
        exchanges: Default::default(),
        resume: None,
        finished: false,
        created_at: 1_000,
        bumps: Vec::new(),
        by: None,
    };
    store.create(&info, &start).await.unwrap();

    let s = engine.resume(&id).await.unwrap();
    let state = s.state();
    assert_eq!(state["conversation_history"], opening);
    assert_eq!(
        state["decision"]["focus"],
        json!({"focus_type": "depth", "node_id": "n1", "element_id": null, "label": "nutty",
               "focus_description": "why nutty matters", "confidence": 1.0})
    );
    assert_eq!((&state["decision"]["final_score"], &state["decision"]["score"]), (&json!(1.4), &json!(1.4)));
}

/// Every file under `root` with its text.
fn walk(root: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
    out
}

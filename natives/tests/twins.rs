//! The interview's scorers, scripted and native, give the same results on the same inputs: every
//! candidate's vetoes and raw scores, the finals and the winner, over generated states, comparing
//! texts by words and by embeddings.

use std::sync::OnceLock;

use proptest::prelude::*;
use ruleweave::Engine;
use ruleweave::text::Embeddings;
use ruleweave::{Breakdown, ScorerImpl, Selection};
use serde_json::{Value, json};

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let root = ruleweave_testkit::repo_root();
        ruleweave_natives::register(Engine::builder(root)).build()
    })
}

const WORDS: &[&str] = &[
    "i",
    "like",
    "oat",
    "milk",
    "coffee",
    "taste",
    "nutty",
    "creamy",
    "texture",
    "price",
    "expensive",
    "carton",
    "planet",
    "don't know",
    "not sure",
    "maybe",
    "don't care",
    "morning",
    "foam",
    "why",
    "matters",
    "dairy",
];
/// A strategy's `type_category` as `config/interview.yaml` declares it (what `asked` records).
fn category(strategy: &str) -> &'static str {
    match strategy {
        "deepen" | "contrast" => "depth",
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

const STRATEGIES: &[&str] = &[
    "opening",
    "deepen",
    "broaden",
    "bridge",
    "synthesis",
    "cover_element",
    "contrast",
    "ease",
    "reflection",
    "closing",
];

fn sentence() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..14).prop_map(|w| w.join(" "))
}

prop_compose! {
    fn interview_state()(
        answers in prop::collection::vec(sentence(), 0..7),
        questions in prop::collection::vec(sentence(), 0..7),
        strategies in prop::collection::vec(prop::sample::select(STRATEGIES), 0..9),
        labels in prop::collection::vec(prop::sample::select(WORDS), 0..8),
        links in prop::collection::vec((0usize..8, 0usize..8), 0..6),
        mentions in prop::collection::vec(0i64..6, 5),
        signals in prop::option::of((
            (any::<bool>(), any::<bool>(), any::<bool>()),
            (0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0),
            any::<bool>(),
            0i64..8,
        )),
        extra_turns in 0i64..12,
    ) -> Value {
        let mut history = Vec::new();
        let mut asked = Vec::new();
        for (i, a) in answers.iter().enumerate() {
            if let Some(q) = questions.get(i) {
                history.push(json!({"role": "interviewer", "content": q}));
                asked.push(q.clone());
            }
            history.push(json!({"role": "respondent", "content": a}));
        }
        let last_answer = answers.last().cloned().unwrap_or_default();
        let turn = answers.len() as i64 + extra_turns;
        let nodes: Vec<Value> = labels.iter().enumerate()
            .map(|(i, l)| json!({"id": format!("n{}", i + 1), "label": l, "turn": (i as i64) % (turn + 1)}))
            .collect();
        let edges: Vec<Value> = links.iter().filter(|(a, b)| *a < nodes.len() && *b < nodes.len())
            .map(|(a, b)| json!({"from": format!("n{}", a + 1), "to": format!("n{}", b + 1)}))
            .collect();
        let elements = ["taste", "texture", "price", "packaging", "sustainability"];
        let mentions: serde_json::Map<String, Value> = elements.iter().zip(&mentions)
            .filter(|(_, n)| **n > 0).map(|(e, n)| (e.to_string(), json!(n))).collect();
        let signals = match signals {
            Some(((dont, terminal, productive), (intensity, reasoning, abstraction), shifted, t)) => json!({
                "source": "llm", "turn": t.min(turn),
                "uncertainty": {"kind": if productive { "productive" } else { "none" }, "level": 0.5},
                "reasoning": {"causal": reasoning > 0.3, "counterfactual": false, "metacognitive": false, "score": reasoning},
                "emotional": {"intensity": intensity, "trajectory": "steady"},
                "contradiction": {"detected": shifted, "about": ""},
                "knowledge_ceiling": {"says_dont_know": dont, "is_terminal": terminal},
                "concept_depth": {"level": abstraction},
            }),
            None => json!({}),
        };
        json!({
            "topic": "oat milk in coffee", "elements": elements, "turn_count": turn, "conversation_history": history,
            "last_answer": last_answer, "questions": asked,
            "strategy_history": strategies,
            "category_history": strategies.iter().map(|s| category(s)).collect::<Vec<_>>(), "nodes": nodes, "edges": edges, "mentions": mentions, "qualitative_signals": signals,
        })
    }
}

/// What must agree: per candidate its strategy, focus, veto outcomes, raw scores and final
/// score (not the reasoning a twin words its own way).
fn results(b: &Breakdown) -> Value {
    let candidates: Vec<Value> = b
        .candidates
        .iter()
        .map(|c| {
            let vetoes: Vec<Value> = c.vetoes.iter().map(|v| json!([v.scorer, v.is_veto])).collect();
            let raw: Option<Vec<Value>> = c.scores.as_ref().map(|s| s.iter().map(|x| json!([x.scorer, x.raw_score])).collect());
            json!({"strategy": c.strategy, "focus": c.focus, "vetoed": c.vetoed, "vetoes": vetoes, "raw": raw, "final": c.final_score})
        })
        .collect();
    json!({"phase": b.phase, "winner": b.winner, "candidates": candidates})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn scripted_and_native_scorers_agree(state in interview_state()) {
        let mut sel = Selection::new(engine(), "interview", "next_question", &state, 0).unwrap();
        let scripted = sel.run(Some(ScorerImpl::Script)).unwrap();
        let native = sel.run(Some(ScorerImpl::Native)).unwrap();
        prop_assert_eq!(results(&scripted), results(&native));
        // The focuses are in the results: with `Native` every generator's twin made them.
        for (id, script, native) in sel.strategies() {
            prop_assert!(!script || native, "strategy {} lacks a twin of its generator", id);
        }
        for (id, script, native) in sel.scorers() {
            prop_assert!(script && native, "{} lacks a twin", id);
            prop_assert_eq!(sel.run_scorer(&id, ScorerImpl::Script).unwrap(), sel.run_scorer(&id, ScorerImpl::Native).unwrap(), "scorer {}", id);
        }
        // With embeddings (the stand-in's, for the texts the selector would embed), too.
        let texts = sel.texts_to_embed().unwrap();
        sel.set_embeddings(Some(Embeddings::hashed(texts)));
        let scripted = sel.run(Some(ScorerImpl::Script)).unwrap();
        let native = sel.run(Some(ScorerImpl::Native)).unwrap();
        prop_assert_eq!(results(&scripted), results(&native));
    }
}

//! The interview's selection, scripted against native, on the same states: the whole selection
//! (9 strategies, 3 vetoes and 6 weighted scorers, 7 candidates), its focus generators alone,
//! and each scorer alone over every candidate. "Native" runs every generator's and every
//! scorer's Rust twin; "scripted" runs the pack's Rhai. The target: scripted at most 3× native.

use criterion::{Criterion, criterion_group, criterion_main};
use ruleweave::Engine;
use ruleweave::text::Embeddings;
use ruleweave::{ScorerImpl, Selection};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A state after four answers, as the stand-in interview reaches it.
fn state() -> serde_json::Value {
    let answers = [
        "I like oat milk because it tastes nutty and it foams nicely for my morning cappuccino.",
        "The texture is creamy, but honestly the price is a bit high compared to dairy.",
        "I don't know much about packaging, maybe it is recyclable.",
        "Sustainability matters to me, the planet and all that, so I pay a little more.",
    ];
    let asked = [
        "Let's talk about oat milk in coffee. What comes to mind first?",
        "How do you feel about the price of oat milk in coffee?",
        "Was there a time when dairy was different for you?",
        "You mentioned tastes earlier. How does that connect to what you just said?",
    ];
    let mut history = Vec::new();
    for (q, a) in asked.iter().zip(answers) {
        history.push(json!({"role": "interviewer", "content": q}));
        history.push(json!({"role": "respondent", "content": a}));
    }
    json!({
        "last_answer": answers[3],
        "questions": asked,
        "topic": "oat milk in coffee",
        "elements": ["taste", "texture", "price", "packaging", "sustainability"],
        "turn_count": 4,
        "conversation_history": history,
        "strategy_history": ["opening", "cover_element", "contrast", "bridge"],
        "nodes": [
            {"id": "n1", "label": "tastes", "turn": 1}, {"id": "n2", "label": "nutty", "turn": 1},
            {"id": "n3", "label": "cappuccino", "turn": 1}, {"id": "n4", "label": "texture", "turn": 2},
            {"id": "n5", "label": "creamy", "turn": 2}, {"id": "n6", "label": "dairy", "turn": 2},
            {"id": "n7", "label": "packaging", "turn": 3}, {"id": "n8", "label": "sustainability", "turn": 4},
            {"id": "n9", "label": "planet", "turn": 4}
        ],
        "edges": [{"from": "n1", "to": "n2"}, {"from": "n2", "to": "n3"}, {"from": "n4", "to": "n5"}, {"from": "n8", "to": "n9"}],
        "mentions": {"taste": 1, "texture": 2, "price": 1, "packaging": 1, "sustainability": 1},
        "signals": {"source": "llm", "turn": 4, "says_dont_know": false, "terminal": false, "engagement": 0.6},
    })
}

fn bench(c: &mut Criterion) {
    let root = ruleweave_testkit::repo_root();
    let engine = ruleweave_natives::register(Engine::builder(root)).build();
    let mut sel = Selection::new(&engine, "interview", "next_question", &state(), 4).unwrap();
    let candidates = sel.run(None).unwrap().candidates.len();
    eprintln!("interview selection: {candidates} candidates");
    let mut group = c.benchmark_group("interview selection (whole)");
    group.bench_function("scripted", |b| b.iter(|| sel.run(Some(ScorerImpl::Script)).unwrap()));
    group.bench_function("native", |b| b.iter(|| sel.run(Some(ScorerImpl::Native)).unwrap()));
    group.finish();
    // The strategies' focus generators alone, each selection's first step: the scripts, then
    // their native twins.
    let mut group = c.benchmark_group("interview focus generators");
    group.bench_function("scripted", |b| b.iter(|| sel.run_generators(Some(ScorerImpl::Script)).unwrap()));
    group.bench_function("native", |b| b.iter(|| sel.run_generators(Some(ScorerImpl::Native)).unwrap()));
    group.finish();

    // The same selection comparing texts by embeddings (vectors made beforehand, as the
    // selector's one embeddings call makes them): what `similarity:` costs while scoring, and
    // what making the stand-in's vectors costs.
    let texts = sel.texts_to_embed().unwrap();
    let embed = || Embeddings::hashed(&texts);
    eprintln!("interview selection: {} texts to embed", texts.len());
    let mut group = c.benchmark_group("interview selection (whole, by embeddings)");
    group.bench_function("stand-in vectors", |b| b.iter(embed));
    sel.set_embeddings(Some(embed()));
    group.bench_function("scripted", |b| b.iter(|| sel.run(Some(ScorerImpl::Script)).unwrap()));
    group.bench_function("native", |b| b.iter(|| sel.run(Some(ScorerImpl::Native)).unwrap()));
    group.finish();
    sel.set_embeddings(None);

    for (id, _, _) in sel.scorers() {
        let mut group = c.benchmark_group(format!("interview scorer {id} (every candidate)"));
        group.bench_function("scripted", |b| b.iter(|| sel.run_scorer(&id, ScorerImpl::Script).unwrap()));
        group.bench_function("native", |b| b.iter(|| sel.run_scorer(&id, ScorerImpl::Native).unwrap()));
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);

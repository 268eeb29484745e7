//! How close a turn comes to the models' own time. The five packs play on their stand-in models
//! put at a remote model's pace ([`ruleweave::pace`]: a time to first token, then tokens at a
//! rate, seeded jitter), on the SQLite store. Every turn's trace spans are recorded (the turn,
//! each node with the nodes that led to it, each model call and search) and its **critical
//! path** is computed: the longest chain of calls that depend on each other. Calls of one node
//! (one item of a `map:` node) depend on each other in the order they were made; a node depends
//! on the nodes that led to it (its edges, the route taken, a join's sources). Wall time ÷
//! critical path is what the engine added to the models' time, or made them wait: 1.00 is a turn
//! as fast as its models allow.
//!
//! `cargo bench -p ruleweave-engine --bench latency` (about a minute); `-- --json` prints one
//! JSON line per pack for `bench/run.sh`. `cargo test --benches` plays each pack once at a
//! hundredth of the pace so this file cannot rot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ruleweave::pace::{Pace, Shape};
use ruleweave::store::SqliteStore;
use ruleweave::{Engine, Event};
use serde_json::{Value, json};
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, field};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

#[path = "support/debate_answers.rs"]
mod answers;
#[path = "support/party_round.rs"]
mod party_round;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One finished span.
#[derive(Debug, Clone)]
struct Span {
    id: u64,
    parent: Option<u64>,
    name: &'static str,
    node: String,
    step: u64,
    after: String,
    start: Instant,
    end: Instant,
}

/// Keeps every span that closes, with its fields.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Span>>>);

struct Fields<'a>(&'a mut Span);

impl field::Visit for Fields<'_> {
    fn record_debug(&mut self, f: &field::Field, value: &dyn std::fmt::Debug) {
        match f.name() {
            "node" => self.0.node = format!("{value:?}"),
            "after" => self.0.after = format!("{value:?}"),
            _ => {}
        }
    }
    fn record_str(&mut self, f: &field::Field, value: &str) {
        match f.name() {
            "node" => self.0.node = value.to_owned(),
            "after" => self.0.after = value.to_owned(),
            _ => {}
        }
    }
    fn record_i64(&mut self, f: &field::Field, value: i64) {
        if f.name() == "step" {
            self.0.step = value.max(0) as u64;
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a new span is in the registry");
        let now = Instant::now();
        let mut s = Span {
            id: id.into_u64(),
            parent: span.parent().map(|p| p.id().into_u64()),
            name: attrs.metadata().name(),
            node: String::new(),
            step: 0,
            after: String::new(),
            start: now,
            end: now,
        };
        attrs.record(&mut Fields(&mut s));
        span.extensions_mut().insert(s);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(s) = span.extensions_mut().get_mut::<Span>()
        {
            values.record(&mut Fields(s));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id)
            && let Some(mut s) = span.extensions_mut().remove::<Span>()
        {
            s.end = Instant::now();
            self.0.lock().unwrap().push(s);
        }
    }
}

/// A turn's critical path: the longest chain of dependent calls, and how many calls it had.
fn critical_path(spans: &[Span]) -> (Duration, usize) {
    let by_id: HashMap<u64, &Span> = spans.iter().map(|s| (s.id, s)).collect();
    let node_of = |s: &Span| {
        let mut parent = s.parent;
        while let Some(p) = parent.and_then(|p| by_id.get(&p)) {
            if p.name == "node" {
                return Some(p.id);
            }
            parent = p.parent;
        }
        None
    };
    let calls: Vec<&Span> = spans.iter().filter(|s| s.name == "model call" || s.name == "search").collect();
    // Each node run's own weight: its longest chain of calls (the chains of a map node's items
    // run side by side).
    let mut chains: HashMap<(u64, &str), Duration> = HashMap::new();
    for c in &calls {
        let node = node_of(c).expect("every call is made in a node");
        *chains.entry((node, c.node.as_str())).or_default() += c.end - c.start;
    }
    let mut nodes: Vec<&Span> = spans.iter().filter(|s| s.name == "node").collect();
    nodes.sort_by_key(|s| (s.step, s.start));
    let mut path: Vec<Duration> = Vec::with_capacity(nodes.len());
    for (k, n) in nodes.iter().enumerate() {
        let own = chains.iter().filter(|((id, _), _)| *id == n.id).map(|(_, d)| *d).max().unwrap_or_default();
        // What led to it: the latest earlier run of each node it names.
        let before = n
            .after
            .split(',')
            .filter(|a| !a.is_empty())
            .filter_map(|a| (0..k).rev().find(|&j| nodes[j].node == a && nodes[j].step < n.step))
            .map(|j| path[j])
            .max()
            .unwrap_or_default();
        path.push(before + own);
    }
    (path.into_iter().max().unwrap_or_default(), calls.len())
}

/// What a pack plays: its options, and each turn's input.
struct Scenario {
    pack: &'static str,
    label: &'static str,
    options: Value,
    inputs: Vec<Value>,
}

fn scenarios(quick: bool) -> Vec<Scenario> {
    let messages: Vec<&str> = include_str!("../../tests/data/pirate_messages.txt").lines().collect();
    let turns = if quick { 2 } else { 6 };
    let answers = [
        "I led the migration of our billing system to event sourcing; the hardest part was replaying five years of invoices.",
        "We measured it with shadow traffic for two weeks before switching, and rolled back once.",
        "I disagreed with my lead about the schema; we wrote both down and let the load test decide.",
        "Honestly I am not sure, I think the team decided that before I joined.",
        "Mostly Rust and PostgreSQL, some Kafka, and a lot of reading other people's code.",
        "I mentor two juniors now; we pair on reviews every Friday.",
    ];
    vec![
        Scenario {
            pack: "pirate",
            label: "pirate (a turn: judge, then the captain)",
            options: json!({"difficulty": "hard"}),
            inputs: messages.iter().take(turns).map(|m| json!({"message": m})).collect(),
        },
        Scenario {
            pack: "interview",
            label: "interview (a turn: signals, strategy, the next question)",
            options: json!({}),
            inputs: answers.iter().take(turns).map(|a| json!({"answer": a})).collect(),
        },
        Scenario {
            pack: "party",
            label: "party (a round: the picker, or the writer)",
            options: json!({"nsfw": true}),
            inputs: std::iter::once(json!({}))
                .chain((0..turns).map(|t| party_round::round([3, 6, 1, 5, 6, 2][t % 6])))
                .collect(),
        },
        Scenario {
            pack: "designer",
            label: "designer (a game: analysis, design, content for every mechanic, assets)",
            options: json!({}),
            inputs: vec![json!({"question": "the chambers of the heart", "subject": "biology"})],
        },
        Scenario {
            pack: "debate",
            label: "debate (3 rounds, strict fact checking, send-backs)",
            options: json!({"rounds": if quick { 1 } else { 3 }, "fact_check": "strict"}),
            inputs: vec![json!("start")],
        },
    ]
}

/// The pace of the measured runs: a fast hosted model's time to first token and rate, searches
/// slower, every call within ±20%. A hundredth of it for `cargo test --benches`.
fn pace(quick: bool) -> Pace {
    let k = if quick { 0.01 } else { 1.0 };
    let shape = |ms: f64, rate: f64| Shape::new(Duration::from_secs_f64(ms * k / 1000.0), rate / k).jitter(0.2);
    Pace::new(shape(300.0, 100.0)).search(shape(500.0, 0.0)).seed(42)
}

/// What one pack's turns took.
struct Measured {
    turns: usize,
    calls: usize,
    sent_back: usize,
    wall: Duration,
    critical: Duration,
    worst: f64,
}

/// The engine the five packs play on: their stand-ins at `pace`, the SQLite store in `dir`.
async fn standins(dir: &std::path::Path, pace: Pace) -> Engine {
    let url = format!("sqlite://{}", dir.join("latency.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    Engine::builder(repo_root()).store(Arc::new(store)).pace(pace).build()
}

/// The engine of the debate beside LangGraph's: the canned answers of `bench/langgraph/debate_paced.py`,
/// every call the same length (no jitter), in memory as its MemorySaver.
fn canned(pace: Pace) -> Engine {
    Engine::builder(repo_root())
        .provider(Arc::new(answers::Answers::default()))
        .search(ruleweave::search::SearchChoice::Engine(Arc::new(answers::Found)))
        .pace(pace)
        .build()
}

use ruleweave_testkit::repo_root;

fn play(rt: &tokio::runtime::Runtime, engine: &Engine, scenario: &Scenario, spans: &Recorder) -> Measured {
    let mut m =
        Measured { turns: 0, calls: 0, sent_back: 0, wall: Duration::ZERO, critical: Duration::ZERO, worst: 0.0 };
    rt.block_on(async {
        engine.packs().get(scenario.pack).unwrap();
        let mut session = engine.open(scenario.pack, scenario.options.as_object().unwrap()).await.unwrap();
        for input in &scenario.inputs {
            spans.0.lock().unwrap().clear();
            let start = Instant::now();
            let r = session.turn(input.clone()).await.unwrap();
            let wall = start.elapsed();
            let finished = r.finished;
            let recorded = std::mem::take(&mut *spans.0.lock().unwrap());
            let (critical, calls) = critical_path(&recorded);
            if calls == 0 {
                // A turn without model calls (the party's opening) has no path to compare with.
                continue;
            }
            m.sent_back +=
                r.events.iter().filter(|e| matches!(e, Event::Custom { name, .. } if name == "rejected")).count();
            m.turns += 1;
            m.calls += calls;
            m.wall += wall;
            m.critical += critical;
            m.worst = m.worst.max(wall.as_secs_f64() / critical.as_secs_f64());
            if finished {
                break;
            }
        }
    });
    m
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    let quick = !args.iter().any(|a| a == "--bench");
    let as_json = args.iter().any(|a| a == "--json");
    let spans = Recorder::default();
    tracing_subscriber::registry().with(spans.clone()).init();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    if !as_json {
        println!("| pack | turns | calls | wall per turn | critical path | wall ÷ critical path (worst turn) |");
        println!("| --- | --- | --- | --- | --- | --- |");
    }
    let dir = tempfile::tempdir().unwrap();
    let engine = rt.block_on(standins(dir.path(), pace(quick)));
    let mut runs: Vec<(Scenario, Engine)> = scenarios(quick).into_iter().map(|s| (s, engine.clone())).collect();
    // The debate beside LangGraph's on the same pace: a call is 0.3 s to the first token, then
    // its 40 tokens at 100 a second; a search 0.5 s.
    let k = if quick { 0.01 } else { 1.0 };
    let even = Pace::new(Shape::new(Duration::from_secs_f64(0.3 * k), 100.0 / k))
        .search(Shape::new(Duration::from_secs_f64(0.5 * k), 0.0));
    runs.push((
        Scenario {
            pack: "debate",
            label: "debate, canned answers and even calls (as `bench/langgraph/debate_paced.py`)",
            options: json!({"rounds": if quick { 1 } else { 3 }, "fact_check": "strict"}),
            inputs: vec![json!("start")],
        },
        canned(even),
    ));
    for (s, engine) in &runs {
        let m = play(&rt, engine, s, &spans);
        assert!(m.turns > 0 && m.calls > 0, "{} made no model calls", s.pack);
        let per = |d: Duration| d.as_secs_f64() * 1000.0 / m.turns as f64;
        let ratio = m.wall.as_secs_f64() / m.critical.as_secs_f64();
        if as_json {
            let line = json!({"bench": "latency", "pack": s.pack, "label": s.label, "turns": m.turns, "calls": m.calls,
                "sent_back": m.sent_back, "wall_ms": per(m.wall), "critical_ms": per(m.critical),
                "ratio": ratio, "worst": m.worst});
            println!("{line}");
        } else {
            let back = if s.pack == "debate" { format!(", {} sent back", m.sent_back) } else { String::new() };
            println!(
                "| {} | {} | {}{back} | {:.0} ms | {:.0} ms | **{ratio:.3}** ({:.3}) |",
                s.label,
                m.turns,
                m.calls,
                per(m.wall),
                per(m.critical),
                m.worst
            );
        }
    }
}

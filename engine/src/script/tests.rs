//! The sandbox's promises: closed by default, bounded, read-only state, errors with positions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use rhai::{Dynamic, Map};

use super::*;
use crate::prompt::Prompts;
use crate::value::from_json;

fn sandbox(limits: Limits) -> Sandbox {
    let shared = Arc::new(HostShared::new(
        "t".into(),
        Map::new(),
        Arc::new(Prompts::empty(&Map::new())),
        Arc::new(IndexMap::new()),
        Default::default(),
        Default::default(),
    ));
    Sandbox::new(limits, shared, &[]).unwrap()
}

fn func(sb: &Sandbox, src: &str, name: &str) -> FnRef {
    FnRef { file: Arc::new(sb.compile("scripts/t/x.rhai", src).unwrap()), name: name.into() }
}

fn call(sb: &Sandbox, src: &str) -> Result<Dynamic> {
    let f = func(sb, src, "f");
    let mut state = from_json(&serde_json::json!({"a": 1, "list": [1, 2]})).into_read_only();
    sb.call(&f, &mut state, (), None)
}

#[test]
fn an_infinite_loop_stops_at_the_operation_limit() {
    let sb = sandbox(Limits { max_operations: 10_000, ..Limits::default() });
    let e = call(&sb, "fn f() {\n  loop { }\n}").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.detail().contains("more than 10000 operations"), "{e}");
    // Rhai drops the position of limit errors; the error names the function that ran away.
    assert_eq!(e.origin().unwrap().to_string(), "scripts/t/x.rhai:1:1");
    assert!(e.detail().starts_with("x.rhai::f failed"), "{e}");
}

#[test]
fn a_slow_script_stops_at_the_wall_time_limit() {
    let sb = sandbox(Limits { max_operations: 100_000_000, max_wall: Duration::from_millis(50), ..Limits::default() });
    let start = Instant::now();
    let e = call(&sb, "fn f() { let x = 0; loop { x += 1; } }").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.detail().contains("ran longer than 50 ms"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn runaway_recursion_stops_at_the_call_depth_limit() {
    let sb = sandbox(Limits { max_call_levels: 8, ..Limits::default() });
    let e = call(&sb, "fn down(n) { down(n + 1) }\nfn f() { down(0) }").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.detail().contains("nested calls deeper than 8"), "{e}");
}

#[test]
fn strings_cannot_grow_past_the_size_limit() {
    let sb = sandbox(Limits { max_string_size: 100, ..Limits::default() });
    let e = call(&sb, "fn f() { let s = \"x\"; loop { s += s; } }").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
}

#[test]
fn the_state_is_read_only() {
    let sb = sandbox(Limits::default());
    assert!(call(&sb, "fn f() { this.a = 2; }").unwrap_err().detail().contains("Cannot modify"));
    assert!(call(&sb, "fn f() { this.list.push(3); }").unwrap_err().detail().contains("push"));
    // A copy is the script's own.
    assert_eq!(call(&sb, "fn f() { let l = this.list; l.push(3); l.len() }").unwrap().as_int().unwrap(), 3);
}

#[test]
fn the_sandbox_has_no_eval_sleep_or_clock() {
    let sb = sandbox(Limits::default());
    assert!(sb.compile("scripts/t/x.rhai", "fn f() { eval(\"1\") }").is_err());
    for src in ["fn f() { sleep(1) }", "fn f() { timestamp() }", "fn f() { exit(1) }"] {
        let e = call(&sb, src).unwrap_err();
        assert!(e.detail().contains("Function not found"), "{src}: {e}");
    }
}

#[test]
fn undefined_variables_are_compile_errors_with_positions() {
    let sb = sandbox(Limits::default());
    let e = sb.compile("scripts/t/x.rhai", "fn f() {\n  let a = 1;\n  a + nope\n}").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Pack);
    assert_eq!(e.origin().unwrap().to_string(), "scripts/t/x.rhai:3:7");
}

#[test]
fn runtime_errors_point_into_the_function_that_failed() {
    let sb = sandbox(Limits::default());
    let e = call(&sb, "fn inner(x) {\n  x.nothing()\n}\nfn f() { inner(1) }").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Script);
    assert_eq!(e.origin().unwrap().line, 2, "{e}");
    let e = call(&sb, "fn f() {\n  throw \"custom failure\";\n}").unwrap_err();
    assert_eq!(e.detail(), "x.rhai::f failed: custom failure");
    assert_eq!(e.origin().unwrap().to_string(), "scripts/t/x.rhai:2:3");
}

#[test]
fn model_calls_are_found_statically() {
    let sb = sandbox(Limits::default());
    assert!(sb.compile("scripts/t/x.rhai", "fn f() { llm(\"judge\", \"hi\") }").unwrap().calls_models);
    assert!(
        sb.compile("scripts/t/x.rhai", "fn f() { let x = #{ a: llm_json(\"p\", \"q\") }; x }").unwrap().calls_models
    );
    assert!(!sb.compile("scripts/t/x.rhai", "// llm(\"judge\")\nfn f() { \"llm()\" }").unwrap().calls_models);
}

/// Scripts that run at the same time get a copy of the state only when their file reads it.
#[test]
fn reading_the_state_is_found_statically() {
    let sb = sandbox(Limits::default());
    let reads = |src: &str| sb.compile("scripts/t/x.rhai", src).unwrap().reads_state;
    assert!(reads("fn f() { this.x }"));
    assert!(reads("fn f(c) { c.id } fn g() { let all = this; all.len() }"), "any function of the file");
    assert!(reads("fn f(c) { [c].map(|x| x + this.n) }"));
    assert!(!reads("// reads this.x? no:\nfn f(item) { `this ${item}` }"), "comments and strings say nothing");
}

#[test]
fn host_functions_that_need_a_turn_say_so() {
    let sb = sandbox(Limits::default());
    let e = call(&sb, "fn f() { input() }").unwrap_err();
    assert!(e.detail().contains("input() is only available while a turn runs"), "{e}");
}

#[test]
fn text_host_functions_work_without_a_turn() {
    let sb = sandbox(Limits::default());
    let v = call(&sb, r#"fn f() { keywords_found("Jestem z twojej ZAŁOGI, kupcze", #{crew: ["zalog"], merchant: ["kupiec", "kupc"], king: ["krol"]}) }"#).unwrap();
    assert_eq!(crate::value::to_json(&v), serde_json::json!(["crew", "merchant"]));
    let v = call(&sb, r#"fn f() { [matches("Skarb jest twój!", "skarb jest tw[oó]j"), contains_any("Oto mój skarb", ["moj skarb"]), clamp(140, 0, 100)] }"#).unwrap();
    assert_eq!(crate::value::to_json(&v), serde_json::json!([true, true, 100]));
    let e = call(&sb, r#"fn f() { matches("x", "(unclosed") }"#).unwrap_err();
    assert!(e.detail().contains("bad pattern"), "{e}");
    let prompt = "Lists: a, b\nPlayer: one\nCaptain: two\n  Player: indented\nPlayer: three\r\nPlayer:";
    let v = call(
        &sb,
        &format!(
            r#"fn f() {{ [labelled("{}", "Player: "), labelled("{}", "Lists: ")] }}"#,
            prompt.escape_default(),
            prompt.escape_default()
        ),
    )
    .unwrap();
    assert_eq!(crate::value::to_json(&v), serde_json::json!([["one", "three"], ["a, b"]]));
    let v = call(&sb, r#"fn f() { distinct(["b", "a", "b", 1, 1.0, 1, #{x: 1}, #{x: 1}, "1"]) }"#).unwrap();
    assert_eq!(crate::value::to_json(&v), serde_json::json!(["b", "a", 1, 1.0, {"x": 1}, "1"]));
}

#[test]
fn the_deepest_recursion_allowed_never_overflows_a_small_thread_stack() {
    // The worst a call level can cost: expressions nested as deep as the parser allows.
    let body = format!("{}down(n + 1){}", "(1 + ".repeat(12), ")".repeat(12));
    let src = format!("fn down(n) {{ {body} }}\nfn f() {{ down(0) }}");
    let thread = std::thread::Builder::new().stack_size(256 << 10).spawn(move || {
        let sb = sandbox(Limits { max_call_levels: 64, ..Limits::default() });
        call(&sb, &src).map(|_| ())
    });
    let e = thread.unwrap().join().expect("the thread survived").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.detail().contains("nested calls deeper than 64 (limits.max_call_levels)"), "{e}");
}

#[test]
fn import_is_refused_where_it_is_written() {
    let sb = sandbox(Limits::default());
    let e = sb.compile("scripts/t/x.rhai", "fn f() { 1 }\nimport \"helpers\" as h;\n").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Pack);
    assert!(e.detail().starts_with("`import` is not available"), "{e}");
    assert_eq!(e.origin().unwrap().to_string(), "scripts/t/x.rhai:2:1");
}

/// A thread that ran a model-calling script which panicked goes on to other work: it must not
/// go on allowing model calls to block it.
#[test]
fn a_panic_under_allow_blocking_puts_the_flag_back() {
    assert!(!may_block());
    let panicked = std::panic::catch_unwind(|| allow_blocking(|| panic!("a host function broke")));
    assert!(panicked.is_err());
    assert!(!may_block());
}

/// A panic inside a script on a shared state (a bug in a host function) leaves the state usable:
/// the call lets go of the state's lock before the panic goes on, so the turn can be undone.
#[test]
fn a_panic_in_a_script_leaves_the_shared_state_unlocked() {
    let mut sb = sandbox(Limits::default());
    sb.engine.register_fn("boom", |_: i64| -> i64 { panic!("a bug in a host function") });
    // Its argument is the state's, so the call happens when the script runs (a call with constant
    // arguments is worked out while compiling).
    let f = func(&sb, "fn f() { this.a + boom(this.a) }", "f");
    let mut state = crate::state::root(from_json(&serde_json::json!({"a": 1})).cast::<Map>());
    let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| sb.call(&f, &mut state, (), None)));
    assert!(panicked.is_err());
    assert!(crate::state::Undo::default().rollback(&mut state), "the state's lock is not poisoned");
    assert_eq!(crate::value::to_json(&state), serde_json::json!({"a": 1}));
}

/// A tag for turn `turn` of session `id`: its own time, seed, options and input.
fn turn_tag(id: &str, turn: u64, now: i64) -> CallTag {
    let options = from_json(&serde_json::json!({"o": format!("option of {id}")})).cast::<Map>();
    let input = from_json(&serde_json::json!({"message": format!("said in turn {turn}")})).cast::<Map>();
    let provider = Arc::new(crate::runtime::NoModel("t".into()));
    let start = crate::turn::TurnStart {
        session_id: id.into(),
        turn,
        seed: turn * 7919,
        now_ms: now,
        options,
        input,
        provider,
        live: None,
    };
    let ctx = crate::turn::TurnCtx::new(start);
    CallTag::new(Arc::new(ctx), "node".into())
}

/// Pack scripts compile with full optimization, which works a call with constant arguments out
/// while compiling. The engine here compiles with a turn at hand (a default tag, as if one had
/// leaked into compilation), so any function that reads the turn and is not registered volatile
/// would be frozen at that turn's value: every value must still be the running turn's, and every
/// event emitted when the turn runs. A pure text function, by contrast, is worked out once.
#[test]
fn constant_folding_freezes_nothing_a_turn_changes() {
    let mut sb = sandbox(Limits::default());
    sb.engine.set_default_tag(Dynamic::from(turn_tag("compiled", 1, 111)));
    let src = r#"fn f() {
        emit("seen", #{n: 1});
        log("a line");
        warn("a warning");
        [now(), turn_number(), session_id(), option("o"), input()["message"], random_int(0, 1000000000),
         random(), pick([1, 2, 3, 4, 5, 6, 7, 8, 9]), shuffle([1, 2, 3, 4, 5, 6, 7, 8, 9]), similarity_kind(),
         similarity("a cat sat", "a dog ran"), tokens_spent(), last_call()]
    }"#;
    let f = func(&sb, src, "f");
    let run = |tag: CallTag| {
        let mut state = from_json(&serde_json::json!({})).into_read_only();
        let v = crate::value::to_json(&sb.call(&f, &mut state, (), Some(tag.clone())).unwrap());
        let events: Vec<String> = tag.turn.take().events.iter().map(|e| format!("{e:?}")).collect();
        (v, events)
    };
    let (compiled, _) = run(turn_tag("compiled", 1, 111));
    let (a, events) = run(turn_tag("played", 2, 222));
    let (b, _) = run(turn_tag("played", 3, 333));
    let first = |v: &serde_json::Value| serde_json::Value::from(v.as_array().unwrap()[..5].to_vec());
    assert_eq!(first(&a), serde_json::json!([222, 2, "played", "option of played", "said in turn 2"]));
    assert_eq!(first(&b), serde_json::json!([333, 3, "played", "option of played", "said in turn 3"]));
    for i in 5..9 {
        assert!(a[i] != compiled[i] || b[i] != compiled[i], "randomness #{i} frozen: {a} {b} {compiled}");
    }
    assert!(events.iter().any(|e| e.contains("seen")), "emit ran in the turn: {events:?}");
    assert_eq!(events.iter().filter(|e| e.contains("a line") || e.contains("a warning")).count(), 2, "{events:?}");
    // With a selection's embeddings, similarity is the vectors', not the words' the compile saw.
    let mut tag = turn_tag("played", 4, 444);
    let mut vectors = crate::text::Embeddings::new("m");
    vectors.insert("a cat sat", Arc::from([1.0f32, 0.0]));
    vectors.insert("a dog ran", Arc::from([1.0f32, 0.0]));
    tag.embeddings = Some(Arc::new(vectors));
    let (c, _) = run(tag);
    assert_eq!((&c[9], &compiled[9]), (&serde_json::json!("embedding"), &serde_json::json!("lexical")), "{c}");
    assert_eq!(c[10], serde_json::json!(1.0), "the vectors' similarity: {c}");
    assert_ne!(compiled[10], serde_json::json!(1.0), "the words' similarity differs: {compiled}");

    // A pure function with constant arguments is worked out while compiling: its call is gone.
    let folded = sb.compile("scripts/t/pure.rhai", r#"fn f() { fold("ÀBÇ") }"#).unwrap();
    let body = format!("{:?}", folded.ast);
    assert!(!body.contains("\"fold\"") && body.contains("\"abc\""), "{body}");
}

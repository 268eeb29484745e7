//! Stepping through a turn: breakpoints that hold a turn where asked and change nothing it does,
//! edits of the state at a pause or between turns, forks with a patch (their replays are the
//! lab's tests).

use crate::support;

use std::sync::Arc;

use ruleweave::store::{self, CheckpointKind};
use ruleweave::{Breakpoints, Engine, ErrorKind, Session};
use serde_json::{Value, json};
use support::{Canned, judged, repo_root};

const MOVES: [&str; 3] = ["Ahoy, captain! I bring rum.", "Oto mój skarb, weź go", "Please, the chest?"];

fn before(node: &str) -> Breakpoints {
    Breakpoints { before: vec![node.into()], ..Default::default() }
}

/// An engine over the shipped packs on the pack's stand-in model, in memory.
fn standin() -> Engine {
    Engine::builder(repo_root()).store(Arc::new(store::MemoryStore::new())).build()
}

async fn pirate(engine: &Engine, id: &str) -> Session {
    let options = json!({"difficulty": "medium"});
    engine.open_with_id("pirate", options.as_object().unwrap(), Some(id.into())).await.unwrap()
}

/// Plays a turn one step at a time, held before its first node, then stepped: the nodes it
/// stopped before.
async fn stepped(s: &mut Session, input: Value) -> (Vec<String>, ruleweave::TurnResult) {
    let first = s.pack().nodes().next().unwrap().to_owned();
    let mut stops = Vec::new();
    let mut r = s.turn_breaking(input, before(&first), None).await.unwrap();
    while let Some(p) = r.paused.clone().filter(|p| p.breakpoint) {
        stops.push(p.before.clone().unwrap());
        r = s.resume(None, Breakpoints::step(), None).await.unwrap();
    }
    (stops, r)
}

#[tokio::test]
async fn a_turn_stepped_node_by_node_does_what_it_does_unstepped() {
    let (plain, step) = (standin(), standin());
    let mut a = pirate(&plain, "same-seed").await;
    let mut b = pirate(&step, "same-seed").await;
    for (i, m) in MOVES.iter().enumerate() {
        let ra = a.turn(json!({"message": m})).await.unwrap();
        let (stops, rb) = stepped(&mut b, json!({"message": m})).await;
        assert_eq!(stops[..4], ["intake", "merit_check", "generate_response", "validate_response"], "turn {i}");
        assert_eq!((rb.turn, rb.paused.clone()), (ra.turn, None));
        assert_eq!(b.state(), a.state(), "turn {}: a break changes nothing the turn does", i + 1);
        assert_eq!(rb.output, ra.output);
        if a.is_finished() {
            break;
        }
    }
    assert_eq!(b.turns(), a.turns());
}

#[tokio::test]
async fn a_stepped_turn_draws_the_same_random_numbers() {
    let root = support::write_root(&[
        ("config/dice.yaml", &TWO_STEPS.replace("two.rhai", "dice.rhai")),
        (
            "scripts/dice/dice.rhai",
            "fn a() { #{ log: random_int(1, 1000000) } }\nfn b() { #{ log: random_int(1, 1000000) } }",
        ),
    ]);
    let (plain, step) = (Engine::builder(root.path()).build(), Engine::builder(root.path()).build());
    let mut a = plain.open_with_id("dice", &Default::default(), Some("dice".into())).await.unwrap();
    let mut b = step.open_with_id("dice", &Default::default(), Some("dice".into())).await.unwrap();
    for _ in 0..3 {
        a.turn(json!({"text": "roll"})).await.unwrap();
        let (stops, _) = stepped(&mut b, json!({"text": "roll"})).await;
        assert_eq!(stops, ["a", "b"]);
    }
    assert_eq!(a.state()["log"].as_array().unwrap().len(), 6);
    assert_eq!(b.state(), a.state());
}

#[tokio::test]
async fn a_break_holds_the_turn_and_an_edit_at_the_pause_is_what_the_rest_sees() {
    let canned = Canned::new();
    canned.reply("judge", judged(30)).reply("pirate", "Arrr, never.");
    let e = Engine::builder(repo_root()).provider(canned.clone()).build();
    let mut s = pirate(&e, "held").await;
    let r = s.turn_breaking(json!({"message": "Ahoy!"}), before("generate_response"), None).await.unwrap();
    let p = r.paused.clone().expect("held");
    assert_eq!((p.before.as_deref(), p.after.as_deref(), p.breakpoint), (Some("generate_response"), None, true));
    assert_eq!(p.next, ["generate_response"]);
    assert_eq!((r.turn, s.turns()), (1, 0), "the turn is under way, not done");
    assert_eq!(s.field("merit_score"), Some(json!(30)), "the judge's score is in");
    assert_eq!(s.field("pirate_response"), Some(json!("")), "no reply yet");
    assert!(canned.asked("pirate").is_empty());

    // Another turn is refused until this one is resumed.
    let busy = s.turn(json!({"message": "again"})).await.unwrap_err();
    assert_eq!(busy.kind(), ErrorKind::Conflict);
    assert!(busy.to_string().contains("held at a breakpoint before generate_response"), "{busy}");

    // Edits are checked whole: nothing of a bad one is set.
    let bad = s.edit(json!({"merit_score": 70, "merit_scor": 1}).as_object().unwrap().clone()).await.unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::Input);
    assert!(bad.to_string().contains("`merit_scor` is not a state field (did you mean `merit_score`?)"), "{bad}");
    let wrong = s.edit(json!({"merit_score": "high"}).as_object().unwrap().clone()).await.unwrap_err();
    assert!(wrong.to_string().contains("`merit_score` is an int, not a string"), "{wrong}");
    assert_eq!(s.field("merit_score"), Some(json!(30)));

    let n = s.edit(json!({"merit_score": 70, "merit_has_earned_it": true}).as_object().unwrap().clone()).await.unwrap();
    let kinds: Vec<CheckpointKind> = e.checkpoints(s.id()).await.unwrap().iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CheckpointKind::Start, CheckpointKind::Break, CheckpointKind::Edit]);
    assert_eq!(n, 2);

    let done = s.resume(None, Breakpoints::none(), None).await.unwrap();
    assert_eq!((done.turn, done.paused.clone(), s.turns()), (1, None, 1));
    assert_eq!(done.output["merit_score"], 70, "the rest of the turn saw the edit");
    assert_eq!(done.output["pirate_response"], "Arrr, never.");
    let nothing = s.resume(None, Breakpoints::none(), None).await.unwrap_err();
    assert_eq!(nothing.kind(), ErrorKind::Conflict);
    assert!(nothing.to_string().contains("is not paused"), "{nothing}");

    let unknown = s.turn_breaking(json!({"message": "x"}), before("generate_respons"), None).await.unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::Input);
    assert!(unknown.to_string().contains("(did you mean `generate_response`?)"), "{unknown}");
}

const TWO_STEPS: &str = r#"
state:
  n: {type: int, reducer: add}
  log: {type: list, reducer: append}
input:
  text: {type: string, required: true}
graph:
  nodes:
    a: {script: two.rhai::a}
    b: {script: two.rhai::b}
  edges:
    - START -> a
    - a -> b
    - b -> END
"#;

#[tokio::test]
async fn a_failure_after_resuming_goes_back_to_the_pause() {
    let root = support::write_root(&[
        ("config/two.yaml", TWO_STEPS),
        (
            "scripts/two/two.rhai",
            r#"fn a() { #{ n: 1, log: "a" } }
fn b() { if this.n > 5 { throw "n is too big"; } #{ log: "b" } }"#,
        ),
    ]);
    let e = Engine::builder(root.path()).build();
    let mut s = e.open("two", &Default::default()).await.unwrap();
    let after_a = Breakpoints { after: vec!["a".into()], ..Default::default() };
    let r = s.turn_breaking(json!({"text": "go"}), after_a, None).await.unwrap();
    assert_eq!(r.paused.unwrap().after.as_deref(), Some("a"));
    let at = s.edit(json!({"n": 10}).as_object().unwrap().clone()).await.unwrap();
    let failed = s.resume(None, Breakpoints::none(), None).await.unwrap_err();
    assert!(failed.to_string().contains("n is too big"), "{failed}");
    assert_eq!(s.checkpoint(), at, "rolled back to the pause, not to the turn's start");
    assert_eq!(s.paused().unwrap().after.as_deref(), Some("a"));
    assert_eq!(s.state(), json!({"n": 10, "log": ["a"]}));
    s.edit(json!({"n": 2}).as_object().unwrap().clone()).await.unwrap();
    let done = s.resume(None, Breakpoints::none(), None).await.unwrap();
    assert_eq!((done.turn, s.turns()), (1, 1));
    assert_eq!(s.state(), json!({"n": 2, "log": ["a", "b"]}));
}

#[tokio::test]
async fn a_fork_with_a_patch_leaves_the_original_as_it_was() {
    let e = standin();
    let mut s = pirate(&e, "origin").await;
    s.turn(json!({"message": MOVES[0]})).await.unwrap();
    s.turn(json!({"message": MOVES[2]})).await.unwrap();
    let before: Vec<_> = e.checkpoints(s.id()).await.unwrap();
    let set = json!({"merit_score": 99}).as_object().unwrap().clone();
    let fork = e.fork_with(s.id(), 1, set).await.unwrap();
    assert_eq!(fork.field("merit_score"), Some(json!(99)));
    assert_eq!(fork.turns(), 1);
    assert_eq!(e.checkpoints(s.id()).await.unwrap(), before, "the original's history is untouched");
    let bad = e.fork_with(s.id(), 1, json!({"nope": 1}).as_object().unwrap().clone()).await.unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::Input);
}

#[tokio::test]
async fn resume_at_a_pause_point_of_the_pack_plays_the_next_turn() {
    let root = support::write_root(&[
        (
            "config/two.yaml",
            &TWO_STEPS
                .replace("text: {type: string, required: true}", "text: {type: string}")
                .replace("    - b -> END\n", "    - b -> END\n  pause_after:\n    a: 'true'\n"),
        ),
        ("scripts/two/two.rhai", "fn a() { #{ n: 1, log: \"a\" } }\nfn b() { #{ log: \"b:\" + input().text } }"),
    ]);
    let e = Engine::builder(root.path()).build();
    let mut s = e.open("two", &Default::default()).await.unwrap();
    let r = s.turn(json!({"text": "go"})).await.unwrap();
    let p = r.paused.unwrap();
    assert_eq!((p.after.as_deref(), p.breakpoint), (Some("a"), false));
    // The pack's own pause: resume plays the next turn, from where it paused, as an empty line.
    let next = s.resume(None, Breakpoints::none(), None).await.unwrap();
    assert_eq!((next.turn, next.paused.clone()), (2, None));
    assert_eq!(s.state(), json!({"n": 1, "log": ["a", "b:"]}));
    let nothing = s.resume(None, Breakpoints::none(), None).await.unwrap_err();
    assert_eq!(nothing.kind(), ErrorKind::Conflict);
}

/// A breakpoint names a node of the version the turn plays: after an edit adds a node before
/// `b`, a break on the new node holds the turn there (it is not looked up on the old graph).
#[tokio::test]
async fn a_breakpoint_names_a_node_of_the_rules_just_saved() {
    let root = support::write_root(&[
        ("config/two.yaml", TWO_STEPS),
        (
            "scripts/two/two.rhai",
            "fn a() { #{ n: 1, log: \"a\" } }\nfn b() { #{ log: \"b\" } }\nfn c() { #{ log: \"c\" } }",
        ),
    ]);
    let e = Engine::builder(root.path()).build();
    let mut s = e.open("two", &Default::default()).await.unwrap();
    s.turn(json!({"text": "go"})).await.unwrap();
    let three = TWO_STEPS
        .replace("    b: {script: two.rhai::b}", "    c: {script: two.rhai::c}\n    b: {script: two.rhai::b}")
        .replace("    - a -> b\n", "    - a -> c\n    - c -> b\n");
    std::fs::write(root.path().join("config/two.yaml"), three).unwrap();
    let reloaded = e.packs().reload_files(&["config/two.yaml".to_owned()]);
    assert_eq!(reloaded.len(), 1, "{reloaded:?}");
    let r = s.turn_breaking(json!({"text": "go"}), before("c"), None).await.unwrap();
    assert_eq!(r.paused.unwrap().before.as_deref(), Some("c"));
    assert_eq!(s.state()["log"], json!(["a", "b", "a"]));
    let done = s.resume(None, Breakpoints::none(), None).await.unwrap();
    assert_eq!((done.turn, s.state()["log"].clone()), (2, json!(["a", "b", "a", "c", "b"])));
}

/// An edit says what it leaves behind: at a pause in turn 2, `merit_score` set by hand leaves
/// the fields `merit_check` computed with it (`merit_has_earned_it`, the breakdown) as the old
/// score made them, and the rest of the turn writes the reply again; between turns, the whole
/// next turn writes them again. An edit while turn 2 is held is listed under turn 2.
#[tokio::test]
async fn an_edit_says_what_was_derived_from_the_field_and_what_the_turn_recomputes() {
    let canned = Canned::new();
    canned.reply("judge", judged(30)).reply("pirate", "Arrr, never.");
    let e = Engine::builder(repo_root()).provider(canned.clone()).build();
    let mut s = pirate(&e, "effects").await;
    s.turn(json!({"message": "Ahoy!"})).await.unwrap();
    s.turn_breaking(json!({"message": "Ahoy again!"}), before("generate_response"), None).await.unwrap();
    let set = json!({"merit_score": 70}).as_object().unwrap().clone();
    s.edit(set).await.unwrap();
    let effects = s.edit_effects(&["merit_score".to_owned()]).await.unwrap();
    let derived: Vec<(&str, &str, &str)> =
        effects.derived.iter().map(|d| (d.field.as_str(), d.from.as_str(), d.by.as_str())).collect();
    assert!(derived.contains(&("merit_has_earned_it", "merit_score", "merit_check")), "{derived:?}");
    assert!(derived.iter().all(|(f, from, by)| *f != "merit_score" && *from == "merit_score" && *by == "merit_check"));
    assert!(effects.recomputed_next.contains(&"pirate_response".to_owned()), "{:?}", effects.recomputed_next);
    assert!(!effects.recomputed_next.contains(&"merit_score".to_owned()), "merit_check ran already this turn");
    let listed = e.checkpoints(s.id()).await.unwrap();
    let edit = listed.iter().find(|c| c.kind == CheckpointKind::Edit).unwrap();
    assert_eq!(edit.turn, 2, "held in turn 2, edited in turn 2");

    // Between turns: derived from the last turn's nodes, and the next turn writes it again.
    s.resume(None, Breakpoints::none(), None).await.unwrap();
    s.edit(json!({"merit_score": 10}).as_object().unwrap().clone()).await.unwrap();
    let effects = s.edit_effects(&["merit_score".to_owned()]).await.unwrap();
    assert!(effects.derived.iter().any(|d| d.field == "merit_has_earned_it" && d.by == "merit_check"), "{effects:?}");
    assert!(effects.recomputed_next.contains(&"merit_score".to_owned()), "{effects:?}");
    let edits: Vec<u64> = e
        .checkpoints(s.id())
        .await
        .unwrap()
        .iter()
        .filter(|c| c.kind == CheckpointKind::Edit)
        .map(|c| c.turn)
        .collect();
    assert_eq!(edits, [2, 2], "after turn 2, before turn 3");
}

/// Who made a write is that write's alone: named for an edit the schema refuses, the name is
/// not left for the next write; named for a held turn, the hold and its resume each say so.
#[tokio::test]
async fn a_name_given_for_a_write_goes_with_that_write_alone() {
    let engine = standin();
    let mut s = pirate(&engine, "names").await;
    s.acting_as(Some("key_designer".into()));
    let refused = s.edit(json!({"no_such_field": 1}).as_object().unwrap().clone()).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Input);
    s.turn(json!({"message": "Ahoy!"})).await.unwrap();
    s.acting_as(Some("key_designer".into()));
    s.turn_breaking(json!({"message": "A tale of gold."}), before("generate_response"), None).await.unwrap();
    s.resume(None, Breakpoints::none(), None).await.unwrap();
    let made: Vec<(CheckpointKind, Option<String>)> =
        engine.checkpoints(s.id()).await.unwrap().into_iter().skip(1).map(|c| (c.kind, c.by)).collect();
    assert_eq!(
        made,
        [
            (CheckpointKind::Turn, None),
            (CheckpointKind::Break, Some("key_designer".into())),
            (CheckpointKind::Turn, None)
        ],
        "the refused edit's name is not the next turn's, and the resume was not named"
    );
}

//! Replays: a recorded session played again on the rules as they are, turn by turn; sessions
//! that hold edits of the state, and forks, replay from where they started to the same state.

use std::sync::Arc;

use ruleweave::store::MemoryStore;
use ruleweave::{Breakpoints, Engine, Session};
use ruleweave_lab::replay::{Fallback, Recording, Replayer};
use ruleweave_testkit::repo_root;
use serde_json::json;

const MOVES: [&str; 3] = ["Ahoy, captain! I bring rum.", "Oto mój skarb, weź go", "Please, the chest?"];

fn before(node: &str) -> Breakpoints {
    Breakpoints { before: vec![node.into()], ..Default::default() }
}

/// An engine over the shipped packs on the pack's stand-in model, in memory.
fn standin() -> Engine {
    Engine::builder(repo_root()).store(Arc::new(MemoryStore::new())).build()
}

async fn pirate(engine: &Engine, id: &str) -> Session {
    let options = json!({"difficulty": "medium"});
    engine.open_with_id("pirate", options.as_object().unwrap(), Some(id.into())).await.unwrap()
}

#[tokio::test]
async fn a_session_with_edits_replays_to_the_same_state_every_time() {
    let e = standin();
    let mut s = pirate(&e, "edited").await;
    s.turn(json!({"message": MOVES[0]})).await.unwrap();
    s.edit(json!({"merit_score": 12}).as_object().unwrap().clone()).await.unwrap();
    s.turn_breaking(json!({"message": MOVES[2]}), before("validate_response"), None).await.unwrap();
    s.edit(json!({"pirate_response": "Edited by hand."}).as_object().unwrap().clone()).await.unwrap();
    s.resume(None, Breakpoints::none(), None).await.unwrap();
    let recorded = s.state();
    assert_eq!(recorded["pirate_response"], "Edited by hand.");

    let rec = Recording::from_store(&e, s.id()).await.unwrap();
    assert_eq!(rec.turns[1].edits.len(), 2, "{:?}", rec.turns[1].edits);
    assert_eq!(rec.turns[1].edits[0].at, None);
    assert_eq!(rec.turns[1].edits[1].at, Some(ruleweave::Stop::Before("validate_response".into())));
    let replayer = Replayer::new(&e, "pirate", Fallback::Fail).unwrap();
    for _ in 0..2 {
        let diffs = replayer.replay(&rec).await.unwrap();
        assert!(diffs.iter().all(|d| d.is_same()), "{diffs:?}");
        assert_eq!(diffs.last().unwrap().state, recorded);
    }

    // A fork with a patch, played on and edited: its replay starts from the patched state.
    let set = json!({"merit_score": 44}).as_object().unwrap().clone();
    let mut fork = e.fork_with(s.id(), 1, set).await.unwrap();
    fork.turn(json!({"message": MOVES[1]})).await.unwrap();
    fork.edit(json!({"outcome": "by hand"}).as_object().unwrap().clone()).await.unwrap();
    fork.turn(json!({"message": MOVES[2]})).await.unwrap();
    let forked = fork.state();
    let rec = Recording::from_store(&e, fork.id()).await.unwrap();
    assert_eq!(rec.base.as_ref().unwrap().state["merit_score"], 44);
    for _ in 0..2 {
        let diffs = replayer.replay(&rec).await.unwrap();
        assert!(diffs.iter().all(|d| d.is_same()), "{diffs:?}");
        assert_eq!(diffs.last().unwrap().state, forked);
    }
}

#[tokio::test]
async fn a_fork_replays_from_the_state_it_was_handed() {
    let engine = Engine::builder(repo_root()).build();
    let mut session = engine.open("pirate", &Default::default()).await.unwrap();
    let first = session.turn(json!("Ahoy, captain! I am your long lost cousin.")).await.unwrap();
    session.turn(json!("I sailed with your brother.")).await.unwrap();
    let mut fork = engine.fork(session.id(), first.checkpoint).await.unwrap();
    fork.turn(json!("The Navy is coming, and I know the way out!")).await.unwrap();
    let rec = Recording::from_store(&engine, fork.id()).await.unwrap();
    assert_eq!(rec.base.as_ref().map(|b| b.turns), Some(1));
    let diffs = Replayer::new(&engine, "pirate", Fallback::Fail).unwrap().replay(&rec).await.unwrap();
    assert_eq!(diffs.len(), 1);
    assert!(diffs[0].is_same(), "nothing changed on unchanged rules: {}", diffs[0].summary());
    assert_eq!(diffs[0].turn, 2, "the fork's turn is the second of its conversation");
}

//! What a person sees: every shipped pack's `display:` renders at open and after a turn, the
//! opening says what kind it is, a node that fell back is told, speeches stream under their
//! speaker without the reasoning before them, and a fork's conversation starts where it left.

use crate::support;

use std::sync::{Arc, Mutex};

use ruleweave::{Engine, Event, OpeningKind};
use serde_json::{Value, json};
use support::{Canned, repo_root};

#[tokio::test]
async fn every_pack_opens_and_plays_a_turn_with_its_display_rendered() {
    let engine = Engine::builder(repo_root()).build();
    let first_moves = [
        ("pirate", json!("Ahoy, captain! I am the harbour master's daughter.")),
        ("interview", json!("I like oat milk because it foams well.")),
        ("party", json!({})),
        ("designer", json!("the chambers of the heart")),
        ("debate", json!("start")),
    ];
    for (pack, input) in first_moves {
        let options = if pack == "debate" { json!({"rounds": 1}) } else { json!({}) };
        let mut session = engine.open(pack, options.as_object().unwrap()).await.unwrap();
        let opened = session.view();
        assert!(opened.notes.is_empty(), "{pack} at open: {:?}", opened.notes);
        assert!(opened.status.is_some(), "{pack} has a status line from the start");
        assert!(opened.opening.is_some(), "{pack}: before the first turn, the view says how it opens");
        let r = session.turn(input).await.unwrap();
        // Nothing fell back; the debate's notes are the claims its fact checker flagged.
        let notes = &r.display.notes;
        assert!(notes.iter().all(|n| pack == "debate" && n.contains("found false")), "{pack} after a turn: {notes:?}");
        assert!(r.display.reply.as_deref().is_some_and(|t| !t.is_empty()), "{pack} replies");
        assert!(r.display.opening.is_none(), "{pack}: the opening is over after the first turn");
        let without_notes = ruleweave::View { notes: Vec::new(), ..r.display.clone() };
        assert_eq!(without_notes, session.view(), "{pack}: the turn's display is the session's view, and its notes");
    }
}

#[tokio::test]
async fn each_pack_says_how_it_opens() {
    let engine = Engine::builder(repo_root()).build();
    let opening = |pack: &'static str| {
        let engine = engine.clone();
        async move { engine.open(pack, &Default::default()).await.unwrap().view().opening.unwrap() }
    };
    let interview = opening("interview").await;
    assert_eq!(interview.kind, OpeningKind::Question);
    assert!(interview.text.unwrap().ends_with('?'));
    let designer = opening("designer").await;
    assert_eq!(designer.kind, OpeningKind::Hint);
    assert!(designer.text.unwrap().starts_with("Type what the game should teach"));
    let debate = opening("debate").await;
    assert_eq!(debate.kind, OpeningKind::Hint);
    assert!(debate.text.unwrap().contains("Type `start`"));
    // The party's first question needs no answer: every face plays `{}` as the lobby opens.
    let party = opening("party").await;
    assert_eq!((party.play, party.text), (Some(json!({})), None));
    let pirate = opening("pirate").await;
    assert_eq!(pirate.text, None, "the pirate waits for the player's first line");
}

#[tokio::test]
async fn a_judge_reply_that_cannot_be_read_is_told_with_the_turn() {
    let canned = Canned::new();
    canned.reply("judge", "I would give this a solid seven out of ten.").reply("pirate", "Arr.");
    let engine = support::engine(&canned);
    let mut session = engine.open("pirate", &Default::default()).await.unwrap();
    let r = session.turn(json!("Ahoy!")).await.unwrap();
    assert_eq!(r.display.reply.as_deref(), Some("Arr."));
    let notes = &r.display.notes;
    assert!(notes.iter().any(|n| n.starts_with("merit_check: falling back to merit.rhai::")), "{notes:?}");
    assert!(r.display.details.unwrap().contains("rule-based fallback"), "the details say which score counted");
}

#[tokio::test]
async fn speeches_stream_under_their_speaker_without_the_reasoning() {
    let engine = Engine::builder(repo_root()).build();
    let options = json!({"rounds": 1, "fact_check": "strict", "topic": "Cars should be banned from city centres"});
    let mut session = engine.open("debate", options.as_object().unwrap()).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let seen = seen.clone();
        Arc::new(move |e: &Event| {
            if let Event::Speech { speaker, text, start, .. } = e {
                let mut seen = seen.lock().unwrap();
                if *start {
                    seen.push((speaker.clone().unwrap_or_default(), String::new()));
                }
                seen.last_mut().unwrap().1.push_str(text);
            }
        })
    };
    let r = session.turn_with_events(json!("start"), sink).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let speakers: Vec<&str> = seen.iter().map(|(who, _)| who.as_str()).collect();
    // Strict mode sends each first speech back: pro twice, then con twice.
    assert_eq!(speakers, ["pro", "pro", "con", "con"]);
    for (_, speech) in &seen {
        assert!(!speech.contains("PHASE") && !speech.contains("REFLECTION"), "{speech}");
        assert!(speech.contains("Cars should be banned from city centres"), "the stand-in argues the motion: {speech}");
    }
    let transcript = r.output["transcript"].as_array().unwrap();
    assert_eq!(seen[1].1.trim(), transcript[0]["speech"].as_str().unwrap(), "what streamed is the speech kept");
    let sent_back: Vec<&String> = r.display.notes.iter().filter(|n| n.contains("speech sent back")).collect();
    assert_eq!(sent_back.len(), 2, "{:?}", r.display.notes);
    assert!(r.display.reply.unwrap().starts_with("pro: Surveys where"));
}

#[tokio::test]
async fn a_moderator_note_at_a_pause_reaches_the_next_rounds_debaters() {
    let canned = Canned::new();
    let speech = "PHASE 1 - REFLECTION:\nx\nPHASE 2 - CRITIQUE:\ny\nPHASE 3 - REFINEMENT:\nA speech of some words.";
    for _ in 0..4 {
        canned.reply("debater", speech);
    }
    let engine = support::engine(&canned);
    let options = json!({"rounds": 2, "fact_check": "off", "pause": "rounds"});
    let mut session = engine.open("debate", options.as_object().unwrap()).await.unwrap();
    let first = session.turn(json!("start")).await.unwrap();
    assert!(first.paused.is_some());
    let status = first.display.status.unwrap();
    assert!(status.contains("paused: type a note for the next round's debaters, or `continue`"), "{status}");
    let note = "Please both address what happens to delivery vans and the people who drive them.";
    let second = session.turn(json!(note)).await.unwrap();
    assert!(second.finished);
    let asked = canned.asked("debater");
    assert_eq!(asked.len(), 4);
    let prompt = |i: usize| asked[i].messages.last().unwrap().content.clone();
    assert!(!prompt(1).contains("MODERATOR'S NOTE"), "round 1 had no note");
    assert!(prompt(2).contains(&format!("MODERATOR'S NOTE: {note}")), "{}", prompt(2));
    assert!(prompt(3).contains(&format!("MODERATOR'S NOTE: {note}")));
    // Before the debate, a sentence is no command: it says what to type.
    let mut fresh = engine.open("debate", options.as_object().unwrap()).await.unwrap();
    let refused = fresh.turn(json!("let us begin")).await.unwrap_err();
    assert!(refused.detail().contains("type \"start\" to begin the debate"), "{refused}");
}

#[tokio::test]
async fn a_forks_conversation_starts_with_the_turns_it_left_from() {
    let engine = Engine::builder(repo_root()).build();
    let mut session = engine.open("pirate", &Default::default()).await.unwrap();
    let first = session.turn(json!("Ahoy, captain!")).await.unwrap();
    session.turn(json!("I sailed with your brother.")).await.unwrap();
    let mut fork = engine.fork(session.id(), first.checkpoint).await.unwrap();
    fork.turn(json!("The Navy is coming!")).await.unwrap();
    let said = engine.conversation(fork.id()).await.unwrap();
    let inputs: Vec<Value> = said.iter().map(|s| s.input.clone()).collect();
    assert_eq!(inputs, [json!({"message": "Ahoy, captain!"}), json!({"message": "The Navy is coming!"})]);
    assert_eq!(said.iter().map(|s| s.turn).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(said[0].display, first.display);
    assert_eq!(said[1].display, fork.view());
}

/// Every event a turn makes names its kind as its JSON does (`type`), and the kind is one of
/// [`Event::KINDS`], the list a server's stream documents.
#[tokio::test]
async fn every_event_names_its_kind_as_its_json_does() {
    let engine = Engine::builder(repo_root()).build();
    let mut session = engine.open("pirate", &Default::default()).await.unwrap();
    let turn = session.turn(json!("Ahoy, captain! I am your long lost cousin.")).await.unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for e in &turn.events {
        assert_eq!(serde_json::to_value(e).unwrap()["type"], e.kind());
        assert!(Event::KINDS.contains(&e.kind()), "{}", e.kind());
        seen.insert(e.kind());
    }
    assert!(seen.is_superset(&["node_started", "node_finished", "route", "llm"].into()), "{seen:?}");
}

//! The pirate game's rules, through real turns of the shipped pirate pack: every row of the win-condition
//! logic, the thresholds, the clamps, the fallback, and what the models are asked.

use crate::support;

use std::sync::Arc;

use ruleweave::{ErrorKind, Session};
use serde_json::{Value, json};
use support::{Canned, engine, judged};

const PHRASE: &str = "Oto mój skarb, weź go";

async fn game(canned: &Arc<Canned>, difficulty: &str) -> Session {
    let options = json!({ "difficulty": difficulty });
    engine(canned).open("pirate", options.as_object().unwrap()).await.unwrap()
}

/// One turn where the judge gives `score` and the pirate says `reply`.
async fn turn(difficulty: &str, score: i64, reply: &str) -> (Value, Session, Arc<Canned>) {
    let canned = Canned::new();
    canned.reply("judge", judged(score)).reply("pirate", reply);
    let mut s = game(&canned, difficulty).await;
    let r = s.turn(json!({"message": "Ahoy, captain!"})).await.unwrap();
    (r.output, s, canned)
}

/// The blocked reply for a player writing English ("Ahoy, captain!").
fn blocked_reply() -> String {
    "Arrr! You nearly had me, landlubber, but a treasure has to be earned. The chest stays shut!".into()
}

// ---- win conditions (medium: threshold 60, close margin 5) ---------------------------------

#[tokio::test]
async fn exact_phrase_with_a_high_score_wins() {
    let (out, s, _) = turn("medium", 60, &format!("Arrr, dobrze. {PHRASE}!")).await;
    assert_eq!(out["outcome"], "won_exact_phrase");
    assert_eq!(out["is_won"], true);
    assert_eq!(out["is_blocked"], false);
    assert!(s.is_finished());
}

#[tokio::test]
async fn exact_phrase_without_the_score_is_blocked_and_replaced() {
    let (out, s, _) = turn("medium", 59, PHRASE).await;
    assert_eq!(out["outcome"], "blocked");
    assert_eq!(out["is_blocked"], true);
    assert_eq!(out["is_won"], false);
    assert_eq!(out["pirate_response"], blocked_reply());
    // The player (and next turn's judge) see the alternative, not the phrase.
    let history = s.field("conversation_history").unwrap();
    assert_eq!(history[1], json!({"role": "pirate", "content": blocked_reply()}));
    assert!(!s.is_finished());
}

#[tokio::test]
async fn a_blocked_reply_goes_through_handle_blocked() {
    let canned = Canned::new();
    canned.reply("judge", judged(10)).reply("pirate", PHRASE);
    let mut s = game(&canned, "medium").await;
    let r = s.turn(json!({"message": "say it"})).await.unwrap();
    let nodes: Vec<&str> = r
        .events
        .iter()
        .filter_map(|e| match e {
            ruleweave::Event::NodeFinished { node, .. } => Some(node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes, ["intake", "merit_check", "generate_response", "validate_response", "handle_blocked"]);
    assert!(r.events.iter().any(|e| matches!(e, ruleweave::Event::Custom { name, data, .. }
        if name == "blocked" && data["original"] == PHRASE && data["threshold"] == 60)));
}

#[tokio::test]
async fn the_exact_phrase_is_case_sensitive() {
    let (out, _, _) = turn("medium", 59, "oto mój skarb, weź go").await;
    assert_eq!(out["outcome"], "continue");
    assert_eq!(out["is_blocked"], false);
}

#[tokio::test]
async fn agreement_with_a_close_score_wins() {
    let (out, _, _) = turn("medium", 55, "Niech ci będzie, skarb jest twój.").await;
    assert_eq!(out["outcome"], "won_agreement");
    assert_eq!(out["is_won"], true);
}

#[tokio::test]
async fn agreement_with_a_high_score_wins() {
    let (out, _, _) = turn("medium", 75, "Fine, the treasure is yours.").await;
    assert_eq!(out["outcome"], "won_agreement");
    assert_eq!(out["is_won"], true);
}

#[tokio::test]
async fn agreement_below_the_margin_does_not_win() {
    let (out, _, _) = turn("medium", 54, "Może... skarb jest twój? Nie, żartowałem.").await;
    assert_eq!(out["outcome"], "continue");
    assert_eq!(out["is_won"], false);
}

/// By the rule as written, an agreement within the margin wins, hedged or not; with the option
/// `hedged_agreement`, one that still asks for more in the same sentence is none.
#[tokio::test]
async fn a_hedged_agreement_wins_unless_the_option_says_otherwise() {
    let hedged = [
        "Blast it... perhaps the treasure is yours, if you give me one more good reason...",
        "Hmm... może i skarb jest twój, jeśli dasz mi jeszcze jeden dobry powód...",
    ];
    for reply in hedged {
        let (out, _, _) = turn("medium", 57, reply).await;
        assert_eq!(out["outcome"], "won_agreement", "by default: {reply}");
    }
    let strict = |reply: &'static str| async move {
        let canned = Canned::new();
        canned.reply("judge", judged(57)).reply("pirate", reply);
        let options = json!({"difficulty": "medium", "hedged_agreement": true});
        let mut s = engine(&canned).open("pirate", options.as_object().unwrap()).await.unwrap();
        s.turn(json!({"message": "Ahoy, captain!"})).await.unwrap().output
    };
    for reply in hedged {
        assert_eq!(strict(reply).await["outcome"], "continue", "with the option: {reply}");
    }
    let out = strict("If you insist. Fine: the treasure is yours!").await;
    assert_eq!(out["outcome"], "won_agreement", "the hedge is in another sentence");
}

#[tokio::test]
async fn the_blocked_reply_speaks_the_players_language() {
    let canned = Canned::new();
    canned.reply("judge", judged(10)).reply("pirate", PHRASE).reply("judge", judged(12)).reply("pirate", PHRASE);
    let mut s = game(&canned, "medium").await;
    let r = s.turn(json!({"message": "Kapitanie, proszę, powiedz te słowa"})).await.unwrap();
    assert_eq!(
        r.output["pirate_response"],
        "Arrr! Prawie mnie podszedłeś, szczurze lądowy, ale na skarb trzeba sobie zasłużyć. Skrzynia zostaje zamknięta!"
    );
    assert_eq!(s.field("language"), Some(json!("polish")));
    // A message that does not tell keeps the language.
    let r = s.turn(json!({"message": "Arrr!"})).await.unwrap();
    assert_eq!(r.output["pirate_response"].as_str().unwrap().split_whitespace().nth(1), Some("Prawie"));
}

#[tokio::test]
async fn a_high_score_wins_on_its_own() {
    let (out, _, _) = turn("medium", 60, "Hmm, I like you, landlubber.").await;
    assert_eq!(out["outcome"], "won_score");
    assert_eq!(out["is_won"], true);
}

#[tokio::test]
async fn a_low_score_without_phrases_goes_on() {
    let (out, s, _) = turn("medium", 59, "Hmm, I like you, landlubber.").await;
    assert_eq!(out["outcome"], "continue");
    assert_eq!(out["is_won"], false);
    assert_eq!(out["pirate_response"], "Hmm, I like you, landlubber.");
    assert_eq!(s.field("conversation_history").unwrap().as_array().unwrap().len(), 2);
}

// ---- thresholds ------------------------------------------------------------------------------

#[tokio::test]
async fn thresholds_follow_the_difficulty() {
    for (difficulty, threshold) in [("easy", 40), ("medium", 60), ("hard", 80)] {
        let (out, _, _) = turn(difficulty, threshold - 1, "Nope.").await;
        assert_eq!(out["merit_has_earned_it"], false, "{difficulty} at {}", threshold - 1);
        let (out, _, _) = turn(difficulty, threshold, "Nope.").await;
        assert_eq!(out["merit_has_earned_it"], true, "{difficulty} at {threshold}");
    }
}

// ---- the judge's JSON: clamps ---------------------------------------------------------------

#[tokio::test]
async fn scores_are_clamped_to_their_ranges() {
    let canned = Canned::new();
    canned
        .reply("judge", r#"{"total_score": 140, "strategy_variety": 40, "conversation_depth": 40, "creativity": 40, "persistence": 40}"#)
        .reply("pirate", "Arr.");
    let mut s = game(&canned, "hard").await;
    let out = s.turn(json!({"message": "hi"})).await.unwrap().output;
    assert_eq!(out["merit_score"], 100);
    assert_eq!(
        out["merit_breakdown"],
        json!({"source": "judge", "total_score": 100, "strategy_variety": 30, "conversation_depth": 25, "creativity": 25, "persistence": 20})
    );
}

#[tokio::test]
async fn negative_and_fractional_scores_are_clamped_and_rounded() {
    let canned = Canned::new();
    canned
        .reply(
            "judge",
            r#"```json
{"total_score": 55.6, "strategy_variety": -3, "creativity": 12.4, "reasoning": "good story"}
```"#,
        )
        .reply("pirate", "Arr.");
    let mut s = game(&canned, "medium").await;
    let out = s.turn(json!({"message": "hi"})).await.unwrap().output;
    assert_eq!(out["merit_score"], 56);
    assert_eq!(
        out["merit_breakdown"],
        json!({"source": "judge", "total_score": 56, "strategy_variety": 0, "creativity": 12, "reasoning": "good story"})
    );
}

// ---- the rule-based fallback ----------------------------------------------------------------

/// strategies × 5 + personas × 3 + messages × 2: "gold" (bribery) and "please" (emotional) are two
/// strategies, "sailor" one persona, and the history holds one message.
const FALLBACK_MESSAGE: &str = "I am a sailor, please, I will pay you gold";

async fn fallback_turn(judge: Result<&str, &str>) -> Value {
    let canned = Canned::new();
    match judge {
        Ok(text) => canned.reply("judge", text),
        Err(why) => canned.fail("judge", why),
    };
    canned.reply("pirate", "Arr.");
    let mut s = game(&canned, "medium").await;
    s.turn(json!({"message": FALLBACK_MESSAGE})).await.unwrap().output
}

#[tokio::test]
async fn invalid_json_falls_back_to_the_rules() {
    let out = fallback_turn(Ok("Niestety nie potrafię ocenić tej rozmowy.")).await;
    assert_eq!(out["merit_score"], 2 * 5 + 3 + 2);
    assert_eq!(out["merit_breakdown"]["source"], "fallback");
    assert_eq!(out["merit_breakdown"]["unique_strategies"], 2);
    assert_eq!(out["merit_breakdown"]["unique_personas"], 1);
    assert_eq!(out["merit_breakdown"]["conversation_length"], 1);
}

#[tokio::test]
async fn a_failed_judge_call_falls_back_to_the_rules() {
    let out = fallback_turn(Err("openai: HTTP 500 (after 4 attempts)")).await;
    assert_eq!(out["merit_score"], 15);
    assert_eq!(out["merit_breakdown"]["reason"], "openai: HTTP 500 (after 4 attempts)");
}

#[tokio::test]
async fn the_fallbacks_breakdown_reads_one_in_the_singular() {
    let canned = Canned::new();
    canned.fail("judge", "openai: HTTP 500").fail("judge", "openai: HTTP 500");
    canned.reply("pirate", "Arr.").reply("pirate", "Arr.");
    let mut s = game(&canned, "medium").await;
    // "please": one strategy (emotional); "sailor": one persona; one message so far.
    s.turn(json!({"message": "I am a sailor, please"})).await.unwrap();
    let details = s.display("details").unwrap().unwrap();
    assert!(
        details.contains("rule-based fallback (openai: HTTP 500): 1 strategy × 5 + 1 persona × 3 + 1 message × 2 → 10"),
        "{details}"
    );
    s.turn(json!({"message": "I will pay you gold, I am a merchant"})).await.unwrap();
    let details = s.display("details").unwrap().unwrap();
    assert!(details.contains(": 2 strategies × 5 + 2 personas × 3 + 3 messages × 2 → 22"), "{details}");
}

#[tokio::test]
async fn json_without_a_total_falls_back_to_the_rules() {
    let out = fallback_turn(Ok(r#"{"score": 90}"#)).await;
    assert_eq!(out["merit_score"], 15);
    assert!(out["merit_breakdown"]["reason"].as_str().unwrap().contains("no numeric total_score"), "{out}");
}

#[tokio::test]
async fn a_judge_reply_too_large_to_read_falls_back_to_the_rules() {
    let reasoning = "x".repeat(5 << 20);
    let huge = format!(r#"{{"total_score": 95, "strategy_variety": 30, "reasoning": "{reasoning}"}}"#);
    let out = fallback_turn(Ok(&huge)).await;
    assert_eq!(out["merit_score"], 15, "the rules score, not the judge");
    let reason = out["merit_breakdown"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the reply is 5242"), "{reason}");
    assert!(reason.ends_with("more than a script may hold (limits.max_string_size 1048576)"), "{reason}");
}

#[tokio::test]
async fn the_fallback_is_capped_at_100() {
    let canned = Canned::new();
    let mut s = game(&canned, "hard").await;
    for _ in 0..20 {
        canned.fail("judge", "down").reply("pirate", "Arr.");
        s.turn(json!({"message": "hello"})).await.unwrap();
    }
    // 39 messages × 2 = 78: just under hard's 80.
    assert_eq!(s.field("merit_score").unwrap(), 78);
    // Ten strategies and seven personas at once: 50 + 21 + 41 × 2 = 153, capped.
    canned.fail("judge", "down").reply("pirate", "Arr.");
    let everything = "I am a sailor and a merchant sent by the king, a navy officer, a witch, your brother and a ghost. \
        My name is Jack, you great captain, please, take my gold or I will kill you, I have a map, you must agree, \
        I promise, answer my riddle, because it is fair.";
    let out = s.turn(json!({"message": everything})).await.unwrap().output;
    assert_eq!(out["merit_breakdown"]["unique_strategies"], 10);
    assert_eq!(out["merit_breakdown"]["unique_personas"], 7);
    assert_eq!(out["merit_score"], 100);
}

// ---- detection before the judge ---------------------------------------------------------------

#[tokio::test]
async fn personas_and_strategies_are_added_only_when_new() {
    let canned = Canned::new();
    let mut s = game(&canned, "medium").await;
    for msg in ["Jestem kupcem, zapłacę złotem!", "Kupię twój skarb za złoto", "Zatopię twój statek z armat!"] {
        canned.reply("judge", judged(10)).reply("pirate", "Arr.");
        s.turn(json!({"message": msg})).await.unwrap();
    }
    assert_eq!(s.field("player_personas").unwrap(), json!(["merchant"]));
    assert_eq!(s.field("strategies_attempted").unwrap(), json!(["bribery", "threat"]));
}

// ---- what the models are asked --------------------------------------------------------------

#[tokio::test]
async fn the_judge_reads_the_last_15_messages_as_gracz_and_pirat() {
    let canned = Canned::new();
    let mut s = game(&canned, "hard").await;
    for i in 1..=9 {
        canned.reply("judge", judged(10)).reply("pirate", format!("reply {i}"));
        s.turn(json!({"message": format!("message {i}")})).await.unwrap();
    }
    let last = canned.asked("judge").pop().unwrap();
    assert_eq!(
        (last.model.as_str(), last.temperature, last.max_tokens, last.json),
        ("gpt-4o-mini", Some(0.3), Some(500), true)
    );
    assert_eq!(last.messages.len(), 1);
    let prompt = &last.messages[0].content;
    // 17 messages so far (8 exchanges and the 9th message): the judge sees the last 15.
    let lines: Vec<&str> = prompt.lines().filter(|l| l.starts_with("Gracz: ") || l.starts_with("Pirat: ")).collect();
    assert_eq!(lines.len(), 15);
    assert_eq!(lines[0], "Gracz: message 2");
    assert_eq!(lines[1], "Pirat: reply 2");
    assert_eq!(lines[14], "Gracz: message 9");
    assert!(prompt.contains("Poziom trudności: hard"), "{prompt}");
}

#[tokio::test]
async fn the_pirate_remembers_10_messages_as_user_and_assistant() {
    let canned = Canned::new();
    let mut s = game(&canned, "easy").await;
    for i in 1..=7 {
        // The third reply is empty: a failed call, and the captain's silence stands in for it.
        let reply = if i == 3 { String::new() } else { format!("reply {i}") };
        canned.reply("judge", judged(10)).reply("pirate", reply);
        s.turn(json!({"message": format!("message {i}")})).await.unwrap();
    }
    let last = canned.asked("pirate").pop().unwrap();
    assert_eq!(last.model, "gpt-3.5-turbo");
    assert_eq!(last.messages[0].role, "system");
    let window: Vec<(String, String)> =
        last.messages[1..].iter().map(|m| (m.role.clone(), m.content.clone())).collect();
    // History before the 7th reply: 13 messages; the last 10 start at "reply 2".
    let silent = "The captain narrows his eyes and says nothing. Try him another way, landlubber.";
    let expected: Vec<(String, String)> = [
        ("assistant", "reply 2"),
        ("user", "message 3"),
        ("assistant", silent),
        ("user", "message 4"),
        ("assistant", "reply 4"),
        ("user", "message 5"),
        ("assistant", "reply 5"),
        ("user", "message 6"),
        ("assistant", "reply 6"),
        ("user", "message 7"),
    ]
    .iter()
    .map(|(r, c)| (r.to_string(), c.to_string()))
    .collect();
    assert_eq!(window, expected);
}

/// The captain is asked the model his profile names for the session's difficulty: each row of
/// the manifest's table, as config/pirate.yaml has it now.
#[tokio::test]
async fn the_pirate_model_follows_the_difficulty() {
    let manifest = std::fs::read_to_string(support::repo_root().join("config/pirate.yaml")).unwrap();
    let manifest: serde_json::Value = serde_saphyr::from_str(&manifest).unwrap();
    let table = manifest["llm"]["pirate"]["model"]["difficulty"].as_object().expect("a model per difficulty");
    let models: std::collections::BTreeSet<&str> = table.values().filter_map(|m| m.as_str()).collect();
    assert_eq!((table.len(), models.len()), (3, 3), "a model of its own per difficulty: {table:?}");
    for (difficulty, model) in table {
        let (_, _, canned) = turn(difficulty, 10, "Arr.").await;
        assert_eq!(canned.asked("pirate")[0].model, model.as_str().unwrap(), "on {difficulty}");
    }
}

#[tokio::test]
async fn the_system_prompt_is_suspicious_until_the_player_earned_it() {
    let (_, _, canned) = turn("medium", 59, "Arr.").await;
    let system = &canned.asked("pirate")[0].messages[0].content;
    assert!(system.contains("Bądź podejrzliwy"), "{system}");
    assert!(!system.contains("59") && !system.contains("60"), "the model is not shown the score: {system}");
    let (_, _, canned) = turn("medium", 60, "Arr.").await;
    let system = &canned.asked("pirate")[0].messages[0].content;
    assert!(system.contains("Bądź bardziej podatny"), "earned: a more vulnerable captain: {system}");
    assert!(!system.contains(PHRASE), "not told to say the winning words: {system}");
}

// ---- a finished game --------------------------------------------------------------------------

#[tokio::test]
async fn a_won_game_refuses_further_moves_and_changes_nothing() {
    let (_, mut s, _) = turn("easy", 90, PHRASE).await;
    let before = s.state();
    let e = s.turn(json!({"message": "one more"})).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Finished);
    assert!(e.detail().contains("won and over"), "{e}");
    assert_eq!(s.state(), before);
    assert_eq!(s.turns(), 1);
}

/// The captain's model failing, or refusing to play him, leaves him silent in the player's
/// language, with a note; the turn goes on (the judge's fallback scores it).
#[tokio::test]
async fn a_captain_whose_model_fails_or_refuses_stays_silent() {
    let canned = Canned::new();
    let mut s = game(&canned, "medium").await;
    canned.fail("judge", "down").fail("pirate", "openai: HTTP 500 (after 4 attempts)");
    let r = s.turn(json!({"message": "Jestem kupcem!"})).await.unwrap();
    assert_eq!(
        r.output["pirate_response"],
        "Kapitan mruży oczy i milczy. Spróbuj go przekonać inaczej, szczurze lądowy."
    );
    assert!(
        r.display.notes.iter().any(|n| n.contains("the captain says nothing: openai: HTTP 500")),
        "{:?}",
        r.display.notes
    );
    canned.reply("judge", judged(20)).reply("pirate", "I'm sorry, but I can't continue this role-play.");
    let r = s.turn(json!({"message": "Ahoy there!"})).await.unwrap();
    assert_eq!(
        r.output["pirate_response"],
        "The captain narrows his eyes and says nothing. Try him another way, landlubber."
    );
    assert!(r.display.notes.iter().any(|n| n.contains("refused to play")), "{:?}", r.display.notes);
    assert_eq!(r.output["outcome"], "continue");
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_runs() {
    let canned = Canned::new();
    let mut s = game(&canned, "medium").await;
    for (input, why) in [
        (json!({}), "input field `message` is required"),
        (json!({"message": "   "}), "input field `message` is empty"),
        (json!({"message": 3}), "is a string, not an int"),
        (json!({"message": "x", "extra": 1}), "unknown input field `extra`"),
        (json!({"message": "x".repeat(2001)}), "the most is 2000"),
        (json!(3), "a map of fields"),
        (json!(["hello"]), "a map of fields"),
    ] {
        let e = s.turn(input).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Input);
        assert!(e.detail().contains(why), "{e}");
    }
    assert!(canned.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn options_are_checked() {
    let canned = Canned::new();
    let e = engine(&canned).open("pirate", json!({"difficulty": "insane"}).as_object().unwrap()).await.unwrap_err();
    assert_eq!(e.detail(), "option `difficulty` must be one of easy, medium, hard, not insane");
    let e = engine(&canned).open("pirate", json!({"level": 3}).as_object().unwrap()).await.unwrap_err();
    assert!(e.detail().contains("has no option `level`"), "{e}");
    let s = engine(&canned).open("pirate", &Default::default()).await.unwrap();
    assert_eq!(s.field("difficulty").unwrap(), "medium");
    assert_eq!(s.field("game_id").unwrap(), s.id());
}

//! The pirate's models answering at once from fixed cycles (a judge's score, the captain's reply),
//! shared by the pirate bench and the server the load generator measures with an instant model
//! (`host/examples/instant_serve.rs`). The baseline's canned judge scores would win the game by
//! the fifth turn (its graph has no finish rule and keeps going); ours ends a won game, so the
//! cycles exercise the same paths (plain, fenced and clamped JSON, the rule-based fallback, a
//! blocked treasure phrase, an agreement below the margin) without winning.

use std::sync::atomic::{AtomicUsize, Ordering};

use ruleweave::Result;
use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, Provider, TokenSink, Usage};

const PLAIN_35: &str =
    r#"{"total_score": 35, "strategy_variety": 10, "conversation_depth": 10, "creativity": 10, "persistence": 5}"#;
const PLAIN_48: &str =
    r#"{"total_score": 48, "strategy_variety": 12, "conversation_depth": 12, "creativity": 14, "persistence": 10}"#;
const PLAIN_30: &str =
    r#"{"total_score": 30, "strategy_variety": 8, "conversation_depth": 8, "creativity": 8, "persistence": 6}"#;
const PLAIN_51: &str =
    r#"{"total_score": 51, "strategy_variety": 18, "conversation_depth": 16, "creativity": 17, "persistence": 0}"#;
const PLAIN_42: &str =
    r#"{"total_score": 42, "strategy_variety": 11, "conversation_depth": 11, "creativity": 10, "persistence": 10}"#;
const FENCED_52: &str = "```json\n{\"total_score\": 52, \"strategy_variety\": 15, \"conversation_depth\": 15, \"creativity\": 12, \"persistence\": 10}\n```";
const CLAMPED_44: &str =
    r#"{"total_score": 44, "strategy_variety": 40, "conversation_depth": 40, "creativity": 40, "persistence": 40}"#;
const NOT_JSON: &str = "Niestety nie potrafie ocenic tej rozmowy.";

/// The judge's reply on each turn. The rule-based fallback (NOT_JSON) comes early: its score grows
/// with the conversation and would win the game later on.
const JUDGE: [&str; 20] = [
    PLAIN_35, PLAIN_48, NOT_JSON, NOT_JSON, FENCED_52, PLAIN_30, CLAMPED_44, PLAIN_51, PLAIN_42, PLAIN_35, PLAIN_48,
    FENCED_52, PLAIN_30, CLAMPED_44, PLAIN_51, PLAIN_42, PLAIN_35, PLAIN_48, PLAIN_30, CLAMPED_44,
];

const SUSPICIOUS: &str =
    "Arrr! Myslisz, ze stary wilk morski odda swoj skarb byle szczurowi ladowemu? Pokaz, co potrafisz!";
const MOCKING: &str = "Hahaha! Ladnie mowisz, ale slowa to wiatr w zaglach. Skarb zostaje w mojej skrzyni, kamracie.";
const PHRASE: &str = "Oto mój skarb, weź go";
const AGREEMENT: &str = "Niech ci bedzie, skarb jest twój, zasluzyles na niego!";
const THREAT: &str = "Grozisz mi? Mnie, kapitanowi Czarnobrodemu? Rekiny w tej zatoce sa glodne, wiesz?";
const GOLD: &str = "Zloto? Mam go wiecej niz ty kiedykolwiek zobaczysz. Sprobuj czegos innego.";

/// The pirate's reply on each turn: the treasure phrase below the threshold (blocked, then
/// handle_blocked) on turns 3, 9 and 15; agreements below the margin on turns 4, 11 and 17.
const CHAT: [&str; 20] = [
    SUSPICIOUS, MOCKING, PHRASE, AGREEMENT, SUSPICIOUS, THREAT, GOLD, MOCKING, PHRASE, SUSPICIOUS, AGREEMENT, MOCKING,
    THREAT, GOLD, PHRASE, SUSPICIOUS, AGREEMENT, MOCKING, GOLD, SUSPICIOUS,
];

/// Answers instantly from the cycles above.
#[derive(Default)]
pub struct InstantModel {
    judge: AtomicUsize,
    chat: AtomicUsize,
}

impl InstantModel {
    /// Starts both cycles over.
    #[allow(dead_code)]
    pub fn reset(&self) {
        self.judge.store(0, Ordering::Relaxed);
        self.chat.store(0, Ordering::Relaxed);
    }
}

impl Provider for InstantModel {
    fn name(&self) -> &str {
        "instant"
    }

    fn complete<'a>(&'a self, request: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        let content = if request.profile == "judge" {
            JUDGE[self.judge.fetch_add(1, Ordering::Relaxed) % JUDGE.len()]
        } else {
            CHAT[self.chat.fetch_add(1, Ordering::Relaxed) % CHAT.len()]
        };
        let response = LlmResponse {
            content: content.to_owned(),
            model: request.model.clone(),
            usage: Usage::default(),
            attempts: 1,
        };
        Box::pin(std::future::ready(Ok(response)))
    }
}

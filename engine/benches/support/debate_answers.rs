//! The debate's models and search engine answering at once with canned replies, shared by the
//! debate and latency benches (and mirrored by `bench/langgraph/debate_paced.py`).

use std::sync::atomic::{AtomicUsize, Ordering};

use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, TokenSink, Usage};
use ruleweave::search::{Search, SearchResult};
use ruleweave::{Provider, Result};

/// Models that answer at once: a speech with two claims, the claims, and a verdict that finds
/// every third claim false (as the LangGraph baseline's fact checker rejects every third check);
/// the judge names a side.
#[derive(Default)]
pub struct Answers {
    checks: AtomicUsize,
}

impl Provider for Answers {
    fn name(&self) -> &str {
        "instant"
    }

    fn complete<'a>(&'a self, r: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        let content = match r.profile.as_str() {
            "debater" => "PHASE 1 - REFLECTION:\nThe other side's numbers.\n\nPHASE 2 - CRITIQUE:\nThey ignore wages.\n\n\
                          PHASE 3 - REFINEMENT:\nProductivity rose by 14 percent in support teams. Wages followed within two years."
                .to_owned(),
            "claims" => {
                r#"{"claims": ["Productivity rose by 14 percent in support teams", "Wages followed within two years"]}"#.to_owned()
            }
            "judge" => r#"{"winner": "pro", "reason": "Better sourced."}"#.to_owned(),
            _ => {
                let n = self.checks.fetch_add(1, Ordering::Relaxed) + 1;
                let verdict = if n.is_multiple_of(3) { "false" } else { "true" };
                format!(r#"{{"verdict": "{verdict}", "reasoning": "As the sources say."}}"#)
            }
        };
        Box::pin(std::future::ready(Ok(LlmResponse {
            content,
            model: r.model.clone(),
            usage: Usage { prompt_tokens: 100, completion_tokens: 40 },
            attempts: 1,
        })))
    }
}

/// A search engine that answers at once.
pub struct Found;

impl Search for Found {
    fn name(&self) -> &str {
        "instant"
    }

    fn search<'a>(&'a self, query: &'a str, _: usize) -> BoxFuture<'a, Result<Vec<SearchResult>>> {
        let hit = |i: usize| SearchResult {
            title: format!("Source {i}"),
            url: format!("https://example.org/{i}"),
            content: format!("About {query}."),
            score: 0.9,
        };
        Box::pin(std::future::ready(Ok(vec![hit(1), hit(2), hit(3)])))
    }
}

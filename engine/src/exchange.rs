//! What a turn asked of the world outside it, as its checkpoint records it: each model call
//! (what was asked and what came back) and each web search (the query and its results). Replays
//! answer a turn's calls from these, and a turn's cost is counted from them.

use serde::{Deserialize, Serialize};

use crate::llm::{LlmRequest, LlmResponse, Message};
use crate::search::SearchResult;

/// One call a turn made: to a model, or a web search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "Stored", untagged)]
pub enum Exchange {
    /// A model call.
    Model(ModelExchange),
    /// A web search (scripts' `search()`).
    Search(SearchExchange),
}

/// A model call: what was asked and what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelExchange {
    /// The node that asked.
    pub node: String,
    /// The provider that answered.
    pub provider: String,
    /// The request.
    pub request: LlmRequest,
    /// The answer, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<LlmResponse>,
    /// Why there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall time of the call, in milliseconds.
    pub latency_ms: f64,
}

/// A web search: the query and what the engine found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchExchange {
    /// The node that searched.
    pub node: String,
    /// The engine that answered (`tavily`, the pack's stand-in).
    pub engine: String,
    /// What was searched for.
    pub query: String,
    /// The results, when there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<SearchResult>>,
    /// Why there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall time of the search, in milliseconds.
    pub latency_ms: f64,
}

impl Exchange {
    /// The node that made the call.
    pub fn node(&self) -> &str {
        match self {
            Exchange::Model(m) => &m.node,
            Exchange::Search(s) => &s.node,
        }
    }

    /// Wall time of the call, in milliseconds.
    pub fn latency_ms(&self) -> f64 {
        match self {
            Exchange::Model(m) => m.latency_ms,
            Exchange::Search(s) => s.latency_ms,
        }
    }

    /// The model call, when this is one.
    pub fn model(&self) -> Option<&ModelExchange> {
        match self {
            Exchange::Model(m) => Some(m),
            Exchange::Search(_) => None,
        }
    }
}

/// An exchange as stored: a search first (it has a `query`), else a model call. Checkpoints
/// written before searches had their own record kept one as a model call to the profile
/// `search` whose reply is the results as JSON: read back, it is a search again.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Search(SearchExchange),
    Model(ModelExchange),
}

impl From<Stored> for Exchange {
    fn from(stored: Stored) -> Self {
        match stored {
            Stored::Search(s) => Exchange::Search(s),
            Stored::Model(m) => match old_search(&m) {
                Some(results) => Exchange::Search(SearchExchange {
                    query: m
                        .request
                        .messages
                        .first()
                        .map(|Message { content, .. }| content.clone())
                        .unwrap_or_default(),
                    node: m.node,
                    engine: m.provider,
                    results,
                    error: m.error,
                    latency_ms: m.latency_ms,
                }),
                None => Exchange::Model(m),
            },
        }
    }
}

/// Whether a stored model call is a search as checkpoints recorded one before searches had
/// their own record (the profile `search`, asked of a "model" named for its engine, one user
/// message, no tokens, and a reply that is a result list, or none when it failed); its results.
/// A pack's own model profile called `search` is none of that, and stays a model call.
fn old_search(m: &ModelExchange) -> Option<Option<Vec<SearchResult>>> {
    let r = &m.request;
    let looks = r.profile == "search" && r.model == m.provider && r.messages.len() == 1 && r.schema.is_none();
    if !looks {
        return None;
    }
    match &m.response {
        None => m.error.is_some().then_some(None),
        Some(reply) if reply.usage == Default::default() && reply.model == m.provider => {
            serde_json::from_str::<Vec<SearchResult>>(&reply.content).ok().map(Some)
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_its_own_record_and_an_old_one_reads_as_a_search() {
        let search = Exchange::Search(SearchExchange {
            node: "fact_check".into(),
            engine: "tavily".into(),
            query: "the moon's distance".into(),
            results: Some(vec![SearchResult {
                title: "Moon".into(),
                url: "https://example.org/moon".into(),
                content: "384,400 km".into(),
                score: 0.9,
            }]),
            error: None,
            latency_ms: 12.0,
        });
        let json = serde_json::to_value(&search).unwrap();
        assert_eq!(json["query"], "the moon's distance");
        assert!(json.get("request").is_none(), "no fake model request: {json}");
        assert_eq!(serde_json::from_value::<Exchange>(json).unwrap(), search);
        // As checkpoints written before held it.
        let old = serde_json::json!({
            "node": "fact_check",
            "provider": "tavily",
            "request": {"profile": "search", "model": "tavily", "messages": [{"role": "user", "content": "the moon's distance"}]},
            "response": {
                "content": "[{\"title\":\"Moon\",\"url\":\"https://example.org/moon\",\"content\":\"384,400 km\",\"score\":0.9}]",
                "model": "tavily",
                "usage": {"prompt_tokens": 0, "completion_tokens": 0},
                "attempts": 1,
            },
            "latency_ms": 12.0,
        });
        assert_eq!(serde_json::from_value::<Exchange>(old).unwrap(), search);
        let model = serde_json::json!({
            "node": "judge",
            "provider": "openai",
            "request": {"profile": "judge", "model": "gpt-4o-mini", "messages": []},
            "latency_ms": 3.0,
            "error": "429",
        });
        let read = serde_json::from_value::<Exchange>(model.clone()).unwrap();
        assert_eq!(read.model().map(|m| m.request.profile.as_str()), Some("judge"));
        assert_eq!(serde_json::to_value(&read).unwrap()["request"]["profile"], "judge");
        // A pack's own model profile called `search` stays a model call, its reply whole.
        let own = serde_json::json!({
            "node": "lookup",
            "provider": "openai",
            "request": {"profile": "search", "model": "gpt-4o-mini", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]},
            "response": {"content": "[]", "model": "gpt-4o-mini", "usage": {"prompt_tokens": 9, "completion_tokens": 2}, "attempts": 1},
            "latency_ms": 3.0,
        });
        let read = serde_json::from_value::<Exchange>(own).unwrap();
        assert_eq!(read.model().and_then(|m| m.response.as_ref()).map(|r| r.usage.prompt_tokens), Some(9));
    }
}

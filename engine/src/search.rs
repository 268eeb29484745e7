//! Web search beside models: the tool a pack's scripts call with `search(query)`. Tavily's API
//! (`TAVILY_API_KEY`, `TAVILY_BASE_URL` for a local server speaking its `POST /search`), or each
//! pack's offline stand-in written in its own Rhai (`search_standin:` in the manifest). Calls are
//! timed out and retried like model calls, counted against the turn's model budget, shown as
//! `search` events and recorded with the turn's model exchanges.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{Error, ErrorKind, Result};
use crate::llm::{RetryPolicy, parse_var};
use crate::vocab::BoxFuture;

/// One search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The page's title.
    pub title: String,
    /// Where it is.
    pub url: String,
    /// What the page says about the query (Tavily's extract).
    pub content: String,
    /// How relevant the engine finds it (0 to 1; 0 when it does not say).
    #[serde(default)]
    pub score: f64,
}

impl SearchResult {
    /// The most characters of a result's title, url and content that scripts and checkpoints
    /// see: a page's extract past this is cut (with `…`), whatever the engine sent.
    pub const MAX_TITLE: usize = 300;
    /// See [`SearchResult::MAX_TITLE`].
    pub const MAX_URL: usize = 2_000;
    /// See [`SearchResult::MAX_TITLE`].
    pub const MAX_CONTENT: usize = 4_000;

    /// This result within the budget of [`SearchResult::MAX_TITLE`] and the others.
    pub fn trimmed(self) -> Self {
        SearchResult {
            title: cut(self.title, Self::MAX_TITLE),
            url: cut(self.url, Self::MAX_URL),
            content: cut(self.content, Self::MAX_CONTENT),
            score: if self.score.is_finite() { self.score } else { 0.0 },
        }
    }
}

fn cut(text: String, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// A search engine.
pub trait Search: Send + Sync {
    /// Its name, for events and records (`tavily`, `standin`).
    fn name(&self) -> &str;

    /// At most `max_results` hits for `query`.
    fn search<'a>(&'a self, query: &'a str, max_results: usize) -> BoxFuture<'a, Result<Vec<SearchResult>>>;
}

/// Which search engine answers scripts' `search()`.
#[derive(Clone, Default)]
pub enum SearchChoice {
    /// Each pack's stand-in (`search_standin:`), offline and deterministic.
    #[default]
    Standin,
    /// One engine for every pack.
    Engine(Arc<dyn Search>),
}

impl std::fmt::Debug for SearchChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchChoice::Standin => f.write_str("Standin"),
            SearchChoice::Engine(s) => write!(f, "Engine({})", s.name()),
        }
    }
}

impl SearchChoice {
    /// `RULEWEAVE_SEARCH=standin|tavily`; when unset, `tavily` if `TAVILY_API_KEY` is set, else
    /// the stand-in.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let choice = var("RULEWEAVE_SEARCH")
            .unwrap_or_else(|| if var("TAVILY_API_KEY").is_some() { "tavily".into() } else { "standin".into() });
        match choice.trim() {
            "standin" => Ok(SearchChoice::Standin),
            #[cfg(feature = "http-models")]
            "tavily" => Ok(SearchChoice::Engine(Arc::new(Tavily::from_vars(&var)?))),
            #[cfg(not(feature = "http-models"))]
            "tavily" => Err(Error::new(
                ErrorKind::Input,
                "this build has no web search (the engine's `http-models` feature): register a Search",
            )),
            other => Err(Error::new(
                ErrorKind::Input,
                format!("RULEWEAVE_SEARCH={other} is not a search engine (standin or tavily)"),
            )),
        }
    }

    /// [`SearchChoice::from_vars`] over the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }
}

#[cfg(feature = "http-models")]
/// Tavily's search API.
pub struct Tavily {
    client: reqwest::Client,
    url: String,
    key: String,
    retry: RetryPolicy,
    /// A rate limit's pause, kept by every search.
    throttle: crate::llm::http::Throttle,
}

#[cfg(feature = "http-models")]
impl Tavily {
    /// `TAVILY_API_KEY` (required), `TAVILY_BASE_URL` (default `https://api.tavily.com`), and the
    /// model calls' `RULEWEAVE_LLM_TIMEOUT_MS` and retry variables.
    pub fn from_vars(var: &impl Fn(&str) -> Option<String>) -> Result<Self> {
        let key = var("TAVILY_API_KEY").ok_or_else(|| {
            Error::new(ErrorKind::Input, "RULEWEAVE_SEARCH=tavily needs TAVILY_API_KEY (a key from tavily.com)")
        })?;
        let base = var("TAVILY_BASE_URL").unwrap_or_else(|| "https://api.tavily.com".into());
        let timeout = Duration::from_millis(parse_var(var, "RULEWEAVE_LLM_TIMEOUT_MS")?.unwrap_or(60_000));
        Ok(Tavily {
            client: crate::llm::http::client(timeout)?,
            url: format!("{}/search", base.trim_end_matches('/')),
            key,
            retry: RetryPolicy::from_vars(var)?,
            throttle: Default::default(),
        })
    }
}

#[cfg(feature = "http-models")]
/// Tavily's answer, as far as it is read.
#[derive(Deserialize)]
struct TavilyAnswer {
    #[serde(default)]
    results: Vec<SearchResult>,
}

#[cfg(feature = "http-models")]
impl Search for Tavily {
    fn name(&self) -> &str {
        "tavily"
    }

    fn search<'a>(&'a self, query: &'a str, max_results: usize) -> BoxFuture<'a, Result<Vec<SearchResult>>> {
        Box::pin(async move {
            let body = json!({"query": query, "max_results": max_results, "search_depth": "basic"});
            let (resp, attempts) = crate::llm::http::send("tavily", &self.retry, &self.throttle, || {
                self.client.post(&self.url).bearer_auth(&self.key).json(&body)
            })
            .await?;
            let v = crate::llm::http::json_body("tavily", resp, attempts, self.retry.max_reply_bytes).await?;
            let answer: TavilyAnswer = serde_json::from_value(v).map_err(|e| {
                Error::new(ErrorKind::Llm, format!("tavily answered JSON without a readable `results` list ({e})"))
            })?;
            let mut results = answer.results;
            results.truncate(max_results);
            Ok(results)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SearchResult;

    #[test]
    fn a_result_past_its_budget_is_cut() {
        let big =
            SearchResult { title: "t".repeat(1000), url: "u".into(), content: "é".repeat(10_000), score: f64::NAN };
        let cut = big.trimmed();
        assert_eq!(cut.title.chars().count(), SearchResult::MAX_TITLE + 1);
        assert!(cut.content.ends_with('…') && cut.content.chars().count() == SearchResult::MAX_CONTENT + 1);
        assert_eq!((cut.url.as_str(), cut.score), ("u", 0.0));
    }
}

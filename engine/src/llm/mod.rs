//! Model providers: one small trait, one file per implementation.
//!
//! A pack's profiles name models as the original designs do (`gpt-4o-mini` at temperature 0.3 for the judge);
//! the provider decides where a request goes: `openai` (any Chat Completions endpoint), `anthropic`
//! (the Messages API), or `standin`, the pack's own deterministic offline model written in Rhai.
//! [`LlmChoice::from_env`] reads the environment variables; [`ModelMap`] renames models for endpoints
//! that serve other ones (a local Ollama, Claude).

#[cfg(feature = "http-models")]
mod anthropic;
#[cfg(feature = "http-models")]
pub(crate) mod http;
mod named;
#[cfg(feature = "http-models")]
mod openai;
mod profile;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[cfg(feature = "http-models")]
pub use anthropic::{Anthropic, AnthropicConfig};
pub use named::{NamedProviders, key_alias};
#[cfg(feature = "http-models")]
pub use openai::{OpenAi, OpenAiConfig, StructuredOutput};
pub(crate) use profile::ModelSpec;
pub use profile::Profile;

use crate::error::{Error, ErrorKind, Result};

pub use crate::vocab::BoxFuture;

/// A callback that receives a streamed reply piece by piece.
pub type TokenSink = Arc<dyn Fn(&str) + Send + Sync>;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message with `role` and `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Message { role: role.into(), content: content.into() }
    }
}

/// What a node asks a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The named provider the profile asks for (`groq`); the default provider when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model to ask instead when the named provider is not set up and the default provider
    /// answers (a Groq model name means nothing to OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// The pack's profile the request was made from.
    pub profile: String,
    /// The model, as the profile names it.
    pub model: String,
    /// The conversation, system message first when there is one.
    pub messages: Vec<Message>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The most tokens the reply may have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Ask for a JSON object (JSON mode where the provider has one).
    #[serde(default)]
    pub json: bool,
    /// The JSON Schema the reply must match, sent as the request's structured-output format
    /// where the provider has one (OpenAI's `response_format: json_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<ReplySchema>,
}

impl LlmRequest {
    /// The request as a provider written in another language receives it (a Python or Node
    /// model function): `profile`, `model`, `provider`, `messages` (`[{role, content}]`),
    /// `temperature`, `max_tokens`, and `response_format` in OpenAI's shape (`null`,
    /// `{"type": "json_object"}`, or `{"type": "json_schema", "json_schema": {"name", "schema"}}`),
    /// so it can be passed to an OpenAI-compatible client as it is.
    pub fn for_callable(&self) -> serde_json::Value {
        let response_format = match (&self.schema, self.json) {
            (Some(s), _) => serde_json::json!({
                "type": "json_schema",
                "json_schema": {"name": s.name, "schema": &*s.document},
            }),
            (None, true) => serde_json::json!({"type": "json_object"}),
            (None, false) => serde_json::Value::Null,
        };
        serde_json::json!({
            "profile": self.profile,
            "model": self.model,
            "provider": self.provider,
            "messages": self.messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "response_format": response_format,
        })
    }
}

/// A JSON Schema a reply must match: the pack's name for it, and the document (not recorded with
/// the exchange: the pack's file has it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplySchema {
    /// The schema's name in the pack (`design`).
    pub name: String,
    /// The schema document.
    #[serde(skip)]
    pub document: std::sync::Arc<serde_json::Value>,
}

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u32,
    /// Tokens in the reply.
    pub completion_tokens: u32,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The reply text.
    pub content: String,
    /// The model that answered, as the provider reported it.
    pub model: String,
    /// Token counts.
    pub usage: Usage,
    /// Requests it took (1 without retries).
    pub attempts: u32,
}

/// What a selector asks an embedding model: one vector per text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbedRequest {
    /// The pack's profile the request was made from.
    pub profile: String,
    /// The embedding model, as the profile names it.
    pub model: String,
    /// The texts, in order.
    pub texts: Vec<String>,
}

/// An embedding model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedResponse {
    /// One vector per text of the request, in its order.
    pub vectors: Vec<Arc<[f32]>>,
    /// The model that answered, as the provider reported it.
    pub model: String,
    /// Tokens the provider counted (0 when every text came from its cache).
    pub prompt_tokens: u32,
    /// How many of the texts came from the provider's cache rather than a request.
    pub cached: usize,
    /// Requests it took (0 when every text was cached, 1 without retries).
    pub attempts: u32,
}

/// A model provider. Implementations retry what is worth retrying themselves; an error means the
/// call is over.
pub trait Provider: Send + Sync {
    /// A short name for events and logs (`openai`).
    fn name(&self) -> &str;

    /// True for the offline stand-in, which is labelled as such wherever it answers.
    fn is_standin(&self) -> bool {
        false
    }

    /// Answers `request`. When `tokens` is given and the provider can stream, pieces of the reply
    /// go to it as they arrive; the full reply is returned either way.
    fn complete<'a>(&'a self, request: &'a LlmRequest, tokens: Option<TokenSink>)
    -> BoxFuture<'a, Result<LlmResponse>>;

    /// The provider that answers `profile`'s calls, when this one stands for several (see
    /// [`LlmChoice::ByProfile`]); `None` when this one answers every profile itself. A turn asks
    /// before each call, so its events name the provider that really answered.
    fn route(&self, profile: &str) -> Option<Arc<dyn Provider>> {
        let _ = profile;
        None
    }

    /// Embeds `request.texts`. Providers without an embeddings endpoint answer with an error
    /// (the default), and selectors compare texts lexically instead.
    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        let _ = request;
        let e = Error::new(ErrorKind::Llm, format!("the {} provider has no embeddings endpoint", self.name()));
        Box::pin(std::future::ready(Err(e)))
    }
}

/// Puts why a reply finished (`stop`, `length`, `end_turn`) on the model call's trace span, as
/// OpenTelemetry's GenAI conventions name it.
pub(crate) fn finished(reason: Option<&str>) {
    if let Some(reason) = reason {
        let span = tracing::Span::current();
        if !span.is_disabled() {
            span.record("gen_ai.response.finish_reasons", serde_json::json!([reason]).to_string());
        }
    }
}

/// Which provider answers a session's model calls.
#[derive(Clone)]
pub enum LlmChoice {
    /// Each pack's own stand-in model (offline, deterministic).
    Standin,
    /// A provider shared by every pack.
    Provider(Arc<dyn Provider>),
    /// These profiles on these providers (`judge` on OpenAI), every other profile on its pack's
    /// stand-in: a playtest that pays for the calls that matter and no others.
    ByProfile(Arc<std::collections::BTreeMap<String, Arc<dyn Provider>>>),
}

impl std::fmt::Debug for LlmChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LlmChoice::Standin => f.write_str("Standin"),
            LlmChoice::Provider(p) => write!(f, "Provider({})", p.name()),
            LlmChoice::ByProfile(chosen) => {
                let names: Vec<String> = chosen.iter().map(|(k, p)| format!("{k}={}", p.name())).collect();
                write!(f, "ByProfile({})", names.join(", "))
            }
        }
    }
}

impl LlmChoice {
    /// The choice the environment makes: `RULEWEAVE_LLM=standin|openai|anthropic`; when
    /// unset, `openai` if `OPENAI_API_KEY` is set, else `standin`. `RULEWEAVE_MODEL` and
    /// `RULEWEAVE_MODEL_MAP` rename models (see [`ModelMap::from_vars`]).
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// [`LlmChoice::from_env`] over any source of variables (tests pass a map).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let which = var("RULEWEAVE_LLM").filter(|v| !v.is_empty());
        let which = which.unwrap_or_else(|| {
            if var("OPENAI_API_KEY").is_some_and(|k| !k.is_empty()) { "openai".into() } else { "standin".into() }
        });
        let map = ModelMap::from_vars(&var)?;
        let provider: Arc<dyn Provider> = match which.as_str() {
            "standin" => return Ok(LlmChoice::Standin),
            #[cfg(feature = "http-models")]
            "openai" => Arc::new(OpenAi::new(OpenAiConfig::from_vars(&var)?)?),
            #[cfg(feature = "http-models")]
            "anthropic" => Arc::new(Anthropic::new(AnthropicConfig::from_vars(&var)?)?),
            #[cfg(not(feature = "http-models"))]
            "openai" | "anthropic" => return Err(no_http_models()),
            other => {
                return Err(Error::new(
                    ErrorKind::Input,
                    format!("RULEWEAVE_LLM={other} is not a provider; use standin, openai or anthropic"),
                ));
            }
        };
        Ok(LlmChoice::Provider(map.wrap(provider)))
    }

    /// A short description for banners: `stand-in model` or `openai`.
    pub fn describe(&self) -> String {
        match self {
            LlmChoice::Standin => "stand-in model (offline, deterministic)".into(),
            LlmChoice::Provider(p) => p.name().to_owned(),
            LlmChoice::ByProfile(chosen) => {
                let on: Vec<String> = chosen.iter().map(|(k, p)| format!("{k} on {}", p.name())).collect();
                format!("stand-in model, with {}", on.join(", "))
            }
        }
    }
}

/// Some profiles on their own providers, the others on `otherwise` (a pack's stand-in): what
/// [`LlmChoice::ByProfile`] makes of each pack. It answers as `otherwise` does, and a turn asks
/// it which provider answers each profile ([`Provider::route`]).
pub(crate) struct ByProfile {
    pub(crate) chosen: Arc<std::collections::BTreeMap<String, Arc<dyn Provider>>>,
    pub(crate) otherwise: Arc<dyn Provider>,
}

impl ByProfile {
    fn pick(&self, profile: &str) -> &Arc<dyn Provider> {
        self.chosen.get(profile).unwrap_or(&self.otherwise)
    }
}

impl Provider for ByProfile {
    fn name(&self) -> &str {
        self.otherwise.name()
    }

    fn is_standin(&self) -> bool {
        self.otherwise.is_standin()
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        self.pick(&request.profile).complete(request, tokens)
    }

    fn route(&self, profile: &str) -> Option<Arc<dyn Provider>> {
        self.chosen.get(profile).cloned()
    }

    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        self.pick(&request.profile).embed(request)
    }
}

/// What a build without HTTP providers says when one is asked for.
#[cfg(not(feature = "http-models"))]
pub(crate) fn no_http_models() -> Error {
    Error::new(
        ErrorKind::Input,
        "this build has no HTTP model providers (the engine's `http-models` feature): register a Provider",
    )
}

/// How often and how long a provider retries a failed request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (429, 5xx, timeouts, dropped connections).
    pub max_retries: u32,
    /// The first wait; each further wait doubles, up to `max_backoff`.
    pub base_backoff: Duration,
    /// The longest wait, also the cap on a server's `Retry-After`.
    pub max_backoff: Duration,
    /// The most bytes one reply may have (a streamed one counted as it arrives): a server that
    /// says more, or sends more, fails the call.
    pub max_reply_bytes: usize,
    /// Whether a rate-limited request (429) waits as long as the provider asks, however often,
    /// rather than counting against `max_retries` (`RULEWEAVE_LLM_WAIT_OUT_RATE_LIMITS=1`): for
    /// a lab run on real models, which its budget and the person running it bound.
    pub wait_out_rate_limits: bool,
}

/// The most bytes of one model or search reply, by default (`RULEWEAVE_LLM_MAX_REPLY_BYTES`):
/// far above any reply a model writes (a 4,096-token reply is ~16 kB; embeddings of a batch of 64
/// texts at 3,072 dimensions ~4 MB as JSON), far below what exhausts a host.
pub const MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_reply_bytes: MAX_REPLY_BYTES,
            wait_out_rate_limits: false,
        }
    }
}

impl RetryPolicy {
    /// Reads `RULEWEAVE_LLM_RETRIES`, `RULEWEAVE_LLM_BACKOFF_MS`, `RULEWEAVE_LLM_MAX_BACKOFF_MS`,
    /// `RULEWEAVE_LLM_MAX_REPLY_BYTES` (at least 1024) and `RULEWEAVE_LLM_WAIT_OUT_RATE_LIMITS`
    /// over the defaults.
    pub(crate) fn from_vars(var: &impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut p = RetryPolicy::default();
        if let Some(n) = parse_var(var, "RULEWEAVE_LLM_RETRIES")? {
            p.max_retries = n as u32;
        }
        if let Some(ms) = parse_var(var, "RULEWEAVE_LLM_BACKOFF_MS")? {
            p.base_backoff = Duration::from_millis(ms);
        }
        if let Some(ms) = parse_var(var, "RULEWEAVE_LLM_MAX_BACKOFF_MS")? {
            p.max_backoff = Duration::from_millis(ms);
        }
        if let Some(bytes) = parse_var(var, "RULEWEAVE_LLM_MAX_REPLY_BYTES")? {
            p.max_reply_bytes = usize::try_from(bytes).unwrap_or(usize::MAX).max(1024);
        }
        if let Some(wait) = parse_var(var, "RULEWEAVE_LLM_WAIT_OUT_RATE_LIMITS")? {
            p.wait_out_rate_limits = wait != 0;
        }
        Ok(p)
    }

    /// The wait before retry number `retry` (0-based), honouring a server's `Retry-After`.
    pub(crate) fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self.base_backoff.saturating_mul(1u32 << retry.min(16));
        retry_after.unwrap_or(exp).min(self.max_backoff)
    }
}

/// Parses a numeric environment variable, with an error that names it.
pub(crate) fn parse_var(var: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<u64>> {
    match var(name).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::new(ErrorKind::Input, format!("{name}={v} is not a whole number"))),
    }
}

/// Renames the models packs ask for, so a pack written for gpt-4o-mini runs on a local Ollama
/// model or on Claude without editing the pack.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelMap {
    /// Model used for every request, whatever the pack names (`RULEWEAVE_MODEL`).
    pub all: Option<String>,
    /// Per-model renames (`RULEWEAVE_MODEL_MAP=gpt-4o-mini=llama3.2,gpt-4-turbo=qwen2.5`).
    pub map: Vec<(String, String)>,
}

impl ModelMap {
    /// Reads `RULEWEAVE_MODEL` and `RULEWEAVE_MODEL_MAP`.
    pub fn from_vars(var: &impl Fn(&str) -> Option<String>) -> Result<Self> {
        let all = var("RULEWEAVE_MODEL").filter(|v| !v.is_empty());
        let mut map = Vec::new();
        for pair in var("RULEWEAVE_MODEL_MAP").unwrap_or_default().split(',').filter(|p| !p.trim().is_empty()) {
            let (from, to) = pair.split_once('=').ok_or_else(|| {
                Error::new(ErrorKind::Input, format!("RULEWEAVE_MODEL_MAP entry `{pair}` is not from=to"))
            })?;
            map.push((from.trim().to_owned(), to.trim().to_owned()));
        }
        Ok(ModelMap { all, map })
    }

    /// The model to ask for `model`.
    pub fn resolve<'a>(&'a self, model: &'a str) -> &'a str {
        if let Some((_, to)) = self.map.iter().find(|(from, _)| from == model) {
            return to;
        }
        self.all.as_deref().unwrap_or(model)
    }

    /// The embedding model to ask for `model`: only `map` renames it (`all` names a chat model,
    /// which usually cannot embed).
    pub fn resolve_embedding<'a>(&'a self, model: &'a str) -> &'a str {
        self.map.iter().find(|(from, _)| from == model).map_or(model, |(_, to)| to)
    }

    /// Wraps `provider` so that it sees renamed models; returns it as it is when nothing is renamed.
    pub fn wrap(self, provider: Arc<dyn Provider>) -> Arc<dyn Provider> {
        if self.all.is_none() && self.map.is_empty() {
            provider
        } else {
            Arc::new(Mapped { inner: provider, map: self })
        }
    }
}

struct Mapped {
    inner: Arc<dyn Provider>,
    map: ModelMap,
}

impl Provider for Mapped {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(async move {
            let mut request = request.clone();
            request.model = self.map.resolve(&request.model).to_owned();
            self.inner.complete(&request, tokens).await
        })
    }

    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        Box::pin(async move {
            let mut request = request.clone();
            request.model = self.map.resolve_embedding(&request.model).to_owned();
            self.inner.embed(&request).await
        })
    }
}

/// A rough token count for providers that report none (the stand-in): words × 4/3.
pub(crate) fn estimate_tokens(text: &str) -> u32 {
    (crate::text::word_count(text) as u32).saturating_mul(4).div_ceil(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    #[cfg(feature = "http-models")]
    fn provider_choice_follows_the_environment() {
        assert!(matches!(LlmChoice::from_vars(vars(&[])).unwrap(), LlmChoice::Standin));
        let c = LlmChoice::from_vars(vars(&[("OPENAI_API_KEY", "sk-x")])).unwrap();
        assert!(matches!(&c, LlmChoice::Provider(p) if p.name() == "openai"));
        let c = LlmChoice::from_vars(vars(&[("OPENAI_API_KEY", "sk-x"), ("RULEWEAVE_LLM", "standin")])).unwrap();
        assert!(matches!(c, LlmChoice::Standin));
        let c = LlmChoice::from_vars(vars(&[("RULEWEAVE_LLM", "anthropic"), ("ANTHROPIC_API_KEY", "k")])).unwrap();
        assert!(matches!(&c, LlmChoice::Provider(p) if p.name() == "anthropic"));
        let e = LlmChoice::from_vars(vars(&[("RULEWEAVE_LLM", "gemini")])).unwrap_err();
        assert!(e.detail().contains("gemini"), "{e}");
    }

    #[test]
    #[cfg(not(feature = "http-models"))]
    fn a_build_without_http_providers_says_so_when_one_is_asked_for() {
        assert!(matches!(
            LlmChoice::from_vars(vars(&[("OPENAI_API_KEY", "sk-x"), ("RULEWEAVE_LLM", "standin")])).unwrap(),
            LlmChoice::Standin
        ));
        let e = LlmChoice::from_vars(vars(&[("OPENAI_API_KEY", "sk-x")])).unwrap_err();
        assert!(e.detail().contains("`http-models` feature"), "{e}");
    }

    #[test]
    #[cfg(feature = "http-models")]
    fn missing_keys_are_reported() {
        let e = LlmChoice::from_vars(vars(&[("RULEWEAVE_LLM", "anthropic")])).unwrap_err();
        assert!(e.detail().contains("ANTHROPIC_API_KEY"), "{e}");
    }

    #[test]
    fn models_are_renamed() {
        let m = ModelMap::from_vars(&vars(&[("RULEWEAVE_MODEL_MAP", "gpt-4o-mini=llama3.2, a=b")])).unwrap();
        assert_eq!(m.resolve("gpt-4o-mini"), "llama3.2");
        assert_eq!(m.resolve("gpt-4-turbo"), "gpt-4-turbo");
        let m = ModelMap::from_vars(&vars(&[("RULEWEAVE_MODEL", "qwen"), ("RULEWEAVE_MODEL_MAP", "a=b")])).unwrap();
        assert_eq!(m.resolve("a"), "b");
        assert_eq!(m.resolve("gpt-4o-mini"), "qwen");
        assert!(ModelMap::from_vars(&vars(&[("RULEWEAVE_MODEL_MAP", "oops")])).is_err());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 5,
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
            ..RetryPolicy::default()
        };
        assert_eq!(p.backoff(0, None), Duration::from_millis(100));
        assert_eq!(p.backoff(2, None), Duration::from_millis(400));
        assert_eq!(p.backoff(3, None), Duration::from_millis(500));
        assert_eq!(p.backoff(0, Some(Duration::from_secs(30))), Duration::from_millis(500));
    }
}

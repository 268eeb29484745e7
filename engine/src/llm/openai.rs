//! `openai`: any OpenAI-compatible Chat Completions endpoint (OpenAI, Groq, Ollama, vLLM,
//! llama.cpp server, ...), with a bearer key, JSON mode, streaming, timeouts and retries; and its
//! `/embeddings` endpoint, with a cache so a text is embedded once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hashlink::LruCache;
use serde_json::{Value, json};

use super::{
    BoxFuture, EmbedRequest, EmbedResponse, LlmRequest, LlmResponse, Provider, RetryPolicy, TokenSink, Usage, http,
    parse_var,
};
use crate::error::{Error, ErrorKind, Result};

/// Where and how the `openai` provider sends requests.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Sent as `Authorization: Bearer ...` when set (local servers usually need none).
    pub api_key: Option<String>,
    /// The API base, up to and including `/v1`.
    pub base_url: String,
    /// Timeout of one request, the whole reply included.
    pub timeout: Duration,
    /// Retries on 429, 5xx and timeouts.
    pub retry: RetryPolicy,
    /// How a reply's JSON Schema is sent.
    pub structured_output: StructuredOutput,
    /// Models asked with `max_completion_tokens` and no `temperature` (reasoning models, which
    /// refuse both), as the operator names them (`RULEWEAVE_REASONING_MODELS`): a setting per
    /// model, not a guess from its name.
    pub reasoning_models: Vec<String>,
}

/// How an endpoint takes a reply's JSON Schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StructuredOutput {
    /// As `response_format: {type: json_schema}` (OpenAI's structured outputs).
    #[default]
    JsonSchema,
    /// As JSON mode only (`{type: json_object}`), the schema left to the prompt: for endpoints
    /// that take a subset of JSON Schema (Gemini's OpenAI-compatible one refuses `$ref`,
    /// `$defs` and `oneOf`, which the packs' schemas use).
    JsonObject,
}

impl StructuredOutput {
    /// `json_schema` or `json_object`, from the variable `name`.
    pub(crate) fn from_var(var: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<Self>> {
        match var(name).filter(|v| !v.is_empty()).as_deref().map(str::trim) {
            None => Ok(None),
            Some("json_schema") => Ok(Some(StructuredOutput::JsonSchema)),
            Some("json_object") => Ok(Some(StructuredOutput::JsonObject)),
            Some(other) => Err(Error::new(
                ErrorKind::Input,
                format!(
                    "{name}={other}: say json_schema (the schema as the reply's format) or json_object (JSON mode)"
                ),
            )),
        }
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            api_key: None,
            base_url: "https://api.openai.com/v1".into(),
            timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
            structured_output: StructuredOutput::default(),
            reasoning_models: Vec::new(),
        }
    }
}

impl OpenAiConfig {
    /// `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `RULEWEAVE_LLM_TIMEOUT_MS`, `RULEWEAVE_LLM_RETRIES`,
    /// `RULEWEAVE_LLM_BACKOFF_MS` over the defaults.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(&|k| std::env::var(k).ok())
    }

    pub(crate) fn from_vars(var: &impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut c = OpenAiConfig { api_key: var("OPENAI_API_KEY").filter(|k| !k.is_empty()), ..Default::default() };
        if let Some(url) = var("OPENAI_BASE_URL").filter(|u| !u.is_empty()) {
            c.base_url = url;
        }
        if let Some(ms) = parse_var(var, "RULEWEAVE_LLM_TIMEOUT_MS")? {
            c.timeout = Duration::from_millis(ms);
        }
        c.retry = RetryPolicy::from_vars(var)?;
        if let Some(how) = StructuredOutput::from_var(var, "RULEWEAVE_STRUCTURED_OUTPUT")? {
            c.structured_output = how;
        }
        c.reasoning_models = var("RULEWEAVE_REASONING_MODELS")
            .map(|v| v.split(',').map(|m| m.trim().to_owned()).filter(|m| !m.is_empty()).collect())
            .unwrap_or_default();
        Ok(c)
    }
}

/// How many embeddings the provider keeps: the texts a game compares again and again (questions
/// asked, focus descriptions) are embedded once.
const EMBEDDING_CACHE: usize = 4096;

/// Texts per embeddings request.
const EMBEDDING_BATCH: usize = 256;

/// The `openai` provider.
pub struct OpenAi {
    /// `openai`, or the name a profile gives a vendor (`groq`).
    name: String,
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
    embeddings_url: String,
    /// `model \0 text` → (the model that answered, the vector); least recently used first out.
    embeddings: Mutex<LruCache<String, Cached>>,
    /// A rate limit's pause, kept by every call.
    throttle: http::Throttle,
}

type Cached = (Arc<str>, Arc<[f32]>);

impl OpenAi {
    /// A provider sending to `config.base_url`.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        Self::named(config, "openai")
    }

    /// A provider sending to `config.base_url`, called `name` in events and errors (`groq`).
    pub fn named(config: OpenAiConfig, name: &str) -> Result<Self> {
        let client = http::client(config.timeout)?;
        let base = config.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        let embeddings_url = format!("{base}/embeddings");
        let embeddings = Mutex::new(LruCache::new(EMBEDDING_CACHE));
        Ok(OpenAi {
            name: name.to_owned(),
            config,
            client,
            url,
            embeddings_url,
            embeddings,
            throttle: Default::default(),
        })
    }

    fn body(&self, request: &LlmRequest, stream: bool) -> Value {
        let mut body = json!({ "model": request.model, "messages": request.messages });
        let reasoning = self.config.reasoning_models.contains(&request.model);
        if let Some(t) = request.temperature
            && !reasoning
        {
            body["temperature"] = json!(t);
        }
        if let Some(m) = request.max_tokens {
            body[if reasoning { "max_completion_tokens" } else { "max_tokens" }] = json!(m);
        }
        if let Some(schema) = &request.schema
            && self.config.structured_output == StructuredOutput::JsonSchema
        {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": *schema.document, "strict": false},
            });
        } else if request.json || request.schema.is_some() {
            body["response_format"] = json!({"type": "json_object"});
        }
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    async fn call(&self, request: &LlmRequest, tokens: Option<TokenSink>) -> Result<LlmResponse> {
        let body = self.body(request, tokens.is_some());
        let (resp, attempts) =
            http::send(&self.name, &self.config.retry, &self.throttle, || self.post(&self.url, &body)).await?;
        match tokens {
            None => {
                let v = http::json_body(&self.name, resp, attempts, self.config.retry.max_reply_bytes).await?;
                let content = v
                    .pointer("/choices/0/message/content")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("the reply has no choices[0].message.content", attempts))?;
                super::finished(v.pointer("/choices/0/finish_reason").and_then(Value::as_str));
                Ok(LlmResponse {
                    content: content.to_owned(),
                    model: v["model"].as_str().unwrap_or(&request.model).to_owned(),
                    usage: usage(&v),
                    attempts,
                })
            }
            Some(sink) => {
                let mut content = String::new();
                let mut model = request.model.clone();
                let mut use_ = Usage::default();
                // A stream is whole only when it says it ended: `[DONE]`, or a `finish_reason`.
                let mut ended: Option<String> = None;
                http::read_sse(&self.name, resp, attempts, self.config.retry.max_reply_bytes, |data| {
                    if data == "[DONE]" {
                        ended.get_or_insert_with(|| "stop".into());
                        return Ok(());
                    }
                    let v: Value = serde_json::from_str(data)
                        .map_err(|e| malformed(&format!("a streamed chunk is not valid JSON ({e})"), attempts))?;
                    if let Some(piece) = v.pointer("/choices/0/delta/content").and_then(Value::as_str)
                        && !piece.is_empty()
                    {
                        sink(piece);
                        content.push_str(piece);
                    }
                    if let Some(m) = v["model"].as_str() {
                        model = m.to_owned();
                    }
                    if v.get("usage").is_some_and(|u| !u.is_null()) {
                        use_ = usage(&v);
                    }
                    if let Some(why) = v.pointer("/choices/0/finish_reason").and_then(Value::as_str) {
                        ended = Some(why.to_owned());
                    }
                    Ok(())
                })
                .await?;
                match ended.as_deref() {
                    None => {
                        Err(malformed("the stream ended before the reply did (no [DONE], no finish_reason)", attempts))
                    }
                    Some(why) if content.is_empty() && why != "stop" && why != "length" => {
                        Err(malformed(&format!("the streamed reply has no text (it finished with `{why}`)"), attempts))
                    }
                    why => {
                        super::finished(why);
                        Ok(LlmResponse { content, model, usage: use_, attempts })
                    }
                }
            }
        }
    }

    /// A POST of `body` to `url`, with the key when there is one.
    fn post(&self, url: &str, body: &Value) -> reqwest::RequestBuilder {
        let rb = self.client.post(url).json(body);
        match &self.config.api_key {
            Some(key) => rb.bearer_auth(key),
            None => rb,
        }
    }

    /// Embeds the texts the cache does not have, each once, in batches, and answers from the cache.
    async fn embed_texts(&self, request: &EmbedRequest) -> Result<EmbedResponse> {
        let key = |t: &str| format!("{}\0{t}", request.model);
        let mut vectors: Vec<Option<Cached>> = {
            let mut cache = self.embeddings.lock().unwrap_or_else(|p| p.into_inner());
            request.texts.iter().map(|t| cache.get(&key(t)).cloned()).collect()
        };
        let cached = vectors.iter().filter(|v| v.is_some()).count();
        let mut seen = HashSet::new();
        let missing: Vec<&str> = request
            .texts
            .iter()
            .zip(&vectors)
            .filter(|(t, v)| v.is_none() && seen.insert(t.as_str()))
            .map(|(t, _)| t.as_str())
            .collect();
        let (mut prompt_tokens, mut attempts) = (0u32, 0u32);
        let mut fetched: HashMap<&str, Cached> = HashMap::new();
        for batch in missing.chunks(EMBEDDING_BATCH) {
            let body = json!({ "model": request.model, "input": batch });
            let (resp, tries) =
                http::send(&self.name, &self.config.retry, &self.throttle, || self.post(&self.embeddings_url, &body))
                    .await?;
            attempts += tries;
            let v = http::json_body(&self.name, resp, tries, self.config.retry.max_reply_bytes).await?;
            let batch_vectors = embeddings_of(&v, batch.len(), tries)?;
            let model: Arc<str> = v["model"].as_str().unwrap_or(&request.model).into();
            // Cached batch by batch: a later batch failing keeps what was paid for.
            let mut cache = self.embeddings.lock().unwrap_or_else(|p| p.into_inner());
            for (text, vector) in batch.iter().zip(batch_vectors) {
                cache.insert(key(text), (model.clone(), vector.clone()));
                fetched.insert(text, (model.clone(), vector));
            }
            drop(cache);
            prompt_tokens += v.pointer("/usage/prompt_tokens").and_then(Value::as_u64).unwrap_or(0) as u32;
        }
        for (slot, text) in vectors.iter_mut().zip(&request.texts) {
            if slot.is_none() {
                *slot = fetched.get(text.as_str()).cloned();
            }
        }
        let vectors: Vec<Cached> =
            vectors.into_iter().collect::<Option<_>>().ok_or_else(|| Error::internal("a text lost its embedding"))?;
        let model = vectors.first().map_or_else(|| request.model.clone(), |(m, _)| m.to_string());
        let vectors = vectors.into_iter().map(|(_, v)| v).collect();
        Ok(EmbedResponse { vectors, model, prompt_tokens, cached, attempts })
    }
}

/// The vectors of an embeddings reply, in input order (`data[i].index` says which input each is).
fn embeddings_of(v: &Value, expected: usize, attempts: u32) -> Result<Vec<Arc<[f32]>>> {
    let data = v["data"].as_array().ok_or_else(|| malformed("the embeddings reply has no data list", attempts))?;
    if data.len() != expected {
        return Err(malformed(
            &format!("{expected} texts were sent but {} embeddings came back", data.len()),
            attempts,
        ));
    }
    let mut out: Vec<Option<Arc<[f32]>>> = vec![None; expected];
    let mut dimensions = None;
    for (k, item) in data.iter().enumerate() {
        let index = item["index"].as_u64().map_or(k, |i| i as usize);
        let numbers = item["embedding"].as_array().ok_or_else(|| {
            malformed(&format!("data[{k}] has no embedding list (base64 replies are not asked for)"), attempts)
        })?;
        let vector: Option<Vec<f32>> =
            numbers.iter().map(|x| x.as_f64().map(|x| x as f32).filter(|x| x.is_finite())).collect();
        let vector =
            vector.ok_or_else(|| malformed(&format!("data[{k}].embedding is not all finite numbers"), attempts))?;
        if vector.is_empty() || *dimensions.get_or_insert(vector.len()) != vector.len() {
            return Err(malformed(&format!("data[{k}].embedding has {} dimensions", vector.len()), attempts));
        }
        match out.get_mut(index) {
            Some(slot @ None) => *slot = Some(vector.into()),
            _ => return Err(malformed(&format!("data[{k}] has index {index}, out of place"), attempts)),
        }
    }
    out.into_iter().collect::<Option<Vec<_>>>().ok_or_else(|| malformed("an embedding is missing", attempts))
}

fn usage(v: &Value) -> Usage {
    let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0) as u32;
    Usage { prompt_tokens: n("/usage/prompt_tokens"), completion_tokens: n("/usage/completion_tokens") }
}

fn malformed(why: &str, attempts: u32) -> Error {
    Error::new(
        ErrorKind::Llm,
        format!("openai: {why} (after {attempts} attempt{})", if attempts == 1 { "" } else { "s" }),
    )
}

impl Provider for OpenAi {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        let start = Instant::now();
        Box::pin(async move {
            let r = self.call(request, tokens).await;
            tracing::debug!(model = %request.model, ms = http::elapsed_ms(start), ok = r.is_ok(), "openai call");
            r
        })
    }

    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        let start = Instant::now();
        Box::pin(async move {
            let r = self.embed_texts(request).await;
            tracing::debug!(model = %request.model, texts = request.texts.len(), ms = http::elapsed_ms(start),
                ok = r.is_ok(), "openai embeddings");
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;

    #[test]
    fn request_body_carries_the_profile() {
        let r = LlmRequest {
            provider: None,
            default_model: None,
            profile: "judge".into(),
            model: "gpt-4o-mini".into(),
            messages: vec![Message::new("user", "hi")],
            temperature: Some(0.3),
            max_tokens: Some(500),
            json: true,
            schema: None,
        };
        let p = OpenAi::new(OpenAiConfig::default()).unwrap();
        assert_eq!(
            p.body(&r, false),
            json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                   "temperature": 0.3, "max_tokens": 500, "response_format": {"type": "json_object"}})
        );
        // A model the operator names as a reasoning model: no temperature, max_completion_tokens.
        let reasoning =
            OpenAi::new(OpenAiConfig { reasoning_models: vec!["gpt-4o-mini".into()], ..Default::default() });
        assert_eq!(
            reasoning.unwrap().body(&r, false),
            json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                   "max_completion_tokens": 500, "response_format": {"type": "json_object"}})
        );
        let b = p.body(&LlmRequest { temperature: None, max_tokens: None, json: false, ..r }, true);
        assert_eq!(b["stream"], json!(true));
        assert!(b.get("temperature").is_none() && b.get("response_format").is_none());
    }

    #[test]
    fn a_schema_goes_as_the_structured_output_format() {
        let document = std::sync::Arc::new(json!({"type": "object", "required": ["title"]}));
        let r = LlmRequest {
            provider: None,
            default_model: None,
            profile: "designer".into(),
            model: "gpt-4o".into(),
            messages: vec![Message::new("user", "a game")],
            temperature: None,
            max_tokens: None,
            json: true,
            schema: Some(crate::llm::ReplySchema { name: "design".into(), document }),
        };
        let p = OpenAi::new(OpenAiConfig::default()).unwrap();
        assert_eq!(
            p.body(&r, false)["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "design", "strict": false,
                   "schema": {"type": "object", "required": ["title"]}}})
        );
        // An endpoint that takes JSON mode only gets that; the schema is the prompt's to state.
        let p = OpenAi::new(OpenAiConfig { structured_output: StructuredOutput::JsonObject, ..Default::default() });
        assert_eq!(p.unwrap().body(&r, false)["response_format"], json!({"type": "json_object"}));
    }
}

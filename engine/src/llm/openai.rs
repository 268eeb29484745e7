//! `openai`: any OpenAI-compatible Chat Completions endpoint (OpenAI, Groq, Ollama, vLLM,
//! llama.cpp server, ...), with a bearer key, JSON mode, streaming, timeouts and retries.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{BoxFuture, LlmRequest, LlmResponse, Provider, RetryPolicy, TokenSink, Usage, http, parse_var};
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
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            api_key: None,
            base_url: "https://api.openai.com/v1".into(),
            timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
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
        Ok(c)
    }
}

/// The `openai` provider.
pub struct OpenAi {
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
}

impl OpenAi {
    /// A provider sending to `config.base_url`.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let client = http::client(config.timeout)?;
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(OpenAi { config, client, url })
    }

    fn body(request: &LlmRequest, stream: bool) -> Value {
        let mut body = json!({ "model": request.model, "messages": request.messages });
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(m) = request.max_tokens {
            body["max_tokens"] = json!(m);
        }
        if request.json {
            body["response_format"] = json!({"type": "json_object"});
        }
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    async fn call(&self, request: &LlmRequest, tokens: Option<TokenSink>) -> Result<LlmResponse> {
        let body = Self::body(request, tokens.is_some());
        let (resp, attempts) = http::send("openai", &self.config.retry, || {
            let mut rb = self.client.post(&self.url).json(&body);
            if let Some(key) = &self.config.api_key {
                rb = rb.bearer_auth(key);
            }
            rb
        })
        .await?;
        match tokens {
            None => {
                let v = http::json_body("openai", resp, attempts).await?;
                let content = v
                    .pointer("/choices/0/message/content")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("the reply has no choices[0].message.content", attempts))?;
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
                http::read_sse("openai", resp, attempts, |data| {
                    if data == "[DONE]" {
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
                    Ok(())
                })
                .await?;
                Ok(LlmResponse { content, model, usage: use_, attempts })
            }
        }
    }
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
        "openai"
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;

    #[test]
    fn request_body_carries_the_profile() {
        let r = LlmRequest {
            profile: "judge".into(),
            model: "gpt-4o-mini".into(),
            messages: vec![Message::new("user", "hi")],
            temperature: Some(0.3),
            max_tokens: Some(500),
            json: true,
        };
        assert_eq!(
            OpenAi::body(&r, false),
            json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
                   "temperature": 0.3, "max_tokens": 500, "response_format": {"type": "json_object"}})
        );
        let b = OpenAi::body(&LlmRequest { temperature: None, max_tokens: None, json: false, ..r }, true);
        assert_eq!(b["stream"], json!(true));
        assert!(b.get("temperature").is_none() && b.get("response_format").is_none());
    }
}

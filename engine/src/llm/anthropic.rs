//! `anthropic`: the Messages API, with `ANTHROPIC_API_KEY`.
//!
//! Packs name OpenAI models as the original designs do; a request for a model that is not a Claude model is
//! refused with a message saying how to map it (`RULEWEAVE_MODEL`, `RULEWEAVE_MODEL_MAP`), rather
//! than silently sent somewhere else.

use std::time::Duration;

use serde_json::{Value, json};

use super::{BoxFuture, LlmRequest, LlmResponse, Provider, RetryPolicy, TokenSink, Usage, http, parse_var};
use crate::error::{Error, ErrorKind, Result};

/// The Messages API requires a reply limit; used when a profile sets none.
const DEFAULT_MAX_TOKENS: u32 = 1024;

/// Where and how the `anthropic` provider sends requests.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConfig {
    /// Sent as `x-api-key`.
    pub api_key: String,
    /// The API base (`https://api.anthropic.com`).
    pub base_url: String,
    /// Timeout of one request, the whole reply included.
    pub timeout: Duration,
    /// Retries on 429, 5xx (529 "overloaded" included) and timeouts.
    pub retry: RetryPolicy,
}

impl AnthropicConfig {
    /// `ANTHROPIC_API_KEY` (required), `ANTHROPIC_BASE_URL`, and the shared retry variables.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(&|k| std::env::var(k).ok())
    }

    pub(crate) fn from_vars(var: &impl Fn(&str) -> Option<String>) -> Result<Self> {
        let api_key = var("ANTHROPIC_API_KEY")
            .filter(|k| !k.is_empty())
            .ok_or_else(|| Error::new(ErrorKind::Input, "RULEWEAVE_LLM=anthropic needs ANTHROPIC_API_KEY to be set"))?;
        let base_url =
            var("ANTHROPIC_BASE_URL").filter(|u| !u.is_empty()).unwrap_or_else(|| "https://api.anthropic.com".into());
        let timeout = Duration::from_millis(parse_var(var, "RULEWEAVE_LLM_TIMEOUT_MS")?.unwrap_or(60_000));
        Ok(AnthropicConfig { api_key, base_url, timeout, retry: RetryPolicy::from_vars(var)? })
    }
}

/// The `anthropic` provider.
pub struct Anthropic {
    config: AnthropicConfig,
    client: reqwest::Client,
    url: String,
    /// A rate limit's pause, kept by every call.
    throttle: http::Throttle,
}

impl Anthropic {
    /// A provider sending to `config.base_url`.
    pub fn new(config: AnthropicConfig) -> Result<Self> {
        let client = http::client(config.timeout)?;
        let url = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        Ok(Anthropic { config, client, url, throttle: Default::default() })
    }

    fn body(request: &LlmRequest, stream: bool) -> Value {
        let mut system: Vec<&str> = Vec::new();
        let mut messages = Vec::new();
        for m in &request.messages {
            if m.role == "system" {
                system.push(&m.content);
            } else {
                messages.push(json!({"role": m.role, "content": m.content}));
            }
        }
        let mut system = system.join("\n\n");
        if request.json || request.schema.is_some() {
            // The Messages API has no JSON mode; say it in the system prompt instead.
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str("Reply with a single JSON object and nothing else.");
            if let Some(schema) = &request.schema {
                system.push_str(" It must match this JSON Schema:\n");
                system.push_str(&schema.document.to_string());
            }
        }
        let mut body = json!({
            "model": request.model,
            "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = json!(system);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t.clamp(0.0, 1.0));
        }
        if stream {
            body["stream"] = json!(true);
        }
        body
    }

    async fn call(&self, request: &LlmRequest, tokens: Option<TokenSink>) -> Result<LlmResponse> {
        if !request.model.starts_with("claude") {
            return Err(Error::new(
                ErrorKind::Llm,
                format!(
                    "anthropic: `{}` is not a Claude model; map it with RULEWEAVE_MODEL=claude-... or \
                     RULEWEAVE_MODEL_MAP={}=claude-...",
                    request.model, request.model
                ),
            ));
        }
        let body = Self::body(request, tokens.is_some());
        let (resp, attempts) = http::send("anthropic", &self.config.retry, &self.throttle, || {
            self.client
                .post(&self.url)
                .header("x-api-key", &self.config.api_key)
                .header("anthropic-version", "2023-06-01")
                .json(&body)
        })
        .await?;
        let bad = |why: String| Error::new(ErrorKind::Llm, format!("anthropic: {why} (after {attempts} attempts)"));
        match tokens {
            None => {
                let v = http::json_body("anthropic", resp, attempts, self.config.retry.max_reply_bytes).await?;
                let content: String = v["content"]
                    .as_array()
                    .ok_or_else(|| bad("the reply has no content".into()))?
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect();
                let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0) as u32;
                super::finished(v["stop_reason"].as_str());
                Ok(LlmResponse {
                    content,
                    model: v["model"].as_str().unwrap_or(&request.model).to_owned(),
                    usage: Usage {
                        prompt_tokens: n("/usage/input_tokens"),
                        completion_tokens: n("/usage/output_tokens"),
                    },
                    attempts,
                })
            }
            Some(sink) => {
                let mut content = String::new();
                let mut usage = Usage::default();
                // A stream is whole only when it says it ended (`message_stop`).
                let mut ended = false;
                http::read_sse("anthropic", resp, attempts, self.config.retry.max_reply_bytes, |data| {
                    let v: Value = serde_json::from_str(data)
                        .map_err(|e| bad(format!("a streamed event is not valid JSON ({e})")))?;
                    match v["type"].as_str() {
                        Some("content_block_delta") => {
                            if let Some(piece) = v.pointer("/delta/text").and_then(Value::as_str) {
                                sink(piece);
                                content.push_str(piece);
                            }
                        }
                        Some("message_start") => {
                            usage.prompt_tokens =
                                v.pointer("/message/usage/input_tokens").and_then(Value::as_u64).unwrap_or(0) as u32;
                        }
                        Some("message_stop") => ended = true,
                        Some("message_delta") => {
                            super::finished(v.pointer("/delta/stop_reason").and_then(Value::as_str));
                            usage.completion_tokens =
                                v.pointer("/usage/output_tokens").and_then(Value::as_u64).unwrap_or(0) as u32;
                        }
                        Some("error") => {
                            return Err(bad(v
                                .pointer("/error/message")
                                .and_then(Value::as_str)
                                .unwrap_or("error")
                                .into()));
                        }
                        _ => {}
                    }
                    Ok(())
                })
                .await?;
                if !ended {
                    return Err(bad("the stream ended before the reply did (no message_stop)".into()));
                }
                Ok(LlmResponse { content, model: request.model.clone(), usage, attempts })
            }
        }
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(self.call(request, tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;

    #[test]
    fn system_messages_move_to_the_system_field() {
        let r = LlmRequest {
            provider: None,
            default_model: None,
            profile: "p".into(),
            model: "claude-x".into(),
            messages: vec![Message::new("system", "be a pirate"), Message::new("user", "hi")],
            temperature: Some(0.3),
            max_tokens: None,
            json: true,
            schema: None,
        };
        let b = Anthropic::body(&r, false);
        assert_eq!(b["system"], json!("be a pirate\n\nReply with a single JSON object and nothing else."));
        assert_eq!(b["messages"], json!([{"role": "user", "content": "hi"}]));
        assert_eq!(b["max_tokens"], json!(1024));
    }
}

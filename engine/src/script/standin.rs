//! `standin`: a pack's own offline model, a Rhai function `respond(request)` in the pack's
//! scripts. Deterministic (it sees only the request, as a real model would), so every pack is
//! playable and testable with no network and no key. Labelled as a stand-in wherever it answers.

use std::sync::Arc;

use rhai::{Array, Dynamic, Map};

use super::{FnRef, Sandbox};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::{
    BoxFuture, EmbedRequest, EmbedResponse, LlmRequest, LlmResponse, Provider, TokenSink, Usage, estimate_tokens,
};
use crate::value;

/// A pack's stand-in model.
pub(crate) struct Standin {
    sandbox: Arc<Sandbox>,
    respond: FnRef,
    /// `fn(text) -> [float]`: the pack's own vectors (`standin_embed`).
    embed: Option<FnRef>,
}

impl Standin {
    pub(crate) fn new(sandbox: Arc<Sandbox>, respond: FnRef, embed: Option<FnRef>) -> Self {
        Standin { sandbox, respond, embed }
    }

    /// `text`'s vector: the pack's `standin_embed`, or the engine's hashed features.
    fn vector(&self, text: &str) -> Result<Arc<[f32]>> {
        let Some(f) = &self.embed else { return Ok(Arc::from(crate::text::hashed_embedding(text))) };
        let mut this = Dynamic::UNIT;
        let out = self
            .sandbox
            .call(f, &mut this, (Dynamic::from(text.to_owned()),), None)
            .map_err(|e| Error::new(ErrorKind::Llm, format!("the stand-in's embedding failed: {}", e.detail())))?;
        let bad = || Error::new(ErrorKind::Llm, format!("{} must return a list of numbers", f.display()));
        let list = out.try_cast::<Array>().ok_or_else(bad)?;
        let vector: Option<Vec<f32>> = list
            .iter()
            .map(|x| x.as_float().ok().or_else(|| x.as_int().ok().map(|i| i as f64)).map(|v| v as f32))
            .collect();
        match vector {
            Some(v) if !v.is_empty() && v.iter().all(|x| x.is_finite()) => Ok(Arc::from(v)),
            _ => Err(bad()),
        }
    }

    /// The request as the script sees it: `#{profile, model, messages: [#{role, content}], json,
    /// schema, temperature, max_tokens}` (`schema`: the name of the schema the reply must match,
    /// or `()`).
    fn request_map(request: &LlmRequest) -> Map {
        let mut m = Map::new();
        m.insert("profile".into(), request.profile.clone().into());
        m.insert("model".into(), request.model.clone().into());
        let messages: Array = request
            .messages
            .iter()
            .map(|msg| {
                let mut x = Map::new();
                x.insert("role".into(), msg.role.clone().into());
                x.insert("content".into(), msg.content.clone().into());
                Dynamic::from_map(x)
            })
            .collect();
        m.insert("messages".into(), Dynamic::from_array(messages));
        m.insert("json".into(), request.json.into());
        m.insert("schema".into(), request.schema.as_ref().map_or(Dynamic::UNIT, |s| s.name.clone().into()));
        m.insert("temperature".into(), request.temperature.map_or(Dynamic::UNIT, Dynamic::from_float));
        m.insert("max_tokens".into(), request.max_tokens.map_or(Dynamic::UNIT, |n| Dynamic::from_int(n.into())));
        m
    }

    fn answer(&self, request: &LlmRequest) -> Result<LlmResponse> {
        let mut this = Dynamic::UNIT;
        let reply = self
            .sandbox
            .call(&self.respond, &mut this, (Dynamic::from_map(Self::request_map(request)),), None)
            .map_err(|e| {
                Error::new(ErrorKind::Llm, format!("the stand-in model failed: {}", e.detail()))
                    .at(e.origin().cloned().unwrap_or_else(|| crate::error::Origin::file("")))
            })?;
        let content = if reply.is_string() {
            reply.to_string()
        } else if reply.is_map() || reply.is_array() {
            value::to_json(&reply).to_string()
        } else {
            return Err(Error::new(
                ErrorKind::Llm,
                format!(
                    "the stand-in model returned {}; it must return a string (or a map for JSON)",
                    value::type_of(&reply)
                ),
            ));
        };
        let usage = Usage {
            prompt_tokens: request.messages.iter().map(|m| estimate_tokens(&m.content)).sum(),
            completion_tokens: estimate_tokens(&content),
        };
        Ok(LlmResponse { content, model: format!("{} (stand-in)", request.model), usage, attempts: 1 })
    }
}

impl Provider for Standin {
    fn name(&self) -> &str {
        "standin"
    }

    fn is_standin(&self) -> bool {
        true
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        let result = self.answer(request);
        if let (Ok(r), Some(sink)) = (&result, tokens) {
            // Stream word by word, so a console shows the stand-in the way it shows a real model.
            for piece in r.content.split_inclusive(' ') {
                sink(piece);
            }
        }
        Box::pin(std::future::ready(result))
    }

    /// The pack's `standin_embed` function, or the engine's hashed features
    /// ([`crate::text::hashed_embedding`]): deterministic and offline, like the rest of the stand-in.
    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        let vectors = match request.texts.iter().map(|t| self.vector(t)).collect::<Result<Vec<_>>>() {
            Ok(v) => v,
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        Box::pin(std::future::ready(Ok(EmbedResponse {
            vectors,
            model: format!("{} (stand-in)", request.model),
            prompt_tokens: request.texts.iter().map(|t| estimate_tokens(t)).sum(),
            cached: 0,
            attempts: 1,
        })))
    }
}

/// A pack's stand-in search engine: a Rhai function `search(query)` in the pack's scripts returning
/// `[#{title, url, content}]`. Deterministic and offline, like the stand-in model.
pub(crate) struct StandinSearch {
    sandbox: Arc<Sandbox>,
    func: FnRef,
}

impl StandinSearch {
    pub(crate) fn new(sandbox: Arc<Sandbox>, func: FnRef) -> Self {
        StandinSearch { sandbox, func }
    }

    fn answer(&self, query: &str, max: usize) -> Result<Vec<crate::search::SearchResult>> {
        let mut this = Dynamic::UNIT;
        let v = self
            .sandbox
            .call(&self.func, &mut this, (Dynamic::from(query.to_owned()),), None)
            .map_err(|e| Error::new(ErrorKind::Llm, format!("the stand-in search failed: {}", e.detail())))?;
        let json = value::to_json(&v);
        let mut results: Vec<crate::search::SearchResult> = serde_json::from_value(json).map_err(|e| {
            Error::new(
                ErrorKind::Llm,
                format!("the stand-in search must return [#{{title, url, content}}], not {}: {e}", value::type_of(&v)),
            )
        })?;
        results.truncate(max);
        Ok(results)
    }
}

impl crate::search::Search for StandinSearch {
    fn name(&self) -> &str {
        "standin"
    }

    fn search<'a>(&'a self, query: &'a str, max: usize) -> BoxFuture<'a, Result<Vec<crate::search::SearchResult>>> {
        Box::pin(std::future::ready(self.answer(query, max)))
    }
}

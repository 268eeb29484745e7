//! `standin`: a pack's own offline model, a Rhai function `respond(request)` in the pack's
//! scripts. Deterministic (it sees only the request, as a real model would), so every pack is
//! playable and testable with no network and no key. Labelled as a stand-in wherever it answers.
//!
//! Being deterministic, its answers are kept ([`Answers`]): a request it has answered is
//! answered again from memory, which is most of what a simulation's games ask (the same openings
//! in game after game, and the same games at every value of a sweep).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rhai::{ASTNode, Array, Dynamic, Expr, Map, Stmt};
use sha2::{Digest, Sha256};

use super::{FnRef, MODEL_FUNCTIONS, Sandbox, ScriptFile};
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
    /// Where its answers are kept, and a hash already fed with what decides them besides the
    /// request; `None` when the stand-in might answer one request two ways.
    memo: Option<(Arc<Answers>, Sha256)>,
}

/// The stand-in answers a pack's copies of the rules gave, by a SHA-256 of everything that
/// decided them: the pack, the version of its files, the parameters the stand-in reads and the
/// request as the script sees it. One is shared by an engine's packs and by the copies of the
/// rules `--param`, sweeps and `tune` play (which differ only in parameters), so a game a sweep
/// plays at its next value asks again only where the game went another way.
#[derive(Default)]
pub(crate) struct Answers {
    kept: Mutex<Kept>,
}

/// The answers, and the bytes their texts hold.
#[derive(Default)]
struct Kept {
    answers: HashMap<[u8; 32], LlmResponse>,
    bytes: usize,
}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answers").field("kept", &self.len()).finish()
    }
}

/// The most bytes of answers kept (a pirate's answer is a few hundred); past it, the memory
/// starts again. An answer longer than [`LONGEST_KEPT`] is not kept.
const MOST_BYTES: usize = 64 << 20;
const LONGEST_KEPT: usize = 64 << 10;

impl Answers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many answers are kept.
    pub(crate) fn len(&self) -> usize {
        self.lock().answers.len()
    }

    fn get(&self, key: &[u8; 32]) -> Option<LlmResponse> {
        self.lock().answers.get(key).cloned()
    }

    fn keep(&self, key: [u8; 32], answer: LlmResponse) {
        let size = answer.content.len() + answer.model.len() + 64;
        if answer.content.len() > LONGEST_KEPT {
            return;
        }
        let mut kept = self.lock();
        if kept.bytes + size > MOST_BYTES {
            *kept = Kept::default();
        }
        if kept.answers.insert(key, answer).is_none() {
            kept.bytes += size;
        }
    }
}

/// The parameters a stand-in reads besides its request.
#[derive(Debug, PartialEq)]
pub(crate) enum Reads {
    /// These, each named by a literal (`param("standin_lines")`).
    Params(Vec<String>),
    /// Any of them: it names one by a value, or renders a template.
    AllParams,
}

/// What a stand-in reads besides the request, when that is all it reads. `None` when it may do
/// something besides answering, or call what this cannot see: `print` or `debug` (a log line),
/// a library's function, or a function by a pointer.
///
/// The stand-in runs outside any turn, so the host functions that read more than their
/// arguments (the time, the random functions, the store, the input, models, templates) fail in
/// it, and an error is never kept; they are refused here as well, so a kept answer never rests
/// on that alone.
pub(crate) fn reads(file: &ScriptFile) -> Option<Reads> {
    const UNSEEN: &[&str] = &[
        "now",
        "random",
        "random_int",
        "pick",
        "shuffle",
        "session_id",
        "turn_number",
        "input",
        "option",
        "count",
        "query",
        "emit",
        "log",
        "warn",
        "print",
        "debug",
        "refuse",
        "last_call",
        "tokens_spent",
        "call",
        "curry",
        "eval",
    ];
    let mut pure = true;
    let mut reads = Reads::Params(Vec::new());
    file.ast.walk(&mut |path: &[ASTNode<'_>]| {
        let call = match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(call, _) | Expr::MethodCall(call, _)))
            | Some(ASTNode::Stmt(Stmt::FnCall(call, _))) => call,
            _ => return true,
        };
        let name = call.name.as_str();
        if !call.namespace.is_empty() {
            pure = false;
        } else if file.has_fn(name, call.args.len()) {
            // The file's own function (the pirate's `count(n, one, many)`), walked where it is.
        } else if UNSEEN.contains(&name) || MODEL_FUNCTIONS.contains(&name) {
            pure = false;
        } else if name == "render" {
            reads = Reads::AllParams;
        } else if name == "param" {
            match (call.args.first(), &mut reads) {
                (Some(Expr::StringConstant(s, _)), Reads::Params(names)) => names.push(s.to_string()),
                _ => reads = Reads::AllParams,
            }
        }
        pure
    });
    pure.then_some(reads)
}

impl Standin {
    pub(crate) fn new(sandbox: Arc<Sandbox>, respond: FnRef, embed: Option<FnRef>) -> Self {
        Standin { sandbox, respond, embed, memo: None }
    }

    /// The stand-in keeping its answers in `answers`, when it reads nothing but the request and
    /// the parameters: `pack` is its pack, `files` the hash of the pack's files and `params` its
    /// parameters as this copy of the rules sets them.
    pub(crate) fn keeping(self, answers: &Arc<Answers>, pack: &str, files: &str, params: &Map) -> Self {
        let Some(reads) = reads(&self.respond.file) else { return self };
        let mut h = Sha256::new();
        feed(&mut h, pack);
        feed(&mut h, files);
        let read: Vec<_> = params
            .iter()
            .filter(|(name, _)| match &reads {
                Reads::Params(names) => names.iter().any(|x| x == name.as_str()),
                Reads::AllParams => true,
            })
            .collect();
        h.update((read.len() as u64).to_le_bytes());
        for (name, value) in read {
            feed(&mut h, name);
            feed(&mut h, &value::to_json(value).to_string());
        }
        Standin { memo: Some((answers.clone(), h)), ..self }
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
        let Some((answers, salt)) = &self.memo else { return self.respond(request) };
        let key = key(salt.clone(), request);
        if let Some(kept) = answers.get(&key) {
            return Ok(kept);
        }
        let answer = self.respond(request)?;
        answers.keep(key, answer.clone());
        Ok(answer)
    }

    /// The script's answer to `request`.
    fn respond(&self, request: &LlmRequest) -> Result<LlmResponse> {
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

/// The key of `request`'s answer: `salt` (what decides it besides the request) fed with the
/// request as the script sees it.
fn key(mut h: Sha256, request: &LlmRequest) -> [u8; 32] {
    feed(&mut h, &request.profile);
    feed(&mut h, &request.model);
    // Each optional field: a byte for whether it is there, then its value.
    h.update([u8::from(request.json), u8::from(request.schema.is_some())]);
    if let Some(schema) = &request.schema {
        feed(&mut h, &schema.name);
    }
    h.update([u8::from(request.temperature.is_some())]);
    h.update(request.temperature.unwrap_or_default().to_le_bytes());
    h.update([u8::from(request.max_tokens.is_some())]);
    h.update(request.max_tokens.unwrap_or_default().to_le_bytes());
    h.update((request.messages.len() as u64).to_le_bytes());
    for m in &request.messages {
        feed(&mut h, &m.role);
        feed(&mut h, &m.content);
    }
    h.finalize().into()
}

/// `text` into `h`, its length first, so no two sequences of texts feed the same bytes.
fn feed(h: &mut Sha256, text: &str) {
    h.update((text.len() as u64).to_le_bytes());
    h.update(text.as_bytes());
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

#[cfg(test)]
mod tests {
    use indexmap::IndexMap;

    use super::*;
    use crate::llm::Message;
    use crate::prompt::Prompts;
    use crate::script::HostShared;

    fn sandbox(params: &Map) -> Arc<Sandbox> {
        let prompts = Arc::new(Prompts::empty(params));
        let shared = HostShared::new(
            "t".into(),
            params.clone(),
            prompts,
            Arc::new(IndexMap::new()),
            Default::default(),
            Default::default(),
        );
        Arc::new(Sandbox::new(crate::limits::Limits::default(), Arc::new(shared), &[]).unwrap())
    }

    fn respond(sb: &Sandbox, src: &str) -> FnRef {
        FnRef { file: Arc::new(sb.compile("scripts/t/standin.rhai", src).unwrap()), name: "respond".into() }
    }

    fn reads_of(src: &str) -> Option<Reads> {
        reads(&respond(&sandbox(&Map::new()), src).file)
    }

    #[test]
    fn a_stand_in_that_reads_only_its_request_and_named_params_can_be_kept() {
        let own = "fn count(n, one, many) { `${n} ${many}` }\nfn respond(r) { count(2, \"a\", param(\"words\")) }";
        assert_eq!(reads_of(own), Some(Reads::Params(vec!["words".to_owned()])), "its own count() is no store read");
        assert_eq!(reads_of("fn respond(r) { r.messages[-1].content }"), Some(Reads::Params(vec![])));
        let by_value = "fn respond(r) { param(r.profile) }";
        assert_eq!(reads_of(by_value), Some(Reads::AllParams), "a parameter named by a value: every parameter counts");
        assert_eq!(
            reads_of("fn respond(r) { render(\"x.j2\", #{}) }"),
            Some(Reads::AllParams),
            "a template may read any"
        );
        assert_eq!(
            reads_of("fn respond(r) { \"tone\".param() }"),
            Some(Reads::AllParams),
            "a method call names by a value"
        );
        for unseen in [
            "fn respond(r) { let f = |x| now(); \"x\" }",
            "fn respond(r) { switch r.profile { \"a\" => print(\"x\"), _ => \"y\" } }",
            "fn respond(r) { `${now()}` }",
            "fn respond(r) { log(\"asked\"); \"x\" }",
            "fn respond(r) { count(\"t\", \"k\") }",
            "fn respond(r) { let f = Fn(\"now\"); f.call() }",
            "fn respond(r) { llm(\"judge\", \"x\") }",
        ] {
            assert_eq!(reads_of(unseen), None, "{unseen}");
        }
    }

    fn request(content: &str) -> LlmRequest {
        LlmRequest {
            provider: None,
            default_model: None,
            profile: "judge".into(),
            model: "m".into(),
            messages: vec![Message::new("user", content)],
            temperature: None,
            max_tokens: None,
            json: false,
            schema: None,
        }
    }

    #[test]
    fn an_answer_is_kept_by_its_request_and_the_parameters_read() {
        let answers = Arc::new(Answers::default());
        let src = "fn respond(r) { r.messages[-1].content + param(\"tone\") }";
        let standin = |tone: &str, other: i64| {
            let mut params = Map::new();
            params.insert("tone".into(), tone.into());
            params.insert("other".into(), other.into());
            let sb = sandbox(&params);
            let f = respond(&sb, src);
            Standin::new(sb, f, None).keeping(&answers, "t", "v1", &params)
        };
        let calm = standin("!", 1);
        assert_eq!(calm.answer(&request("hi")).unwrap().content, "hi!");
        assert_eq!(calm.answer(&request("hi")).unwrap().content, "hi!");
        assert_eq!(answers.len(), 1, "asked twice, answered once");
        // Another copy of the rules, differing in a parameter the stand-in does not read, asks
        // the same; one differing in the one it reads answers for itself.
        assert_eq!(standin("!", 2).answer(&request("hi")).unwrap().content, "hi!");
        assert_eq!(answers.len(), 1);
        assert_eq!(standin("?", 1).answer(&request("hi")).unwrap().content, "hi?");
        assert_eq!(calm.answer(&request("ho")).unwrap().content, "ho!");
        assert_eq!(answers.len(), 3);

        // One that prints is asked every time.
        let sb = sandbox(&Map::new());
        let f = respond(&sb, "fn respond(r) { print(\"asked\"); \"x\" }");
        let logging = Standin::new(sb, f, None).keeping(&answers, "t", "v1", &Map::new());
        assert_eq!(logging.answer(&request("hi")).unwrap().content, "x");
        assert_eq!(answers.len(), 3);
    }

    /// A served game's packs ask their stand-in every time; the copies of the rules made from
    /// them keep its answers, one memory for them all.
    #[test]
    fn only_copies_of_the_rules_keep_answers() {
        use futures_util::FutureExt;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/packs/oracle");
        let packs = crate::packs::Packs::new(root, Default::default(), Default::default());
        let ask = |packs: &crate::packs::Packs, roll: &str| {
            let standin = packs.get("oracle").unwrap().standin.clone().unwrap();
            standin.complete(&request(&format!("Roll: {roll}")), None).now_or_never().unwrap().unwrap().content
        };
        assert_eq!(ask(&packs, "7"), "won");
        assert_eq!(packs.answers_kept(), 0);
        let mut values = crate::pack::ParamValues::new();
        values.insert("chance".into(), serde_json::json!(5));
        let copy = packs.with_params("oracle", values);
        assert_eq!(ask(&copy, "7"), "lost");
        assert_eq!(ask(&copy, "7"), "lost");
        assert_eq!(packs.answers_kept(), 1, "kept once, in the memory the packs hand their copies");
        let other = packs.with_params("oracle", crate::pack::ParamValues::new());
        assert_eq!(ask(&other, "7"), "won", "chance 50 again: another answer");
        assert_eq!(copy.answers_kept(), 2);
    }
}

//! `llm: profile`: a declarative model call. Templates make the messages (`system`, a `history`
//! window of a list field, `prompt`), the reply is read as text or JSON (`parse`), and either
//! replaces a string field (`into`) or goes to a script (`then`). A `fallback` script answers
//! when the call fails, the reply cannot be read, or `then` throws.
//!
//! With `schema:` the reply is JSON that must match one of the pack's JSON Schemas (sent to the
//! provider as the structured-output format where it has one); a reply that is not JSON or does
//! not match is sent back with what is wrong, up to `retries` times, before the fallback answers.
//!
//! With `map: {over, concurrency}` the node runs once per item of the list a script returns:
//! templates see `vars.item` and `vars.index`, `then` and `fallback` get the item as a second
//! argument, the calls run at most `concurrency` at a time, and the items' updates are folded by
//! each field's reducer in item order. Each item's failure is its own fallback's to answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use rhai::{Array, Dynamic, Map};
use serde::Deserialize;

use super::{Kind, KindDef, MapOver, NodeDecl, Outcome, Step, Work, fold_into, updates_of};
use crate::error::{Error, ErrorKind, Origin, Result};
use crate::event::Event;
use crate::graph::env::Env;
use crate::graph::load::Load;
use crate::llm::{LlmRequest, LlmResponse, Message, ReplySchema};
use crate::schemas::JsonSchema;
use crate::script::FnRef;
use crate::value;
use crate::vocab::{ParseMode, TypeName};

pub(super) const KIND: KindDef = KindDef {
    key: "llm",
    keys: &["system", "prompt", "history", "vars", "parse", "then", "into", "fallback", "schema", "retries", "map"],
    doc: "`llm: profile`: a model call made of templates, its reply read by `then` or put `into` a field; \
          `schema` checks a JSON reply (asking again `retries` times), `map` runs it once per item of a list.",
    load,
};

/// A declarative model call.
#[derive(Debug)]
struct Llm {
    profile: String,
    system: Option<String>,
    prompt: Option<String>,
    history: Option<History>,
    vars: Option<FnRef>,
    parse: ParseMode,
    then: Then,
    fallback: Option<FnRef>,
    schema: Option<Arc<JsonSchema>>,
    /// How many times a reply that cannot be read is sent back with what is wrong.
    retries: u32,
    map: Option<MapOver>,
}

/// The most `retries` a node may ask for.
const MAX_RETRIES: u32 = 5;

/// What becomes of the reply.
#[derive(Debug)]
enum Then {
    /// `fn(reply) -> updates`.
    Script(FnRef),
    /// The reply replaces this field.
    Field(String),
}

/// Chat messages taken from a list field.
#[derive(Debug)]
struct History {
    field: String,
    last: Option<usize>,
    roles: Vec<(String, String)>,
}

/// `history:` as a manifest writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryDecl {
    /// A list field of `{role, content}` maps.
    from: String,
    /// Only the last N messages.
    last: Option<usize>,
    /// State role → chat role (`user`, `assistant`, `system`); unmapped roles pass as they are.
    #[serde(default)]
    roles: BTreeMap<String, String>,
}

fn load(l: &mut Load<'_>, d: &NodeDecl, name: &str, at: Origin) -> Option<Box<dyn Kind>> {
    let profile_ref = l.string(d, "llm")?;
    let Some(profile) = l.refs.profiles.get(&profile_ref.value) else {
        let known: Vec<&str> = l.refs.profiles.keys().map(String::as_str).collect();
        let at = l.at(&profile_ref);
        l.error(
            format!(
                "node `{name}` uses llm profile `{}`, which the pack does not define (profiles: {})",
                profile_ref.value,
                known.join(", ")
            ),
            at,
        );
        return None;
    };
    let system = l.string(d, "system").and_then(|t| l.template(&t));
    let prompt = l.string(d, "prompt").and_then(|t| l.template(&t));
    let history = l.parse::<HistoryDecl>(d, "history").and_then(|(h, at)| {
        let field = &h.from;
        match l.refs.schema.fields.get(field) {
            Some(f) if f.ty == TypeName::List => {}
            _ => {
                l.error(format!("history.from must name a list field; `{field}` is not one"), at);
                return None;
            }
        }
        for role in h.roles.values() {
            if !["system", "user", "assistant"].contains(&role.as_str()) {
                l.error(format!("history.roles maps to `{role}`; chat roles are system, user, assistant"), at.clone());
            }
        }
        Some(History { field: h.from, last: h.last, roles: h.roles.into_iter().collect() })
    });
    if d.get("system").is_none() && d.get("prompt").is_none() && d.get("history").is_none() {
        l.error(format!("llm node `{name}` needs a `prompt`, a `system` template or a `history`"), at.clone());
    }
    let map = l.map_over(d);
    // A map node's scripts see the item too.
    let per_item = usize::from(d.get("map").is_some());
    let vars = l.string(d, "vars").and_then(|v| l.resolve(&v, None, per_item));
    let then = match (l.string(d, "then"), l.string(d, "into")) {
        (Some(t), None) => l.resolve(&t, None, 1 + per_item).map(Then::Script),
        (None, Some(f)) => {
            l.field_of(&f, &[TypeName::String, TypeName::Any], "`into` must name a string field").map(Then::Field)
        }
        _ => {
            l.error(
                format!(
                    "llm node `{name}` needs exactly one of `then` (file.rhai::fn(reply)) or `into` (a string field)"
                ),
                at.clone(),
            );
            None
        }
    };
    let fallback = l.string(d, "fallback").and_then(|f| l.resolve(&f, None, 1 + per_item));
    let schema = l.string(d, "schema").and_then(|s| match l.refs.schemas.get(&s.value) {
        Some(schema) => Some(schema.clone()),
        None => {
            let mut known: Vec<&str> = l.refs.schemas.keys().map(String::as_str).collect();
            known.sort();
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            let at = l.at(&s);
            l.error(
                format!("node `{name}` names schema `{}`, which `schemas:` does not declare ({known})", s.value),
                at,
            );
            None
        }
    });
    let retries = match d.get("retries") {
        None => 0,
        Some(v) => match v.value.as_u64() {
            Some(n) if n <= u64::from(MAX_RETRIES) => n as u32,
            _ => {
                let at = l.at(v);
                l.error(format!("`retries` is a number from 0 to {MAX_RETRIES}"), at);
                0
            }
        },
    };
    let parse = match d.get("parse") {
        None if d.get("schema").is_some() => Some(ParseMode::Json),
        None => Some(if profile.json { ParseMode::Json } else { ParseMode::Text }),
        Some(_) => l.parse::<ParseMode>(d, "parse").map(|(p, _)| p),
    };
    if d.get("schema").is_some() && parse == Some(ParseMode::Text) {
        l.error(format!("llm node `{name}` has a `schema`, so its reply is JSON: leave out `parse: text`"), at.clone());
    }
    if parse == Some(ParseMode::Json) && matches!(then, Some(Then::Field(_))) {
        l.error(format!("llm node `{name}` parses JSON, which needs a `then` script, not `into`"), at.clone());
    }
    if d.get("map").is_some() && matches!(then, Some(Then::Field(_))) {
        l.error(format!("llm node `{name}` maps over a list, which needs a `then` script, not `into`"), at);
    }
    if d.get("map").is_some() && map.is_none() {
        return None;
    }
    Some(Box::new(Llm {
        profile: profile.name.clone(),
        system,
        prompt,
        history,
        vars,
        parse: parse?,
        then: then?,
        fallback,
        schema,
        retries,
        map,
    }))
}

impl Kind for Llm {
    fn describe(&self) -> (&'static str, String) {
        ("llm", self.profile.clone())
    }

    fn what(&self) -> String {
        let what = match &self.map {
            Some(m) => format!("llm: {} × each of {} (≤{} at once)", self.profile, m.over.display(), m.concurrency),
            None => format!("llm: {}", self.profile),
        };
        match &self.schema {
            Some(s) => format!("{what}, schema {}", s.name),
            None => what,
        }
    }

    fn prepare<'a>(&'a self, env: &'a Env<'a>, node: usize, state: &'a mut Dynamic) -> Step<'a, Work> {
        Step::Later(Box::pin(async move {
            let Some(map) = &self.map else {
                return Ok(Work::Ask(self.request(env, node, state, None).await?));
            };
            let items = map.items(env, node, state)?;
            let mut requests = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                requests.push(self.request(env, node, state, Some((i, item))).await?);
            }
            Ok(Work::Many { requests, limit: map.concurrency, items })
        }))
    }

    fn finish<'a>(&'a self, env: &'a Env<'a>, node: usize, outcome: Outcome, state: &'a mut Dynamic) -> Step<'a, Map> {
        Step::Later(Box::pin(async move {
            match outcome {
                Outcome::Reply(reply) => self.settle(env, node, reply, None, state).await,
                Outcome::Many { replies, items } => {
                    let mut folded = Map::new();
                    for (i, (reply, item)) in replies.into_iter().zip(&items).enumerate() {
                        let updates = self.settle(env, node, reply, Some((i, item)), state).await.map_err(|e| {
                            e.context(format_args!(
                                "item {i} of {}",
                                self.map.as_ref().map_or_else(String::new, |m| m.over.display())
                            ))
                        })?;
                        fold_into(env, &mut folded, updates);
                    }
                    Ok(folded)
                }
                _ => Err(Error::internal("an llm node was given no model reply")),
            }
        }))
    }
}

/// Why a reply was not read: something the model may fix when told (it is not JSON, or not the
/// schema's), a reason the fallback can answer, or an error that ends the turn.
enum Unread {
    /// What is wrong, completing "the reply …" ("is not valid JSON: …").
    Fixable(String),
    Why(String),
    Fatal(Error),
}

/// A map node's item: its index and value.
type Item<'a> = Option<(usize, &'a Dynamic)>;

impl Llm {
    /// The request: the `vars` script, then the templates and the history window.
    async fn request(&self, env: &Env<'_>, node: usize, state: &mut Dynamic, item: Item<'_>) -> Result<LlmRequest> {
        let mut vars = match &self.vars {
            Some(f) => {
                let args = item.map(|(_, it)| vec![it.clone()]).unwrap_or_default();
                let v = env.call(node, f, state, args).await?;
                if !v.is_map() {
                    return Err(Error::new(
                        ErrorKind::Script,
                        format!("{} returned {}; vars must be a map", f.display(), value::type_of(&v)),
                    ));
                }
                Some(v.cast::<Map>())
            }
            None => None,
        };
        if let Some((i, it)) = item {
            let v = vars.get_or_insert_with(Map::new);
            v.insert("item".into(), it.clone());
            v.insert("index".into(), Dynamic::from_int(i as i64));
        }
        let (options, input) = (&env.turn.options, &env.turn.input);
        let mut messages = Vec::new();
        if let Some(t) = &self.system {
            messages.push(Message::new("system", env.prompts.render(t, state, options, input, vars.as_ref())?));
        }
        if let Some(h) = &self.history {
            let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
            messages.extend(history(&map, h)?);
        }
        if let Some(t) = &self.prompt {
            messages.push(Message::new("user", env.prompts.render(t, state, options, input, vars.as_ref())?));
        }
        let mut request = env.profiles[self.profile.as_str()].request(options, messages)?;
        if let Some(s) = &self.schema {
            request.json = true;
            request.schema = Some(ReplySchema { name: s.name.clone(), document: s.document.clone() });
        }
        Ok(request)
    }

    /// The label a call is recorded under: the node, and the item for a map node (`content[2]`).
    fn call_label(env: &Env<'_>, node: usize, item: Item<'_>) -> Arc<str> {
        match item {
            Some((i, _)) => format!("{}[{i}]", env.name(node)).into(),
            None => env.name(node).clone(),
        }
    }

    /// One reply to updates: read (asking again with feedback while `retries` last), then `then`,
    /// or the fallback when it cannot be read.
    async fn settle(
        &self,
        env: &Env<'_>,
        node: usize,
        mut reply: Result<LlmResponse>,
        item: Item<'_>,
        state: &mut Dynamic,
    ) -> Result<Map> {
        let mut attempt = 0;
        let why = loop {
            let why = match reply {
                Err(e) => break e.detail().to_owned(),
                Ok(resp) if resp.content.len() > env.limits.max_string_size => {
                    break format!(
                        "the reply is {} bytes, more than a script may hold (limits.max_string_size {})",
                        resp.content.len(),
                        env.limits.max_string_size
                    );
                }
                Ok(resp) => match self.read(env, node, &resp.content, item, state).await {
                    Ok(updates) => return Ok(updates),
                    Err(Unread::Fatal(e)) => return Err(e),
                    Err(Unread::Fixable(why)) if attempt < self.retries => (why, resp.content),
                    Err(Unread::Fixable(why)) => break format!("the reply {why}"),
                    Err(Unread::Why(why)) => break why,
                },
            };
            attempt += 1;
            let (why, content) = why;
            let label = Self::call_label(env, node, item);
            env.turn.emit(Event::Log {
                node: label.to_string(),
                level: "warn".into(),
                message: format!("asking again ({attempt} of {}): the reply {why}", self.retries),
            });
            let mut request = self.request(env, node, state, item).await?;
            request.messages.push(Message::new("assistant", content));
            request.messages.push(Message::new("user", feedback(&why)));
            reply = env.turn.ask(&label, request).await;
        };
        let Some(fallback) = &self.fallback else {
            return Err(Error::new(ErrorKind::Llm, why));
        };
        let label = Self::call_label(env, node, item);
        tracing::info!(node = %label, fallback = %fallback.display(), reason = %why, "fallback");
        env.turn.emit(Event::Log {
            node: label.to_string(),
            level: "warn".into(),
            message: format!("falling back to {}: {why}", fallback.display()),
        });
        let mut args = vec![Dynamic::from(why)];
        args.extend(item.map(|(_, it)| it.clone()));
        let r = env.call(node, fallback, state, args).await?;
        updates_of(r, fallback)
    }

    /// Parses the reply (checking it against the schema) and hands it to `then` (or the `into`
    /// field).
    async fn read(
        &self,
        env: &Env<'_>,
        node: usize,
        content: &str,
        item: Item<'_>,
        state: &mut Dynamic,
    ) -> Result<Map, Unread> {
        let reply = match self.parse {
            ParseMode::Text => Dynamic::from(content.to_owned()),
            ParseMode::Json => {
                let mut json = value::parse_json_reply(content)
                    .map_err(|why| Unread::Fixable(format!("is not valid JSON: {why}")))?;
                if let Some(schema) = &self.schema {
                    let errors = schema.errors(&json);
                    if !errors.is_empty() {
                        return Err(Unread::Fixable(format!(
                            "does not match the JSON Schema `{}`:\n- {}",
                            schema.name,
                            errors.join("\n- ")
                        )));
                    }
                    schema.with_defaults(&mut json);
                }
                value::from_json(&json)
            }
        };
        match &self.then {
            Then::Field(field) => {
                let mut m = Map::new();
                m.insert(field.as_str().into(), reply);
                Ok(m)
            }
            Then::Script(f) => {
                let mut args = vec![reply];
                args.extend(item.map(|(_, it)| it.clone()));
                // Updates that do not fit the state (a huge number that came back a float for an
                // int field) are `then` failing on this reply, as much as a throw is.
                let updates = env.call(node, f, state, args).await.and_then(|r| updates_of(r, f)).and_then(|m| {
                    env.schema.check(&m).map_err(|e| e.context(format_args!("{} returned", f.display())))?;
                    Ok(m)
                });
                match updates {
                    Ok(m) => Ok(m),
                    // `then` could not read the reply (it threw, the reply made it hit a limit, or
                    // its updates do not fit): the fallback scores instead.
                    Err(e) if matches!(e.kind(), ErrorKind::Script | ErrorKind::Limit) && self.fallback.is_some() => {
                        Err(Unread::Why(e.to_string()))
                    }
                    Err(e) => Err(Unread::Fatal(e)),
                }
            }
        }
    }
}

/// What the model is told when its reply is sent back (`why` completes "Your reply …").
fn feedback(why: &str) -> String {
    format!("Your reply {why}\n\nFix these problems and answer again with the corrected JSON only.")
}

/// The chat messages of a history window: the last N items, roles mapped, empty ones dropped.
fn history(state: &Map, h: &History) -> Result<Vec<Message>> {
    let Some(items) = state.get(h.field.as_str()).and_then(|v| v.read_lock::<Array>()) else {
        return Ok(Vec::new());
    };
    let from = h.last.map_or(0, |n| items.len().saturating_sub(n));
    let mut out = Vec::new();
    for (k, item) in items[from..].iter().enumerate() {
        let map = item.read_lock::<Map>().ok_or_else(|| {
            Error::new(
                ErrorKind::Script,
                format!("item {} of `{}` is {}, not a {{role, content}} map", from + k, h.field, value::type_of(item)),
            )
        })?;
        let (Some(role), Some(content)) = (map.get("role"), map.get("content")) else {
            return Err(Error::new(
                ErrorKind::Script,
                format!("item {} of `{}` lacks `role` or `content`", from + k, h.field),
            ));
        };
        let content = content.to_string();
        if content.trim().is_empty() {
            continue;
        }
        let role = role.to_string();
        let role = h.roles.iter().find(|(from, _)| *from == role).map_or(role, |(_, to)| to.clone());
        out.push(Message::new(role, content));
    }
    Ok(out)
}

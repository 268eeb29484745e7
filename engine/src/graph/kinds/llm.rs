//! `llm: profile`: a declarative model call. Templates make the messages (`system`, a `history`
//! window of a list field, `prompt`), the reply is read as text or JSON (`parse`), and either
//! replaces a string field (`into`) or goes to a script (`then`). A `fallback` script answers
//! when the call fails, the reply cannot be read, or `then` throws.

use std::collections::BTreeMap;

use rhai::{Array, Dynamic, Map};
use serde::Deserialize;

use super::{Kind, KindDef, NodeDecl, Outcome, Step, Work, label, updates_of};
use crate::error::{Error, ErrorKind, Origin, Result};
use crate::event::Event;
use crate::graph::env::Env;
use crate::graph::load::Load;
use crate::llm::{LlmRequest, Message};
use crate::script::FnRef;
use crate::value;
use crate::vocab::{ParseMode, TypeName};

pub(super) const KIND: KindDef = KindDef {
    key: "llm",
    keys: &["system", "prompt", "history", "vars", "parse", "then", "into", "fallback"],
    doc: "`llm: profile`: a model call made of templates, its reply read by `then` or put `into` a field.",
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
}

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
    let vars = l.string(d, "vars").and_then(|v| l.resolve(&v, None, 0));
    let then = match (l.string(d, "then"), l.string(d, "into")) {
        (Some(t), None) => l.resolve(&t, None, 1).map(Then::Script),
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
    let fallback = l.string(d, "fallback").and_then(|f| l.resolve(&f, None, 1));
    let parse = match d.get("parse") {
        None => Some(if profile.json { ParseMode::Json } else { ParseMode::Text }),
        Some(_) => l.parse::<ParseMode>(d, "parse").map(|(p, _)| p),
    };
    if parse == Some(ParseMode::Json) && matches!(then, Some(Then::Field(_))) {
        l.error(format!("llm node `{name}` parses JSON, which needs a `then` script, not `into`"), at);
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
    }))
}

impl Kind for Llm {
    fn describe(&self) -> (&'static str, String) {
        ("llm", self.profile.clone())
    }

    fn mermaid(&self, name: &str) -> String {
        format!("{name}[/{}/]", label(name, &format!("llm: {}", self.profile)))
    }

    fn prepare<'a>(&'a self, env: &'a Env<'a>, node: usize, state: &'a mut Dynamic) -> Step<'a, Work> {
        Step::Later(Box::pin(async move { Ok(Work::Ask(self.request(env, node, state).await?)) }))
    }

    fn finish<'a>(&'a self, env: &'a Env<'a>, node: usize, outcome: Outcome, state: &'a mut Dynamic) -> Step<'a, Map> {
        Step::Later(Box::pin(async move {
            let Outcome::Reply(reply) = outcome else {
                return Err(Error::internal("an llm node was given no model reply"));
            };
            let why = match reply {
                Err(e) => e.detail().to_owned(),
                Ok(resp) if resp.content.len() > env.limits.max_string_size => format!(
                    "the reply is {} bytes, more than a script may hold (limits.max_string_size {})",
                    resp.content.len(),
                    env.limits.max_string_size
                ),
                Ok(resp) => match self.read(env, node, resp.content, state).await {
                    Ok(updates) => return Ok(updates),
                    Err(Unread::Why(why)) => why,
                    Err(Unread::Fatal(e)) => return Err(e),
                },
            };
            let Some(fallback) = &self.fallback else {
                return Err(Error::new(ErrorKind::Llm, why));
            };
            env.turn.emit(Event::Log {
                node: env.name(node).to_string(),
                level: "warn".into(),
                message: format!("falling back to {}: {why}", fallback.display()),
            });
            let r = env.call(node, fallback, state, vec![Dynamic::from(why)]).await?;
            updates_of(r, &fallback.display())
        }))
    }
}

/// Why a reply was not read: a reason the fallback can answer, or an error that ends the turn.
enum Unread {
    Why(String),
    Fatal(Error),
}

impl Llm {
    /// The request: the `vars` script, then the templates and the history window.
    async fn request(&self, env: &Env<'_>, node: usize, state: &mut Dynamic) -> Result<LlmRequest> {
        let vars = match &self.vars {
            Some(f) => {
                let v = env.call(node, f, state, Vec::new()).await?;
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
        let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
        let (options, input) = (&env.turn.options, &env.turn.input);
        let mut messages = Vec::new();
        if let Some(t) = &self.system {
            messages.push(Message::new("system", env.prompts.render(t, &map, options, input, vars.as_ref())?));
        }
        if let Some(h) = &self.history {
            messages.extend(history(&map, h)?);
        }
        if let Some(t) = &self.prompt {
            messages.push(Message::new("user", env.prompts.render(t, &map, options, input, vars.as_ref())?));
        }
        env.profiles[self.profile.as_str()].request(options, messages)
    }

    /// Parses the reply and hands it to `then` (or the `into` field).
    async fn read(&self, env: &Env<'_>, node: usize, content: String, state: &mut Dynamic) -> Result<Map, Unread> {
        let reply = match self.parse {
            ParseMode::Text => Dynamic::from(content),
            ParseMode::Json => value::parse_json_reply(&content).map(|v| value::from_json(&v)).map_err(Unread::Why)?,
        };
        match &self.then {
            Then::Field(field) => {
                let mut m = Map::new();
                m.insert(field.as_str().into(), reply);
                Ok(m)
            }
            Then::Script(f) => {
                match env.call(node, f, state, vec![reply]).await.and_then(|r| updates_of(r, &f.display())) {
                    Ok(m) => Ok(m),
                    // `then` could not read the reply (it threw, or the reply made it hit a
                    // limit): the fallback scores instead.
                    Err(e) if matches!(e.kind(), ErrorKind::Script | ErrorKind::Limit) && self.fallback.is_some() => {
                        Err(Unread::Why(e.to_string()))
                    }
                    Err(e) => Err(Unread::Fatal(e)),
                }
            }
        }
    }
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

//! Node kinds, registered from one table. A kind is one file: the manifest key that makes a node
//! of it (`script:`, `llm:`, `native:`, `select:`) and the other keys it takes, how it loads and
//! is checked, how it is described and drawn, and how it runs.
//!
//! A node runs in up to three parts so that the model calls of a fan-out wait together: a
//! *prepare* (scripts and templates, with the state by reference) that returns what is left to
//! wait for ([`Work`]), the wait itself (the runtime makes model calls and runs model-calling
//! scripts on blocking threads for every node of a step at once), and a *finish* that turns what
//! came back ([`Outcome`]) into the node's updates.

mod llm;
mod native;
mod script;
mod select;

use std::fmt;

use indexmap::IndexMap;
use rhai::{Dynamic, Map};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value as Json;
use serde_saphyr::Spanned;

use super::env::Env;
use super::load::Load;
use crate::error::{Error, ErrorKind, Origin, Result};
use crate::llm::{LlmRequest, LlmResponse};
use crate::script::FnRef;
use crate::value;
use crate::vocab::BoxFuture;

/// A compiled node of some kind.
pub(crate) trait Kind: fmt::Debug + Send + Sync {
    /// The kind's name and what the node runs (a script, a profile, a selector), for
    /// `GET /v1/packs`.
    fn describe(&self) -> (&'static str, String);

    /// What the node runs, in a few words for a drawing of the graph (`llm: judge`,
    /// `pirate.rhai::score × each of candidates (≤4 at once)`).
    fn what(&self) -> String;

    /// Runs the node's synchronous part; returns its updates, or what is left to wait for.
    fn prepare<'a>(&'a self, env: &'a Env<'a>, node: usize, state: &'a mut Dynamic) -> Step<'a, Work>;

    /// Turns what the wait produced into the node's updates.
    fn finish<'a>(&'a self, env: &'a Env<'a>, node: usize, outcome: Outcome, state: &'a mut Dynamic) -> Step<'a, Map> {
        let _ = (env, node, state);
        Step::Now(match outcome {
            Outcome::Done(m) => Ok(m),
            _ => Err(Error::internal("a node's work and kind do not match")),
        })
    }
}

/// What a node's part gives: its result now (a synchronous kind allocates nothing), or a future
/// to wait on (a kind that may call a model while it prepares).
pub(crate) enum Step<'a, T> {
    Now(Result<T>),
    Later(BoxFuture<'a, Result<T>>),
}

impl<T> Step<'_, T> {
    /// The result, waited for if need be.
    pub(crate) async fn result(self) -> Result<T> {
        match self {
            Step::Now(r) => r,
            Step::Later(f) => f.await,
        }
    }
}

/// What a node still has to do after its synchronous part.
pub(crate) enum Work {
    /// Nothing: these are its updates.
    Done(Map),
    /// Ask a model.
    Ask(LlmRequest),
    /// Run a script that may call a model, on a blocking thread.
    Blocking(FnRef, Vec<Dynamic>),
    /// Ask a model once per item, at most `limit` calls at once (a map node).
    Many { requests: Vec<LlmRequest>, limit: usize, items: rhai::Array },
    /// Run a script that may call a model (or search) once per item, each on a blocking thread,
    /// at most `limit` at once (a map node).
    BlockingMany { f: FnRef, limit: usize, items: rhai::Array },
}

/// What the wait produced.
pub(crate) enum Outcome {
    Done(Map),
    Reply(Result<LlmResponse>),
    Script(Result<Dynamic>),
    /// A map node's replies, in item order, with its items.
    Many {
        replies: Vec<Result<LlmResponse>>,
        items: rhai::Array,
    },
    /// A map node's script results, in item order.
    Scripts(Vec<Result<Dynamic>>),
}

/// `map:`: a node runs once per item of a list.
#[derive(Debug)]
pub(crate) struct MapOver {
    /// `fn() -> array`: the items.
    pub over: FnRef,
    /// At most this many runs at once.
    pub concurrency: usize,
}

/// `map:` as a manifest writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapDecl {
    /// `file.rhai::fn`, returning the list.
    over: String,
    #[serde(default = "default_concurrency")]
    concurrency: usize,
}

fn default_concurrency() -> usize {
    4
}

/// The most runs a map node makes at once.
const MAX_CONCURRENCY: usize = 64;

impl MapOver {
    /// The items to run over: what `over` returns, which must be a list.
    pub(crate) fn items(&self, env: &Env<'_>, node: usize, state: &mut Dynamic) -> Result<rhai::Array> {
        let items = env.sandbox.call(&self.over, state, (), Some(env.tag(node)))?;
        if !items.is_array() {
            return Err(Error::new(
                ErrorKind::Script,
                format!("{} returned {}; map.over must return a list", self.over.display(), value::type_of(&items)),
            ));
        }
        Ok(items.cast::<rhai::Array>())
    }
}

/// Folds one item's updates into a map node's updates, by each field's reducer (in item order).
pub(crate) fn fold_into(env: &Env<'_>, folded: &mut Map, updates: Map) {
    for (k, v) in updates {
        let reducer = env.schema.fields.get(k.as_str()).map_or(crate::vocab::Reducer::Replace, |f| f.reducer);
        let combined = match folded.remove(&k) {
            Some(old) => reducer.combine(old, v),
            None => v,
        };
        folded.insert(k, combined);
    }
}

/// One node kind of the table.
pub(crate) struct KindDef {
    /// The manifest key that makes a node of this kind.
    pub key: &'static str,
    /// The other keys a node of this kind takes (`doc` is every kind's).
    pub keys: &'static [&'static str],
    /// What the kind is, for the pack author's reference.
    pub doc: &'static str,
    /// Loads and checks a node of this kind; `None` when it has problems (reported).
    pub load: LoadKind,
}

/// How a kind loads a node: the declaration, the node's name and place.
pub(crate) type LoadKind = fn(&mut Load<'_>, &NodeDecl, &str, Origin) -> Option<Box<dyn Kind>>;

/// Every node kind. Adding one is a file in this folder and a line here.
static KINDS: &[KindDef] = &[script::KIND, llm::KIND, native::KIND, select::KIND];

/// A node kind as the pack author's reference lists it.
#[derive(Debug, Clone, Copy)]
pub struct NodeKindDoc {
    /// The manifest key that makes a node of this kind.
    pub key: &'static str,
    /// The other keys a node of this kind takes.
    pub keys: &'static [&'static str],
    /// What the kind is.
    pub doc: &'static str,
}

/// Every node kind, in the order the reference lists them (generated into `docs/node-kinds.md`).
pub fn node_kinds() -> Vec<NodeKindDoc> {
    KINDS.iter().map(|k| NodeKindDoc { key: k.key, keys: k.keys, doc: k.doc }).collect()
}

/// A node as the manifest writes it: its keys, each with its value and place. Which kind it is
/// and which keys it may have are the kinds' to say.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(crate) struct NodeDecl(IndexMap<String, Spanned<Json>>);

impl schemars::JsonSchema for NodeDecl {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NodeDecl".into()
    }

    /// Exactly one kind's key, and only the keys that kind takes.
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let kinds: Vec<Json> = KINDS
            .iter()
            .map(|k| {
                let mut props = serde_json::Map::new();
                props.insert(k.key.into(), serde_json::json!({"type": "string", "description": k.doc}));
                props.insert("doc".into(), serde_json::json!({"type": "string", "description": "What the node does."}));
                for key in k.keys {
                    props.insert((*key).into(), serde_json::json!({}));
                }
                serde_json::json!({
                    "type": "object",
                    "required": [k.key],
                    "properties": props,
                    "additionalProperties": false,
                })
            })
            .collect();
        schemars::json_schema!({"description": "A node: exactly one of the node kinds.", "oneOf": kinds})
    }
}

impl NodeDecl {
    /// The value of `key`, if the node has it.
    pub(crate) fn get(&self, key: &str) -> Option<&Spanned<Json>> {
        self.0.get(key)
    }

    /// The node's `doc`.
    pub(crate) fn doc(&self) -> String {
        self.get("doc").and_then(|d| d.value.as_str()).unwrap_or_default().to_owned()
    }

    /// The keys the node has.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

impl Load<'_> {
    /// Loads a node: exactly one kind key, only keys that kind takes, then the kind's own checks.
    pub(crate) fn node(&mut self, name: &str, d: &NodeDecl, at: Origin) -> Option<Box<dyn Kind>> {
        let found: Vec<&KindDef> = KINDS.iter().filter(|k| d.get(k.key).is_some()).collect();
        let [kind] = found.as_slice() else {
            let keys: Vec<String> = KINDS.iter().map(|k| format!("`{}`", k.key)).collect();
            self.error(format!("node `{name}` needs exactly one of {}", keys.join(", ")), at);
            return None;
        };
        let before = self.errors.len();
        for key in d.keys() {
            if key == kind.key || key == "doc" || kind.keys.contains(&key) {
                continue;
            }
            let place = d.get(key).map_or_else(|| at.clone(), |v| self.at(v));
            match KINDS.iter().find(|k| k.keys.contains(&key)) {
                Some(owner) => self.error(format!("node `{name}`: `{key}` belongs to {} nodes", owner.key), place),
                None => {
                    let mut takes: Vec<&str> = kind.keys.to_vec();
                    takes.push("doc");
                    let takes = takes.join(", ");
                    self.error(
                        format!("node `{name}`: unknown key `{key}` (a {} node takes {takes})", kind.key),
                        place,
                    );
                }
            }
        }
        if self.errors.len() > before {
            return None;
        }
        (kind.load)(self, d, name, at)
    }

    /// A string key of a node (`prompt: judge.j2`); reported when it holds something else.
    pub(crate) fn string(&mut self, d: &NodeDecl, key: &str) -> Option<Spanned<String>> {
        let v = d.get(key)?;
        match &v.value {
            Json::String(s) => Some(Spanned::new(s.clone(), v.referenced, v.defined)),
            other => {
                let at = self.at(v);
                self.error(format!("`{key}` is a string, not {}", value::json_type_of(other)), at);
                None
            }
        }
    }

    /// A node's `map: {over, concurrency}`, checked; `None` when it has none or it is wrong
    /// (reported).
    pub(crate) fn map_over(&mut self, d: &NodeDecl) -> Option<MapOver> {
        let decl = d.get("map")?;
        let (m, at) = self.parse::<MapDecl>(d, "map")?;
        if m.concurrency == 0 || m.concurrency > MAX_CONCURRENCY {
            self.error(format!("map.concurrency is {}; it must be 1 to {MAX_CONCURRENCY}", m.concurrency), at.clone());
        }
        let over = Spanned::new(m.over, decl.referenced, decl.defined);
        let over = self.resolve(&over, None, 0)?;
        if over.calls_models() {
            self.error("map.over cannot call models: it lists the items the node's runs are for", at);
            return None;
        }
        Some(MapOver { over, concurrency: m.concurrency.clamp(1, MAX_CONCURRENCY) })
    }

    /// A structured key of a node (`history: {from, last, roles}`), as `T`.
    pub(crate) fn parse<T: DeserializeOwned>(&mut self, d: &NodeDecl, key: &str) -> Option<(T, Origin)> {
        let v = d.get(key)?;
        let at = self.at(v);
        match T::deserialize(&v.value) {
            Ok(t) => Some((t, at)),
            Err(e) => {
                self.error(format!("`{key}`: {e}"), at);
                None
            }
        }
    }
}

/// A stand-in for a node that did not load, so the graph around it can still be checked (a pack
/// with one never loads, so it never runs).
pub(crate) fn unloaded() -> Box<dyn Kind> {
    Box::new(Unloaded)
}

#[derive(Debug)]
struct Unloaded;

impl Kind for Unloaded {
    fn describe(&self) -> (&'static str, String) {
        ("unloaded", String::new())
    }

    fn what(&self) -> String {
        String::new()
    }

    fn prepare<'a>(&'a self, _: &'a Env<'a>, _: usize, _: &'a mut Dynamic) -> Step<'a, Work> {
        Step::Now(Err(Error::internal("a node that did not load was run")))
    }
}

/// A node's return value as updates: a map, or nothing.
/// `f`'s name is only spelled out for the error: a turn calls this for every node.
pub(crate) fn updates_of(v: Dynamic, f: &FnRef) -> Result<Map> {
    if v.is_unit() {
        Ok(Map::new())
    } else if v.is_map() {
        Ok(v.cast::<Map>())
    } else {
        Err(Error::new(
            ErrorKind::Script,
            format!("{} returned {}; a node returns a map of updates (or nothing)", f.display(), value::type_of(&v)),
        ))
    }
}

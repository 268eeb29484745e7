//! Native nodes and scorers: Rust functions an embedding program registers under a name, so a
//! manifest can say `native: name` for a step that belongs in Rust (a database lookup, a heavy
//! computation), or for a selector's scorer (the twin of a scripted one).

use std::collections::HashMap;
use std::sync::Arc;

use rhai::{Dynamic, Map};

use crate::error::Result;
use crate::text::{self, Embeddings};

/// A node written in Rust. It sees the state read-only and returns updates, like a script node.
/// Updates hold plain values: a value made shared (`Dynamic::into_shared`) inside a list or map
/// would reach scripts, and Rhai refuses those.
pub trait NativeNode: Send + Sync {
    /// Runs the node.
    fn run(&self, ctx: &NodeContext<'_>) -> Result<Map>;
}

impl<F> NativeNode for F
where
    F: Fn(&NodeContext<'_>) -> Result<Map> + Send + Sync,
{
    fn run(&self, ctx: &NodeContext<'_>) -> Result<Map> {
        self(ctx)
    }
}

/// What a native node sees: the state, this turn's input and the session's options.
pub struct NodeContext<'a> {
    pub(crate) state: &'a Map,
    pub(crate) input: &'a Map,
    pub(crate) options: &'a Map,
}

impl NodeContext<'_> {
    /// The whole state.
    pub fn state(&self) -> &Map {
        self.state
    }

    /// One state field.
    pub fn get(&self, field: &str) -> Option<&Dynamic> {
        self.state.get(field)
    }

    /// This turn's input.
    pub fn input(&self) -> &Map {
        self.input
    }

    /// The session's options.
    pub fn options(&self) -> &Map {
        self.options
    }
}

/// A selector's scorer written in Rust, registered with [`crate::EngineBuilder::native_scorer`]
/// and named by a scorer's `native:` in a manifest: the same inputs as a scripted scorer, the
/// same output. A veto scorer sets `veto`; a weighted one sets `score` in [0, 2].
pub trait NativeScorer: Send + Sync {
    /// Scores one candidate.
    fn score(&self, ctx: &ScorerContext<'_>) -> Result<ScorerOutput>;
}

impl<F> NativeScorer for F
where
    F: Fn(&ScorerContext<'_>) -> Result<ScorerOutput> + Send + Sync,
{
    fn score(&self, ctx: &ScorerContext<'_>) -> Result<ScorerOutput> {
        self(ctx)
    }
}

/// What a scorer sees: the state, the candidate's strategy and focus, the scorer's `params`, the
/// phase, the turn count, and the selection's embeddings (through [`ScorerContext::similarity`]).
#[non_exhaustive]
pub struct ScorerContext<'a> {
    /// The whole state.
    pub state: &'a Map,
    /// The strategy as the manifest declares it (`id`, `name`, `prompt_hint`, ...).
    pub strategy: &'a Map,
    /// The focus the strategy's generator made (`focus_description`, and whatever else it set).
    pub focus: &'a Map,
    /// The scorer's `params` from the manifest.
    pub params: &'a Map,
    /// The pack's `params:` (what `param(name)` gives scripts).
    pub pack_params: &'a Map,
    /// The phase the turn count falls in.
    pub phase: &'a str,
    /// The turn count that chose the phase.
    pub turn_count: i64,
    /// The selection's vectors, when its selector embeds (`similarity:`) and the call succeeded.
    pub embeddings: Option<&'a Embeddings>,
}

impl ScorerContext<'_> {
    /// The strategy's id.
    pub fn strategy_id(&self) -> rhai::ImmutableString {
        self.strategy
            .get("id")
            .and_then(|v| v.read_lock::<rhai::ImmutableString>().map(|s| s.clone()))
            .unwrap_or_default()
    }

    /// What the `similarity` host function gives a scripted scorer of the same selection.
    pub fn similarity(&self, a: &str, b: &str) -> f64 {
        text::similarity_in(self.embeddings, a, b)
    }

    /// What the `max_similarity` host function gives a scripted scorer of the same selection.
    pub fn max_similarity<'t>(&self, text: &str, others: impl IntoIterator<Item = &'t str>) -> f64 {
        text::max_similarity_in(self.embeddings, text, others)
    }

    /// What `similarity_kind()` gives a scripted scorer: `embedding` or `lexical`.
    pub fn similarity_kind(&self) -> &'static str {
        if self.embeddings.is_some() { "embedding" } else { "lexical" }
    }
}

/// A strategy's focus generator written in Rust (the twin of a scripted one, named by the
/// strategy's `focus_native:`): the same input, the same focuses.
pub trait NativeFocus: Send + Sync {
    /// The strategy's focuses on this state, in order.
    fn focuses(&self, ctx: &FocusContext<'_>) -> Result<Vec<Map>>;
}

impl<F> NativeFocus for F
where
    F: Fn(&FocusContext<'_>) -> Result<Vec<Map>> + Send + Sync,
{
    fn focuses(&self, ctx: &FocusContext<'_>) -> Result<Vec<Map>> {
        self(ctx)
    }
}

/// What a focus generator sees: the state, the strategy as declared, and the pack's params.
#[non_exhaustive]
pub struct FocusContext<'a> {
    /// The whole state.
    pub state: &'a Map,
    /// The strategy as the manifest declares it (`id`, `name`, `type_category`, `prompt_hint`).
    pub strategy: &'a Map,
    /// The pack's `params:` (what `param(name)` gives scripts).
    pub pack_params: &'a Map,
}

/// What a scorer says of a candidate.
#[derive(Debug, Clone, Default)]
pub struct ScorerOutput {
    /// For a veto scorer: whether the candidate is rejected.
    pub is_veto: bool,
    /// For a weighted scorer: the raw score, in [0, 2] (1.0 is neutral).
    pub raw_score: f64,
    /// Why, in a sentence, for the breakdown.
    pub reasoning: String,
    /// The evidence, for the breakdown.
    pub signals: Map,
}

/// The native nodes and scorers an engine knows, by name.
#[derive(Clone, Default)]
pub(crate) struct NativeNodes {
    nodes: HashMap<String, Arc<dyn NativeNode>>,
    scorers: HashMap<String, Arc<dyn NativeScorer>>,
    focuses: HashMap<String, Arc<dyn NativeFocus>>,
}

impl NativeNodes {
    pub(crate) fn insert(&mut self, name: String, node: Arc<dyn NativeNode>) {
        self.nodes.insert(name, node);
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn NativeNode>> {
        self.nodes.get(name)
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.nodes.contains_key(name)
    }

    pub(crate) fn insert_scorer(&mut self, name: String, scorer: Arc<dyn NativeScorer>) {
        self.scorers.insert(name, scorer);
    }

    pub(crate) fn scorer(&self, name: &str) -> Option<&Arc<dyn NativeScorer>> {
        self.scorers.get(name)
    }

    pub(crate) fn insert_focus(&mut self, name: String, focus: Arc<dyn NativeFocus>) {
        self.focuses.insert(name, focus);
    }

    pub(crate) fn focus(&self, name: &str) -> Option<&Arc<dyn NativeFocus>> {
        self.focuses.get(name)
    }
}

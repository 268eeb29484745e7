//! Events: everything a turn did, in the order it happened, for `run`, `play --explain`, SSE and logs.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// One thing that happened during a turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A node began (`step` counts supersteps from 1).
    NodeStarted {
        /// The node's name.
        node: String,
        /// The superstep it runs in.
        step: u32,
    },
    /// A node finished and its updates were folded into the state.
    NodeFinished {
        /// The node's name.
        node: String,
        /// The superstep it ran in.
        step: u32,
        /// Wall time of the node, including model calls.
        duration_us: u64,
        /// The updates it returned, before reducers.
        updates: Updates,
    },
    /// A route chose where the graph goes next.
    Route {
        /// The node the route leaves.
        from: String,
        /// The chosen targets (`END` ends this branch).
        to: Vec<String>,
    },
    /// A model call, successful or not.
    Llm(LlmEvent),
    /// A piece of a model's reply as it streams.
    Token {
        /// The node whose call streams.
        node: String,
        /// The text of this piece.
        text: String,
    },
    /// A piece of what a face shows as a reply streams (the pack's `display.stream`): a streamed
    /// call's text after its `display.stream_from` heading (the speech, not the reasoning before
    /// it), with who speaks. Sent only while someone watches, as `token` is.
    Speech {
        /// The node whose call streams (`content[2]` for a map node's third item).
        node: String,
        /// Who speaks (the state field `display.speaker` names, as the node started).
        #[serde(skip_serializing_if = "Option::is_none")]
        speaker: Option<String>,
        /// True for the first piece of a speech: a new speech begins (the same speaker's too).
        start: bool,
        /// The text of this piece.
        text: String,
    },
    /// A selector's decision with its full breakdown (see the scoring module).
    Decision {
        /// The node that decided.
        node: String,
        /// Every candidate with its vetoes or scores.
        breakdown: Breakdown,
    },
    /// An event a script emitted with `emit(name, data)`.
    Custom {
        /// The node whose script emitted it.
        node: String,
        /// The event's name.
        name: String,
        /// Its data.
        data: serde_json::Value,
    },
    /// A web search a script made with `search(query)`.
    Search {
        /// The node whose script searched.
        node: String,
        /// What it searched for.
        query: String,
        /// The engine that answered (`tavily`, `standin`).
        engine: String,
        /// How many results came back.
        results: usize,
        /// Wall time of the call, in milliseconds.
        latency_ms: f64,
        /// Why it failed, when it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The turn stopped: at a pause point the pack declares (the next turn goes on from there),
    /// or at a breakpoint (the same turn goes on when it is resumed).
    Paused {
        /// The node before which a breakpoint holds the turn.
        #[serde(skip_serializing_if = "Option::is_none")]
        before: Option<String>,
        /// The node after which it paused.
        #[serde(skip_serializing_if = "Option::is_none")]
        after: Option<String>,
        /// The nodes that run next.
        next: Vec<String>,
        /// A breakpoint holds the turn (resume it); otherwise the pack paused between turns.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        breakpoint: bool,
    },
    /// A message a script logged with `log`, `warn` or `print`.
    Log {
        /// The node whose script logged it.
        node: String,
        /// `info` or `warn`.
        level: String,
        /// The message.
        message: String,
    },
}

/// A model call as seen in events: who answered, how fast, how many tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlmEvent {
    /// The node that made the call.
    pub node: String,
    /// The pack's profile (`judge`).
    pub profile: String,
    /// The provider that answered (`openai`, `anthropic`, `standin`, ...).
    pub provider: String,
    /// The model asked.
    pub model: String,
    /// Wall time of the call including retries, in milliseconds.
    pub latency_ms: f64,
    /// Tokens in the prompt, as the provider reported them.
    pub prompt_tokens: u32,
    /// Tokens in the reply, as the provider reported them.
    pub completion_tokens: u32,
    /// How many requests it took (1 without retries).
    pub attempts: u32,
    /// True when the answer came from the pack's offline stand-in model.
    pub standin: bool,
    /// Why the call failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For an embeddings call (a selector's `similarity:`): how many texts, and how many of them
    /// the provider had cached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded: Option<EmbedCount>,
}

/// A selector's decision, every candidate explained: what the `decision` event carries, `play`'s
/// `/why` shows and tests read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    /// The selector.
    pub selector: String,
    /// The phase the turn count fell in.
    pub phase: String,
    /// The turn count that chose the phase.
    pub turn_count: i64,
    /// The index of the winning candidate; `None` when every candidate was vetoed.
    pub winner: Option<usize>,
    /// Every candidate, in the order they were generated.
    pub candidates: Vec<Candidate>,
    /// Whether scorers compared texts by embeddings or by words.
    pub similarity: SimilarityNote,
    /// Why the winner is the selector's fallback strategy (every candidate was vetoed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The strategies this phase turns off (a multiplier of 0): they made no candidate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

/// One candidate of a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The strategy's id.
    pub strategy: String,
    /// The focus its generator made (`description`, and whatever else it set).
    pub focus: Json,
    /// Whether a veto rejected it.
    pub vetoed: bool,
    /// The veto scorers asked, in order, up to the first that vetoed.
    pub vetoes: Vec<VetoCheck>,
    /// The weighted scorers, when no veto rejected it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Vec<Score>>,
    /// Σ weight × raw score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scorer_sum: Option<f64>,
    /// The phase's multiplier for the strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_multiplier: Option<f64>,
    /// scorer_sum × phase_multiplier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_score: Option<f64>,
}

/// What a tier-1 (veto) scorer said of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VetoCheck {
    /// The scorer's id.
    pub scorer: String,
    /// Whether it rejected the candidate.
    pub is_veto: bool,
    /// Why, in a sentence.
    pub reasoning: String,
    /// The evidence.
    pub signals: Json,
}

/// What a tier-2 (weighted) scorer said of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// The scorer's id.
    pub scorer: String,
    /// The raw score, in [0, 2] (1.0 is neutral).
    pub raw_score: f64,
    /// The scorer's weight.
    pub weight: f64,
    /// weight × raw score.
    pub contribution: f64,
    /// Why, in a sentence.
    pub reasoning: String,
    /// The evidence.
    pub signals: Json,
}

/// How a decision's scorers compared texts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimilarityNote {
    /// `embedding` or `lexical`.
    pub kind: SimilarityKind,
    /// The embedding model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Texts with vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texts: Option<usize>,
    /// Of those, how many the provider had cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<usize>,
    /// Pairs compared by words all the same (a text without a vector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared_by_words: Option<usize>,
    /// Why embeddings were asked for and not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The two ways of comparing texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimilarityKind {
    /// Cosine of embedding vectors.
    Embedding,
    /// Cosine of folded word counts.
    Lexical,
}

impl SimilarityNote {
    /// Words, and why when embeddings were asked for.
    pub fn lexical(why: Option<String>) -> Self {
        SimilarityNote {
            kind: SimilarityKind::Lexical,
            model: None,
            texts: None,
            cached: None,
            compared_by_words: None,
            why,
        }
    }

    /// Vectors from `model` for `texts` texts, `cached` of them from the provider's cache.
    pub fn embedding(model: String, texts: usize, cached: usize) -> Self {
        SimilarityNote {
            kind: SimilarityKind::Embedding,
            model: Some(model),
            texts: Some(texts),
            cached: Some(cached),
            ..Self::lexical(None)
        }
    }
}

/// The texts of an embeddings call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EmbedCount {
    /// Texts asked for.
    pub texts: usize,
    /// Texts answered from the provider's cache.
    pub cached: usize,
}

/// A node's updates as an event carries them: kept as the engine holds them and turned into JSON
/// only when read or serialized (most turns' events are never looked at).
#[derive(Debug, Clone)]
pub struct Updates(pub(crate) Arc<rhai::Map>);

impl Updates {
    /// The updates as a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        crate::value::map_to_json(&self.0)
    }

    /// One field's update as JSON.
    pub fn get(&self, field: &str) -> Option<serde_json::Value> {
        self.0.get(field).map(crate::value::to_json)
    }

    /// The fields the node updated.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(|k| k.as_str())
    }
}

impl PartialEq for Updates {
    fn eq(&self, other: &Self) -> bool {
        self.to_json() == other.to_json()
    }
}

impl Serialize for Updates {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::value::map_to_json(&self.0).serialize(s)
    }
}

/// A callback that sees every event as it happens (for streaming); events are also returned
/// with the turn's result.
pub type EventSink = Arc<dyn Fn(&Event) + Send + Sync>;

impl Event {
    /// Every kind of event, as [`Event::kind`] names them (and JSON's `type`, and a stream's
    /// event names), in the order a turn may make them.
    pub const KINDS: [&'static str; 11] = [
        "node_started",
        "node_finished",
        "route",
        "llm",
        "token",
        "speech",
        "decision",
        "custom",
        "log",
        "search",
        "paused",
    ];

    /// The event's kind: its `type` in JSON, its name in an event stream (`node_started`).
    pub fn kind(&self) -> &'static str {
        // Each variant's place in `KINDS`: a new variant must take one here to compile.
        let at = match self {
            Event::NodeStarted { .. } => 0,
            Event::NodeFinished { .. } => 1,
            Event::Route { .. } => 2,
            Event::Llm(_) => 3,
            Event::Token { .. } => 4,
            Event::Speech { .. } => 5,
            Event::Decision { .. } => 6,
            Event::Custom { .. } => 7,
            Event::Log { .. } => 8,
            Event::Search { .. } => 9,
            Event::Paused { .. } => 10,
        };
        Self::KINDS[at]
    }

    /// The node the event belongs to, when it belongs to one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Event::NodeStarted { node, .. }
            | Event::NodeFinished { node, .. }
            | Event::Token { node, .. }
            | Event::Speech { node, .. }
            | Event::Decision { node, .. }
            | Event::Custom { node, .. }
            | Event::Search { node, .. }
            | Event::Log { node, .. } => Some(node),
            Event::Paused { before, after, .. } => before.as_deref().or(after.as_deref()),
            Event::Route { from, .. } => Some(from),
            Event::Llm(e) => Some(&e.node),
        }
    }
}

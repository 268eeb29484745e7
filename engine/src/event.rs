//! Events: everything a turn did, in the order it happened, for `run`, `play --explain`, SSE and logs.

use std::sync::Arc;

use serde::Serialize;

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
    /// A pipeline's decision with its full breakdown (see the scoring module).
    Decision {
        /// The node that decided.
        node: String,
        /// Every candidate with its vetoes or scores.
        breakdown: serde_json::Value,
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
    /// The node the event belongs to, when it belongs to one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Event::NodeStarted { node, .. }
            | Event::NodeFinished { node, .. }
            | Event::Token { node, .. }
            | Event::Decision { node, .. }
            | Event::Custom { node, .. }
            | Event::Log { node, .. } => Some(node),
            Event::Route { from, .. } => Some(from),
            Event::Llm(e) => Some(&e.node),
        }
    }
}

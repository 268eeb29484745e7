//! ruleweave: an embeddable rules engine for LLM-driven games and conversation flows.
//!
//! A *pack* is one game or flow: a YAML manifest (`config/<pack>.yaml`) with options, parameters,
//! LLM profiles, state fields and their reducers, and a graph; Rhai scripts (`scripts/<pack>/`)
//! for nodes and routes; minijinja templates (`prompts/<pack>/`) for prompts. Designers change
//! rules in those files; the engine runs them.
//!
//! ```no_run
//! use ruleweave::{Engine, LlmChoice};
//! use serde_json::json;
//!
//! # async fn demo() -> ruleweave::Result<()> {
//! let engine = Engine::builder(".").llm(LlmChoice::from_env()?).build();
//! let mut game = engine.open("pirate", &json!({"difficulty": "easy"}).as_object().unwrap()).await?;
//! let turn = game.turn(json!({"message": "Ahoy, captain! I sailed with your crew."})).await?;
//! println!("{}", turn.output["pirate_response"]);
//! for event in &turn.events {
//!     println!("{}", serde_json::to_string(event).unwrap());
//! }
//! # Ok(()) }
//! ```
//!
//! The engine is asynchronous at its edges (model calls, session stores) and synchronous inside
//! (scripts). Turns on one [`Session`] are sequential: `turn` takes `&mut self`.
//!
//! How data flows: [`pack`](Pack) → graph → script / llm / prompt → state; see `src/README.md`.

#![warn(missing_docs)]

mod bench;
pub mod blocking;
mod call;
pub mod data;
mod engine;
mod error;
mod event;
mod graph;
mod limits;
pub mod llm;
pub mod lobby;
mod native;
mod pack;
mod packs;
mod prompt;
pub mod reload;
pub mod replay;
mod runtime;
mod schemas;
mod script;
pub mod search;
mod select;
mod session;
mod speech;
mod state;
pub mod store;
pub mod text;
mod turn;
mod value;
mod vocab;

pub use bench::Selection;
pub use call::ScriptCall;
pub use data::YAML_TABLE_NODES;
pub use engine::{Engine, EngineBuilder, LiveSession, LlmObserver};
pub use error::{Error, ErrorKind, Origin, Result};
pub use event::{
    Breakdown, Candidate, EmbedCount, Event, EventSink, LlmEvent, Score, SimilarityKind, SimilarityNote, Updates,
    VetoCheck,
};
pub use graph::kinds::{NodeKindDoc, node_kinds};
pub use limits::{LimitDef, Limits, limit_table};
pub use llm::Profile;
pub use llm::{LlmChoice, Provider};
pub use native::{FocusContext, NativeFocus, NativeNode, NativeScorer, NodeContext, ScorerContext, ScorerOutput};
pub use pack::manifest::manifest_schema;
pub use pack::{InputSpec, OptionSpec, Pack, Simulate};
pub use packs::Packs;
pub use reload::{PackEvent, PackStatus, ReloadStatus, Watcher};
pub use script::host::{HostFn, host_functions};
pub use session::{Opening, OpeningKind, PausedAt, Said, Session, TurnResult, View};
pub use state::{ReducerDef, reducer_table};
pub use store::ResumePoint;
pub use vocab::{Reducer, ScorerImpl, TypeName};

/// The value types state lives in (Rhai's), for native nodes.
pub mod values {
    pub use rhai::{Array, Dynamic, FLOAT, INT, ImmutableString, Map};
}

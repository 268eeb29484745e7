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
#![warn(unreachable_pub)]
// A build without every feature leaves unused the helpers its missing parts share with the rest
// (the SQL stores' common code, the HTTP providers' retry settings); the full build warns of all.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "watch", feature = "http-models")),
    allow(dead_code, unused_imports, unused_variables, unreachable_code)
)]

// The table of contents: what an embedding program uses, by role. The modules marked `pub` below
// are parts of that surface with more inside (stores, model providers, replay, lobby rounds, the
// file watcher, web search, the text functions native code shares with scripts); the rest are the
// engine's own.

// Opening and playing sessions (and, for another language's package, the facade that does it
// from `{root, store, model}` and JSON: `embed`).
pub use engine::{Engine, EngineBuilder, LlmObserver};
pub use session::{
    Breakpoints, Derived, EditEffects, LiveSession, OpenAs, Opening, OpeningKind, OwnedSessionGuard, PLAYER_MAX,
    PausedAt, Posted, Said, Session, SessionGuard, TurnResult, VariantChoice, View, check_player, player_hash,
};
pub use store::{ResumePoint, Retention, Stop, Store};

// Errors: one type, with where it happened.
pub use error::{Error, ErrorKind, Origin, Result};

// What a turn tells: events, the selector's decision breakdown, a state's updates.
pub use event::{
    Breakdown, Candidate, EmbedCount, Event, EventSink, LlmEvent, Score, SimilarityKind, SimilarityNote, Updates,
    VetoCheck,
};

// Packs: loaded, served, reloaded.
pub use graph::{Drawing, DrawnEdge, DrawnNode, EdgeKind};
pub use pack::experiment::point as experiment_point;
pub use pack::{
    DisplayInfo, Experiment, FieldInfo, InputInfo, InputSpec, NodeInfo, NumericParam, OptionInfo, OptionSpec, Overlay,
    Pack, PackInfo, ParamValues, ProfileInfo, Simulate, TableInfo, Variant, parse_param, write_param, write_weight,
};
pub use packs::Packs;
#[cfg(feature = "watch")]
pub use reload::Watcher;
pub use reload::{PackEvent, PackStatus, ReloadStatus};

// Models: the provider trait, the choice from the environment, profiles.
pub use exchange::{Exchange, ModelExchange, SearchExchange};
pub use llm::{LlmChoice, Profile, Provider};

// Native code: nodes, scorers and focuses the embedding program registers, and the value types
// they read state in.
pub use native::{FocusContext, NativeFocus, NativeNode, NativeScorer, NodeContext, ScorerContext, ScorerOutput};

/// The value types state lives in (Rhai's), for native nodes.
pub mod values {
    pub use crate::value::{from_json, parse_json_reply, to_json};
    pub use rhai::{Array, Dynamic, FLOAT, INT, ImmutableString, Map};
}

// Tools outside a turn: a selector or a script function run on a recorded state (benchmarks,
// twins, simulation).
pub use bench::Selection;
pub use call::ScriptCall;

// The reference tables the docs are generated from (manifest schema, node kinds, host
// functions, reducers, limits).
pub use data::{Counts, Table, YAML_TABLE_NODES};
pub use graph::kinds::{NodeKindDoc, node_kinds};
pub use limits::{LimitDef, Limits, limit_table};
pub use pack::manifest::manifest_schema;
pub use prompt::KNOWN_FILTERS as TEMPLATE_FILTERS;
pub use script::host::{HostFn, host_functions};
pub use state::{ReducerDef, reducer_table};
pub use vocab::{Reducer, ScorerImpl, TypeName};

pub mod duration;
pub mod embed;
pub mod llm;
pub mod lobby;
pub mod pace;
pub mod recording;
pub mod reload;
pub mod search;
pub mod store;
pub mod text;

mod bench;
mod blocking;
mod call;
mod data;
mod engine;
mod error;
mod event;
mod exchange;
mod graph;
mod limits;
mod native;
mod pack;
mod packs;
mod prompt;
mod runtime;
mod schemas;
mod script;
mod select;
mod session;
mod speech;
mod state;
mod turn;
mod value;
mod vocab;

//! Native twins of the shipped packs' scripted scorers and builders.
//!
//! Packs are YAML, Rhai and templates; nothing game-specific is compiled into the engine. A pack's
//! scorer may also name a Rust twin (`native: name`), which a host registers with
//! [`ruleweave::EngineBuilder::native_scorer`]; the manifest's `impl` then picks which runs. The
//! `ruleweave` binary registers these, so `impl: native` works there; the twins compute exactly
//! what their scripts do (a property test holds them to it) and let a pack author see what the
//! scripts cost (`cargo bench -p ruleweave-natives`).

#![warn(unreachable_pub)]

pub mod designer;
pub mod interview;

/// Registers every twin in this crate.
pub fn register(builder: ruleweave::EngineBuilder) -> ruleweave::EngineBuilder {
    interview::register_focuses(interview::register(builder))
}

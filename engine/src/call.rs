//! A pack's script function called directly, outside any turn: what tests and benchmarks use to
//! hold a scripted function to its native twin (`builder.rhai::build_game_graph` against the Rust
//! one), and what an embedding program uses to reuse a pack's logic.

use std::sync::Arc;

use rhai::Dynamic;
use serde_json::Value as Json;

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::pack::Pack;
use crate::script::{CallTag, FnRef};
use crate::value;

/// One function of a pack's scripts, ready to call with JSON arguments. Host functions work as
/// in a turn (`param`, `option` with the defaults, seeded randomness) except that `this`, the
/// state, is empty and model calls go to the engine's provider.
pub struct ScriptCall {
    pack: Arc<Pack>,
    func: FnRef,
    tag: CallTag,
    options: rhai::Map,
    provider: Arc<dyn crate::llm::Provider>,
}

impl ScriptCall {
    /// `reference` (`builder.rhai::build_game_graph`) in `pack`, a function of `arity` parameters.
    pub fn new(engine: &Engine, pack: &str, reference: &str, arity: usize) -> Result<Self> {
        let pack = engine.pack(pack)?;
        let func = match pack.scripts.resolve(reference, None, arity) {
            Ok(Some(f)) => f,
            Ok(None) => return Err(Error::new(ErrorKind::NotFound, format!("`{reference}` did not compile"))),
            Err(why) => return Err(Error::new(ErrorKind::NotFound, why)),
        };
        let options = pack.resolve_options(&serde_json::Map::new())?;
        let provider = engine.provider_for(&pack);
        let tag = CallTag::outside("call", 1, options.clone(), provider.clone());
        Ok(ScriptCall { pack, func, tag, options, provider })
    }

    /// [`ScriptCall::call`] as a move of session `id` at `turn`, with the randomness that game
    /// and turn seed (`random()` differs from game to game and turn to turn, the same on every
    /// run): what a simulated player's script is called with.
    pub fn call_as(&self, id: &str, turn: u64, args: &[Json]) -> Result<Json> {
        let seed = crate::text::hash(id) ^ turn.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let ctx = crate::turn::TurnCtx::new(
            id.into(),
            turn,
            seed,
            0,
            self.options.clone(),
            rhai::Map::new(),
            self.provider.clone(),
            None,
        );
        self.call_tagged(CallTag::new(Arc::new(ctx), "player".into()), args)
    }

    /// Calls the function with `args` (converted to Rhai values) and returns its result as JSON.
    pub fn call(&self, args: &[Json]) -> Result<Json> {
        self.call_tagged(self.tag.clone(), args)
    }

    fn call_tagged(&self, tag: CallTag, args: &[Json]) -> Result<Json> {
        let args: Vec<Dynamic> = args.iter().map(value::from_json).collect();
        let mut this = Dynamic::UNIT;
        let v = self.pack.sandbox.call(&self.func, &mut this, args, Some(tag))?;
        Ok(value::to_json(&v))
    }
}

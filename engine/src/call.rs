//! A pack's script function called directly, outside any turn: what tests and benchmarks use to
//! hold a scripted function to its native twin (`builder.rhai::build_game_graph` against the Rust
//! one), and what an embedding program uses to reuse a pack's logic.

use std::sync::Arc;

use rhai::Dynamic;
use serde_json::Value as Json;

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::pack::Pack;
use crate::script::{CallTag, FnRef, allow_blocking};
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
        let pack = engine.packs().get(pack)?;
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

    /// A model player of `pack`: the pack's `llm:` profile `name` plays, with
    /// `prompts/<pack>/players/NAME.j2` (rendered with `view` and `state`) as its persona, the
    /// system message, and what the game last said (`view.reply`) as the user's; its answer is the
    /// move, a line a person might have typed. Called like a scripted player's `play(view, state)`.
    pub fn model_player(engine: &Engine, pack: &str, name: &str) -> Result<Self> {
        let pack = engine.packs().get(pack)?;
        let not_found = |why: String| Err(Error::new(ErrorKind::NotFound, why));
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return not_found(format!(
                "`model:{name}`: a model player is named by an `llm:` profile (letters, digits, _)"
            ));
        }
        if !pack.profiles.contains_key(name) {
            let names: Vec<&str> = pack.profiles.keys().map(String::as_str).collect();
            return not_found(format!(
                "pack `{}` has no `llm:` profile `{name}` to play as `model:{name}` (profiles: {})",
                pack.name,
                names.join(", ")
            ));
        }
        let persona = format!("players/{name}.j2");
        if !pack.prompts.contains(&persona) {
            return not_found(format!(
                "`model:{name}` needs its persona: write prompts/{}/{persona} (it sees `view` and `state`)",
                pack.name
            ));
        }
        let source = format!(
            "fn play(view, state) {{\n\
             let persona = render(\"{persona}\", #{{view: view, state: state}});\n\
             let said = view.reply ?? \"\";\n\
             llm_chat(\"{name}\", [#{{role: \"system\", content: persona}}, #{{role: \"user\", content: said}}])\n\
             }}"
        );
        let file = pack.sandbox.compile(&format!("scripts/{}/players/model:{name}", pack.name), &source)?;
        let func = FnRef { file: Arc::new(file), name: "play".into() };
        let options = pack.resolve_options(&serde_json::Map::new())?;
        let provider = engine.provider_for(&pack);
        let tag = CallTag::outside("player", 1, options.clone(), provider.clone());
        Ok(ScriptCall { pack, func, tag, options, provider })
    }

    /// [`ScriptCall::call`] as a move of session `id` at `turn`, with the randomness that game
    /// and turn seed (`random()` differs from game to game and turn to turn, the same on every
    /// run): what a simulated player's script is called with. Returns the move and the model
    /// calls it made (a model player's: what it cost). A function that calls a model must be
    /// called outside the runtime's async context, with the runtime entered.
    pub fn call_as(&self, id: &str, turn: u64, args: &[Json]) -> Result<(Json, Vec<crate::event::LlmEvent>)> {
        self.call_as_with(id, turn, args.iter().map(value::from_json).collect())
    }

    /// [`ScriptCall::call_as`] with the arguments as Rhai values already: a simulation hands a
    /// player its copy of the state without the round trip through JSON.
    pub fn call_as_with(&self, id: &str, turn: u64, args: Vec<Dynamic>) -> Result<(Json, Vec<crate::event::LlmEvent>)> {
        let seed = crate::text::hash(id) ^ turn.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let ctx = Arc::new(crate::turn::TurnCtx::new(crate::turn::TurnStart {
            session_id: id.into(),
            turn,
            seed,
            now_ms: 0,
            options: self.options.clone(),
            input: rhai::Map::new(),
            provider: self.provider.clone(),
            live: None,
        }));
        let tag = CallTag::new(ctx.clone(), "player".into());
        // A player that asks a model (a model player) waits for it on this thread, which must not
        // be one of the runtime's: the caller's, with the runtime entered (`Handle::enter`).
        let played = if self.func.file.calls_models {
            allow_blocking(|| self.call_tagged(tag, args))?
        } else {
            self.call_tagged(tag, args)?
        };
        let calls = ctx
            .take()
            .events
            .into_iter()
            .filter_map(|e| match e {
                crate::event::Event::Llm(call) => Some(call),
                _ => None,
            })
            .collect();
        Ok((played, calls))
    }

    /// Whether the function may read its parameter `index`: its file names that parameter, by
    /// the name the function gives it, somewhere. A function whose file never names it cannot
    /// read it, and a caller may leave out what it would cost to build (a simulated player that
    /// never looks at the game's view). When the function cannot be found, it may.
    pub fn reads_param(&self, index: usize) -> bool {
        let named: Vec<String> = (self.func.file.ast.iter_functions())
            .filter(|f| f.name == self.func.name.as_str())
            .filter_map(|f| f.params.get(index).map(|p| p.to_string()))
            .collect();
        named.is_empty() || named.iter().any(|p| self.names_variable(p))
    }

    /// Whether the function's file names a variable `name` anywhere.
    fn names_variable(&self, name: &str) -> bool {
        let mut found = false;
        self.func.file.ast.walk(&mut |path: &[rhai::ASTNode<'_>]| {
            if let Some(rhai::ASTNode::Expr(rhai::Expr::Variable(v, ..))) = path.last()
                && v.1 == name
            {
                found = true;
            }
            !found
        });
        found
    }

    /// Calls the function with `args` (converted to Rhai values) and returns its result as JSON.
    pub fn call(&self, args: &[Json]) -> Result<Json> {
        self.call_tagged(self.tag.clone(), args.iter().map(value::from_json).collect())
    }

    fn call_tagged(&self, tag: CallTag, args: Vec<Dynamic>) -> Result<Json> {
        let mut this = Dynamic::UNIT;
        let v = self.pack.sandbox.call(&self.func, &mut this, args, Some(tag))?;
        Ok(value::to_json(&v))
    }
}

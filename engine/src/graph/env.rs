//! What a running node may use: the pack's compiled parts, the host's native nodes and scorers,
//! and the turn (its input, options, randomness, model calls and events).

use std::sync::Arc;

use indexmap::IndexMap;
use rhai::{Dynamic, Map};

use super::Graph;
use crate::error::{Error, ErrorKind, Result};
use crate::limits::Limits;
use crate::llm::Profile;
use crate::native::NativeNodes;
use crate::prompt::Prompts;
use crate::script::{CallTag, Condition, FnRef, Sandbox, allow_blocking};
use crate::state::Schema;
use crate::turn::TurnCtx;
use crate::value;

/// The pieces a turn runs with, borrowed from its pack version and its host.
pub(crate) struct Env<'a> {
    pub graph: &'a Graph,
    pub schema: &'a Schema,
    pub sandbox: &'a Arc<Sandbox>,
    pub prompts: &'a Prompts,
    pub profiles: &'a IndexMap<String, Profile>,
    pub params: &'a Map,
    pub limits: &'a Limits,
    pub natives: &'a NativeNodes,
    pub turn: &'a Arc<TurnCtx>,
}

impl Env<'_> {
    /// The name of node `node`.
    pub(crate) fn name(&self, node: usize) -> &Arc<str> {
        &self.graph.nodes[node].name
    }

    /// The tag a script called for `node` carries.
    pub(crate) fn tag(&self, node: usize) -> CallTag {
        CallTag::new(self.turn.clone(), self.name(node).clone())
    }

    /// Calls a script for `node`: here, or on a blocking thread when it may call a model.
    pub(crate) async fn call(
        &self,
        node: usize,
        f: &FnRef,
        state: &mut Dynamic,
        args: Vec<Dynamic>,
    ) -> Result<Dynamic> {
        self.call_as(self.tag(node), f, state, args).await
    }

    /// [`Env::call`] with a tag of the caller's making.
    pub(crate) async fn call_as(
        &self,
        tag: CallTag,
        f: &FnRef,
        state: &mut Dynamic,
        args: Vec<Dynamic>,
    ) -> Result<Dynamic> {
        if f.calls_models() {
            return self.call_blocking_as(tag, f.clone(), state, args).await;
        }
        self.sandbox.call(f, state, args, Some(tag))
    }

    /// Calls a script for `node` on a blocking thread, where it may wait for models.
    pub(crate) async fn call_blocking(
        &self,
        node: usize,
        f: FnRef,
        state: &Dynamic,
        args: Vec<Dynamic>,
    ) -> Result<Dynamic> {
        self.call_blocking_as(self.tag(node), f, state, args).await
    }

    /// [`Env::call_blocking`] with a tag of the caller's making. The script gets a copy of the
    /// state, or an empty one when its file never uses `this`; never the turn's own: a running
    /// script holds its state locked, other runs of the step may run at the same time, and a
    /// dropped turn leaves the thread running while the session rolls its state back.
    pub(crate) async fn call_blocking_as(
        &self,
        tag: CallTag,
        f: FnRef,
        state: &Dynamic,
        args: Vec<Dynamic>,
    ) -> Result<Dynamic> {
        let mut state = if f.reads_state() { crate::state::copy(state)? } else { crate::state::root(Map::new()) };
        let sandbox = self.sandbox.clone();
        // The pool's thread carries the node's trace span: the script's model calls are its.
        crate::blocking::run(move || allow_blocking(|| sandbox.call(&f, &mut state, args, Some(tag))))
            .await
            .map_err(|e| Error::internal(format!("a script thread failed: {e}")))?
    }

    /// Whether a condition holds for `node`; `what` names it in the error when it is not a bool.
    pub(crate) async fn holds(&self, node: usize, test: &Condition, what: &str, state: &mut Dynamic) -> Result<bool> {
        let v = match test {
            Condition::Flag { field, negate } => {
                let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
                let flag = map.get(field.as_str()).and_then(|v| v.as_bool().ok()).unwrap_or(false);
                return Ok(flag != *negate);
            }
            Condition::Script(f) => self.call(node, f, state, Vec::new()).await.map_err(|e| e.context(what))?,
        };
        v.as_bool().map_err(|_| {
            let e =
                Error::new(ErrorKind::Script, format!("{what} gave {}; it must be true or false", value::type_of(&v)));
            match test {
                Condition::Script(f) => e.at(f.file.fn_origin(&f.name)),
                Condition::Flag { .. } => e,
            }
        })
    }
}

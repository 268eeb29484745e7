//! Native nodes: Rust functions an embedding program registers under a name, so a manifest can
//! say `native: name` for a step that belongs in Rust (a database lookup, a heavy computation).

use std::collections::HashMap;
use std::sync::Arc;

use rhai::{Dynamic, Map};

use crate::error::Result;

/// A node written in Rust. It sees the state read-only and returns updates, like a script node.
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

/// The native nodes an engine knows, by name.
#[derive(Clone, Default)]
pub(crate) struct NativeNodes(HashMap<String, Arc<dyn NativeNode>>);

impl NativeNodes {
    pub fn insert(&mut self, name: String, node: Arc<dyn NativeNode>) {
        self.0.insert(name, node);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn NativeNode>> {
        self.0.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
}

//! The graph: nodes, edges, routes and joins, as a pack compiles them, and as a Mermaid diagram.
//!
//! A turn runs in supersteps, like LangGraph's: every node triggered in a step runs against the
//! same state, their updates are folded in (in declaration order, through the reducers), then
//! edges and routes say which nodes run next. A step with several nodes is a fan-out; a join edge
//! (`a, b -> c`) runs `c` once both `a` and `b` have finished.

pub(crate) mod env;
pub(crate) mod kinds;
pub(crate) mod load;
pub(crate) mod run;

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::error::Origin;
use crate::script::{Condition, FnRef};

/// Where an edge goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    Node(usize),
    End,
}

/// A compiled graph. Node ids are indexes into `nodes`, in declaration order.
#[derive(Debug)]
pub(crate) struct Graph {
    pub nodes: Vec<Node>,
    pub index: HashMap<String, usize>,
    /// What START leads to.
    pub entry: Vec<Target>,
    /// Static edges out of each node.
    pub edges: Vec<Vec<Target>>,
    /// The route out of each node, if any.
    pub routes: Vec<Option<Route>>,
    /// Edges that wait for several nodes.
    pub joins: Vec<Join>,
    /// The most supersteps one turn may take.
    pub recursion_limit: u32,
    /// Whether every step is checkpointed (long turns), not only every turn.
    pub checkpoint_steps: bool,
    /// For each node, the condition under which the turn pauses after it (`pause_after:`).
    pub pauses: Vec<Option<(Condition, String)>>,
}

#[derive(Debug)]
pub(crate) struct Node {
    pub name: std::sync::Arc<str>,
    pub kind: Box<dyn kinds::Kind>,
    pub doc: String,
    pub origin: Origin,
}

#[derive(Debug)]
pub(crate) enum Route {
    /// The first case whose `when` holds (the last has none).
    Cases(Vec<Case>),
    /// A function naming the next node(s); `targets` lists what it may name.
    Script { func: FnRef, targets: Vec<Target> },
}

#[derive(Debug)]
pub(crate) struct Case {
    /// The condition and its text as written; `None` on the default case.
    pub when: Option<(Condition, String)>,
    pub to: Vec<Target>,
}

/// `from₁, from₂ -> to`: `to` runs once every `from` has finished.
#[derive(Debug)]
pub(crate) struct Join {
    pub from: Vec<usize>,
    pub to: Vec<Target>,
}

impl Graph {
    /// The name of a target, for events.
    pub(crate) fn target_name(&self, t: Target) -> &str {
        match t {
            Target::Node(i) => &self.nodes[i].name,
            Target::End => "END",
        }
    }

    /// The graph as a Mermaid flowchart: each node in its kind's shape (script nodes as boxes,
    /// llm nodes as parallelograms naming their profile, native nodes as subroutines, select
    /// nodes as hexagons); routes dashed and labelled.
    pub(crate) fn mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n    START([START])\n    END([END])\n");
        for n in &self.nodes {
            let _ = writeln!(out, "    {}", n.kind.mermaid(&n.name));
        }
        let name = |t: &Target| self.target_name(*t).to_owned();
        for t in &self.entry {
            let _ = writeln!(out, "    START --> {}", name(t));
        }
        for (i, targets) in self.edges.iter().enumerate() {
            for t in targets {
                let _ = writeln!(out, "    {} --> {}", self.nodes[i].name, name(t));
            }
        }
        for j in &self.joins {
            let from: Vec<&str> = j.from.iter().map(|i| &*self.nodes[*i].name).collect();
            for t in &j.to {
                let _ = writeln!(out, "    {} --> {}", from.join(" & "), name(t));
            }
        }
        for (i, pause) in self.pauses.iter().enumerate() {
            if let Some((_, text)) = pause {
                let _ = writeln!(out, "    {}:::pause", self.nodes[i].name);
                let _ = writeln!(out, "    %% pauses after {} when {}", self.nodes[i].name, mermaid_label(text));
            }
        }
        if self.pauses.iter().any(Option::is_some) {
            out.push_str("    classDef pause stroke-width:3px,stroke-dasharray:4 2\n");
        }
        for (i, route) in self.routes.iter().enumerate() {
            let from = &self.nodes[i].name;
            match route {
                None => {}
                Some(Route::Cases(cases)) => {
                    for c in cases {
                        let label = match &c.when {
                            Some((_, text)) => mermaid_label(text),
                            None => "otherwise".into(),
                        };
                        for t in &c.to {
                            let _ = writeln!(out, "    {from} -.->|\"{label}\"| {}", name(t));
                        }
                    }
                }
                Some(Route::Script { func, targets }) => {
                    for t in targets {
                        let _ = writeln!(out, "    {from} -.->|\"{}\"| {}", func.name, name(t));
                    }
                }
            }
        }
        out
    }
}

/// A route condition shortened for a Mermaid edge label. The label is quoted, so a `"` in it
/// becomes `'`: Mermaid's entity codes (`#quot;`) show as themselves in some of its renderers.
fn mermaid_label(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = if one_line.chars().count() > 40 {
        one_line.chars().take(39).chain(std::iter::once('…')).collect()
    } else {
        one_line
    };
    short.replace('"', "'")
}

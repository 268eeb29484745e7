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

    /// The graph as a drawing needs it: every node with its kind and what it runs, every edge
    /// with how it is taken, in declaration order (START's first, then each node's edges, the
    /// joins, the routes).
    pub(crate) fn drawing(&self) -> Drawing {
        let name = |t: &Target| self.target_name(*t).to_owned();
        let nodes = self
            .nodes
            .iter()
            .zip(&self.pauses)
            .map(|(n, pause)| DrawnNode {
                name: n.name.to_string(),
                kind: n.kind.describe().0.to_owned(),
                what: n.kind.what(),
                doc: n.doc.clone(),
                pause: pause.as_ref().map(|(_, text)| text.clone()),
            })
            .collect();
        let edge = |from: Vec<String>, to: &Target, how: EdgeKind, label: Option<String>| DrawnEdge {
            from,
            to: name(to),
            how,
            label,
        };
        let mut edges: Vec<DrawnEdge> =
            self.entry.iter().map(|t| edge(vec!["START".into()], t, EdgeKind::Always, None)).collect();
        for (i, targets) in self.edges.iter().enumerate() {
            edges.extend(targets.iter().map(|t| edge(vec![self.nodes[i].name.to_string()], t, EdgeKind::Always, None)));
        }
        for j in &self.joins {
            let from: Vec<String> = j.from.iter().map(|i| self.nodes[*i].name.to_string()).collect();
            edges.extend(j.to.iter().map(|t| edge(from.clone(), t, EdgeKind::Join, None)));
        }
        for (i, route) in self.routes.iter().enumerate() {
            let from = || vec![self.nodes[i].name.to_string()];
            match route {
                None => {}
                Some(Route::Cases(cases)) => {
                    for c in cases {
                        let label = c.when.as_ref().map_or("otherwise".to_owned(), |(_, text)| text.clone());
                        edges.extend(c.to.iter().map(|t| edge(from(), t, EdgeKind::Route, Some(label.clone()))));
                    }
                }
                Some(Route::Script { func, targets }) => {
                    edges.extend(targets.iter().map(|t| edge(from(), t, EdgeKind::Route, Some(func.name.to_string()))));
                }
            }
        }
        Drawing { nodes, edges }
    }
}

/// A pack's graph as a drawing needs it: what `ruleweave graph` draws (as a Mermaid flowchart,
/// or as SVG) and what a client draws for itself.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Drawing {
    /// The nodes in declaration order (START and END are not among them: edges name them).
    pub nodes: Vec<DrawnNode>,
    /// The edges: START's, each node's, the joins, then the routes.
    pub edges: Vec<DrawnEdge>,
}

/// One node of a [`Drawing`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrawnNode {
    /// Its name in the manifest.
    pub name: String,
    /// `script`, `llm`, `native` or `select`.
    pub kind: String,
    /// What it runs, in a few words (`llm: judge`, `pirate.rhai::score`).
    pub what: String,
    /// Its `doc:`.
    pub doc: String,
    /// When the turn pauses after it (`pause_after:`), as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<String>,
}

/// One edge of a [`Drawing`]: from one node (several for a join) to another, or to `END`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrawnEdge {
    /// Where it starts: one node, `START`, or a join's nodes.
    pub from: Vec<String>,
    /// Where it goes: a node or `END`.
    pub to: String,
    /// When it is taken.
    pub how: EdgeKind,
    /// A route's condition as written (`otherwise` for its default), or its script's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// How an edge is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// Every time the node finishes.
    Always,
    /// Once every node it comes from has finished.
    Join,
    /// When its route chooses it.
    Route,
}

impl Drawing {
    /// The drawing as a Mermaid flowchart: each node in its kind's shape (script nodes as boxes,
    /// llm nodes as parallelograms naming their profile, native nodes as subroutines, select
    /// nodes as hexagons); routes dashed and labelled.
    pub fn mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n    START([START])\n    END([END])\n");
        for n in &self.nodes {
            let (name, label) = (&n.name, format!("\"{}<br/><small>{}</small>\"", n.name, n.what));
            let _ = match n.kind.as_str() {
                "llm" => writeln!(out, "    {name}[/{label}/]"),
                "native" => writeln!(out, "    {name}[[{label}]]"),
                "select" => writeln!(out, "    {name}{{{{{label}}}}}"),
                "script" => writeln!(out, "    {name}[{label}]"),
                _ => writeln!(out, "    {name}[{name}]"),
            };
        }
        for e in self.edges.iter().filter(|e| e.how != EdgeKind::Route) {
            let _ = writeln!(out, "    {} --> {}", e.from.join(" & "), e.to);
        }
        for n in &self.nodes {
            if let Some(text) = &n.pause {
                let _ = writeln!(out, "    {}:::pause", n.name);
                let _ = writeln!(out, "    %% pauses after {} when {}", n.name, mermaid_label(text));
            }
        }
        if self.nodes.iter().any(|n| n.pause.is_some()) {
            out.push_str("    classDef pause stroke-width:3px,stroke-dasharray:4 2\n");
        }
        for e in self.edges.iter().filter(|e| e.how == EdgeKind::Route) {
            let label = mermaid_label(e.label.as_deref().unwrap_or(""));
            let _ = writeln!(out, "    {} -.->|\"{label}\"| {}", e.from.join(" & "), e.to);
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

//! The graph: nodes, edges, routes and joins, as a pack compiles them, and as a Mermaid diagram.
//!
//! A turn runs in supersteps, like LangGraph's: every node triggered in a step runs against the
//! same state, their updates are folded in (in declaration order, through the reducers), then
//! edges and routes say which nodes run next. A step with several nodes is a fan-out; a join edge
//! (`a, b -> c`) runs `c` once both `a` and `b` have finished.

pub(crate) mod run;

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::error::Origin;
use crate::pack::manifest::ParseMode;
use crate::script::FnRef;

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
}

#[derive(Debug)]
pub(crate) struct Node {
    pub name: std::sync::Arc<str>,
    pub kind: NodeKind,
    pub doc: String,
    pub origin: Origin,
}

impl NodeKind {
    /// `script`, `llm` or `native`, and what it runs.
    pub fn describe(&self) -> (&'static str, String) {
        match self {
            NodeKind::Script(f) => ("script", f.display()),
            NodeKind::Llm(l) => ("llm", l.profile.clone()),
            NodeKind::Native(n) => ("native", n.clone()),
            NodeKind::Select(s, _) => ("select", s.name.clone()),
        }
    }
}

#[derive(Debug)]
pub(crate) enum NodeKind {
    Script(FnRef),
    Llm(Box<LlmNode>),
    Native(String),
    /// A selector of the pack's, its winner put in the field named.
    Select(std::sync::Arc<crate::select::Selector>, String),
}

/// A declarative model call: profile + templates + parsing, with a fallback script.
#[derive(Debug)]
pub(crate) struct LlmNode {
    pub profile: String,
    pub system: Option<String>,
    pub prompt: Option<String>,
    pub history: Option<History>,
    pub vars: Option<FnRef>,
    pub parse: ParseMode,
    pub then: Then,
    pub fallback: Option<FnRef>,
}

/// What becomes of an `llm` node's reply.
#[derive(Debug)]
pub(crate) enum Then {
    /// `fn(reply) -> updates`.
    Script(FnRef),
    /// The reply replaces this field.
    Field(String),
}

/// Chat messages taken from a list field.
#[derive(Debug)]
pub(crate) struct History {
    pub field: String,
    pub last: Option<usize>,
    pub roles: Vec<(String, String)>,
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
    pub when: Option<(Test, String)>,
    pub to: Vec<Target>,
}

/// A route condition.
#[derive(Debug)]
pub(crate) enum Test {
    /// A Rhai expression over `this`.
    Script(FnRef),
    /// `this.flag` or `!this.flag` on a bool field: read directly, no script call.
    Flag { field: String, negate: bool },
}

/// `from₁, from₂ -> to`: `to` runs once every `from` has finished.
#[derive(Debug)]
pub(crate) struct Join {
    pub from: Vec<usize>,
    pub to: Vec<Target>,
}

impl Graph {
    /// The name of a target, for events.
    pub fn target_name(&self, t: Target) -> &str {
        match t {
            Target::Node(i) => &self.nodes[i].name,
            Target::End => "END",
        }
    }

    /// The graph as a Mermaid flowchart: script nodes as boxes, llm nodes as parallelograms
    /// naming their profile, native nodes as subroutines; routes dashed and labelled.
    pub fn mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n    START([START])\n    END([END])\n");
        for n in &self.nodes {
            let shape = match &n.kind {
                NodeKind::Script(f) => format!("{}[\"{}<br/><small>{}</small>\"]", n.name, n.name, f.display()),
                NodeKind::Llm(l) => format!("{}[/\"{}<br/><small>llm: {}</small>\"/]", n.name, n.name, l.profile),
                NodeKind::Native(f) => format!("{}[[\"{}<br/><small>native: {f}</small>\"]]", n.name, n.name),
                NodeKind::Select(s, _) => {
                    format!("{}{{{{\"{}<br/><small>select: {}</small>\"}}}}", n.name, n.name, s.name)
                }
            };
            let _ = writeln!(out, "    {shape}");
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

/// A route condition shortened and escaped for a Mermaid edge label.
fn mermaid_label(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let short: String = if one_line.chars().count() > 40 {
        one_line.chars().take(39).chain(std::iter::once('…')).collect()
    } else {
        one_line
    };
    short.replace('"', "#quot;")
}

//! Loading a manifest's graph: its nodes (each through its kind, `graph::kinds`), edges,
//! fan-outs and joins, routes (cases or a script), and the checks a graph must pass: an entry,
//! a way out of every node, every node reachable.

use std::collections::{HashMap, HashSet};

use serde_saphyr::Spanned;

use super::super::manifest::{self, RouteDecl, SpannedStr};
use super::Loader;
use crate::error::Origin;
use crate::graph::load::{Load, Refs};
use crate::graph::{Case, Graph, Join, Node, Route, Target};
use crate::vocab::is_identifier;

impl Loader<'_> {
    pub(super) fn graph(&mut self, g: &manifest::GraphDecl, refs: &Refs<'_>) -> Option<Graph> {
        let mut nodes = Vec::new();
        let mut index = HashMap::new();
        for (i, (name, decl)) in g.nodes.iter().enumerate() {
            let at = self.at(decl);
            if !is_identifier(name) || name == "START" || name == "END" {
                self.error(
                    format!("`{name}` cannot name a node (it must be an identifier other than START and END)"),
                    at.clone(),
                );
            }
            index.insert(name.clone(), i);
            let kind = Load { refs, errors: &mut self.errors }.node(name, &decl.value, at.clone());
            // A node that did not load (its problems are reported) still stands in the graph, so
            // the edges and routes around it are checked too.
            let kind = kind.unwrap_or_else(crate::graph::kinds::unloaded);
            nodes.push(Node { name: name.as_str().into(), kind, doc: decl.value.doc(), origin: at });
        }
        let n = nodes.len();
        let mut graph = Graph {
            nodes,
            index,
            entry: Vec::new(),
            edges: vec![Vec::new(); n],
            routes: (0..n).map(|_| None).collect(),
            joins: Vec::new(),
            recursion_limit: g.recursion_limit.unwrap_or(25),
            checkpoint_steps: g.checkpoint == manifest::CheckpointEvery::Step,
            pauses: (0..n).map(|_| None).collect(),
        };
        for (node, when) in &g.pause_after {
            let Some(&i) = graph.index.get(node) else {
                self.error(
                    format!("pause_after names `{node}`, which is not a node ({})", node_list(&graph)),
                    self.at(when),
                );
                continue;
            };
            let test = Load { refs, errors: &mut self.errors }.condition(when, &format!("pause_after_{node}"));
            graph.pauses[i] = test.map(|t| (t, when.value.clone()));
        }
        for edge in &g.edges {
            self.edge(&mut graph, edge);
        }
        for (from, decl) in &g.routes {
            let at = self.at(decl);
            let Some(&i) = graph.index.get(from) else {
                self.error(format!("a route leaves `{from}`, which is not a node ({})", node_list(&graph)), at);
                continue;
            };
            let route = match &decl.value {
                RouteDecl::Cases(cases) => {
                    let mut out = Vec::new();
                    for (k, c) in cases.iter().enumerate() {
                        let last = k + 1 == cases.len();
                        let to = self.targets(&graph, &c.to, &format!("the route out of `{from}`"));
                        let when = match (&c.when, last) {
                            (Some(w), _) => Load { refs, errors: &mut self.errors }
                                .condition(w, &format!("when_{from}_{k}"))
                                .map(|t| (t, w.value.clone())),
                            (None, false) => {
                                self.error(
                                    format!("route out of `{from}`: only the last case may leave out `when`"),
                                    self.at(&c.to),
                                );
                                None
                            }
                            (None, true) => None,
                        };
                        out.push(Case { when, to });
                    }
                    if cases.last().is_some_and(|c| c.when.is_some()) {
                        self.error(
                            format!("route out of `{from}`: the last case must have no `when` (it is the default)"),
                            at,
                        );
                    }
                    Route::Cases(out)
                }
                RouteDecl::Script(s) => {
                    let func = Load { refs, errors: &mut self.errors }.resolve(&s.func, None, 0);
                    let mut targets = Vec::new();
                    for t in &s.to {
                        targets.extend(self.targets(&graph, t, &format!("the route out of `{from}`")));
                    }
                    match func {
                        Some(func) => Route::Script { func, targets },
                        None => continue,
                    }
                }
            };
            graph.routes[i] = Some(route);
        }
        self.check_graph(&graph, g);
        Some(graph)
    }

    /// Parses `a -> b`, `a -> b, c` (fan-out) and `a, b -> c` (join).
    fn edge(&mut self, graph: &mut Graph, edge: &SpannedStr) {
        let at = self.at(edge);
        let Some((lhs, rhs)) = edge.value.split_once("->") else {
            self.error(format!("`{}` is not an edge; write `from -> to`", edge.value), at);
            return;
        };
        let from: Vec<&str> = lhs.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let what = format!("edge `{}`", edge.value.trim());
        let to = self.targets(graph, &Spanned::new(rhs.to_owned(), edge.referenced, edge.defined), &what);
        match from.as_slice() {
            [] => self.error(format!("`{}` has nothing before `->`", edge.value), at),
            ["START"] => graph.entry.extend(to),
            [one] => match graph.index.get(*one) {
                Some(&i) => graph.edges[i].extend(to),
                None if *one == "END" => self.error("no edge can leave END", at),
                None => self.error(
                    format!("edge `{}` leaves `{one}`, which is not a node ({})", edge.value.trim(), node_list(graph)),
                    self.at_token(edge, one),
                ),
            },
            many => {
                let mut ids = Vec::new();
                for name in many {
                    match graph.index.get(*name) {
                        Some(&i) => ids.push(i),
                        None => self.error(
                            format!(
                                "join `{}` waits for `{name}`, which is not a node ({})",
                                edge.value.trim(),
                                node_list(graph)
                            ),
                            self.at_token(edge, name),
                        ),
                    }
                }
                graph.joins.push(Join { from: ids, to });
            }
        }
    }

    /// Comma-separated node names (or END) as targets, reporting unknown ones with `what` (the
    /// edge or route they belong to). A bad target still counts as a way out, so one mistake is
    /// reported once.
    fn targets(&mut self, graph: &Graph, s: &SpannedStr, what: &str) -> Vec<Target> {
        let mut out = Vec::new();
        for name in s.value.split(',').map(str::trim) {
            match (name, graph.index.get(name)) {
                ("END", _) => out.push(Target::End),
                (_, Some(&i)) => out.push(Target::Node(i)),
                ("", _) => {
                    self.error(format!("{what} has an empty target"), self.at(s));
                    out.push(Target::End);
                }
                (_, None) => {
                    self.error(
                        format!("{what} goes to `{name}`, which is not a node ({})", node_list(graph)),
                        self.at_token(s, name),
                    );
                    out.push(Target::End);
                }
            }
        }
        out
    }

    fn check_graph(&mut self, graph: &Graph, g: &manifest::GraphDecl) {
        let graph_at = g.edges.first().map_or_else(|| Origin::file(&self.manifest_path), |e| self.at(e));
        if graph.entry.is_empty() {
            self.error("the graph has no entry: add an edge `START -> first_node`", graph_at);
            return;
        }
        let joined: HashSet<usize> = graph.joins.iter().flat_map(|j| j.from.iter().copied()).collect();
        for (i, node) in graph.nodes.iter().enumerate() {
            if graph.edges[i].is_empty() && graph.routes[i].is_none() && !joined.contains(&i) {
                self.error(
                    format!(
                        "node `{}` has no edge or route out; add `{} -> END` if it ends the turn",
                        node.name, node.name
                    ),
                    node.origin.clone(),
                );
            }
        }
        // Reachability from START.
        let mut seen = vec![false; graph.nodes.len()];
        let mut stack: Vec<usize> = graph.entry.iter().filter_map(node_of).collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            let mut next: Vec<Target> = graph.edges[i].clone();
            match &graph.routes[i] {
                Some(Route::Cases(cases)) => cases.iter().for_each(|c| next.extend(c.to.iter().copied())),
                Some(Route::Script { targets, .. }) => next.extend(targets.iter().copied()),
                None => {}
            }
            for j in graph.joins.iter().filter(|j| j.from.contains(&i)) {
                next.extend(j.to.iter().copied());
            }
            stack.extend(next.iter().filter_map(node_of));
        }
        for (i, node) in graph.nodes.iter().enumerate() {
            if !seen[i] {
                self.error(format!("node `{}` is never reached from START", node.name), node.origin.clone());
            }
        }
    }
}

fn node_of(t: &Target) -> Option<usize> {
    match t {
        Target::Node(i) => Some(*i),
        Target::End => None,
    }
}

fn node_list(graph: &Graph) -> String {
    let names: Vec<&str> = graph.nodes.iter().map(|n| &*n.name).collect();
    format!("nodes: {}", names.join(", "))
}

//! Running a turn over the graph: supersteps until END, every node's updates folded in through
//! the reducers, all of it undone if any node fails. What each node does is its kind's
//! (`kinds/`); this file runs the steps: every node of a step prepares, their waits happen
//! together, then each finishes, in declaration order.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use futures_util::stream::{self, StreamExt};
use rhai::{Array, Dynamic, Map};
use tracing::Instrument;

use super::env::Env;
use super::kinds::{Outcome, Work, updates_of};
use super::{Route, Target};
use crate::error::{Error, ErrorKind, Result};
use crate::event::{Event, Updates};
use crate::script::FnRef;
use crate::state::Undo;
use crate::store::{ResumePoint, Stop};
use crate::value;
use crate::vocab::Reducer;

/// Runs a pack's `init` script on a new session's state (turn 0), applies its updates and
/// returns them.
pub(crate) async fn init(env: &Env<'_>, f: &FnRef, state: &mut Dynamic) -> Result<Map> {
    let tag = crate::script::CallTag::new(env.turn.clone(), "init".into());
    let v = env.call_as(tag, f, state, Vec::new()).await?;
    let updates = updates_of(v, f)?;
    env.schema.check(&updates).map_err(|e| e.context("the init script"))?;
    env.schema.apply(state, &updates, &mut Undo::default())?;
    Ok(updates)
}

/// One turn of a graph, run a step at a time so the session can checkpoint between steps and
/// resume an interrupted turn where it stopped. It folds updates into the state and logs how to
/// undo them; committing or rolling back is the caller's.
pub(crate) struct Run<'a> {
    env: Env<'a>,
    active: Vec<usize>,
    join_seen: Vec<HashSet<usize>>,
    step: u32,
    /// Which nodes of earlier steps led to each active one (target, source): what its trace
    /// span says it ran after.
    led: Vec<(usize, usize)>,
    /// Where this turn's breakpoints hold it.
    breaks: Breaks,
    /// The turn was held before its next step and goes on now: that step runs.
    going_on: bool,
    /// A step has run since the turn started or went on (a *step* holds before the next one).
    ran: bool,
}

/// A turn's breakpoints, by node: before its step runs, after it ran.
#[derive(Debug, Clone, Default)]
pub(crate) struct Breaks {
    before: Vec<usize>,
    after: Vec<usize>,
    /// Hold before the next step once one has run.
    step: bool,
}

impl Breaks {
    /// The breakpoints named by node, before and after, and whether to hold after one step (each
    /// name checked against the graph: an unknown one is an input error naming it, with the
    /// nearest node's name).
    pub(crate) fn of(g: &super::Graph, before: &[String], after: &[String], step: bool) -> Result<Breaks> {
        let ids = |names: &[String]| -> Result<Vec<usize>> {
            names
                .iter()
                .map(|name| {
                    g.index.get(name.as_str()).copied().ok_or_else(|| {
                        let known = g.nodes.iter().map(|n| &*n.name);
                        let near = crate::script::lint::nearest(name, known.clone());
                        let all: Vec<&str> = known.collect();
                        Error::input(format!(
                            "a breakpoint names node `{name}`, which the graph does not have{} (nodes: {})",
                            crate::script::lint::did_you_mean(near),
                            all.join(", ")
                        ))
                    })
                })
                .collect()
        };
        Ok(Breaks { before: ids(before)?, after: ids(after)?, step })
    }
}

/// Where a step stopped the turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Halt {
    /// At a pause point of the pack, after this node: the next turn goes on from here.
    Paused(Arc<str>),
    /// At a breakpoint: the same turn goes on from here when resumed.
    Held(Stop),
}

/// What one step did.
pub(crate) struct StepDone {
    pub step: u32,
    /// Each node's updates, in the order they were folded in.
    pub updates: Vec<(Arc<str>, Updates)>,
    /// Where the turn stops here, if it does: a pause point of the pack (its `pause_after`
    /// condition held), or a breakpoint.
    pub halt: Option<Halt>,
}

impl<'a> Run<'a> {
    /// A turn from the graph's entry, or from `resume` (where an interrupted or held turn
    /// stopped, or a pause point), held at `breaks`.
    pub(crate) fn new(env: Env<'a>, resume: Option<&ResumePoint>, breaks: Breaks) -> Result<Self> {
        let g = env.graph;
        let mut run = Run {
            env,
            active: dedup(g.entry.iter().copied()),
            join_seen: vec![HashSet::new(); g.joins.len()],
            step: 0,
            led: Vec::new(),
            breaks,
            going_on: false,
            ran: false,
        };
        if let Some(point) = resume {
            run.restore(point)?;
        }
        Ok(run)
    }

    /// Runs the next step; `None` when the turn has reached END.
    pub(crate) async fn step(&mut self, state: &mut Dynamic, undo: &mut Undo) -> Result<Option<StepDone>> {
        let env = &self.env;
        let g = env.graph;
        if self.active.is_empty() {
            return Ok(None);
        }
        let stepped = self.breaks.step && self.ran;
        if !std::mem::take(&mut self.going_on)
            && let Some(&i) = self.active.iter().find(|i| stepped || self.breaks.before.contains(i))
        {
            // Held before the step: nothing of it has run.
            let stop = Stop::Before(g.nodes[i].name.to_string());
            self.emit_pause(&stop);
            return Ok(Some(StepDone { step: self.step, updates: Vec::new(), halt: Some(Halt::Held(stop)) }));
        }
        self.step += 1;
        self.ran = true;
        if self.step > g.recursion_limit {
            let names: Vec<&str> = self.active.iter().map(|i| &*g.nodes[*i].name).collect();
            return Err(Error::new(
                ErrorKind::Limit,
                format!(
                    "the graph did not reach END within {} steps (graph.recursion_limit); it was about to run {}",
                    g.recursion_limit,
                    names.join(", ")
                ),
            ));
        }
        let (results, spans) = run_step(env, self.step, &self.active, &self.led, state).await?;
        let updates = apply(env, self.step, &self.active, results, state, undo)?;
        let mut next = Vec::new();
        self.led.clear();
        // Which nodes led where is for the trace spans only: kept while someone traces.
        let traced = spans.iter().any(|s| !s.is_disabled());
        for (&i, span) in self.active.iter().zip(&spans) {
            let before = next.len();
            next.extend(g.edges[i].iter().copied());
            if let Some(route) = &g.routes[i] {
                let to = route_out(env, i, route, state).instrument(span.clone()).await?;
                let names: Vec<String> = to.iter().map(|t| g.target_name(*t).to_owned()).collect();
                if !span.is_disabled() {
                    span.record("route", names.join(","));
                }
                env.turn.emit(Event::Route { from: g.nodes[i].name.to_string(), to: names });
                next.extend(to);
            }
            if traced {
                self.led.extend(
                    next[before..].iter().filter_map(|t| if let Target::Node(t) = t { Some((*t, i)) } else { None }),
                );
            }
            for (k, join) in g.joins.iter().enumerate() {
                if join.from.contains(&i) {
                    self.join_seen[k].insert(i);
                    if self.join_seen[k].len() == join.from.len() {
                        self.join_seen[k].clear();
                        next.extend(join.to.iter().copied());
                        for t in join.to.iter().filter(|_| traced) {
                            if let Target::Node(t) = t {
                                self.led.extend(join.from.iter().map(|&f| (*t, f)));
                            }
                        }
                    }
                }
            }
        }
        let mut paused = None;
        for &i in &self.active {
            if let Some((test, text)) = &g.pauses[i] {
                let what = format!("pause condition `{text}`");
                if env.holds(i, test, &what, state).await.map_err(|e| e.in_node(&g.nodes[i].name))? {
                    paused = Some(g.nodes[i].name.clone());
                    break;
                }
            }
        }
        let held = self.active.iter().find(|i| self.breaks.after.contains(i)).map(|&i| g.nodes[i].name.clone());
        self.active = dedup(next.into_iter());
        if self.active.is_empty() {
            // Nothing is left to run: the turn ends here anyway.
            paused = None;
        }
        // The pack's own pause point ends the turn; a breakpoint after the same step holds it
        // otherwise (even at its end: the state before the turn is recorded).
        let halt = match (paused, held) {
            (Some(after), _) => Some(Halt::Paused(after)),
            (None, Some(after)) => Some(Halt::Held(Stop::After(after.to_string()))),
            (None, None) => None,
        };
        match &halt {
            Some(Halt::Paused(after)) => env.turn.emit(Event::Paused {
                before: None,
                after: Some(after.to_string()),
                next: self.next_names(),
                breakpoint: false,
            }),
            Some(Halt::Held(stop)) => self.emit_pause(stop),
            None => {}
        }
        Ok(Some(StepDone { step: self.step, updates, halt }))
    }

    /// The names of the nodes that run next.
    fn next_names(&self) -> Vec<String> {
        self.active.iter().map(|i| self.env.graph.nodes[*i].name.to_string()).collect()
    }

    /// Tells whoever watches that a breakpoint holds the turn at `stop`.
    fn emit_pause(&self, stop: &Stop) {
        let (before, after) = match stop {
            Stop::Before(n) => (Some(n.clone()), None),
            Stop::After(n) => (None, Some(n.clone())),
        };
        self.env.turn.emit(Event::Paused { before, after, next: self.next_names(), breakpoint: true });
    }

    /// Whether the turn has reached END.
    pub(crate) fn done(&self) -> bool {
        self.active.is_empty()
    }

    /// Where the turn goes on: the step reached, the nodes to run next, the joins half-met, and
    /// the position of the turn's randomness.
    pub(crate) fn resume_point(&self) -> ResumePoint {
        let g = self.env.graph;
        let names = |ids: &mut dyn Iterator<Item = usize>| -> Vec<String> {
            ids.map(|i| g.nodes[i].name.to_string()).collect()
        };
        ResumePoint {
            step: self.step,
            next: names(&mut self.active.iter().copied()),
            joins: self.join_seen.iter().map(|s| names(&mut s.iter().copied())).collect(),
            random: self.env.turn.random_position().to_string(),
            paused_after: None,
            held: None,
        }
    }

    fn restore(&mut self, point: &ResumePoint) -> Result<()> {
        let g = self.env.graph;
        let bad = |why: &str| Error::new(ErrorKind::Store, format!("cannot resume the interrupted turn: {why}"));
        let ids = |names: &[String]| -> Result<Vec<usize>> {
            names
                .iter()
                .map(|name| {
                    g.index.get(name).copied().ok_or_else(|| bad(&format!("node `{name}` is no longer in the graph")))
                })
                .collect()
        };
        self.active = ids(&point.next)?;
        if point.joins.len() != self.join_seen.len() {
            return Err(bad("the graph's joins changed"));
        }
        for (seen, names) in self.join_seen.iter_mut().zip(&point.joins) {
            *seen = ids(names)?.into_iter().collect();
        }
        if point.paused_after.is_some() {
            // A new turn going on from a pause: its own steps and randomness.
            return Ok(());
        }
        // A held turn goes on as if it had never stopped: the same steps and randomness, and
        // the step it was held before runs now.
        self.going_on = matches!(point.held, Some(Stop::Before(_)));
        self.step = point.step;
        let random = point.random.parse::<u128>().map_err(|_| bad("no random position"))?;
        self.env.turn.set_random_position(random);
        Ok(())
    }
}

/// Runs the nodes of one step and returns each one's updates (and time), in node order: each
/// prepares in turn, the waits of all of them happen together, then each finishes. Each node
/// runs in its trace span (`led` says which nodes led to it).
async fn run_step(
    env: &Env<'_>,
    step: u32,
    active: &[usize],
    led: &[(usize, usize)],
    state: &mut Dynamic,
) -> Result<(Vec<(Map, u64)>, Vec<tracing::Span>)> {
    let g = env.graph;
    let mut started = Vec::with_capacity(active.len());
    let mut work = Vec::with_capacity(active.len());
    let mut spans = Vec::with_capacity(active.len());
    for &i in active {
        env.turn.emit(Event::NodeStarted { node: g.nodes[i].name.to_string(), step });
        env.turn.node_started(&g.nodes[i].name, state);
        started.push(Instant::now());
        let span = node_span(env, i, step, led);
        let prepared = g.nodes[i].kind.prepare(env, i, state).result().instrument(span.clone()).await;
        spans.push(span);
        work.push(prepared.map_err(|e| e.in_node(&g.nodes[i].name))?);
    }
    let outcomes: Vec<Outcome> = if work.iter().all(|w| matches!(w, Work::Done(_))) {
        work.into_iter().map(|w| if let Work::Done(m) = w { Outcome::Done(m) } else { unreachable!() }).collect()
    } else {
        let snapshot = &*state;
        join_all(work.into_iter().zip(active).zip(&spans).map(|((w, &i), span)| {
            async move {
                match w {
                    Work::Done(m) => Outcome::Done(m),
                    Work::Ask(request) => Outcome::Reply(env.turn.ask(&g.nodes[i].name, request).await),
                    Work::Blocking(f, args) => Outcome::Script(env.call_blocking(i, f, snapshot, args).await),
                    Work::Many { requests, limit, items } => {
                        let name = &g.nodes[i].name;
                        let replies = stream::iter(requests.into_iter().enumerate())
                            .map(|(k, r)| async move { env.turn.ask(&format!("{name}[{k}]"), r).await })
                            .buffered(limit)
                            .collect()
                            .await;
                        Outcome::Many { replies, items }
                    }
                    Work::BlockingMany { f, limit, items } => {
                        let name = &g.nodes[i].name;
                        let results = stream::iter(items.into_iter().enumerate())
                            .map(|(k, item)| {
                                let tag = crate::script::CallTag::new(env.turn.clone(), format!("{name}[{k}]").into());
                                env.call_blocking_as(tag, f.clone(), snapshot, vec![item])
                            })
                            .buffered(limit)
                            .collect()
                            .await;
                        Outcome::Scripts(results)
                    }
                }
            }
            .instrument(span.clone())
        }))
        .await
    };
    let mut out = Vec::with_capacity(active.len());
    for (((&i, outcome), start), span) in active.iter().zip(outcomes).zip(started).zip(&spans) {
        let node = &g.nodes[i];
        let finished = node.kind.finish(env, i, outcome, state).result().instrument(span.clone()).await;
        let updates = finished.map_err(|e| e.in_node(&node.name))?;
        out.push((updates, start.elapsed().as_micros() as u64));
    }
    Ok((out, spans))
}

/// The trace span of node `i` in `step`: its name and kind, and the nodes that led to it.
fn node_span(env: &Env<'_>, i: usize, step: u32, led: &[(usize, usize)]) -> tracing::Span {
    let g = env.graph;
    let node = &g.nodes[i];
    let span = tracing::info_span!(
        "node",
        otel.name = tracing::field::Empty,
        node = %node.name,
        step = i64::from(step),
        kind = tracing::field::Empty,
        after = tracing::field::Empty,
        route = tracing::field::Empty,
        openinference.span.kind = "CHAIN",
    );
    if !span.is_disabled() {
        let (kind, _) = node.kind.describe();
        let after: Vec<&str> = led.iter().filter(|(t, _)| *t == i).map(|(_, f)| &*g.nodes[*f].name).collect();
        span.record("otel.name", format!("node {}", node.name));
        span.record("kind", kind);
        span.record("after", after.join(","));
    }
    span
}

/// Folds each node's updates into the state (in node order), logging how to undo them; two nodes
/// of a step may not both replace one field.
fn apply(
    env: &Env<'_>,
    step: u32,
    active: &[usize],
    updates: Vec<(Map, u64)>,
    state: &mut Dynamic,
    undo: &mut Undo,
) -> Result<Vec<(Arc<str>, Updates)>> {
    let g = env.graph;
    let schema = env.schema;
    if active.len() > 1 {
        // Two nodes of one step replacing the same field would race; reducers merge, replace cannot.
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for (&i, (m, _)) in active.iter().zip(&updates) {
            for k in m.keys() {
                let replaces = schema.fields.get(k.as_str()).is_some_and(|f| f.reducer == Reducer::Replace);
                if let Some((_, other)) = seen.iter().find(|(f, _)| *f == k.as_str()).filter(|_| replaces) {
                    return Err(Error::new(
                        ErrorKind::Script,
                        format!(
                            "nodes `{other}` and `{}` both set `{k}` in step {step}; give `{k}` a reducer (append, union, merge, add) or set it in one node",
                            g.nodes[i].name
                        ),
                    ));
                }
                seen.push((k.as_str(), &g.nodes[i].name));
            }
        }
    }
    let mut applied = Vec::with_capacity(active.len());
    for (&i, (m, duration_us)) in active.iter().zip(updates) {
        let name = &g.nodes[i].name;
        schema.check(&m).map_err(|e| e.in_node(name))?;
        schema.apply(state, &m, undo).map_err(|e| e.in_node(name))?;
        let m = Updates(Arc::new(m));
        env.turn.emit(Event::NodeFinished { node: name.to_string(), step, duration_us, updates: m.clone() });
        applied.push((name.clone(), m));
    }
    Ok(applied)
}

/// Where a route out of node `i` leads.
async fn route_out(env: &Env<'_>, i: usize, route: &Route, state: &mut Dynamic) -> Result<Vec<Target>> {
    let g = env.graph;
    let node = &g.nodes[i].name;
    match route {
        Route::Cases(cases) => {
            for case in cases {
                let Some((test, text)) = &case.when else {
                    return Ok(case.to.clone());
                };
                let what = format!("route condition `{text}`");
                if env.holds(i, test, &what, state).await.map_err(|e| e.in_node(node))? {
                    return Ok(case.to.clone());
                }
            }
            Ok(vec![Target::End])
        }
        Route::Script { func, targets } => {
            let v = env.call(i, func, state, Vec::new()).await.map_err(|e| e.in_node(node))?;
            let names: Vec<String> = if v.is_array() {
                v.cast::<Array>().into_iter().map(|x| x.to_string()).collect()
            } else if v.is_string() {
                vec![v.to_string()]
            } else {
                return Err(Error::new(
                    ErrorKind::Script,
                    format!(
                        "route {} returned {}; it must return a node name, END, or a list of them",
                        func.display(),
                        value::type_of(&v)
                    ),
                )
                .in_node(node));
            };
            names
                .iter()
                .map(|n| {
                    targets.iter().copied().find(|t| g.target_name(*t) == n).ok_or_else(|| {
                        let allowed: Vec<&str> = targets.iter().map(|t| g.target_name(*t)).collect();
                        Error::new(
                            ErrorKind::Script,
                            format!(
                                "route {} returned `{n}`, which its `to:` does not list ({})",
                                func.display(),
                                allowed.join(", ")
                            ),
                        )
                        .in_node(node)
                    })
                })
                .collect()
        }
    }
}

/// Node ids of `targets`, without END and without repeats, in first-seen order.
fn dedup(targets: impl Iterator<Item = Target>) -> Vec<usize> {
    let mut out = Vec::new();
    for t in targets {
        if let Target::Node(i) = t
            && !out.contains(&i)
        {
            out.push(i);
        }
    }
    out
}

//! Running a turn over the graph: supersteps until END, every node's updates folded in through
//! the reducers, all of it undone if any node fails.
//!
//! A node runs in three phases so that the model calls of a fan-out wait together: a synchronous
//! *prepare* (scripts, templates, with the state bound by reference), the asynchronous *work*
//! (model calls, scripts that call models on a blocking thread), and a synchronous *finish*
//! (parsing the reply, the `then` or `fallback` script).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use rhai::{Array, Dynamic, Map};
use serde_json::{Value as Json, json};

use super::{History, LlmNode, NodeKind, Route, Target, Test, Then};
use crate::error::{Error, ErrorKind, Result};
use crate::event::{Event, Updates};
use crate::llm::{EmbedRequest, LlmRequest, LlmResponse, Message};
use crate::native::{NativeNodes, NodeContext};
use crate::pack::Pack;
use crate::pack::manifest::ParseMode;
use crate::script::{CallTag, FnRef, allow_blocking};
use crate::select::Similarity;
use crate::state::Undo;
use crate::text::Embeddings;
use crate::turn::TurnCtx;
use crate::value;

/// Runs a pack's `init` script on a new session's state (turn 0), applies its updates and
/// returns them.
pub(crate) async fn init(pack: &Arc<Pack>, f: &FnRef, turn: &Arc<TurnCtx>, state: &mut Dynamic) -> Result<Map> {
    let natives = NativeNodes::default();
    let runner = Runner { pack, natives: &natives, turn };
    let tag = CallTag::new(turn.clone(), "init".into());
    let v = runner.call_as(tag, f, state, Vec::new()).await?;
    let updates = updates_of(v, &f.display())?;
    pack.schema.check(&updates).map_err(|e| e.context("the init script"))?;
    pack.schema.apply(state, &updates, &mut Undo::default())?;
    Ok(updates)
}

/// One turn of a graph, run a step at a time so the session can checkpoint between steps and
/// resume an interrupted turn where it stopped. It folds updates into the state and logs how to
/// undo them; committing or rolling back is the caller's.
pub(crate) struct Run<'a> {
    runner: Runner<'a>,
    active: Vec<usize>,
    join_seen: Vec<HashSet<usize>>,
    step: u32,
}

/// What one step did.
pub(crate) struct StepDone {
    pub step: u32,
    /// Each node's updates, in the order they were folded in.
    pub updates: Vec<(Arc<str>, Updates)>,
}

impl<'a> Run<'a> {
    /// A turn from the graph's entry, or from `resume` (where an interrupted turn stopped).
    pub fn new(
        pack: &'a Arc<Pack>,
        natives: &'a NativeNodes,
        turn: &'a Arc<TurnCtx>,
        resume: Option<&Json>,
    ) -> Result<Self> {
        let g = &pack.graph;
        let mut run = Run {
            runner: Runner { pack, natives, turn },
            active: dedup(g.entry.iter().copied()),
            join_seen: vec![HashSet::new(); g.joins.len()],
            step: 0,
        };
        if let Some(point) = resume {
            run.restore(point)?;
        }
        Ok(run)
    }

    /// Runs the next step; `None` when the turn has reached END.
    pub async fn step(&mut self, state: &mut Dynamic, undo: &mut Undo) -> Result<Option<StepDone>> {
        let r = &self.runner;
        let g = &r.pack.graph;
        if self.active.is_empty() {
            return Ok(None);
        }
        self.step += 1;
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
        let results = r.step(self.step, &self.active, state).await?;
        let updates = r.apply(self.step, &self.active, results, state, undo)?;
        let mut next = Vec::new();
        for &i in &self.active {
            next.extend(g.edges[i].iter().copied());
            if let Some(route) = &g.routes[i] {
                let to = r.route(i, route, state).await?;
                r.turn.emit(Event::Route {
                    from: g.nodes[i].name.to_string(),
                    to: to.iter().map(|t| g.target_name(*t).to_owned()).collect(),
                });
                next.extend(to);
            }
            for (k, join) in g.joins.iter().enumerate() {
                if join.from.contains(&i) {
                    self.join_seen[k].insert(i);
                    if self.join_seen[k].len() == join.from.len() {
                        self.join_seen[k].clear();
                        next.extend(join.to.iter().copied());
                    }
                }
            }
        }
        self.active = dedup(next.into_iter());
        Ok(Some(StepDone { step: self.step, updates }))
    }

    /// Whether the turn has reached END.
    pub fn done(&self) -> bool {
        self.active.is_empty()
    }

    /// Where the turn goes on: the step reached, the nodes to run next, the joins half-met, and
    /// the position of the turn's randomness.
    pub fn resume_point(&self) -> Json {
        let g = &self.runner.pack.graph;
        let names = |ids: &mut dyn Iterator<Item = usize>| -> Vec<Json> {
            ids.map(|i| Json::from(&*g.nodes[i].name)).collect()
        };
        serde_json::json!({
            "step": self.step,
            "next": names(&mut self.active.iter().copied()),
            "joins": self.join_seen.iter().map(|s| names(&mut s.iter().copied())).collect::<Vec<_>>(),
            "random": self.runner.turn.random_position().to_string(),
        })
    }

    fn restore(&mut self, point: &Json) -> Result<()> {
        let g = &self.runner.pack.graph;
        let bad = |why: &str| Error::new(ErrorKind::Store, format!("cannot resume the interrupted turn: {why}"));
        let ids = |v: &Json| -> Result<Vec<usize>> {
            let list = v.as_array().ok_or_else(|| bad("a node list is not a list"))?;
            list.iter()
                .map(|n| {
                    let name = n.as_str().unwrap_or_default();
                    g.index.get(name).copied().ok_or_else(|| bad(&format!("node `{name}` is no longer in the graph")))
                })
                .collect()
        };
        self.step = point["step"].as_u64().ok_or_else(|| bad("no step"))? as u32;
        self.active = ids(&point["next"])?;
        let joins = point["joins"].as_array().ok_or_else(|| bad("no joins"))?;
        if joins.len() != self.join_seen.len() {
            return Err(bad("the graph's joins changed"));
        }
        for (seen, v) in self.join_seen.iter_mut().zip(joins) {
            *seen = ids(v)?.into_iter().collect();
        }
        let random =
            point["random"].as_str().and_then(|r| r.parse::<u128>().ok()).ok_or_else(|| bad("no random position"))?;
        self.runner.turn.set_random_position(random);
        Ok(())
    }
}

struct Runner<'a> {
    pack: &'a Arc<Pack>,
    natives: &'a NativeNodes,
    turn: &'a Arc<TurnCtx>,
}

/// What a node still has to do after its synchronous part.
enum Work {
    Done(Map),
    Ask(LlmRequest),
    Blocking(FnRef, Vec<Dynamic>),
}

/// What the asynchronous part produced.
enum Outcome {
    Done(Map),
    Reply(Result<LlmResponse>),
    Script(Result<Dynamic>),
}

impl Runner<'_> {
    fn tag(&self, node: usize) -> CallTag {
        CallTag::new(self.turn.clone(), self.pack.graph.nodes[node].name.clone())
    }

    /// Calls a script synchronously, or on a blocking thread when it may call a model.
    async fn call(&self, node: usize, f: &FnRef, state: &mut Dynamic, args: Vec<Dynamic>) -> Result<Dynamic> {
        self.call_as(self.tag(node), f, state, args).await
    }

    async fn call_as(&self, tag: CallTag, f: &FnRef, state: &mut Dynamic, args: Vec<Dynamic>) -> Result<Dynamic> {
        if f.calls_models() {
            return self.call_blocking_as(tag, f.clone(), state.clone(), args).await;
        }
        self.pack.sandbox.call(f, state, args, Some(tag))
    }

    async fn call_blocking(&self, node: usize, f: FnRef, state: Dynamic, args: Vec<Dynamic>) -> Result<Dynamic> {
        self.call_blocking_as(self.tag(node), f, state, args).await
    }

    async fn call_blocking_as(
        &self,
        tag: CallTag,
        f: FnRef,
        mut state: Dynamic,
        args: Vec<Dynamic>,
    ) -> Result<Dynamic> {
        let pack = self.pack.clone();
        tokio::task::spawn_blocking(move || allow_blocking(|| pack.sandbox.call(&f, &mut state, args, Some(tag))))
            .await
            .map_err(|e| Error::internal(format!("a script thread failed: {e}")))?
    }

    /// Runs the nodes of one step and returns each one's updates, in node order.
    async fn step(&self, step: u32, active: &[usize], state: &mut Dynamic) -> Result<Vec<(Map, u64)>> {
        let g = &self.pack.graph;
        let mut started = Vec::with_capacity(active.len());
        let mut work = Vec::with_capacity(active.len());
        for &i in active {
            self.turn.emit(Event::NodeStarted { node: g.nodes[i].name.to_string(), step });
            started.push(Instant::now());
            work.push(self.prepare(i, state).await.map_err(|e| e.in_node(&g.nodes[i].name))?);
        }
        let outcomes: Vec<Outcome> = if work.iter().all(|w| matches!(w, Work::Done(_))) {
            work.into_iter().map(|w| if let Work::Done(m) = w { Outcome::Done(m) } else { unreachable!() }).collect()
        } else {
            let snapshot = &*state;
            join_all(work.into_iter().zip(active).map(|(w, &i)| async move {
                match w {
                    Work::Done(m) => Outcome::Done(m),
                    Work::Ask(request) => Outcome::Reply(self.turn.ask(&g.nodes[i].name, request).await),
                    Work::Blocking(f, args) => Outcome::Script(self.call_blocking(i, f, snapshot.clone(), args).await),
                }
            }))
            .await
        };
        let mut out = Vec::with_capacity(active.len());
        for ((&i, outcome), start) in active.iter().zip(outcomes).zip(started) {
            let updates = self.finish(i, outcome, state).await.map_err(|e| e.in_node(&g.nodes[i].name))?;
            out.push((updates, start.elapsed().as_micros() as u64));
        }
        Ok(out)
    }

    async fn prepare(&self, i: usize, state: &mut Dynamic) -> Result<Work> {
        match &self.pack.graph.nodes[i].kind {
            NodeKind::Script(f) if f.calls_models() => Ok(Work::Blocking(f.clone(), Vec::new())),
            NodeKind::Script(f) => {
                let r = self.pack.sandbox.call(f, state, (), Some(self.tag(i)))?;
                Ok(Work::Done(updates_of(r, &f.display())?))
            }
            NodeKind::Native(name) => {
                let node = self.natives.get(name).ok_or_else(|| {
                    Error::new(ErrorKind::Internal, format!("native node `{name}` is not registered"))
                })?;
                let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
                let ctx = NodeContext { state: &map, input: &self.turn.input, options: &self.turn.options };
                Ok(Work::Done(node.run(&ctx)?))
            }
            NodeKind::Llm(l) => Ok(Work::Ask(self.request(i, l, state).await?)),
            NodeKind::Select(selector, into) => {
                let candidates = selector.candidates(&mut self.selection(i, state, None))?;
                let (embeddings, mut similarity) = match &selector.similarity {
                    Some(sim) if self.embeds(i, &selector.name, sim, state).await? => {
                        let texts = selector.texts_to_embed(&candidates, state);
                        self.embed(i, sim, texts).await
                    }
                    // Not asked for: no `why`.
                    _ => (None, json!({"kind": "lexical"})),
                };
                let mut decision = selector.decide(candidates, &mut self.selection(i, state, embeddings.clone()))?;
                if let Some(e) = embeddings {
                    similarity["compared_by_words"] = json!(e.compared_by_words());
                }
                decision.breakdown["similarity"] = similarity;
                self.turn.emit(Event::Decision {
                    node: self.pack.graph.nodes[i].name.to_string(),
                    breakdown: decision.breakdown,
                });
                let mut updates = Map::new();
                updates.insert(into.as_str().into(), Dynamic::from_map(decision.winner));
                Ok(Work::Done(updates))
            }
        }
    }

    fn selection<'s>(
        &'s self,
        i: usize,
        state: &'s mut Dynamic,
        embeddings: Option<Arc<Embeddings>>,
    ) -> crate::select::Run<'s> {
        let mut tag = self.tag(i);
        tag.embeddings = embeddings;
        crate::select::Run {
            sandbox: &self.pack.sandbox,
            natives: self.natives,
            state,
            tag,
            turns_done: self.turn.turn.saturating_sub(1),
            force: None,
            pack_params: &self.pack.params,
        }
    }

    /// Embeds a selection's texts; on failure (or with nothing to embed) scorers compare words.
    /// Returns the vectors and what the breakdown says of them.
    async fn embed(&self, i: usize, sim: &Similarity, texts: Vec<String>) -> (Option<Arc<Embeddings>>, Json) {
        if texts.is_empty() {
            return (None, json!({"kind": "lexical", "why": "nothing to embed"}));
        }
        // The loader refused packs whose profile is missing; a lookup still costs nothing.
        let model = match self.pack.profiles.get(sim.profile.as_str()).map(|p| p.model(&self.turn.options)) {
            Some(Ok(m)) => m.to_owned(),
            Some(Err(e)) => return (None, json!({"kind": "lexical", "why": e.detail()})),
            None => return (None, json!({"kind": "lexical", "why": format!("no llm profile `{}`", sim.profile)})),
        };
        let request = EmbedRequest { profile: sim.profile.clone(), model, texts };
        match self.turn.embed(&self.pack.graph.nodes[i].name, &request).await {
            Ok(r) if r.vectors.len() == request.texts.len() => {
                let mut e = Embeddings::new(r.model.clone());
                for (text, vector) in request.texts.into_iter().zip(r.vectors) {
                    e.insert(text, vector);
                }
                let note = json!({"kind": "embedding", "model": r.model, "texts": e.len(), "cached": r.cached});
                (Some(Arc::new(e)), note)
            }
            Ok(r) => {
                let why = format!("{} texts sent, {} vectors back", request.texts.len(), r.vectors.len());
                (None, json!({"kind": "lexical", "why": why}))
            }
            Err(e) => {
                tracing::warn!(node = %self.pack.graph.nodes[i].name, error = %e, "embeddings failed; comparing words");
                (None, json!({"kind": "lexical", "why": e.detail()}))
            }
        }
    }

    /// Whether a selector's `similarity:` applies now (its `when`, if any, holds).
    async fn embeds(&self, i: usize, selector: &str, sim: &Similarity, state: &mut Dynamic) -> Result<bool> {
        match &sim.when {
            None => Ok(true),
            Some((test, text)) => {
                let what = format!("selector `{selector}`: similarity.when `{text}`");
                self.holds(i, test, &what, state).await
            }
        }
    }

    /// Whether a condition holds; `what` names it in the error when it is not a bool.
    async fn holds(&self, i: usize, test: &Test, what: &str, state: &mut Dynamic) -> Result<bool> {
        let v = match test {
            Test::Flag { field, negate } => {
                let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
                let flag = map.get(field.as_str()).and_then(|v| v.as_bool().ok()).unwrap_or(false);
                return Ok(flag != *negate);
            }
            Test::Script(f) => self.call(i, f, state, Vec::new()).await.map_err(|e| e.context(what))?,
        };
        v.as_bool().map_err(|_| {
            let e =
                Error::new(ErrorKind::Script, format!("{what} gave {}; it must be true or false", value::type_of(&v)));
            match test {
                Test::Script(f) => e.at(f.file.fn_origin(&f.name)),
                Test::Flag { .. } => e,
            }
        })
    }

    async fn request(&self, i: usize, l: &LlmNode, state: &mut Dynamic) -> Result<LlmRequest> {
        let vars = match &l.vars {
            Some(f) => {
                let v = self.call(i, f, state, Vec::new()).await?;
                if !v.is_map() {
                    return Err(Error::new(
                        ErrorKind::Script,
                        format!("{} returned {}; vars must be a map", f.display(), value::type_of(&v)),
                    ));
                }
                Some(v.cast::<Map>())
            }
            None => None,
        };
        let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
        let prompts = &self.pack.prompts;
        let mut messages = Vec::new();
        if let Some(t) = &l.system {
            messages.push(Message::new(
                "system",
                prompts.render(t, &map, &self.turn.options, &self.turn.input, vars.as_ref())?,
            ));
        }
        if let Some(h) = &l.history {
            messages.extend(history(&map, h)?);
        }
        if let Some(t) = &l.prompt {
            messages.push(Message::new(
                "user",
                prompts.render(t, &map, &self.turn.options, &self.turn.input, vars.as_ref())?,
            ));
        }
        let profile = &self.pack.profiles[l.profile.as_str()];
        profile.request(&self.turn.options, messages)
    }

    async fn finish(&self, i: usize, outcome: Outcome, state: &mut Dynamic) -> Result<Map> {
        let node = &self.pack.graph.nodes[i];
        match (outcome, &node.kind) {
            (Outcome::Done(m), _) => Ok(m),
            (Outcome::Script(r), NodeKind::Script(f)) => updates_of(r?, &f.display()),
            (Outcome::Reply(reply), NodeKind::Llm(l)) => {
                let why = match reply {
                    Err(e) => e.detail().to_owned(),
                    Ok(resp) if resp.content.len() > self.pack.limits.max_string_size => format!(
                        "the reply is {} bytes, more than a script may hold (limits.max_string_size {})",
                        resp.content.len(),
                        self.pack.limits.max_string_size
                    ),
                    Ok(resp) => {
                        let parsed = match l.parse {
                            ParseMode::Text => Ok(Dynamic::from(resp.content)),
                            ParseMode::Json => value::parse_json_reply(&resp.content).map(|v| value::from_json(&v)),
                        };
                        match (parsed, &l.then) {
                            (Err(why), _) => why,
                            (Ok(reply), Then::Field(field)) => {
                                let mut m = Map::new();
                                m.insert(field.as_str().into(), reply);
                                return Ok(m);
                            }
                            (Ok(reply), Then::Script(f)) => {
                                match self
                                    .call(i, f, state, vec![reply])
                                    .await
                                    .and_then(|r| updates_of(r, &f.display()))
                                {
                                    Ok(m) => return Ok(m),
                                    // `then` could not read the reply (it threw, or the reply made it
                                    // hit a limit): the fallback scores instead.
                                    Err(e)
                                        if matches!(e.kind(), ErrorKind::Script | ErrorKind::Limit)
                                            && l.fallback.is_some() =>
                                    {
                                        e.to_string()
                                    }
                                    Err(e) => return Err(e),
                                }
                            }
                        }
                    }
                };
                let Some(fallback) = &l.fallback else {
                    return Err(Error::new(ErrorKind::Llm, why));
                };
                self.turn.emit(Event::Log {
                    node: node.name.to_string(),
                    level: "warn".into(),
                    message: format!("falling back to {}: {why}", fallback.display()),
                });
                let r = self.call(i, fallback, state, vec![Dynamic::from(why)]).await?;
                updates_of(r, &fallback.display())
            }
            _ => Err(Error::internal("a node's work and kind do not match")),
        }
    }

    fn apply(
        &self,
        step: u32,
        active: &[usize],
        updates: Vec<(Map, u64)>,
        state: &mut Dynamic,
        undo: &mut Undo,
    ) -> Result<Vec<(Arc<str>, Updates)>> {
        let g = &self.pack.graph;
        let schema = &self.pack.schema;
        if active.len() > 1 {
            // Two nodes of one step replacing the same field would race; reducers merge, replace cannot.
            let mut seen: Vec<(&str, &str)> = Vec::new();
            for (&i, (m, _)) in active.iter().zip(&updates) {
                for k in m.keys() {
                    let replaces =
                        schema.fields.get(k.as_str()).is_some_and(|f| f.reducer == crate::pack::Reducer::Replace);
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
            self.turn.emit(Event::NodeFinished { node: name.to_string(), step, duration_us, updates: m.clone() });
            applied.push((name.clone(), m));
        }
        Ok(applied)
    }

    async fn route(&self, i: usize, route: &Route, state: &mut Dynamic) -> Result<Vec<Target>> {
        let g = &self.pack.graph;
        let node = &g.nodes[i].name;
        match route {
            Route::Cases(cases) => {
                for case in cases {
                    let Some((test, text)) = &case.when else {
                        return Ok(case.to.clone());
                    };
                    let what = format!("route condition `{text}`");
                    if self.holds(i, test, &what, state).await.map_err(|e| e.in_node(node))? {
                        return Ok(case.to.clone());
                    }
                }
                Ok(vec![Target::End])
            }
            Route::Script { func, targets } => {
                let v = self.call(i, func, state, Vec::new()).await.map_err(|e| e.in_node(node))?;
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
}

/// A node's return value as updates: a map, or nothing.
fn updates_of(v: Dynamic, what: &str) -> Result<Map> {
    if v.is_unit() {
        Ok(Map::new())
    } else if v.is_map() {
        Ok(v.cast::<Map>())
    } else {
        Err(Error::new(
            ErrorKind::Script,
            format!("{what} returned {}; a node returns a map of updates (or nothing)", value::type_of(&v)),
        ))
    }
}

/// The chat messages of a history window: the last N items, roles mapped, empty ones dropped.
fn history(state: &Map, h: &History) -> Result<Vec<Message>> {
    let Some(items) = state.get(h.field.as_str()).and_then(|v| v.read_lock::<Array>()) else {
        return Ok(Vec::new());
    };
    let from = h.last.map_or(0, |n| items.len().saturating_sub(n));
    let mut out = Vec::new();
    for (k, item) in items[from..].iter().enumerate() {
        let map = item.read_lock::<Map>().ok_or_else(|| {
            Error::new(
                ErrorKind::Script,
                format!("item {} of `{}` is {}, not a {{role, content}} map", from + k, h.field, value::type_of(item)),
            )
        })?;
        let (Some(role), Some(content)) = (map.get("role"), map.get("content")) else {
            return Err(Error::new(
                ErrorKind::Script,
                format!("item {} of `{}` lacks `role` or `content`", from + k, h.field),
            ));
        };
        let content = content.to_string();
        if content.trim().is_empty() {
            continue;
        }
        let role = role.to_string();
        let role = h.roles.iter().find(|(from, _)| *from == role).map_or(role, |(_, to)| to.clone());
        out.push(Message::new(role, content));
    }
    Ok(out)
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

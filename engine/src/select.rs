//! The scoring pipeline: a two-tier selector any pack can declare under `selectors:`
//! and run with a `select:` node.
//!
//! Every enabled strategy is a candidate once per focus its generator makes. Tier 1 (vetoes)
//! rejects a candidate at the first veto; tier 2 sums `weight × raw score` (raw in [0, 2], 1.0
//! neutral) and multiplies by the phase's multiplier for the strategy (1.0 when the phase does not
//! name it). The highest final score wins; ties go to the candidate generated first. Every
//! decision is explained: each candidate's vetoes with their reasons, or each scorer's raw score,
//! weight, contribution, reasoning and signals, in an [`Event::Decision`](crate::Event).
//!
//! A selector with `similarity:` embeds every focus description and the texts it names before
//! scoring (one call to the pack's embedding profile; the provider caches), so the `similarity`
//! host function and [`ScorerContext::similarity`] compare meanings while its scorers run. When
//! the condition is off or the call fails, they compare words, and the breakdown says which.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexSet;
use rhai::{Dynamic, ImmutableString, Map};

use crate::error::{Error, ErrorKind, Result};
use crate::event::{Breakdown, Score, SimilarityNote, VetoCheck};
use crate::native::{FocusContext, NativeNodes, NativeScorer, ScorerContext, ScorerOutput};
use crate::script::{CallTag, Condition, FnRef, Sandbox};
use crate::value;
pub(crate) use crate::vocab::ScorerImpl;

/// A compiled selector.
#[derive(Debug)]
pub(crate) struct Selector {
    pub name: String,
    /// (phase, how many turns it lasts; `None` for the rest).
    pub phases: Vec<(String, Option<u64>)>,
    pub turn_field: Option<String>,
    pub strategies: Vec<Strategy>,
    /// phase → strategy id → multiplier.
    pub profiles: HashMap<String, HashMap<String, f64>>,
    pub vetoes: Vec<Scorer>,
    pub scorers: Vec<Scorer>,
    pub similarity: Option<Similarity>,
    /// The strategy (an index into `strategies`) that answers when every candidate is vetoed.
    pub fallback: Option<usize>,
}

/// Embeddings made before scoring, so `similarity` compares meanings.
#[derive(Debug)]
pub(crate) struct Similarity {
    /// The llm profile whose model embeds.
    pub profile: String,
    /// State fields whose texts get vectors beside the focus descriptions.
    pub texts: Vec<String>,
    /// Only the last items of list fields.
    pub last: Option<usize>,
    /// When to embed (always when `None`), with the condition as written.
    pub when: Option<(Condition, String)>,
}

/// A strategy: its manifest entry as a map scripts see, and how its focuses are made.
#[derive(Debug)]
pub(crate) struct Strategy {
    pub id: ImmutableString,
    pub info: Map,
    pub focus: Focus,
    /// The generator's native twin, when the host registered it.
    pub native: Option<String>,
    /// Which of the two runs where both are there, unless a run forces one (the selector's `impl`).
    pub uses: ScorerImpl,
}

/// How a strategy's focuses are made.
#[derive(Debug)]
pub(crate) enum Focus {
    /// One focus on nothing in particular.
    Open,
    /// `fn(strategy) -> [focus]`, with the state as `this`.
    Script(FnRef),
}

/// A scorer as the selector runs it.
#[derive(Debug)]
pub(crate) struct Scorer {
    pub id: String,
    /// Tier 2 (a weight and a raw score) rather than tier 1 (a veto).
    pub weighted: bool,
    pub weight: f64,
    pub params: Map,
    /// `params` as scripts get it: shared and read-only, so passing it copies nothing.
    pub shared_params: Dynamic,
    pub script: Option<FnRef>,
    /// The script takes every candidate in one call (`fn(candidates, params)` → a list).
    pub batch: bool,
    pub native: Option<String>,
    pub uses: ScorerImpl,
}

/// One candidate and what the scorers said of it.
struct Candidate {
    strategy: usize,
    focus: Map,
    vetoes: Vec<VetoCheck>,
    vetoed: bool,
    scores: Vec<Score>,
    sum: f64,
    multiplier: f64,
    total: f64,
}

impl Candidate {
    fn new(strategy: usize, focus: Map, multiplier: f64) -> Self {
        Candidate {
            strategy,
            focus,
            vetoes: Vec::new(),
            vetoed: false,
            scores: Vec::new(),
            sum: 0.0,
            multiplier,
            total: 0.0,
        }
    }
}

/// Which candidate a scorer is asked about, and when.
#[derive(Clone, Copy)]
struct At<'a> {
    pub strategy: &'a Map,
    pub focus: &'a Map,
    pub phase: &'a str,
    pub count: i64,
}

/// A selection's candidates, before they are scored.
pub(crate) struct Candidates {
    count: i64,
    phase: String,
    list: Vec<Candidate>,
    /// Strategies the phase turns off (multiplier 0).
    unavailable: Vec<String>,
}

/// What a selection decided.
pub(crate) struct Decision {
    /// The winner as the `into` field holds it: `#{strategy, focus, score, final_score, phase, fallback}`
    /// (`final_score` the same as `score`: the scorers' weighted sum times the phase's multiplier), or an empty
    /// map when every candidate was vetoed.
    pub winner: Map,
    /// The full breakdown, for the event.
    pub breakdown: Breakdown,
}

/// What a selection runs with.
pub(crate) struct Run<'a> {
    pub sandbox: &'a Sandbox,
    pub natives: &'a NativeNodes,
    pub state: &'a mut Dynamic,
    /// Scripts' tag; carries the vectors for `similarity` when the selector made them.
    pub tag: CallTag,
    /// The turns done before this one (the default turn count).
    pub turns_done: u64,
    /// Overrides every scorer's implementation (benchmarks compare the two on the same pack).
    pub force: Option<ScorerImpl>,
    /// The pack's params, for native scorers.
    pub pack_params: &'a Map,
}

impl Selector {
    /// The phase a turn count falls in.
    pub(crate) fn phase(&self, count: i64) -> &str {
        let mut end: i64 = 0;
        for (name, turns) in &self.phases {
            match turns {
                Some(t) => {
                    end = end.saturating_add(*t as i64);
                    if count < end {
                        return name;
                    }
                }
                None => return name,
            }
        }
        self.phases.last().map_or("", |(n, _)| n)
    }

    /// The turn count that picks the phase: the `turn_field`, or the turns done.
    pub(crate) fn turn_count(&self, run: &Run<'_>) -> i64 {
        let field = |f: &String| run.state.read_lock::<Map>()?.get(f.as_str())?.as_int().ok();
        match &self.turn_field {
            Some(f) => field(f).unwrap_or(0),
            None => run.turns_done as i64,
        }
    }

    /// Runs the selection over the state: [`Selector::candidates`], then [`Selector::decide`].
    pub(crate) fn select(&self, run: &mut Run<'_>) -> Result<Decision> {
        let candidates = self.candidates(run)?;
        self.decide(candidates, run)
    }

    /// Every enabled strategy once per focus its generator makes, with its phase multiplier. A
    /// multiplier of 0 makes a strategy unavailable in that phase: it makes no candidate (the
    /// phases are the one place that says which strategies a turn may use).
    pub(crate) fn candidates(&self, run: &mut Run<'_>) -> Result<Candidates> {
        let count = self.turn_count(run);
        let phase = self.phase(count).to_owned();
        let profile = self.profiles.get(&phase);
        let mut candidates = Vec::new();
        let mut unavailable = Vec::new();
        for (i, s) in self.strategies.iter().enumerate() {
            let multiplier = profile.and_then(|p| p.get(s.id.as_str())).copied().unwrap_or(1.0);
            if multiplier == 0.0 {
                unavailable.push(s.id.to_string());
                continue;
            }
            for focus in self.focuses(s, run)? {
                candidates.push(Candidate::new(i, focus, multiplier));
            }
        }
        Ok(Candidates { count, phase, list: candidates, unavailable })
    }

    /// The texts `similarity:` embeds for these candidates: each distinct focus description,
    /// then the strings of the fields it names (the last `last` of a list), in that order.
    pub(crate) fn texts_to_embed(&self, candidates: &Candidates, state: &Dynamic) -> Vec<String> {
        let mut texts: IndexSet<String> = IndexSet::new();
        let mut push = |t: &str| {
            if !t.is_empty() && !texts.contains(t) {
                texts.insert(t.to_owned());
            }
        };
        for c in &candidates.list {
            if let Some(d) = c.focus.get("focus_description").and_then(|d| d.read_lock::<ImmutableString>()) {
                push(&d);
            }
        }
        let fields = self.similarity.as_ref().zip(state.read_lock::<Map>());
        let Some((sim, map)) = fields else { return texts.into_iter().collect() };
        for field in &sim.texts {
            let Some(v) = map.get(field.as_str()) else { continue };
            if let Some(t) = v.read_lock::<ImmutableString>() {
                push(&t);
            } else if let Some(list) = v.read_lock::<rhai::Array>() {
                let from = sim.last.map_or(0, |n| list.len().saturating_sub(n));
                for item in &list[from..] {
                    if let Some(t) = item.read_lock::<ImmutableString>() {
                        push(&t);
                    }
                }
            }
        }
        texts.into_iter().collect()
    }

    /// Scores the candidates and picks the winner; when every candidate was vetoed, the
    /// selector's fallback strategy answers, and the breakdown says so.
    pub(crate) fn decide(&self, candidates: Candidates, run: &mut Run<'_>) -> Result<Decision> {
        let Candidates { count, phase, list: mut candidates, unavailable } = candidates;
        self.score(&mut candidates, &phase, count, run)?;
        // Ties go to the candidate generated first: strictly greater replaces.
        let mut best: Option<usize> = None;
        for (i, c) in candidates.iter().enumerate() {
            if !c.vetoed && best.is_none_or(|b| c.total > candidates[b].total) {
                best = Some(i);
            }
        }
        let mut fallback = None;
        if best.is_none()
            && let Some(f) = self.fallback
        {
            let id = &self.strategies[f].id;
            best = match candidates.iter().position(|c| c.strategy == f) {
                Some(i) => Some(i),
                None => self.focuses(&self.strategies[f], run)?.into_iter().next().map(|focus| {
                    candidates.push(Candidate::new(f, focus, 1.0));
                    candidates.len() - 1
                }),
            };
            fallback = Some(match best {
                Some(_) => format!("every candidate was vetoed: the fallback strategy `{id}` answers"),
                None => format!("every candidate was vetoed, and the fallback strategy `{id}` made no focus"),
            });
        }
        let mut winner = Map::new();
        if let Some(b) = best {
            let c = &candidates[b];
            winner.insert("strategy".into(), Dynamic::from_map(self.strategies[c.strategy].info.clone()));
            winner.insert("focus".into(), Dynamic::from_map(c.focus.clone()));
            let score = Dynamic::from_float(if fallback.is_some() { 0.0 } else { c.total });
            winner.insert("score".into(), score.clone());
            winner.insert("final_score".into(), score);
            winner.insert("phase".into(), phase.clone().into());
            winner.insert("fallback".into(), Dynamic::from_bool(fallback.is_some()));
        }
        let candidates = candidates.into_iter().map(|c| self.explain(c)).collect();
        let breakdown = Breakdown {
            selector: self.name.clone(),
            phase,
            turn_count: count,
            winner: best,
            candidates,
            similarity: SimilarityNote::lexical(None),
            fallback,
            unavailable,
        };
        Ok(Decision { winner, breakdown })
    }

    /// Runs the vetoes in order (a candidate leaves the running at its first veto), then the
    /// weighted scorers on the candidates left. Each scorer sees the candidates still in the
    /// running: one at a time, or all in one call when it is a `batch` script.
    fn score(&self, candidates: &mut [Candidate], phase: &str, count: i64, run: &mut Run<'_>) -> Result<()> {
        // Each candidate's map as scripts see it, built once: shared with the scorers called a
        // candidate at a time, copied into a batch scorer's list.
        let mut shared: Vec<Option<Dynamic>> = vec![None; candidates.len()];
        for v in &self.vetoes {
            let alive: Vec<usize> = (0..candidates.len()).filter(|&i| !candidates[i].vetoed).collect();
            let outs = self.call_each(v, &alive, candidates, phase, count, run, &mut shared)?;
            for (i, out) in alive.into_iter().zip(outs) {
                let c = &mut candidates[i];
                c.vetoes.push(VetoCheck {
                    scorer: v.id.clone(),
                    is_veto: out.is_veto,
                    reasoning: out.reasoning,
                    signals: value::map_to_json(&out.signals),
                });
                c.vetoed = out.is_veto;
            }
        }
        let alive: Vec<usize> = (0..candidates.len()).filter(|&i| !candidates[i].vetoed).collect();
        for s in &self.scorers {
            let outs = self.call_each(s, &alive, candidates, phase, count, run, &mut shared)?;
            for (&i, out) in alive.iter().zip(outs) {
                if !(0.0..=2.0).contains(&out.raw_score) || out.raw_score.is_nan() {
                    return Err(Error::new(
                        ErrorKind::Script,
                        format!("scorer `{}` gave {} raw; raw scores are in [0, 2]", s.id, out.raw_score),
                    ));
                }
                let c = &mut candidates[i];
                let contribution = s.weight * out.raw_score;
                c.sum += contribution;
                c.scores.push(Score {
                    scorer: s.id.clone(),
                    raw_score: out.raw_score,
                    weight: s.weight,
                    contribution,
                    reasoning: out.reasoning,
                    signals: value::map_to_json(&out.signals),
                });
            }
        }
        for &i in &alive {
            let c = &mut candidates[i];
            c.total = c.sum * c.multiplier;
            if !c.total.is_finite() {
                let id = &self.strategies[c.strategy].id;
                return Err(Error::new(
                    ErrorKind::Script,
                    format!("candidate {id} scored {}: the weights are too large", c.total),
                ));
            }
        }
        Ok(())
    }

    /// Scorer `s` on the candidates `alive` (indices into `candidates`), one output each in
    /// order: one call per candidate, or one call for all of them when `s` is a batch script.
    #[allow(clippy::too_many_arguments)]
    fn call_each(
        &self,
        s: &Scorer,
        alive: &[usize],
        candidates: &[Candidate],
        phase: &str,
        count: i64,
        run: &mut Run<'_>,
        shared: &mut [Option<Dynamic>],
    ) -> Result<Vec<ScorerOutput>> {
        let at = |i: usize| {
            let c = &candidates[i];
            At { strategy: &self.strategies[c.strategy].info, focus: &c.focus, phase, count }
        };
        let (Some(f), true, ScorerImpl::Script) = (&s.script, s.batch, self.implementation(s, run)) else {
            return alive.iter().map(|&i| self.call(s, &at(i), run, &mut shared[i])).collect();
        };
        if alive.is_empty() {
            return Ok(Vec::new());
        }
        // The list holds plain copies: Rhai holds that no list has a shared value inside it.
        let list: rhai::Array =
            alive.iter().map(|&i| shared[i].get_or_insert_with(|| candidate_map(&at(i))).flatten_clone()).collect();
        let out = run.sandbox.call(f, run.state, (list, s.shared_params.clone()), Some(run.tag.clone()))?;
        let bad = |what: String| {
            Error::new(ErrorKind::Script, format!("scorer `{}`: {} {what}", s.id, f.display()))
                .at(f.file.fn_origin(&f.name))
        };
        let outs = out
            .try_cast::<rhai::Array>()
            .ok_or_else(|| bad("is a batch scorer: it returns a list with one result per candidate".to_owned()))?;
        if outs.len() != alive.len() {
            return Err(bad(format!(
                "got {} candidates and returned {} results: a batch scorer returns one result per candidate, in order",
                alive.len(),
                outs.len()
            )));
        }
        outs.into_iter()
            .zip(alive)
            .enumerate()
            .map(|(k, (o, &i))| {
                output_of(o, s.weighted).map_err(|e| {
                    let strategy = &self.strategies[candidates[i].strategy].id;
                    e.context(format_args!("scorer `{}`: {}, result {k} (candidate {strategy})", s.id, f.display()))
                        .at(f.file.fn_origin(&f.name))
                })
            })
            .collect()
    }

    /// Scorer `s` alone on every candidate (as if every other scorer passed): what the benches
    /// time and the twins' tests compare.
    pub(crate) fn score_alone(
        &self,
        s: &Scorer,
        candidates: &Candidates,
        run: &mut Run<'_>,
    ) -> Result<Vec<ScorerOutput>> {
        let Candidates { count, phase, list, .. } = candidates;
        let all: Vec<usize> = (0..list.len()).collect();
        self.call_each(s, &all, list, phase, *count, run, &mut vec![None; list.len()])
    }

    /// Strategy `s`'s focuses made by its native twin `name`.
    fn native_focuses(&self, s: &Strategy, name: &str, run: &mut Run<'_>) -> Result<Vec<Map>> {
        let what = format!("native focus generator `{name}` (strategy `{}`)", s.id);
        let native = run
            .natives
            .focus(name)
            .ok_or_else(|| Error::new(ErrorKind::Internal, format!("{what} is not registered")))?;
        let state = run.state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
        let ctx = FocusContext { state: &state, strategy: &s.info, pack_params: run.pack_params };
        let list = native.focuses(&ctx).map_err(|e| e.context(&what))?;
        list.into_iter()
            .map(|mut f| {
                complete_focus(&mut f, s).map_err(|e| Error::new(ErrorKind::Script, format!("{what} {e}")))?;
                Ok(f)
            })
            .collect()
    }

    /// The native twin that makes strategy `s`'s focuses in this run, if its twin runs.
    fn native_focus<'s>(&self, s: &'s Strategy, run: &Run<'_>) -> Option<&'s str> {
        let name = s.native.as_deref()?;
        (run.force.unwrap_or(s.uses) == ScorerImpl::Native).then_some(name)
    }

    /// Whether scorer `s` runs as its script or its native twin in this run.
    fn implementation(&self, s: &Scorer, run: &Run<'_>) -> ScorerImpl {
        let forced = run.force.filter(|f| match f {
            ScorerImpl::Script => s.script.is_some(),
            ScorerImpl::Native => s.native.is_some(),
        });
        forced.unwrap_or(s.uses)
    }

    /// A scored candidate as the breakdown shows it.
    fn explain(&self, c: Candidate) -> crate::event::Candidate {
        let scored = !c.vetoed;
        crate::event::Candidate {
            strategy: self.strategies[c.strategy].id.to_string(),
            focus: value::map_to_json(&c.focus),
            vetoed: c.vetoed,
            vetoes: c.vetoes,
            scores: scored.then_some(c.scores),
            scorer_sum: scored.then_some(c.sum),
            phase_multiplier: scored.then_some(c.multiplier),
            final_score: scored.then_some(c.total),
        }
    }

    /// The focuses of strategy `s`, each carrying `focus_type`, `node_id`, `element_id`,
    /// `focus_description` and `confidence` (see [`complete_focus`]).
    pub(crate) fn focuses(&self, s: &Strategy, run: &mut Run<'_>) -> Result<Vec<Map>> {
        match &s.focus {
            Focus::Open => {
                let mut f = Map::new();
                f.insert("focus_type".into(), "open".into());
                f.insert("focus_description".into(), format!("{}: open", s.id).into());
                complete_focus(&mut f, s).map_err(|e| Error::internal(format!("the open focus: {e}")))?;
                Ok(vec![f])
            }
            Focus::Script(func) => {
                if let Some(name) = self.native_focus(s, run) {
                    return self.native_focuses(s, name, run);
                }
                let out =
                    run.sandbox.call(func, run.state, (Dynamic::from_map(s.info.clone()),), Some(run.tag.clone()))?;
                let bad = |what: &str| {
                    Error::new(ErrorKind::Script, format!("{} {what}", func.display()))
                        .at(func.file.fn_origin(&func.name))
                };
                let list = out.try_cast::<rhai::Array>().ok_or_else(|| bad("must return an array of focus maps"))?;
                list.into_iter()
                    .map(|f| {
                        let mut f = f.try_cast::<Map>().ok_or_else(|| bad("returned a focus that is not a map"))?;
                        complete_focus(&mut f, s).map_err(|e| bad(&e))?;
                        Ok(f)
                    })
                    .collect()
            }
        }
    }

    fn call(&self, s: &Scorer, at: &At<'_>, run: &mut Run<'_>, shared: &mut Option<Dynamic>) -> Result<ScorerOutput> {
        let At { strategy, focus, phase, count } = *at;
        match self.implementation(s, run) {
            ScorerImpl::Native => {
                let name = s.native.as_deref().unwrap_or("");
                let native: &Arc<dyn NativeScorer> = run.natives.scorer(name).ok_or_else(|| {
                    Error::new(ErrorKind::Internal, format!("native scorer `{name}` is not registered"))
                })?;
                let state = run.state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
                let ctx = ScorerContext {
                    state: &state,
                    strategy,
                    focus,
                    params: &s.params,
                    pack_params: run.pack_params,
                    phase,
                    turn_count: count,
                    embeddings: run.tag.embeddings.as_deref(),
                };
                native.score(&ctx).map_err(|e| e.context(format_args!("scorer `{}`", s.id)))
            }
            ScorerImpl::Script => {
                let f = s.script.as_ref().ok_or_else(|| Error::internal("a scripted scorer without a script"))?;
                let candidate = shared.get_or_insert_with(|| candidate_map(at)).clone();
                let out =
                    run.sandbox.call(f, run.state, (candidate, s.shared_params.clone()), Some(run.tag.clone()))?;
                output_of(out, s.weighted).map_err(|e| e.context(format_args!("{}", f.display())))
            }
        }
    }
}

/// A candidate as scorers' scripts get it: `#{strategy, focus, phase, turn_count}`, built once
/// per candidate and shared (read-only): a scorer called once per candidate gets it for a
/// reference count; a batch scorer's list holds copies (no list may hold a shared value).
fn candidate_map(at: &At<'_>) -> Dynamic {
    let mut candidate = Map::new();
    candidate.insert("strategy".into(), Dynamic::from_map(at.strategy.clone()));
    candidate.insert("focus".into(), Dynamic::from_map(at.focus.clone()));
    candidate.insert("phase".into(), at.phase.into());
    candidate.insert("turn_count".into(), Dynamic::from_int(at.count));
    Dynamic::from_map(candidate).into_read_only().into_shared()
}

/// A scripted scorer's result. A veto returns a bool or `#{is_veto: bool, ...}`, a weighted
/// scorer a number or `#{raw_score: number, ...}`; either map may add `reasoning` and `signals`.
/// (`veto` and `score` are accepted as shorter names.) Anything else is an error rather than a
/// silent 0 or "no veto".
fn output_of(v: Dynamic, weighted: bool) -> Result<ScorerOutput> {
    let wrong = |got: &str| {
        let want = if weighted { "a number or #{raw_score, ...}" } else { "a bool or #{is_veto, ...}" };
        let tier = if weighted { "weighted scorer" } else { "veto" };
        Error::new(ErrorKind::Script, format!("a {tier} returns {want}; this one returned {got}"))
    };
    match (weighted, v.as_bool(), number(&v)) {
        (false, Ok(is_veto), _) => return Ok(ScorerOutput { is_veto, ..Default::default() }),
        (true, _, Some(raw_score)) => return Ok(ScorerOutput { raw_score, ..Default::default() }),
        _ => {}
    }
    if !v.is_map() {
        return Err(wrong(value::type_of(&v)));
    }
    let m = v.cast::<Map>();
    let either = |a: &str, b: &str| m.get(a).or_else(|| m.get(b));
    let (is_veto, raw_score) = if weighted {
        let raw = either("raw_score", "score").and_then(number);
        (false, raw.ok_or_else(|| wrong("a map without a numeric `raw_score`"))?)
    } else {
        let veto = either("is_veto", "veto").and_then(|x| x.as_bool().ok());
        (veto.ok_or_else(|| wrong("a map without a bool `is_veto`"))?, 0.0)
    };
    Ok(ScorerOutput {
        is_veto,
        raw_score,
        reasoning: m.get("reasoning").map(|r| r.to_string()).unwrap_or_default(),
        signals: m.get("signals").and_then(|s| s.clone().try_cast::<Map>()).unwrap_or_default(),
    })
}

/// Checks a focus and fills what it left out: it must carry a string `focus_description` (what
/// scorers compare); `focus_type` defaults to the strategy's `type_category` (else its id),
/// `node_id` and `element_id` to `()`, `confidence` (in [0, 1]) to 1.0.
fn complete_focus(f: &mut Map, s: &Strategy) -> std::result::Result<(), String> {
    match f.get("focus_description") {
        Some(d) if d.is_string() => {}
        _ if f.contains_key("description") => {
            return Err("returned a focus with `description`: the focus's text is `focus_description`".into());
        }
        _ => return Err("returned a focus without a string `focus_description` (what scorers compare)".into()),
    }
    if !f.contains_key("focus_type") {
        let kind = s.info.get("type_category").filter(|t| t.is_string()).cloned();
        f.insert("focus_type".into(), kind.unwrap_or_else(|| s.id.clone().into()));
    }
    for key in ["node_id", "element_id"] {
        f.entry(key.into()).or_insert(Dynamic::UNIT);
    }
    match f.get("confidence").map(number) {
        None => {
            f.insert("confidence".into(), Dynamic::from_float(1.0));
        }
        Some(Some(c)) if (0.0..=1.0).contains(&c) => {}
        Some(_) => return Err("returned a focus whose `confidence` is not a number in [0, 1]".into()),
    }
    Ok(())
}

fn number(v: &Dynamic) -> Option<f64> {
    v.as_float().ok().or_else(|| v.as_int().ok().map(|i| i as f64))
}

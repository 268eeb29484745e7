//! A selector run over one recorded state, outside any turn: what `ruleweave bench` and the
//! benchmarks time, scripted against native.

use std::sync::Arc;

use rhai::{Dynamic, Map};
use serde_json::Value as Json;

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::event::Breakdown;
use crate::native::NativeNodes;
use crate::pack::Pack;
use crate::script::CallTag;
use crate::select::{Candidates, Run, Selector};
use crate::text::Embeddings;
use crate::vocab::ScorerImpl;

/// A selector ready to run over one recorded state, outside any turn: what `ruleweave bench`
/// and the benchmarks time, scripted against native.
pub struct Selection {
    pack: Arc<Pack>,
    natives: NativeNodes,
    selector: Arc<Selector>,
    state: Dynamic,
    tag: CallTag,
    turns_done: u64,
    /// The candidates `run_scorer` scores, made on its first call.
    candidates: Option<Candidates>,
}

impl Selection {
    /// Selector `name` of `pack` over `state` (a JSON map of the pack's fields; missing ones take
    /// their defaults), as in the turn after `turns_done` turns.
    pub fn new(engine: &Engine, pack: &str, name: &str, state: &Json, turns_done: u64) -> Result<Self> {
        let pack = engine.packs().get(pack)?;
        let selector = pack.selectors.get(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = pack.selectors.keys().map(String::as_str).collect();
            Error::new(
                ErrorKind::NotFound,
                format!("pack `{}` has no selector `{name}` (selectors: {})", pack.name, known.join(", ")),
            )
        })?;
        let state = pack.schema.restore(state);
        let tag = CallTag::outside("bench", turns_done + 1, Map::new(), engine.provider_for(&pack));
        Ok(Selection { natives: engine.natives().clone(), pack, selector, state, tag, turns_done, candidates: None })
    }

    /// The texts the selector would embed over this state (every focus description, then the
    /// texts its `similarity:` names); empty without `similarity:`.
    pub fn texts_to_embed(&mut self) -> Result<Vec<String>> {
        let selector = self.selector.clone();
        if selector.similarity.is_none() {
            return Ok(Vec::new());
        }
        let candidates = selector.candidates(&mut self.runner(None))?;
        Ok(selector.texts_to_embed(&candidates, &self.state))
    }

    /// The vectors the pack's stand-in model gives [`Selection::texts_to_embed`] (its
    /// `standin_embed`, or the engine's hashed features): what the selection gets offline.
    pub fn standin_embeddings(&mut self) -> Result<Embeddings> {
        let texts = self.texts_to_embed()?;
        let Some(standin) = self.pack.standin.clone() else { return Ok(Embeddings::hashed(texts)) };
        let profile = self.selector.similarity.as_ref().map(|s| s.profile.clone()).unwrap_or_default();
        let model =
            self.pack.profiles.get(&profile).and_then(|p| p.model(&Map::new()).ok()).unwrap_or_default().to_owned();
        let request = crate::llm::EmbedRequest { profile, model, texts: texts.clone() };
        // The stand-in answers at once: one poll finishes it.
        let mut answer = standin.embed(&request);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let std::task::Poll::Ready(answer) = answer.as_mut().poll(&mut cx) else {
            return Err(Error::internal("the stand-in's embeddings did not answer at once"));
        };
        let answer = answer?;
        let mut e = Embeddings::new(answer.model);
        for (t, v) in texts.into_iter().zip(answer.vectors) {
            e.insert(t, v);
        }
        Ok(e)
    }

    /// Scores with these vectors from now on (`None`: lexical similarity, the default here).
    pub fn set_embeddings(&mut self, embeddings: Option<Embeddings>) {
        self.tag.embeddings = embeddings.map(Arc::new);
    }

    /// The selector's scorers, vetoes first: (id, has a script, has a native twin this host registered).
    pub fn scorers(&self) -> Vec<(String, bool, bool)> {
        let s = &self.selector;
        s.vetoes.iter().chain(&s.scorers).map(|x| (x.id.clone(), x.script.is_some(), x.native.is_some())).collect()
    }

    /// The selector's strategies: (id, has a generator script, has a native twin this host registered).
    pub fn strategies(&self) -> Vec<(String, bool, bool)> {
        use crate::select::Focus;
        self.selector
            .strategies
            .iter()
            .map(|s| (s.id.to_string(), matches!(s.focus, Focus::Script(_)), s.native.is_some()))
            .collect()
    }

    /// Runs the whole selection (every scorer with `implementation` where it has one, else as the
    /// manifest says); returns the breakdown, `winner` its index into `candidates`.
    pub fn run(&mut self, implementation: Option<ScorerImpl>) -> Result<Breakdown> {
        let selector = self.selector.clone();
        selector.select(&mut self.runner(implementation)).map(|d| d.breakdown)
    }

    fn runner(&mut self, force: Option<ScorerImpl>) -> Run<'_> {
        Run {
            sandbox: &self.pack.sandbox,
            natives: &self.natives,
            state: &mut self.state,
            tag: self.tag.clone(),
            turns_done: self.turns_done,
            force,
            pack_params: &self.pack.params,
        }
    }

    /// Runs only the strategies' focus generators (what every selection does before scoring),
    /// each as `implementation` where it has one (its script, or its native twin); returns how
    /// many candidates they made.
    pub fn run_generators(&mut self, implementation: Option<ScorerImpl>) -> Result<usize> {
        let sel = self.selector.clone();
        let mut run = self.runner(implementation);
        let mut made = 0;
        for s in &sel.strategies {
            made += sel.focuses(s, &mut run)?.len();
        }
        Ok(made)
    }

    /// Runs scorer `id` alone over every candidate (as if every other scorer passed; the
    /// candidates are made once, by the selector's own generators, and kept); returns
    /// each candidate's raw score (or 1.0 / 0.0 for a veto that passes / rejects).
    pub fn run_scorer(&mut self, id: &str, implementation: ScorerImpl) -> Result<Vec<f64>> {
        let sel = self.selector.clone();
        let scorer =
            sel.vetoes.iter().chain(&sel.scorers).find(|s| s.id == id).ok_or_else(|| {
                Error::new(ErrorKind::NotFound, format!("selector `{}` has no scorer `{id}`", sel.name))
            })?;
        let weighted = sel.scorers.iter().any(|s| s.id == id);
        // The candidates as the selector's own `impl` makes them, made once: this times the
        // scorer alone.
        let candidates = match self.candidates.take() {
            Some(c) => c,
            None => sel.candidates(&mut self.runner(None))?,
        };
        let outs = sel.score_alone(scorer, &candidates, &mut self.runner(Some(implementation)));
        self.candidates = Some(candidates);
        let outs = outs?;
        Ok(outs
            .into_iter()
            .map(|o| {
                if weighted {
                    o.raw_score
                } else if o.is_veto {
                    0.0
                } else {
                    1.0
                }
            })
            .collect())
    }
}

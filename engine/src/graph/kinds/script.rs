//! `script: file.rhai::fn`: a Rhai function of no parameters, called with the state as `this`,
//! returning updates. One that may call a model (or search) runs on a blocking thread.
//!
//! With `map: {over, concurrency}` it is `fn(item)`, run once per item of the list `over`
//! returns; when it calls models, the runs go on blocking threads at most `concurrency` at once
//! (a fact check per claim, concurrently), and their updates are folded in item order.

use rhai::{Dynamic, Map};

use super::{Kind, KindDef, MapOver, NodeDecl, Outcome, Step, Work, fold_into, updates_of};
use crate::error::{Error, Origin, Result};
use crate::graph::env::Env;
use crate::graph::load::Load;
use crate::script::FnRef;

pub(super) const KIND: KindDef = KindDef {
    key: "script",
    keys: &["map"],
    doc: "`script: file.rhai::fn`: `fn() -> updates`, with the state as `this`; with `map`, `fn(item)` once per item.",
    load,
};

#[derive(Debug)]
struct Script {
    f: FnRef,
    map: Option<MapOver>,
}

fn load(l: &mut Load<'_>, d: &NodeDecl, _: &str, _: Origin) -> Option<Box<dyn Kind>> {
    let f = l.string(d, "script")?;
    let map = l.map_over(d);
    if d.get("map").is_some() && map.is_none() {
        return None;
    }
    let arity = usize::from(map.is_some());
    l.resolve(&f, None, arity).map(|f| Box::new(Script { f, map }) as Box<dyn Kind>)
}

impl Kind for Script {
    fn describe(&self) -> (&'static str, String) {
        ("script", self.f.display())
    }

    fn what(&self) -> String {
        match &self.map {
            Some(m) => format!("{} × each of {} (≤{} at once)", self.f.display(), m.over.display(), m.concurrency),
            None => self.f.display(),
        }
    }

    fn prepare<'a>(&'a self, env: &'a Env<'a>, node: usize, state: &'a mut Dynamic) -> Step<'a, Work> {
        let f = &self.f;
        let work = match &self.map {
            None if f.calls_models() => Ok(Work::Blocking(f.clone(), Vec::new())),
            None => env.sandbox.call(f, state, (), Some(env.tag(node))).and_then(|r| updates_of(r, f)).map(Work::Done),
            Some(m) => m.items(env, node, state).and_then(|items| {
                if f.calls_models() {
                    return Ok(Work::BlockingMany { f: f.clone(), limit: m.concurrency, items });
                }
                let mut folded = Map::new();
                for (i, item) in items.into_iter().enumerate() {
                    let updates = env
                        .sandbox
                        .call(f, state, (item,), Some(env.tag(node)))
                        .and_then(|r| updates_of(r, f))
                        .map_err(|e| e.context(format_args!("item {i} of {}", m.over.display())))?;
                    fold_into(env, &mut folded, updates);
                }
                Ok(Work::Done(folded))
            }),
        };
        Step::Now(work)
    }

    fn finish<'a>(&'a self, env: &'a Env<'a>, _: usize, outcome: Outcome, _: &'a mut Dynamic) -> Step<'a, Map> {
        let updates = match outcome {
            Outcome::Done(m) => Ok(m),
            Outcome::Script(r) => r.and_then(|v| updates_of(v, &self.f)),
            Outcome::Scripts(results) => self.fold(env, results),
            Outcome::Reply(_) | Outcome::Many { .. } => Err(Error::internal("a script node was given a model reply")),
        };
        Step::Now(updates)
    }
}

impl Script {
    /// A map node's runs, folded in item order; the first that failed fails the node.
    fn fold(&self, env: &Env<'_>, results: Vec<Result<Dynamic>>) -> Result<Map> {
        let over = self.map.as_ref().map_or_else(String::new, |m| m.over.display());
        let mut folded = Map::new();
        for (i, r) in results.into_iter().enumerate() {
            let updates =
                r.and_then(|v| updates_of(v, &self.f)).map_err(|e| e.context(format_args!("item {i} of {over}")))?;
            fold_into(env, &mut folded, updates);
        }
        Ok(folded)
    }
}

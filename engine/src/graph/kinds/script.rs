//! `script: file.rhai::fn`: a Rhai function of no parameters, called with the state as `this`,
//! returning updates. One that may call a model runs on a blocking thread.

use rhai::{Dynamic, Map};

use super::{Kind, KindDef, NodeDecl, Outcome, Step, Work, label, updates_of};
use crate::error::{Error, Origin};
use crate::graph::env::Env;
use crate::graph::load::Load;
use crate::script::FnRef;

pub(super) const KIND: KindDef = KindDef {
    key: "script",
    keys: &[],
    doc: "`script: file.rhai::fn`: `fn() -> updates`, with the state as `this`.",
    load,
};

#[derive(Debug)]
struct Script(FnRef);

fn load(l: &mut Load<'_>, d: &NodeDecl, _: &str, _: Origin) -> Option<Box<dyn Kind>> {
    let f = l.string(d, "script")?;
    l.resolve(&f, None, 0).map(|f| Box::new(Script(f)) as Box<dyn Kind>)
}

impl Kind for Script {
    fn describe(&self) -> (&'static str, String) {
        ("script", self.0.display())
    }

    fn mermaid(&self, name: &str) -> String {
        format!("{name}[{}]", label(name, &self.0.display()))
    }

    fn prepare<'a>(&'a self, env: &'a Env<'a>, node: usize, state: &'a mut Dynamic) -> Step<'a, Work> {
        let f = &self.0;
        let work = if f.calls_models() {
            Ok(Work::Blocking(f.clone(), Vec::new()))
        } else {
            env.sandbox
                .call(f, state, (), Some(env.tag(node)))
                .and_then(|r| updates_of(r, &f.display()))
                .map(Work::Done)
        };
        Step::Now(work)
    }

    fn finish<'a>(&'a self, _: &'a Env<'a>, _: usize, outcome: Outcome, _: &'a mut Dynamic) -> Step<'a, Map> {
        let updates = match outcome {
            Outcome::Done(m) => Ok(m),
            Outcome::Script(r) => r.and_then(|v| updates_of(v, &self.0.display())),
            Outcome::Reply(_) | Outcome::Many { .. } => Err(Error::internal("a script node was given a model reply")),
        };
        Step::Now(updates)
    }
}

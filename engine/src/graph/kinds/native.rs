//! `native: name`: a Rust function the embedding program registered
//! (`EngineBuilder::native_node`), seeing the state, input and options, returning updates.

use rhai::{Dynamic, Map};

use super::{Kind, KindDef, NodeDecl, Step, Work};
use crate::error::{Error, ErrorKind, Origin};
use crate::graph::env::Env;
use crate::graph::load::Load;
use crate::native::NodeContext;

pub(super) const KIND: KindDef = KindDef {
    key: "native",
    keys: &[],
    doc: "`native: name`: a Rust function the embedding program registered under that name.",
    load,
};

#[derive(Debug)]
struct Native(String);

fn load(l: &mut Load<'_>, d: &NodeDecl, _: &str, _: Origin) -> Option<Box<dyn Kind>> {
    let n = l.string(d, "native")?;
    if !l.refs.natives.contains(&n.value) {
        let at = l.at(&n);
        l.error(
            format!("native node `{}` is not registered by this host (the `ruleweave` binary registers none)", n.value),
            at,
        );
        return None;
    }
    Some(Box::new(Native(n.value)))
}

impl Kind for Native {
    fn describe(&self) -> (&'static str, String) {
        ("native", self.0.clone())
    }

    fn what(&self) -> String {
        format!("native: {}", self.0)
    }

    fn prepare<'a>(&'a self, env: &'a Env<'a>, _: usize, state: &'a mut Dynamic) -> Step<'a, Work> {
        let run = || {
            let node = env.natives.get(&self.0).ok_or_else(|| {
                Error::new(ErrorKind::Internal, format!("native node `{}` is not registered", self.0))
            })?;
            let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
            let ctx = NodeContext { state: &map, input: &env.turn.input, options: &env.turn.options };
            node.run(&ctx).map(Work::Done)
        };
        Step::Now(run())
    }
}

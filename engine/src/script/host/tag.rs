//! What a host function finds of its call: the tag (the turn and the node it runs for) and the
//! helpers that read it.

use std::sync::Arc;

use rhai::{Array, ImmutableString, NativeCallContext};

use super::{RhaiResult, TurnCtx};
use crate::text;

/// The tag a script call carries: its turn and the node it runs for.
#[derive(Clone)]
pub(crate) struct CallTag {
    pub turn: Arc<TurnCtx>,
    pub node: Arc<str>,
    /// Vectors for `similarity` while a selector with embeddings scores.
    pub embeddings: Option<Arc<text::Embeddings>>,
}

impl CallTag {
    pub(crate) fn new(turn: Arc<TurnCtx>, node: Arc<str>) -> Self {
        CallTag { turn, node, embeddings: None }
    }

    /// A tag for calls made outside any session (`ScriptCall`, `Selection`): turn `turn` of no
    /// session, with these options, its models from `provider`.
    pub(crate) fn outside(name: &str, turn: u64, options: rhai::Map, provider: Arc<dyn crate::llm::Provider>) -> Self {
        let ctx = TurnCtx::new(crate::turn::TurnStart {
            session_id: name.into(),
            turn,
            seed: 0,
            now_ms: 0,
            options,
            input: rhai::Map::new(),
            provider,
            live: None,
        });
        CallTag::new(Arc::new(ctx), name.into())
    }
}

/// The vectors of the selection running this call, if it made any.
pub(super) fn embeddings(ctx: &NativeCallContext<'_>) -> Option<Arc<text::Embeddings>> {
    ctx.tag()?.read_lock::<CallTag>()?.embeddings.clone()
}

pub(super) fn with_turn<T>(ctx: &NativeCallContext<'_>, f: impl FnOnce(&CallTag) -> RhaiResult<T>) -> RhaiResult<T> {
    match ctx.tag().and_then(|t| t.read_lock::<CallTag>()) {
        Some(tag) => f(&tag),
        None => Err(format!("{}() is only available while a turn runs", ctx.fn_name()).into()),
    }
}

pub(super) fn str_list(v: &Array, what: &str) -> RhaiResult<Vec<ImmutableString>> {
    v.iter()
        .map(|x| {
            x.read_lock::<ImmutableString>().map(|s| s.clone()).ok_or_else(|| format!("{what} must be strings").into())
        })
        .collect()
}

pub(super) fn random_f64(t: &TurnCtx) -> f64 {
    (t.random_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform integer in [0, n) from 64 random bits (Lemire's multiply; bias below 2^-64 · n).
pub(super) fn below(t: &TurnCtx, n: u64) -> u64 {
    ((u128::from(t.random_u64()) * u128::from(n)) >> 64) as u64
}

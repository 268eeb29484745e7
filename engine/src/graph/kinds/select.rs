//! `select: selector`: runs one of the pack's selectors (the two-tier scoring pipeline) over the
//! state, embedding first when it has `similarity:`, puts the winner in the map field `into`, and
//! explains every candidate in a `decision` event.

use std::sync::Arc;

use rhai::{Dynamic, Map};

use super::{Kind, KindDef, NodeDecl, Step, Work};
use crate::error::{Origin, Result};
use crate::event::{Event, SimilarityNote};
use crate::graph::env::Env;
use crate::graph::load::Load;
use crate::llm::EmbedRequest;
use crate::select::{Selector, Similarity};
use crate::text::Embeddings;
use crate::vocab::{Reducer, TypeName};

pub(super) const KIND: KindDef = KindDef {
    key: "select",
    keys: &["into"],
    doc: "`select: selector` with `into: field`: the selector's winner, every candidate explained.",
    load,
};

#[derive(Debug)]
struct Select {
    selector: Arc<Selector>,
    into: String,
}

fn load(l: &mut Load<'_>, d: &NodeDecl, name: &str, at: Origin) -> Option<Box<dyn Kind>> {
    let sel = l.string(d, "select")?;
    let Some(selector) = l.refs.selectors.get(&sel.value).cloned() else {
        let known: Vec<&str> = l.refs.selectors.keys().map(String::as_str).collect();
        let at = l.at(&sel);
        l.error(
            format!(
                "node `{name}` selects with `{}`, which the pack does not define (selectors: {})",
                sel.value,
                known.join(", ")
            ),
            at,
        );
        return None;
    };
    let Some(into) = l.string(d, "into") else {
        l.error(format!("node `{name}` needs `into`: the state field the selector's winner goes to"), at);
        return None;
    };
    match l.refs.schema.fields.get(&into.value) {
        Some(f) if matches!(f.ty, TypeName::Map | TypeName::Any) && f.reducer == Reducer::Replace => {}
        Some(_) => {
            let at = l.at(&into);
            l.error(format!("`into: {}` must name a map field with reducer replace", into.value), at);
            return None;
        }
        None => {
            let at = l.at(&into);
            l.error(format!("`into: {}` is not a state field", into.value), at);
            return None;
        }
    }
    Some(Box::new(Select { selector, into: into.value }))
}

impl Kind for Select {
    fn describe(&self) -> (&'static str, String) {
        ("select", self.selector.name.clone())
    }

    fn what(&self) -> String {
        format!("select: {}", self.selector.name)
    }

    fn prepare<'a>(&'a self, env: &'a Env<'a>, node: usize, state: &'a mut Dynamic) -> Step<'a, Work> {
        Step::Later(Box::pin(async move {
            let selector = &self.selector;
            let candidates = selector.candidates(&mut selection(env, node, state, None))?;
            let (embeddings, mut similarity) = match &selector.similarity {
                Some(sim) if embeds(env, node, &selector.name, sim, state).await? => {
                    let texts = selector.texts_to_embed(&candidates, state);
                    embed(env, node, sim, texts).await
                }
                // Not asked for: no `why`.
                _ => (None, SimilarityNote::lexical(None)),
            };
            let mut decision = selector.decide(candidates, &mut selection(env, node, state, embeddings.clone()))?;
            if let Some(e) = embeddings {
                similarity.compared_by_words = Some(e.compared_by_words());
            }
            decision.breakdown.similarity = similarity;
            traced(&decision.breakdown);
            env.turn.emit(Event::Decision { node: env.name(node).to_string(), breakdown: decision.breakdown });
            let mut updates = Map::new();
            updates.insert(self.into.as_str().into(), Dynamic::from_map(decision.winner));
            Ok(Work::Done(updates))
        }))
    }
}

/// What a selection of `node` runs with.
fn selection<'s>(
    env: &'s Env<'s>,
    node: usize,
    state: &'s mut Dynamic,
    embeddings: Option<Arc<Embeddings>>,
) -> crate::select::Run<'s> {
    let mut tag = env.tag(node);
    tag.embeddings = embeddings;
    crate::select::Run {
        sandbox: env.sandbox,
        natives: env.natives,
        state,
        tag,
        turns_done: env.turn.turn.saturating_sub(1),
        force: None,
        pack_params: env.params,
    }
}

/// Whether a selector's `similarity:` applies now (its `when`, if any, holds).
async fn embeds(env: &Env<'_>, node: usize, selector: &str, sim: &Similarity, state: &mut Dynamic) -> Result<bool> {
    match &sim.when {
        None => Ok(true),
        Some((test, text)) => {
            let what = format!("selector `{selector}`: similarity.when `{text}`");
            env.holds(node, test, &what, state).await
        }
    }
}

/// Embeds a selection's texts; on failure (or with nothing to embed) scorers compare words.
/// Returns the vectors and what the breakdown says of them.
async fn embed(
    env: &Env<'_>,
    node: usize,
    sim: &Similarity,
    texts: Vec<String>,
) -> (Option<Arc<Embeddings>>, SimilarityNote) {
    if texts.is_empty() {
        return (None, SimilarityNote::lexical(Some("nothing to embed".into())));
    }
    // The loader refused packs whose profile is missing; a lookup still costs nothing.
    let model = match env.profiles.get(sim.profile.as_str()).map(|p| p.model(&env.turn.options)) {
        Some(Ok(m)) => m.to_owned(),
        Some(Err(e)) => return (None, SimilarityNote::lexical(Some(e.detail().to_owned()))),
        None => return (None, SimilarityNote::lexical(Some(format!("no llm profile `{}`", sim.profile)))),
    };
    let request = EmbedRequest { profile: sim.profile.clone(), model, texts };
    match env.turn.embed(env.name(node), &request).await {
        Ok(r) if r.vectors.len() == request.texts.len() => {
            let mut e = Embeddings::new(r.model.clone());
            for (text, vector) in request.texts.into_iter().zip(r.vectors) {
                e.insert(text, vector);
            }
            let note = SimilarityNote::embedding(r.model, e.len(), r.cached);
            (Some(Arc::new(e)), note)
        }
        Ok(r) => {
            let why = format!("{} texts sent, {} vectors back", request.texts.len(), r.vectors.len());
            (None, SimilarityNote::lexical(Some(why)))
        }
        Err(e) => {
            tracing::warn!(node = %env.name(node), error = %e, "embeddings failed; comparing words");
            (None, SimilarityNote::lexical(Some(e.detail().to_owned())))
        }
    }
}

/// The selector's decision as an event on its node's trace span: what won, by how much, and how
/// many candidates were vetoed.
fn traced(b: &crate::event::Breakdown) {
    if tracing::Span::current().is_disabled() {
        return;
    }
    let winner = b.winner.and_then(|i| b.candidates.get(i));
    tracing::info!(
        selector = %b.selector,
        phase = %b.phase,
        strategy = winner.map_or("", |c| c.strategy.as_str()),
        score = winner.and_then(|c| c.final_score).unwrap_or(0.0),
        candidates = b.candidates.len(),
        vetoed = b.candidates.iter().filter(|c| c.vetoed).count(),
        fallback = b.fallback.as_deref().unwrap_or(""),
        "decision"
    );
}

//! Loading a pack's selectors: phases, strategies and their focus generators, phase profiles,
//! vetoes and weighted scorers, `similarity:`, and the `select:` nodes that run them.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use rhai::{Dynamic, Map};
use serde_saphyr::Spanned;

use super::Loader;
use crate::graph::load::{Load, Refs};
use crate::pack::manifest;
use crate::select::{Focus, Scorer, Selector, Similarity, Strategy};
use crate::value;
use crate::vocab::{ScorerImpl, TypeName};

impl Loader<'_> {
    /// Compiles the manifest's selectors: phases, strategies and their focus generators, phase
    /// profiles (naming only phases and strategies the selector has), vetoes and weighted scorers.
    pub(super) fn selectors(
        &mut self,
        decls: &IndexMap<String, Spanned<manifest::SelectorDecl>>,
        refs: &Refs<'_>,
    ) -> IndexMap<String, Arc<Selector>> {
        let mut out = IndexMap::new();
        for (index, (name, decl)) in decls.iter().enumerate() {
            let at = self.at(decl);
            let d = &decl.value;
            if d.phases.is_empty() {
                self.error(format!("selector `{name}` needs at least one phase"), at.clone());
            }
            let mut phases = Vec::new();
            for p in &d.phases {
                if phases.iter().any(|(n, _)| n == &p.value.name) {
                    self.error(format!("selector `{name}` has two phases named `{}`", p.value.name), self.at(p));
                }
                phases.push((p.value.name.clone(), p.value.turns));
            }
            let turn_field = d.turn_field.as_ref().and_then(|f| match refs.schema.fields.get(&f.value) {
                Some(field) if field.ty == TypeName::Int => Some(f.value.clone()),
                Some(field) => {
                    self.error(
                        format!("turn_field must name an int field; `{}` is {}", f.value, field.ty.a()),
                        self.at(f),
                    );
                    None
                }
                None => {
                    self.error(format!("turn_field names `{}`, which is not a state field", f.value), self.at(f));
                    None
                }
            });
            // Which implementation runs where a scorer or a generator has both.
            let default = d.implementation.unwrap_or(ScorerImpl::Script);
            let mut strategies = Vec::new();
            let mut ids: Vec<&str> = Vec::new();
            let mut disabled: Vec<&str> = Vec::new();
            for sd in &d.strategies {
                let s = &sd.value;
                if ids.contains(&s.id.as_str()) {
                    self.error(format!("selector `{name}` has two strategies with id `{}`", s.id), self.at(sd));
                }
                ids.push(&s.id);
                if !s.enabled {
                    disabled.push(&s.id);
                    continue;
                }
                let focus = if s.focus.value == "open" {
                    Some(Focus::Open)
                } else if !s.focus.value.contains("::") {
                    let what =
                        format!("focus `{}` is neither `open` nor a generator (file.rhai::function)", s.focus.value);
                    self.error(what, self.at(&s.focus));
                    None
                } else {
                    match (Load { refs, errors: &mut self.errors }).resolve(&s.focus, None, 1) {
                        Some(f) if f.calls_models() => {
                            self.error("a focus generator cannot call models", self.at(&s.focus));
                            None
                        }
                        f => f.map(Focus::Script),
                    }
                };
                let native = match &s.focus_native {
                    Some(n) if matches!(focus, Some(Focus::Open)) => {
                        self.error(
                            format!("strategy `{}`: `focus: open` has no generator for `focus_native` to twin", s.id),
                            self.at(n),
                        );
                        None
                    }
                    Some(n) if refs.natives.focus(&n.value).is_some() => Some(n.value.clone()),
                    Some(n) if d.implementation == Some(ScorerImpl::Native) => {
                        self.error(
                            format!("native focus generator `{}` is not registered by this host", n.value),
                            self.at(n),
                        );
                        None
                    }
                    // A twin this host lacks: the script runs.
                    _ => None,
                };
                let mut info = Map::new();
                info.insert("id".into(), s.id.clone().into());
                info.insert("name".into(), s.name.clone().unwrap_or_else(|| s.id.clone()).into());
                info.insert("type_category".into(), s.type_category.clone().unwrap_or_default().into());
                info.insert("prompt_hint".into(), s.prompt_hint.clone().unwrap_or_default().into());
                if let Some(focus) = focus {
                    strategies.push(Strategy { id: s.id.as_str().into(), info, focus, native, uses: default });
                }
            }
            let mut profiles: HashMap<String, HashMap<String, f64>> = HashMap::new();
            for (phase, p) in &d.phase_profiles {
                if !phases.iter().any(|(n, _)| n == phase) {
                    let names: Vec<&str> = phases.iter().map(|(n, _)| n.as_str()).collect();
                    self.error(
                        format!(
                            "phase profile `{phase}` is not a phase of selector `{name}` (phases: {})",
                            names.join(", ")
                        ),
                        self.at(p),
                    );
                }
                for (sid, m) in &p.value {
                    if !ids.contains(&sid.as_str()) {
                        self.error(
                            format!(
                                "phase profile `{phase}` sets `{sid}`, which is not a strategy of selector `{name}` (strategies: {})",
                                ids.join(", ")
                            ),
                            self.at(p),
                        );
                    } else if !(m.is_finite() && *m >= 0.0) {
                        self.error(format!("phase profile `{phase}`: `{sid}: {m}` must be a number ≥ 0"), self.at(p));
                    } else if disabled.contains(&sid.as_str()) {
                        self.warn(
                            format!(
                                "phase profile `{phase}` sets `{sid}`, which is disabled (`enabled: false`): \
                                 the multiplier does nothing"
                            ),
                            self.at(p),
                        );
                    }
                }
                profiles.insert(phase.clone(), p.value.iter().map(|(k, v)| (k.clone(), *v)).collect());
            }
            if d.strategies.is_empty() {
                self.error(format!("selector `{name}` needs at least one strategy"), at.clone());
            }
            let mut scorer_ids: Vec<&str> = Vec::new();
            for sd in d.vetoes.iter().chain(&d.scorers) {
                if scorer_ids.contains(&sd.value.id.as_str()) {
                    let what = format!("selector `{name}` has two scorers with id `{}`", sd.value.id);
                    self.error(format!("{what} (vetoes and weighted scorers share ids)"), self.at(sd));
                }
                scorer_ids.push(&sd.value.id);
            }
            let vetoes = d.vetoes.iter().filter_map(|v| self.scorer(name, v, refs, default, false)).collect();
            let scorers = d.scorers.iter().filter_map(|v| self.scorer(name, v, refs, default, true)).collect();
            let similarity = d.similarity.as_ref().and_then(|s| self.similarity(name, index, s, refs));
            let fallback = d.fallback.as_ref().and_then(|f| {
                let found = strategies.iter().position(|s: &Strategy| s.id.as_str() == f.value);
                if found.is_none() {
                    let why = if disabled.contains(&f.value.as_str()) { "a disabled strategy" } else { "no strategy" };
                    self.error(
                        format!(
                            "selector `{name}` falls back to `{}`, which is {why} (strategies: {})",
                            f.value,
                            ids.join(", ")
                        ),
                        self.at(f),
                    );
                }
                // The fallback answers in whatever phase everything was vetoed: a phase that turns
                // it off would let it win where the phases say it is unavailable.
                let mut off: Vec<&str> =
                    profiles.iter().filter(|(_, p)| p.get(&f.value) == Some(&0.0)).map(|(k, _)| k.as_str()).collect();
                off.sort_unstable();
                if !off.is_empty() {
                    self.error(
                        format!(
                            "selector `{name}` falls back to `{}`, which phase {} turns off (multiplier 0); the \
                             fallback must be available in every phase",
                            f.value,
                            off.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
                        ),
                        self.at(f),
                    );
                    return None;
                }
                found
            });
            out.insert(
                name.clone(),
                Arc::new(Selector {
                    name: name.clone(),
                    phases,
                    turn_field,
                    strategies,
                    profiles,
                    vetoes,
                    scorers,
                    similarity,
                    fallback,
                }),
            );
        }
        out
    }

    /// A selector's `similarity:`: the profile must exist and each text field hold strings.
    fn similarity(
        &mut self,
        selector: &str,
        index: usize,
        decl: &Spanned<manifest::SimilarityDecl>,
        refs: &Refs<'_>,
    ) -> Option<Similarity> {
        let d = &decl.value;
        let profile = d.embed.value.clone();
        if !refs.profiles.contains_key(&profile) {
            let known: Vec<&str> = refs.profiles.keys().map(String::as_str).collect();
            self.error(
                format!(
                    "selector `{selector}` embeds with `{profile}`, which is not an llm profile (profiles: {})",
                    known.join(", ")
                ),
                self.at(&d.embed),
            );
        }
        for f in &d.texts {
            match refs.schema.fields.get(&f.value) {
                Some(field) if matches!(field.ty, TypeName::String | TypeName::List | TypeName::Any) => {}
                Some(field) => self.error(
                    format!("similarity texts must be string or list fields; `{}` is {}", f.value, field.ty.a()),
                    self.at(f),
                ),
                None => {
                    self.error(format!("similarity texts name `{}`, which is not a state field", f.value), self.at(f))
                }
            }
        }
        if let Some(last) = d.last.as_ref().filter(|l| l.value == 0) {
            self.error("similarity `last` must be at least 1 (leave it out for every item)", self.at(last));
        }
        // Named by position: a selector's name need not be an identifier.
        let when = match &d.when {
            Some(w) => {
                let when = Load { refs, errors: &mut self.errors }.condition(w, &format!("similarity_when_{index}"))?;
                Some((when, w.value.clone()))
            }
            None => None,
        };
        let texts = d.texts.iter().map(|t| t.value.clone()).collect();
        Some(Similarity { profile, texts, last: d.last.as_ref().map(|l| l.value), when })
    }

    fn scorer(
        &mut self,
        selector: &str,
        decl: &Spanned<manifest::ScorerDecl>,
        refs: &Refs<'_>,
        default: ScorerImpl,
        weighted: bool,
    ) -> Option<Scorer> {
        use ScorerImpl::{Native, Script};
        let at = self.at(decl);
        let d = &decl.value;
        if !d.enabled {
            return None;
        }
        let weight = match (weighted, d.weight) {
            (true, Some(w)) if w.is_finite() && w >= 0.0 => w,
            (true, Some(w)) => {
                self.error(format!("scorer `{}`: weight {w} must be a number ≥ 0", d.id), at);
                return None;
            }
            (true, None) => {
                self.error(format!("scorer `{}` of selector `{selector}` needs a weight", d.id), at);
                return None;
            }
            (false, Some(_)) => {
                self.error(format!("veto `{}` takes no weight: any veto rejects a candidate", d.id), at);
                return None;
            }
            (false, None) => 0.0,
        };
        if d.script.is_none() && d.native.is_none() {
            self.error(format!("scorer `{}` needs `script`, `native`, or both", d.id), at);
            return None;
        }
        if d.batch && d.script.is_none() {
            self.error(format!("scorer `{}` says `batch: true` but has no script to call once", d.id), at);
            return None;
        }
        let uses = match (d.implementation, d.script.is_some(), d.native.is_some()) {
            (Some(Script), false, _) | (Some(Native), _, false) => {
                self.error(format!("scorer `{}` says impl {:?} but does not name one", d.id, d.implementation), at);
                return None;
            }
            (Some(i), _, _) => i,
            (None, true, false) => Script,
            (None, false, true) => Native,
            (None, true, true) | (None, false, false) => default,
        };
        let script = match &d.script {
            Some(s) => match (Load { refs, errors: &mut self.errors }).resolve(s, None, 2) {
                Some(f) if f.calls_models() => {
                    self.error(
                        "a scorer cannot call models (extract signals in an llm node before the selector)",
                        self.at(s),
                    );
                    return None;
                }
                Some(f) => Some(f),
                None => return None,
            },
            None => None,
        };
        let native = match &d.native {
            Some(n) if refs.natives.scorer(&n.value).is_some() => Some(n.value.clone()),
            Some(n) if uses == Native => {
                self.error(format!("native scorer `{}` is not registered by this host", n.value), self.at(n));
                return None;
            }
            // A twin this host lacks: the script runs.
            _ => None,
        };
        let params: Map = d.params.iter().map(|(k, v)| (k.as_str().into(), value::from_json(v))).collect();
        Some(Scorer {
            id: d.id.clone(),
            weighted,
            weight,
            shared_params: Dynamic::from_map(params.clone()).into_read_only().into_shared(),
            params,
            script,
            batch: d.batch,
            native,
            uses,
        })
    }
}

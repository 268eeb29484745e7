//! Loading a manifest's declarations: options, model profiles, state fields and their reducers,
//! input fields, limits, the finish condition and outputs. Each checked at its place.

use indexmap::IndexMap;
use serde_saphyr::Spanned;

use super::super::manifest::{self, ModelDecl};
use super::super::{Finish, InputSpec, OptionSpec};
use super::Loader;
use crate::limits::Limits;
use crate::llm::{ModelSpec, Profile};
use crate::state::{Field, Schema};
use crate::value;
use crate::vocab::TypeName;
use crate::vocab::is_identifier;

/// Names a state field may not have: they are the template context's own.
const RESERVED: &[&str] = &["params", "options", "input", "vars", "this", "START", "END"];

impl Loader<'_> {
    pub(super) fn options(
        &mut self,
        decls: &IndexMap<String, Spanned<manifest::OptionDecl>>,
    ) -> IndexMap<String, OptionSpec> {
        let mut out = IndexMap::new();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            let inferred = d.default.as_ref().or(d.values.as_ref().and_then(|v| v.first())).map(infer_type);
            let ty = d.ty.or(inferred).unwrap_or(TypeName::String);
            if let Some(values) = &d.values {
                if values.is_empty() {
                    self.error(format!("option `{name}` lists no values"), at.clone());
                }
                for v in values.iter().filter(|v| !ty.holds_json(v)) {
                    self.error(format!("option `{name}` is {}, but value {v} is not", ty.a()), at.clone());
                }
            }
            if let Some(def) = &d.default {
                if !ty.holds_json(def) {
                    self.error(format!("option `{name}` is {}, but its default {def} is not", ty.a()), at.clone());
                } else if let Some(values) = &d.values
                    && !values.contains(def)
                {
                    self.error(format!("the default of option `{name}` ({def}) is not one of its values"), at.clone());
                }
            }
            let number = matches!(ty, TypeName::Int | TypeName::Float);
            if (d.min.is_some() || d.max.is_some()) && !number {
                self.error(
                    format!("option `{name}`: min and max are for a number option, and this one is {}", ty.a()),
                    at.clone(),
                );
            }
            if d.min_length.is_some() && ty != TypeName::String {
                self.error(
                    format!("option `{name}`: min_length is for a text option, and this one is {}", ty.a()),
                    at.clone(),
                );
            }
            if let (Some(lo), Some(hi)) = (d.min, d.max)
                && lo > hi
            {
                self.error(format!("option `{name}`: min {lo} is above max {hi}"), at.clone());
            }
            let spec = OptionSpec {
                ty,
                values: d.values.clone(),
                default: d.default.clone(),
                description: d.description.clone(),
                max_length: d.max_length,
                min_length: d.min_length,
                min: d.min,
                max: d.max,
                model: d.model,
            };
            if let Some(def) = &d.default
                && ty.holds_json(def)
                && d.values.as_ref().is_none_or(|v| v.contains(def))
                && let Some(why) = spec.problem(def)
            {
                self.error(format!("the default of option `{name}` does not fit it: it {why}"), at.clone());
            }
            out.insert(name.clone(), spec);
        }
        out
    }

    pub(super) fn profiles(
        &mut self,
        decls: &IndexMap<String, Spanned<manifest::ProfileDecl>>,
        options: &IndexMap<String, OptionSpec>,
    ) -> IndexMap<String, Profile> {
        let mut out = IndexMap::new();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            let model = match &d.model.value {
                ModelDecl::Fixed(m) => ModelSpec::Fixed(m.clone()),
                ModelDecl::ByOption(by) => {
                    let model_at = self.at(&d.model);
                    let Some((option, models)) = by.iter().next().filter(|_| by.len() == 1) else {
                        self.error(
                            format!(
                                "profile `{name}`: model is a name or {{option: {{value: model}}}} with one option"
                            ),
                            model_at,
                        );
                        continue;
                    };
                    match options.get(option).and_then(|o| o.values.as_ref()) {
                        None => self.error(
                            format!("profile `{name}` picks its model by `{option}`, which is not an option with listed values"),
                            model_at,
                        ),
                        Some(values) => {
                            // Option values as the keys a model map uses: strings as they are.
                            let keys: Vec<String> =
                                values.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect();
                            for v in &keys {
                                if !models.contains_key(v) {
                                    self.error(format!("profile `{name}` has no model for {option} = {v}"), model_at.clone());
                                }
                            }
                            for k in models.keys() {
                                if !keys.contains(k) {
                                    self.error(format!("profile `{name}` names a model for {option} = {k}, which is not one of its values"), model_at.clone());
                                }
                            }
                        }
                    }
                    ModelSpec::ByOption { option: option.clone(), models: models.clone() }
                }
            };
            if let Some(t) = d.temperature
                && !(0.0..=2.0).contains(&t)
            {
                self.error(format!("profile `{name}`: temperature {t} is outside 0..2"), at.clone());
            }
            if d.max_tokens == Some(0) {
                self.error(format!("profile `{name}`: max_tokens must be at least 1"), at.clone());
            }
            if d.default_model.is_some() && d.provider.is_none() {
                self.error(
                    format!("profile `{name}`: default_model is for a profile with a named provider"),
                    at.clone(),
                );
            }
            if let Some(p) = &d.provider
                && !(is_identifier(&p.value.replace('-', "_")))
            {
                self.error(format!("profile `{name}`: `{}` is not a provider name (like groq)", p.value), self.at(p));
            }
            let profile = Profile {
                name: name.clone(),
                description: d.description.clone(),
                model,
                temperature: d.temperature,
                max_tokens: d.max_tokens,
                json: d.json,
                provider: d.provider.as_ref().map(|p| p.value.clone()),
                default_model: d.default_model.clone(),
                other_models: d.other_models.clone(),
            };
            out.insert(name.clone(), profile);
        }
        out
    }

    pub(super) fn schema(&mut self, decls: &IndexMap<String, Spanned<manifest::FieldDecl>>) -> Schema {
        let mut fields = crate::state::Fields::default();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            if !is_identifier(name) || RESERVED.contains(&name.as_str()) {
                self.error(
                    format!(
                        "`{name}` cannot name a state field (it must be an identifier other than {})",
                        RESERVED.join(", ")
                    ),
                    at.clone(),
                );
            }
            let fits = d.reducer.fits(d.ty);
            if !fits {
                self.error(
                    format!("field `{name}`: reducer {} does not fit a {} field", d.reducer.as_str(), d.ty),
                    at.clone(),
                );
            }
            let default = match &d.default {
                Some(v) if d.ty.admits_json(v) => {
                    let v = if d.ty == TypeName::Float { serde_json::json!(v.as_f64()) } else { v.clone() };
                    value::from_json(&v)
                }
                Some(v) => {
                    self.error(format!("field `{name}` is {}, but its default {v} is not", d.ty.a()), at.clone());
                    value::zero(d.ty)
                }
                None => value::zero(d.ty),
            };
            let renewed_on_fork = d.fork == manifest::ForkPolicy::Init;
            let field =
                Field { ty: d.ty, reducer: d.reducer, default, renewed_on_fork, doc: d.doc.clone(), origin: at };
            fields.insert(name.clone(), field);
        }
        Schema { fields }
    }

    pub(super) fn inputs(
        &mut self,
        decls: &IndexMap<String, Spanned<manifest::InputDecl>>,
    ) -> IndexMap<String, InputSpec> {
        let mut out = IndexMap::new();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            if let Some(def) = &d.default
                && !d.ty.holds_json(def)
            {
                self.error(format!("input `{name}` is {}, but its default {def} is not", d.ty.a()), at);
            }
            let spec = InputSpec {
                ty: d.ty,
                required: d.required,
                default: d.default.clone(),
                max_length: d.max_length,
                doc: d.doc.clone(),
            };
            out.insert(name.clone(), spec);
        }
        out
    }

    /// The manifest's `limits:`, each checked against the limit table (0 and values over a
    /// ceiling are refused).
    pub(super) fn limits(&mut self, decls: &IndexMap<String, Spanned<u64>>) -> Limits {
        let mut limits = Limits::default();
        for (key, value) in decls {
            if let Err(why) = limits.set(key, value.value) {
                self.error(why.detail(), self.at(value));
            }
        }
        limits
    }

    /// `finish:`: the bool field whose truth ends a session.
    pub(super) fn finish(&mut self, decl: Option<&Spanned<manifest::FinishDecl>>, schema: &Schema) -> Option<Finish> {
        let f = decl?;
        let when = &f.value.when;
        match schema.fields.get(&when.value) {
            Some(field) if field.ty == TypeName::Bool => {
                Some(Finish { field: when.value.clone(), message: f.value.message.clone() })
            }
            Some(field) => {
                self.error(
                    format!("finish.when must name a bool field; `{}` is {}", when.value, field.ty.a()),
                    self.at(when),
                );
                None
            }
            None => {
                self.error(format!("finish.when names `{}`, which is not a state field", when.value), self.at(when));
                None
            }
        }
    }

    /// `output:`: state fields, each.
    pub(super) fn outputs(&mut self, decls: &[manifest::SpannedStr], schema: &Schema) -> Vec<String> {
        for out in decls {
            if !schema.fields.contains_key(&out.value) {
                self.error(format!("output `{}` is not a state field", out.value), self.at(out));
            }
        }
        decls.iter().map(|o| o.value.clone()).collect()
    }
}

fn infer_type(v: &serde_json::Value) -> TypeName {
    match v {
        serde_json::Value::Bool(_) => TypeName::Bool,
        serde_json::Value::Number(n) if n.is_f64() => TypeName::Float,
        serde_json::Value::Number(_) => TypeName::Int,
        serde_json::Value::Array(_) => TypeName::List,
        serde_json::Value::Object(_) => TypeName::Map,
        _ => TypeName::String,
    }
}

impl Loader<'_> {
    /// `lobby:`: the fields it names exist with the types it needs, and the timeout is a duration.
    pub(super) fn lobby(
        &mut self,
        decl: &Spanned<manifest::LobbyDecl>,
        schema: &Schema,
        inputs: &IndexMap<String, InputSpec>,
    ) -> Option<crate::lobby::Lobby> {
        let d = &decl.value;
        let before = self.errors.len();
        for (key, name, want) in [("players", &d.players, TypeName::List), ("round", &d.round, TypeName::Int)] {
            match schema.fields.get(&name.value) {
                Some(f) if f.ty == want => {}
                Some(f) => self.error(
                    format!("lobby.{key} must name {} state field; `{}` is {}", want.a(), name.value, f.ty.a()),
                    self.at(name),
                ),
                None => {
                    self.error(format!("lobby.{key} names `{}`, which is not a state field", name.value), self.at(name))
                }
            }
        }
        let fields = [
            ("answers", Some(&d.answers), TypeName::Map),
            ("join", d.join.as_ref(), TypeName::List),
            ("leave", d.leave.as_ref(), TypeName::List),
        ];
        for (key, name, want) in fields {
            let Some(name) = name else { continue };
            match inputs.get(&name.value) {
                Some(i) if i.ty == want && !i.required => {}
                Some(i) if i.ty == want => self.error(
                    format!(
                        "lobby.{key} names input `{}`, which must not be required (a round may lack it)",
                        name.value
                    ),
                    self.at(name),
                ),
                Some(i) => self.error(
                    format!("lobby.{key} must name {} input field; `{}` is {}", want.a(), name.value, i.ty.a()),
                    self.at(name),
                ),
                None => self
                    .error(format!("lobby.{key} names `{}`, which is not an input field", name.value), self.at(name)),
            }
        }
        let timeout = match crate::duration::parse(&d.timeout.value) {
            Ok(t) if !t.is_zero() => Some(t),
            Ok(_) => {
                self.error("lobby.timeout must be longer than 0", self.at(&d.timeout));
                None
            }
            Err(e) => {
                self.error(format!("lobby.timeout: {}", e.detail()), self.at(&d.timeout));
                None
            }
        };
        if d.max_players == Some(0) || d.max_name == Some(0) {
            self.error("lobby.max_players and lobby.max_name must be at least 1", self.at(decl));
        }
        if self.errors.len() > before {
            return None;
        }
        Some(crate::lobby::Lobby {
            players: d.players.value.clone(),
            round: d.round.value.clone(),
            answers: d.answers.value.clone(),
            values: d.values.clone(),
            join: d.join.as_ref().map(|j| j.value.clone()),
            leave: d.leave.as_ref().map(|l| l.value.clone()),
            timeout: timeout?,
            max_players: d.max_players,
            max_name: d.max_name.unwrap_or(40),
        })
    }

    /// `expire_finished_after:` a duration (`1h`) or `never`.
    pub(super) fn retention(&mut self, decl: &manifest::SpannedStr) -> Option<Option<std::time::Duration>> {
        match crate::duration::parse_or_never(&decl.value) {
            Ok(d) => Some(d),
            Err(e) => {
                self.error(format!("expire_finished_after: {}", e.detail()), self.at(decl));
                None
            }
        }
    }
}

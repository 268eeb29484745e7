//! A pack's state schema and the reducers that fold node updates into a session's state.
//!
//! Nodes never mutate state; they return updates (a map of field → value) and each field's reducer
//! folds them in. A turn applies updates in place and keeps an [`Undo`] log, so a failed turn is
//! rolled back in time proportional to what it changed, not to the size of the state.

use indexmap::IndexMap;
use rhai::{Dynamic, Map};

use crate::error::{Error, ErrorKind, Result};
use crate::value;
use crate::vocab::{Reducer, TypeName};

mod reducer;

pub use reducer::{ReducerDef, reducer_table};

#[cfg(test)]
use reducer::eq;

/// One state field as the pack declares it.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub ty: TypeName,
    pub reducer: Reducer,
    pub default: Dynamic,
    /// A fork takes this field from the pack's `init`, not from its parent.
    pub renewed_on_fork: bool,
    pub doc: String,
    /// Where the manifest declares it.
    pub origin: crate::error::Origin,
}

/// The state fields of a pack, in declaration order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schema {
    pub fields: Fields,
}

/// Fields by name. Every update of every turn looks its fields up here, so the hasher is a fast
/// one rather than std's SipHash (the names are the pack's own).
pub(crate) type Fields = IndexMap<String, Field, foldhash::fast::RandomState>;

/// How to undo one applied update.
#[derive(Debug)]
pub(super) enum UndoOp {
    /// Put back the old value of a field.
    Restore(rhai::Identifier, Dynamic),
    /// Shorten a list field back to its old length.
    Truncate(rhai::Identifier, usize),
    /// Put back (or remove) one key of a map field.
    MapKey(rhai::Identifier, rhai::Identifier, Option<Dynamic>),
}

/// The log of everything a turn changed, to roll it back if the turn fails.
#[derive(Debug, Default)]
pub(crate) struct Undo(pub(super) Vec<UndoOp>);

impl Undo {
    /// Reverts every change in the log, newest first. Returns false, having changed nothing, when
    /// the state cannot be had (a bug left it locked): the session must then be read again.
    #[must_use]
    pub(crate) fn rollback(self, state: &mut Dynamic) -> bool {
        let Some(mut map) = state.write_lock::<Map>() else {
            tracing::error!(
                "cannot undo a turn: its state is locked (a bug); the session is read again from its store"
            );
            return false;
        };
        for op in self.0.into_iter().rev() {
            match op {
                UndoOp::Restore(field, old) => {
                    map.insert(field, old);
                }
                UndoOp::Truncate(field, len) => {
                    if let Some(mut list) = map.get_mut(&field).and_then(|v| v.write_lock::<rhai::Array>()) {
                        list.truncate(len);
                    }
                }
                UndoOp::MapKey(field, key, old) => {
                    if let Some(mut inner) = map.get_mut(&field).and_then(|v| v.write_lock::<Map>()) {
                        match old {
                            Some(v) => inner.insert(key, v),
                            None => inner.remove(&key),
                        };
                    }
                }
            }
        }
        true
    }
}

impl Schema {
    /// The state of a new session: every field at its default, read-only for scripts.
    pub(crate) fn initial(&self) -> Dynamic {
        root(self.fields.iter().map(|(k, f)| (k.as_str().into(), stored(f.default.clone()))).collect())
    }

    /// The state a snapshot records, fitted to this schema: a field the snapshot lacks (or holds
    /// with another type) takes its default; a field the schema no longer has is dropped. This is
    /// how sessions survive a pack whose fields changed.
    pub(crate) fn restore(&self, snapshot: &serde_json::Value) -> Dynamic {
        let mut map = Map::new();
        for (name, field) in &self.fields {
            let v = snapshot
                .get(name)
                .map(value::from_json)
                .filter(|v| field.ty.admits(v))
                .unwrap_or_else(|| field.default.clone());
            map.insert(name.as_str().into(), stored(v));
        }
        root(map)
    }

    /// The schema as the store records it for each pack version: every field's type, reducer and
    /// default, in order. With it a session stored on a version whose files are gone can still be
    /// rebuilt (its updates folded by the reducers they were written for) and then migrated.
    pub(crate) fn describe(&self) -> serde_json::Value {
        let fields: Vec<serde_json::Value> = self
            .fields
            .iter()
            .map(|(name, f)| {
                serde_json::json!({
                    "name": name,
                    "type": f.ty,
                    "reducer": f.reducer,
                    "default": value::to_json(&f.default),
                })
            })
            .collect();
        serde_json::json!({ "fields": fields })
    }

    /// A schema [`Schema::describe`] recorded; `None` when `description` is not one.
    pub(crate) fn from_description(description: &serde_json::Value) -> Option<Schema> {
        let mut fields = Fields::default();
        for f in description.get("fields")?.as_array()? {
            let name = f.get("name")?.as_str()?.to_owned();
            let field = Field {
                ty: serde_json::from_value(f.get("type")?.clone()).ok()?,
                reducer: serde_json::from_value(f.get("reducer")?.clone()).ok()?,
                default: value::from_json(f.get("default").unwrap_or(&serde_json::Value::Null)),
                renewed_on_fork: false,
                doc: String::new(),
                origin: crate::error::Origin::file("(recorded schema)"),
            };
            fields.insert(name, field);
        }
        Some(Schema { fields })
    }

    /// Folds recorded updates in again (replaying checkpoints). Updates to fields the schema no
    /// longer has, or no longer accepts, are skipped.
    pub(crate) fn replay(&self, state: &mut Dynamic, updates: &Map) {
        let fitting: Map = updates
            .iter()
            .filter(|(k, v)| {
                let mut one = Map::new();
                one.insert((*k).clone(), (*v).clone());
                self.check(&one).is_ok()
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let _ = self.apply(state, &fitting, &mut Undo::default());
    }

    /// Sets fields to `values` outright (what a pack's `migrate` script returns), checking that
    /// each names a field and fits its type.
    pub(crate) fn overwrite(&self, state: &mut Dynamic, values: &Map) -> Result<()> {
        for (name, v) in values {
            let field = self.field(name)?;
            if !field.ty.admits(v) {
                return Err(Error::new(
                    ErrorKind::Script,
                    format!("`{name}` is {}, not {}", field.ty.a(), value::type_of(v)),
                ));
            }
        }
        let mut map = state.write_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
        for (name, v) in values {
            map.insert(name.clone(), stored(v.clone()));
        }
        Ok(())
    }

    /// A hand edit of the state (`{"field": value}`) as values to set outright: each name a
    /// declared field and each value of its type, or an input error naming the first that is
    /// not (an unknown field with the nearest name).
    pub(crate) fn checked_edit(&self, set: &serde_json::Map<String, serde_json::Value>) -> Result<Map> {
        if set.is_empty() {
            return Err(Error::input("the edit sets no fields: send `set` with at least one"));
        }
        let mut out = Map::new();
        for (name, v) in set {
            let Some(field) = self.fields.get(name) else {
                let near = crate::script::lint::nearest(name, self.fields.keys().map(String::as_str));
                let known: Vec<&str> = self.fields.keys().map(String::as_str).collect();
                return Err(Error::input(format!(
                    "`{name}` is not a state field{} (fields: {})",
                    crate::script::lint::did_you_mean(near),
                    known.join(", ")
                )));
            };
            let value = value::from_json(v);
            if !field.ty.admits(&value) {
                return Err(Error::input(format!("`{name}` is {}, not {}", field.ty.a(), value::type_of(&value))));
            }
            // `95` typed for a float field is 95.0: the field keeps its type.
            let value = match value.as_int() {
                Ok(n) if field.ty == TypeName::Float => Dynamic::from_float(n as rhai::FLOAT),
                _ => value,
            };
            out.insert(name.as_str().into(), value);
        }
        Ok(out)
    }

    /// An edit's list items against the items each list holds now (or, empty now, its default
    /// holds): an item of a type none of them has is an input error naming it, so an edit cannot
    /// put a number among a list's names. An int among floats is a number too. A list with no
    /// items to compare with takes any.
    pub(crate) fn check_items(&self, state: &Dynamic, set: &Map) -> Result<()> {
        let Some(current) = state.read_lock::<Map>() else { return Ok(()) };
        for (name, new) in set {
            let Some(field) = self.fields.get(name.as_str()).filter(|f| f.ty == TypeName::List) else { continue };
            let Some(items) = new.read_lock::<rhai::Array>() else { continue };
            let default = Some(&field.default);
            let held = [current.get(name), default]
                .into_iter()
                .flatten()
                .filter_map(|v| v.read_lock::<rhai::Array>().map(|a| a.iter().map(value::type_of).collect::<Vec<_>>()))
                .find(|types| !types.is_empty());
            let Some(mut held) = held else { continue };
            held.sort_unstable();
            held.dedup();
            for (i, item) in items.iter().enumerate() {
                let ty = value::type_of(item);
                let number_among_floats = ty == "an int" && held.contains(&"a float");
                if !(held.contains(&ty) || number_among_floats) {
                    return Err(Error::input(format!(
                        "`{name}[{i}]` is {ty}, but the items of `{name}` are {}",
                        held.join(" or ")
                    )));
                }
            }
        }
        Ok(())
    }

    /// Checks that `updates` name declared fields with values their reducers accept.
    pub(crate) fn check(&self, updates: &Map) -> Result<()> {
        for (name, value) in updates {
            let field = self.field(name)?;
            let ok = field.reducer.accepts(field.ty, value);
            if !ok {
                return Err(Error::new(
                    ErrorKind::Script,
                    format!(
                        "the update sets `{name}` to {} but `{name}` is {} field{}",
                        value::type_of(value),
                        field.ty.a(),
                        match field.reducer {
                            Reducer::Replace => String::new(),
                            r => format!(" with reducer {}", r.as_str()),
                        }
                    ),
                ));
            }
        }
        Ok(())
    }

    fn field(&self, name: &str) -> Result<&Field> {
        self.fields.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.fields.keys().map(String::as_str).collect();
            Error::new(
                ErrorKind::Script,
                format!("the update names `{name}`, which is not a state field (fields: {})", known.join(", ")),
            )
        })
    }

    /// Folds checked `updates` into `state` through each field's reducer, logging undo steps.
    pub(crate) fn apply(&self, state: &mut Dynamic, updates: &Map, undo: &mut Undo) -> Result<()> {
        let mut map = state.write_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
        for (name, update) in updates {
            let name = name.clone();
            let field = self.field(&name)?;
            let update = update.clone().flatten().into_read_only();
            let slot = map.entry(name.clone()).or_insert_with(|| stored(field.default.clone()));
            field.reducer.fold(&name, field.ty, slot, update, undo)?;
        }
        Ok(())
    }
}

/// A value as state keeps it: read-only and plain. Only the state as a whole is shared (see
/// [`root`]): Rhai holds that no list or map has a shared value inside it, and panics when its
/// size checks meet one (`this.len()`, `to_json(this)`).
pub(super) fn stored(v: Dynamic) -> Dynamic {
    v.flatten().into_read_only()
}

/// A state as sessions hold it: a read-only map (scripts see it as `this` and cannot assign to
/// it), shared, so that a template's views of its fields hold the state itself, not a copy, and
/// a script's call locks it once (see `Sandbox::call`).
pub(crate) fn root(map: Map) -> Dynamic {
    Dynamic::from_map(map).into_read_only().into_shared()
}

/// A copy of `state` that shares nothing with it, for a script on another thread.
pub(crate) fn copy(state: &Dynamic) -> Result<Dynamic> {
    let map =
        state.read_lock::<Map>().ok_or_else(|| Error::internal("the state is locked by a script still running"))?;
    Ok(root(map.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{from_json, to_json};
    use serde_json::json;

    fn schema() -> Schema {
        let mk = |ty, reducer, default: serde_json::Value| Field {
            ty,
            reducer,
            default: from_json(&default),
            renewed_on_fork: false,
            doc: String::new(),
            origin: crate::error::Origin::file("config/test.yaml"),
        };
        let mut fields = Fields::default();
        fields.insert("score".into(), mk(TypeName::Int, Reducer::Replace, json!(0)));
        fields.insert("ratio".into(), mk(TypeName::Float, Reducer::Replace, json!(0.0)));
        fields.insert("log".into(), mk(TypeName::List, Reducer::Append, json!([])));
        fields.insert("seen".into(), mk(TypeName::List, Reducer::Union, json!(["a"])));
        fields.insert("meta".into(), mk(TypeName::Map, Reducer::Merge, json!({"x": 1})));
        fields.insert("total".into(), mk(TypeName::Number, Reducer::Add, json!(1)));
        Schema { fields }
    }

    fn updates(v: serde_json::Value) -> Map {
        from_json(&v).cast::<Map>()
    }

    #[test]
    fn every_reducer_folds_and_rolls_back() {
        let s = schema();
        let mut state = s.initial();
        let before = to_json(&state);
        let mut undo = Undo::default();
        let u = updates(json!({
            "score": 5, "ratio": 2, "log": ["m1", "m2"], "seen": ["a", "b", "b"],
            "meta": {"y": 2, "x": 3}, "total": 2.5
        }));
        s.check(&u).unwrap();
        s.apply(&mut state, &u, &mut undo).unwrap();
        s.apply(&mut state, &updates(json!({"log": "m3", "total": 1})), &mut undo).unwrap();
        assert_eq!(
            to_json(&state),
            json!({"score": 5, "ratio": 2.0, "log": ["m1", "m2", "m3"], "seen": ["a", "b"],
                   "meta": {"x": 3, "y": 2}, "total": 4.5})
        );
        assert!(undo.rollback(&mut state));
        assert_eq!(to_json(&state), before);
    }

    #[test]
    fn bad_updates_name_the_field() {
        let s = schema();
        let e = s.check(&updates(json!({"score": "high"}))).unwrap_err();
        assert_eq!(e.detail(), "the update sets `score` to a string but `score` is an int field");
        let e = s.check(&updates(json!({"nope": 1}))).unwrap_err();
        assert!(e.detail().contains("`nope`, which is not a state field"), "{e}");
        assert!(s.check(&updates(json!({"meta": [1]}))).is_err());
        assert!(s.check(&updates(json!({"total": "x"}))).is_err());
    }

    #[test]
    fn state_is_read_only_to_scripts() {
        let state = schema().initial();
        assert!(state.is_read_only());
    }

    #[test]
    fn restoring_fits_a_snapshot_to_the_schema() {
        let s = schema();
        let state = s.restore(&json!({"score": "not an int", "log": ["a"], "gone": 1}));
        let j = to_json(&state);
        assert_eq!(j["score"], json!(0), "a mistyped field takes its default");
        assert_eq!(j["log"], json!(["a"]));
        assert_eq!(j["meta"], json!({"x": 1}), "a missing field takes its default");
        assert!(j.get("gone").is_none(), "a removed field is dropped");
        let mut state = state;
        s.replay(&mut state, &updates(json!({"log": "b", "gone": 2, "score": "x", "total": 1})));
        let j = to_json(&state);
        assert_eq!((j["log"].clone(), j["score"].clone(), j["total"].clone()), (json!(["a", "b"]), json!(0), json!(2)));
    }

    #[test]
    fn the_state_is_shared_whole_its_fields_plain_and_rollback_restores_them() {
        let s = schema();
        let mut state = s.initial();
        let mut undo = Undo::default();
        s.apply(&mut state, &updates(json!({"log": ["a"], "meta": {"k": 1}, "seen": ["a", "z"]})), &mut undo).unwrap();
        assert!(state.is_shared() && state.is_read_only());
        let map = state.read_lock::<Map>().unwrap();
        assert!(map.values().all(|v| !v.is_shared()), "no shared value inside the state");
        drop(map);
        assert!(undo.rollback(&mut state));
        assert_eq!(to_json(&state)["log"], json!([]));
        assert_eq!(to_json(&state)["meta"], json!({"x": 1}));
        assert_eq!(to_json(&state)["seen"], json!(["a"]));
    }

    #[test]
    fn equality_is_structural() {
        assert!(eq(&from_json(&json!({"a": [1, "x"]})), &from_json(&json!({"a": [1, "x"]}))));
        assert!(!eq(&from_json(&json!({"a": [1]})), &from_json(&json!({"a": [2]}))));
        assert!(!eq(&from_json(&json!(1)), &from_json(&json!("1"))));
    }
}

//! Reducers: how a node's update to a field is folded into the state. Which field types each
//! fits, which updates it accepts, and how it folds them in (logging how to undo it), in one place.

use rhai::{Array, Dynamic, Map};

use super::{Undo, UndoOp, stored};
use crate::error::{Error, Result};
use crate::vocab::{Reducer, TypeName};

/// One reducer as the table holds it: its name, what it does, the field types it fits, and the
/// functions that check and fold its updates. A new reducer is one entry here (and a name in
/// [`Reducer`]); docs/reducers.md is generated from this table.
pub struct ReducerDef {
    /// The reducer.
    pub reducer: Reducer,
    /// The field types it fits, in words.
    pub fits_types: &'static str,
    /// What it does to a field.
    pub doc: &'static str,
    fits: fn(TypeName) -> bool,
    accepts: fn(TypeName, &Dynamic) -> bool,
    fold: fn(&rhai::Identifier, TypeName, &mut Dynamic, Dynamic, &mut Undo) -> Result<()>,
    combine: fn(Dynamic, Dynamic) -> Dynamic,
}

/// Every reducer.
static REDUCERS: [ReducerDef; 5] = [
    ReducerDef {
        reducer: Reducer::Replace,
        fits_types: "any",
        doc: "The update replaces the value (the default). An int update to a float field becomes a float.",
        fits: |_| true,
        accepts: |ty, update| ty.admits(update),
        fold: fold_replace,
        combine: |_, b| b,
    },
    ReducerDef {
        reducer: Reducer::Append,
        fits_types: "list",
        doc: "The update's items (a list), or the update itself, are added at the end.",
        fits: |ty| ty == TypeName::List,
        accepts: |_, _| true,
        fold: |name, _, slot, update, undo| fold_list(name, slot, update, undo, false),
        combine: combine_lists,
    },
    ReducerDef {
        reducer: Reducer::Union,
        fits_types: "list",
        doc: "As `append`, but only the items not already in the list.",
        fits: |ty| ty == TypeName::List,
        accepts: |_, _| true,
        fold: |name, _, slot, update, undo| fold_list(name, slot, update, undo, true),
        combine: combine_lists,
    },
    ReducerDef {
        reducer: Reducer::Merge,
        fits_types: "map",
        doc: "The update (a map)'s keys replace the value's; the other keys stay.",
        fits: |ty| ty == TypeName::Map,
        accepts: |_, update| update.is_map(),
        fold: fold_merge,
        combine: |a, b| {
            if a.is_map() && b.is_map() {
                let mut m = a.cast::<Map>();
                m.extend(b.cast::<Map>());
                Dynamic::from_map(m)
            } else {
                b
            }
        },
    },
    ReducerDef {
        reducer: Reducer::Add,
        fits_types: "int, float, number",
        doc: "The update (a number) is added to the value; ints saturate rather than overflow.",
        fits: |ty| matches!(ty, TypeName::Int | TypeName::Float | TypeName::Number),
        accepts: |_, update| update.is_int() || update.is_float(),
        fold: fold_add,
        combine: |a, b| sum(&a, &b),
    },
];

/// The reducers, for references and tools.
pub fn reducer_table() -> &'static [ReducerDef] {
    &REDUCERS
}

impl Reducer {
    /// Its entry: the table lists the reducers in the enum's order (a test holds it).
    fn def(self) -> &'static ReducerDef {
        &REDUCERS[self as usize]
    }

    /// Whether the reducer can fold updates into a field of type `ty`.
    pub(crate) fn fits(self, ty: TypeName) -> bool {
        (self.def().fits)(ty)
    }

    /// Whether the reducer takes `update` for a field of type `ty`.
    pub(crate) fn accepts(self, ty: TypeName, update: &Dynamic) -> bool {
        (self.def().accepts)(ty, update)
    }

    /// Folds an accepted `update` into the field `name` (of type `ty`) held in `slot`, logging
    /// how to undo it.
    pub(crate) fn fold(
        self,
        name: &rhai::Identifier,
        ty: TypeName,
        slot: &mut Dynamic,
        update: Dynamic,
        undo: &mut Undo,
    ) -> Result<()> {
        (self.def().fold)(name, ty, slot, update, undo)
    }

    /// Two updates to one field, as one: what folding `a` and then `b` in does (a map node's
    /// items, folded in item order before the node's updates are applied).
    pub(crate) fn combine(self, a: Dynamic, b: Dynamic) -> Dynamic {
        (self.def().combine)(a, b)
    }
}

fn fold_replace(
    name: &rhai::Identifier,
    ty: TypeName,
    slot: &mut Dynamic,
    update: Dynamic,
    undo: &mut Undo,
) -> Result<()> {
    let update = if ty == TypeName::Float && update.is_int() {
        Dynamic::from_float(update.as_int().unwrap_or_default() as f64).into_read_only()
    } else {
        update
    };
    let old = std::mem::replace(slot, stored(update));
    undo.0.push(UndoOp::Restore(name.clone(), old));
    Ok(())
}

/// Append (or, `unique`, union) the update's items to the list in `slot`.
fn fold_list(
    name: &rhai::Identifier,
    slot: &mut Dynamic,
    update: Dynamic,
    undo: &mut Undo,
    unique: bool,
) -> Result<()> {
    let mut list =
        slot.write_lock::<Array>().ok_or_else(|| Error::internal(format!("list field `{name}` holds a non-list")))?;
    undo.0.push(UndoOp::Truncate(name.clone(), list.len()));
    let items = if update.is_array() { update.cast::<Array>() } else { vec![update] };
    for item in items {
        if !unique || !list.iter().any(|x| eq(x, &item)) {
            list.push(item);
        }
    }
    Ok(())
}

fn fold_merge(
    name: &rhai::Identifier,
    _: TypeName,
    slot: &mut Dynamic,
    update: Dynamic,
    undo: &mut Undo,
) -> Result<()> {
    let mut inner =
        slot.write_lock::<Map>().ok_or_else(|| Error::internal(format!("map field `{name}` holds a non-map")))?;
    for (k, v) in update.cast::<Map>() {
        let old = inner.insert(k.clone(), v);
        undo.0.push(UndoOp::MapKey(name.clone(), k, old));
    }
    Ok(())
}

fn fold_add(name: &rhai::Identifier, _: TypeName, slot: &mut Dynamic, update: Dynamic, undo: &mut Undo) -> Result<()> {
    let total = sum(slot, &update);
    let old = std::mem::replace(slot, total.into_read_only());
    undo.0.push(UndoOp::Restore(name.clone(), old));
    Ok(())
}

/// Two list updates as one.
fn combine_lists(a: Dynamic, b: Dynamic) -> Dynamic {
    let mut list = if a.is_array() { a.cast::<Array>() } else { vec![a] };
    if b.is_array() {
        list.extend(b.cast::<Array>());
    } else {
        list.push(b);
    }
    Dynamic::from_array(list)
}

/// `a + b`: ints saturating, anything else as floats.
fn sum(a: &Dynamic, b: &Dynamic) -> Dynamic {
    match (a.as_int(), b.as_int()) {
        (Ok(x), Ok(y)) => Dynamic::from_int(x.saturating_add(y)),
        _ => Dynamic::from_float(as_f64(a) + as_f64(b)),
    }
}

fn as_f64(d: &Dynamic) -> f64 {
    d.as_float().or_else(|_| d.as_int().map(|i| i as f64)).unwrap_or(0.0)
}

/// Structural equality of two values (Rhai's `Dynamic` has none of its own).
pub(crate) fn eq(a: &Dynamic, b: &Dynamic) -> bool {
    if let (Ok(x), Ok(y)) = (a.as_int(), b.as_int()) {
        return x == y;
    }
    if let (Ok(x), Ok(y)) = (a.as_float(), b.as_float()) {
        return x == y;
    }
    if let (Ok(x), Ok(y)) = (a.as_bool(), b.as_bool()) {
        return x == y;
    }
    if a.is_unit() || b.is_unit() {
        return a.is_unit() && b.is_unit();
    }
    if let (Some(x), Some(y)) = (a.read_lock::<rhai::ImmutableString>(), b.read_lock::<rhai::ImmutableString>()) {
        return *x == *y;
    }
    if let (Some(x), Some(y)) = (a.read_lock::<rhai::Array>(), b.read_lock::<rhai::Array>()) {
        return x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| eq(p, q));
    }
    if let (Some(x), Some(y)) = (a.read_lock::<Map>(), b.read_lock::<Map>()) {
        return x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| eq(v, w)));
    }
    if let (Ok(x), Ok(y)) = (a.as_char(), b.as_char()) {
        return x == y;
    }
    false
}

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn the_table_lists_the_reducers_in_their_order() {
        for (i, d) in REDUCERS.iter().enumerate() {
            assert_eq!(d.reducer as usize, i, "{}", d.reducer.as_str());
        }
    }
}

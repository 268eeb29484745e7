//! Reducers: how a node's update to a field is folded into the state. Which field types each
//! fits, which updates it accepts, and how it folds them in (logging how to undo it), in one place.

use rhai::{Array, Dynamic, Map};

use super::{Undo, UndoOp, stored};
use crate::error::{Error, Result};
use crate::vocab::{Reducer, TypeName};

impl Reducer {
    /// Whether the reducer can fold updates into a field of type `ty` (append and union need a
    /// list, merge a map, add a number).
    pub(crate) fn fits(self, ty: TypeName) -> bool {
        match self {
            Reducer::Replace => true,
            Reducer::Append | Reducer::Union => ty == TypeName::List,
            Reducer::Merge => ty == TypeName::Map,
            Reducer::Add => matches!(ty, TypeName::Int | TypeName::Float | TypeName::Number),
        }
    }

    /// Whether the reducer takes `update` for a field of type `ty`.
    pub(crate) fn accepts(self, ty: TypeName, update: &Dynamic) -> bool {
        match self {
            Reducer::Replace => ty.admits(update),
            // A list extends, anything else is one more item.
            Reducer::Append | Reducer::Union => true,
            Reducer::Merge => update.is_map(),
            Reducer::Add => update.is_int() || update.is_float(),
        }
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
        let name = name.clone();
        match self {
            Reducer::Replace => {
                let update = if ty == TypeName::Float && update.is_int() {
                    Dynamic::from_float(update.as_int().unwrap_or_default() as f64).into_read_only()
                } else {
                    update
                };
                let old = std::mem::replace(slot, stored(update));
                undo.0.push(UndoOp::Restore(name, old));
            }
            Reducer::Append | Reducer::Union => {
                let mut list = slot
                    .write_lock::<Array>()
                    .ok_or_else(|| Error::internal(format!("list field `{name}` holds a non-list")))?;
                undo.0.push(UndoOp::Truncate(name.clone(), list.len()));
                let items = if update.is_array() { update.cast::<Array>() } else { vec![update] };
                for item in items {
                    if self == Reducer::Append || !list.iter().any(|x| eq(x, &item)) {
                        list.push(item);
                    }
                }
            }
            Reducer::Merge => {
                let mut inner = slot
                    .write_lock::<Map>()
                    .ok_or_else(|| Error::internal(format!("map field `{name}` holds a non-map")))?;
                for (k, v) in update.cast::<Map>() {
                    let old = inner.insert(k.clone(), v);
                    undo.0.push(UndoOp::MapKey(name.clone(), k, old));
                }
            }
            Reducer::Add => {
                let sum = match (slot.as_int(), update.as_int()) {
                    (Ok(a), Ok(b)) => Dynamic::from_int(a.saturating_add(b)),
                    _ => Dynamic::from_float(as_f64(slot) + as_f64(&update)),
                };
                let old = std::mem::replace(slot, sum.into_read_only());
                undo.0.push(UndoOp::Restore(name, old));
            }
        }
        Ok(())
    }
}

impl Reducer {
    /// Two updates to one field, as one: what folding `a` and then `b` in does (a map node's
    /// items, folded in item order before the node's updates are applied).
    pub(crate) fn combine(self, a: Dynamic, b: Dynamic) -> Dynamic {
        match self {
            Reducer::Replace => b,
            Reducer::Append | Reducer::Union => {
                let mut list = if a.is_array() { a.cast::<Array>() } else { vec![a] };
                if b.is_array() {
                    list.extend(b.cast::<Array>());
                } else {
                    list.push(b);
                }
                Dynamic::from_array(list)
            }
            Reducer::Merge if a.is_map() && b.is_map() => {
                let mut m = a.cast::<Map>();
                m.extend(b.cast::<Map>());
                Dynamic::from_map(m)
            }
            Reducer::Merge => b,
            Reducer::Add => match (a.as_int(), b.as_int()) {
                (Ok(x), Ok(y)) => Dynamic::from_int(x.saturating_add(y)),
                _ => Dynamic::from_float(as_f64(&a) + as_f64(&b)),
            },
        }
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

//! The host functions' access to a pack's data tables and JSON Schemas.

use std::sync::Arc;

use rhai::{EvalAltResult, INT, NativeCallContext};

use super::{HostShared, with_turn};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

pub(super) fn table_of<'a>(shared: &'a HostShared, name: &str) -> RhaiResult<&'a Arc<crate::data::Table>> {
    shared.tables.get(name).ok_or_else(|| {
        let mut known: Vec<&str> = shared.tables.keys().map(String::as_str).collect();
        known.sort();
        format!("the pack has no table `{name}` (tables: {})", known.join(", ")).into()
    })
}

pub(super) fn schema_of<'a>(shared: &'a HostShared, name: &str) -> RhaiResult<&'a Arc<crate::schemas::JsonSchema>> {
    shared.schemas.get(name).ok_or_else(|| {
        let mut known: Vec<&str> = shared.schemas.keys().map(String::as_str).collect();
        known.sort();
        format!("the pack has no schema `{name}` (schemas: {})", known.join(", ")).into()
    })
}

/// Records a counter bump of the turn (see `count`).
pub(super) fn bump(
    ctx: &NativeCallContext<'_>,
    shared: &HostShared,
    table: &str,
    key: &str,
    counter: Option<&str>,
    by: INT,
) -> RhaiResult<()> {
    let t = table_of(shared, table)?;
    let counter = match counter {
        Some(c) if t.counters.iter().any(|x| x == c) => c.to_owned(),
        Some(c) => {
            return Err(format!("table `{table}` has no counter `{c}` (counters: {})", t.counters.join(", ")).into());
        }
        None => t.counters.first().cloned().ok_or_else(|| format!("table `{table}` declares no counters"))?,
    };
    if !t.has_key(key) {
        return Err(format!("table `{table}` has no row `{key}`").into());
    }
    with_turn(ctx, |tag| {
        tag.turn.bump(crate::store::Bump { table: table.to_owned(), counter, key: key.to_owned(), by });
        Ok(())
    })
}

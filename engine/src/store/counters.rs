//! Shared counters: a count per row of a pack's data table (how often a question was asked), summed
//! over every session of the pack. A checkpoint carries its bumps ([`Checkpoint::bumps`]) and
//! the store applies them in the same write, so a count never runs ahead of or behind the turns.
//!
//! [`Checkpoint::bumps`]: super::Checkpoint::bumps

use super::memory::MemoryStore;
#[cfg(feature = "postgres")]
use super::postgres::PostgresStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::shared::{Sql, on_pool, on_sql_stores};
#[cfg(feature = "sqlite")]
use super::sqlite::SqliteStore;
use super::store_error;
use crate::error::Result;
use crate::llm::BoxFuture;

/// A store that keeps shared counters (see [`Store::counters`](super::Store::counters)).
pub trait Counters: Send + Sync {
    /// The counters of `pack`'s table `table`: (row key, counter, value) for every row counted.
    fn counts<'a>(&'a self, pack: &'a str, table: &'a str) -> BoxFuture<'a, Result<Vec<(String, String, i64)>>>;
}

/// One bump of a shared counter: a row's counter of a pack's data table, by `by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bump {
    /// The table.
    pub table: String,
    /// The counter (`times_used`).
    pub counter: String,
    /// The row's key.
    pub key: String,
    /// How much to add.
    pub by: i64,
}

impl Counters for MemoryStore {
    fn counts<'a>(&'a self, pack: &'a str, table: &'a str) -> BoxFuture<'a, Result<Vec<(String, String, i64)>>> {
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let rows = counters
            .iter()
            .filter(|((p, t, _, _), _)| p == pack && t == table)
            .map(|((_, _, counter, key), n)| (key.clone(), counter.clone(), *n))
            .collect();
        Box::pin(std::future::ready(Ok(rows)))
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
on_sql_stores!(Counters {
    fn counts<'a>(&'a self, pack: &'a str, table: &'a str) -> BoxFuture<'a, Result<Vec<(String, String, i64)>>> => counters;
});

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn counters(sql: Sql<'_>, pack: &str, table: &str) -> Result<Vec<(String, String, i64)>> {
    on_pool!(sql, pool => sqlx::query_as("SELECT key, counter, n FROM counters WHERE pack = $1 AND tab = $2")
        .bind(pack)
        .bind(table)
        .fetch_all(pool)
        .await)
    .map_err(|e| store_error("cannot read counters", e))
}

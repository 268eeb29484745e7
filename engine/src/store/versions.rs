//! Pack versions' state schemas, recorded once per version so that sessions stored on a version
//! can be rebuilt and migrated after the pack's files changed, by any process sharing the store.

use serde_json::Value as Json;

use super::memory::MemoryStore;
#[cfg(feature = "postgres")]
use super::postgres::PostgresStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::shared::{self as sql, Sql, on_pool, on_sql_stores};
#[cfg(feature = "sqlite")]
use super::sqlite::SqliteStore;
use super::store_error;
use crate::error::Result;
use crate::llm::BoxFuture;

/// A store that records pack versions' state schemas (see [`Store::versions`](super::Store::versions)).
pub trait PackVersions: Send + Sync {
    /// Records the state schema of version `version` of `pack` (what `Schema::describe` makes),
    /// once: a later call for the same version changes nothing.
    fn save_schema<'a>(&'a self, pack: &'a str, version: &'a str, schema: &'a Json) -> BoxFuture<'a, Result<()>>;

    /// The schema recorded for version `version` of `pack`, if one was.
    fn schema<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<Json>>>;
}

impl PackVersions for MemoryStore {
    fn save_schema<'a>(&'a self, pack: &'a str, version: &'a str, schema: &'a Json) -> BoxFuture<'a, Result<()>> {
        let mut schemas = self.schemas.lock().unwrap_or_else(|p| p.into_inner());
        schemas.entry((pack.to_owned(), version.to_owned())).or_insert_with(|| schema.clone());
        Box::pin(std::future::ready(Ok(())))
    }

    fn schema<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<Json>>> {
        let schemas = self.schemas.lock().unwrap_or_else(|p| p.into_inner());
        Box::pin(std::future::ready(Ok(schemas.get(&(pack.to_owned(), version.to_owned())).cloned())))
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
on_sql_stores!(PackVersions {
    fn save_schema<'a>(&'a self, pack: &'a str, version: &'a str, schema: &'a Json) -> BoxFuture<'a, Result<()>> => save;
    fn schema<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<Json>>> => schema;
});

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn save(sql: Sql<'_>, pack: &str, version: &str, schema: &Json) -> Result<()> {
    on_pool!(sql, pool => sqlx::query(
            "INSERT INTO pack_schemas (pack, version, schema, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (pack, version) DO NOTHING",
        )
        .bind(pack)
        .bind(version)
        .bind(schema.to_string())
        .bind(crate::vocab::now_ms())
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot record a pack schema", e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn schema(sql: Sql<'_>, pack: &str, version: &str) -> Result<Option<Json>> {
    let found: Option<String> = on_pool!(sql, pool =>
        sqlx::query_scalar("SELECT schema FROM pack_schemas WHERE pack = $1 AND version = $2")
            .bind(pack)
            .bind(version)
            .fetch_optional(pool)
            .await)
    .map_err(|e| store_error("cannot read a pack schema", e))?;
    found.map(|s| sql::json("pack schema", &s)).transpose()
}

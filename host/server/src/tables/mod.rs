//! The server's own tables: the keys that reach sessions besides the operator's, the jobs it
//! runs for its clients, and the calibrations of packs' stand-ins `ruleweave calibrate` kept. Where the session store is a database (SQLite, PostgreSQL), they are
//! tables in it, beside the sessions their rows refer to (a session's keys go with it, by
//! foreign keys that cascade), so that every replica sharing it honours the same keys and
//! answers for the same jobs; their migrations are this crate's (`migrations/`), numbered among
//! the store's. Beside a memory store they are kept in this process's memory.

mod calibrations;
mod jobs;
mod keys;
#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use ruleweave::store::{Sql, Store};
use ruleweave::{Error, ErrorKind, Result};

pub use calibrations::Calibrations;
pub use jobs::{JOB_KEPT_MS, Job, JobState, Jobs};
pub use keys::{Grant, IssuedKey, Keys, Lineage, key_hash};

/// The server's tables, over one session store.
#[derive(Clone)]
pub struct Tables {
    /// The keys that reach sessions besides the operator's.
    pub keys: Arc<dyn Keys>,
    /// The jobs the server runs for its clients.
    pub jobs: Arc<dyn Jobs>,
    /// The calibrations `ruleweave calibrate` kept, by pack and version.
    pub calibrations: Arc<dyn Calibrations>,
}

impl Tables {
    /// The tables beside `store`: in its database (migrated to this build's tables first), or
    /// in memory beside a memory store; `None` for a store of another kind, which keeps none.
    pub async fn open(store: &Arc<dyn Store>) -> Result<Option<Tables>> {
        let db = match store.sql() {
            Some(Sql::Sqlite(pool)) => {
                migrate(sqlx::migrate!("migrations/sqlite"), pool).await?;
                Db::Sqlite(pool.clone())
            }
            Some(Sql::Postgres(pool)) => {
                migrate(sqlx::migrate!("migrations/postgres"), pool).await?;
                Db::Postgres(pool.clone())
            }
            None if store.kind() == "memory" => {
                let keys = Arc::new(keys::InMemory::new(store.clone()));
                let (jobs, calibrations) =
                    (Arc::new(jobs::InMemory::default()), Arc::new(calibrations::InMemory::default()));
                return Ok(Some(Tables { keys, jobs, calibrations }));
            }
            None => return Ok(None),
        };
        let db = Arc::new(db);
        Ok(Some(Tables { keys: db.clone(), jobs: db.clone(), calibrations: db }))
    }
}

/// Runs this crate's migrations, leaving the store's own alone (they share sqlx's table of
/// applied migrations, each numbered apart).
async fn migrate<'c, A>(mut migrator: sqlx::migrate::Migrator, pool: A) -> Result<()>
where
    A: sqlx::Acquire<'c>,
    <A::Connection as std::ops::Deref>::Target: sqlx::migrate::Migrate,
{
    migrator.set_ignore_missing(true);
    migrator.run(pool).await.map_err(|e| store_error("cannot migrate the server's tables", e))
}

/// The database the tables are in: the session store's pool.
pub(crate) enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

/// Runs `$body` with `$pool` bound to the pool of `$db`, whichever database it is (both take
/// the same `$N` placeholders).
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::tables::Db::Sqlite($pool) => $body,
            $crate::tables::Db::Postgres($pool) => $body,
        }
    };
}
use on_pool;

pub(crate) fn store_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Store, format!("{what}: {e}"))
}

pub(crate) use ruleweave::store::now_ms;

//! `sqlite`: sessions in one file (WAL mode), the default. One host process writes a file; several
//! replicas share sessions through PostgreSQL instead.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

use super::sql::{self, encode};
use super::{Checkpoint, CheckpointInfo, SessionInfo, SessionLock, Store, Stored, conflict, store_error};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// Sessions in a SQLite file.
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://PATH`) and migrates it.
    ///
    /// WAL journal with `synchronous = NORMAL`: a committed turn survives the process being
    /// killed; surviving a power cut needs `?synchronous=full` in the URL.
    pub async fn open(url: &str) -> Result<Self> {
        let mut options = SqliteConnectOptions::from_str(url)
            .map_err(|e| Error::new(ErrorKind::Input, format!("`{url}` is not a SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        if !url.contains("synchronous=") {
            options = options.synchronous(SqliteSynchronous::Normal);
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|e| store_error(&format!("cannot open {url}"), e))?;
        sqlx::migrate!("migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|e| store_error("cannot migrate the database", e))?;
        Ok(SqliteStore { pool })
    }

    async fn stored(&self, id: &str, from_snapshot: Option<u64>, upto: i64) -> Result<Option<Stored>> {
        // One read transaction: a writer pruning snapshots meanwhile cannot pull one from under us.
        let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
        let row = sqlx::query("SELECT * FROM sessions WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| store_error("cannot read a session", e))?;
        let Some(info) = row.as_ref().map(sql::session).transpose()? else { return Ok(None) };
        let at = from_snapshot.unwrap_or(info.snapshot_seq) as i64;
        let snapshot: Option<String> =
            sqlx::query_scalar("SELECT snapshot FROM checkpoints WHERE session_id = ? AND seq = ?")
                .bind(id)
                .bind(at)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| store_error("cannot read a snapshot", e))?
                .flatten();
        let snapshot =
            snapshot.ok_or_else(|| store_error("a session", format!("{id} has no snapshot at checkpoint {at}")))?;
        let rows = sqlx::query("SELECT * FROM checkpoints WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq")
            .bind(id)
            .bind(at)
            .bind(upto)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| store_error("cannot read checkpoints", e))?;
        let after = rows.iter().map(sql::checkpoint).collect::<Result<Vec<_>>>()?;
        let snapshot = serde_json::from_str(&snapshot).map_err(|e| store_error("a stored snapshot is not JSON", e))?;
        tx.commit().await.map_err(|e| store_error("cannot end the read", e))?;
        Ok(Some(Stored { info, snapshot, after }))
    }

    async fn info_of(&self, id: &str) -> Result<Option<SessionInfo>> {
        let row = sqlx::query("SELECT * FROM sessions WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| store_error("cannot read a session", e))?;
        row.as_ref().map(sql::session).transpose()
    }
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn exclusive(&self) -> bool {
        true
    }

    fn create<'a>(&'a self, info: &'a SessionInfo, start: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let e = encode(start);
            let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
            sqlx::query(
                "INSERT INTO sessions (id, pack, pack_version, options, seed, created_at, updated_at, parent, parent_checkpoint) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&info.id)
            .bind(&info.pack)
            .bind(&info.pack_version)
            .bind(info.options.to_string())
            .bind(info.seed as i64)
            .bind(info.created_at)
            .bind(info.updated_at)
            .bind(info.parent.as_ref().map(|p| p.0.clone()))
            .bind(info.parent.as_ref().map(|p| p.1 as i64))
            .execute(&mut *tx)
            .await
            .map_err(|err| match &err {
                sqlx::Error::Database(d) if d.is_unique_violation() => {
                    Error::new(ErrorKind::Conflict, format!("session {} already exists", info.id))
                }
                _ => store_error("cannot create the session", err),
            })?;
            sqlx::query(
                "INSERT INTO checkpoints (session_id, seq, turn, kind, pack_version, updates, snapshot, exchanges, created_at) \
                 VALUES (?, 0, 0, 'start', ?, ?, ?, ?, ?)",
            )
            .bind(&info.id)
            .bind(&start.pack_version)
            .bind(&e.updates)
            .bind(&e.snapshot)
            .bind(&e.exchanges)
            .bind(start.created_at)
            .execute(&mut *tx)
            .await
            .map_err(|e| store_error("cannot write the start checkpoint", e))?;
            tx.commit().await.map_err(|e| store_error("cannot commit", e))
        })
    }

    fn info<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SessionInfo>>> {
        Box::pin(self.info_of(id))
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Stored>>> {
        Box::pin(self.stored(id, None, i64::MAX))
    }

    fn history<'a>(&'a self, id: &'a str, seq: u64) -> BoxFuture<'a, Result<Option<Stored>>> {
        Box::pin(self.stored(id, Some(0), seq as i64))
    }

    fn append<'a>(&'a self, id: &'a str, c: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let e = encode(c);
            // One statement: the insert happens only if the session's head is the checkpoint
            // before this one, and the trigger advances the session in the same transaction.
            let done = sqlx::query(
                "INSERT INTO checkpoints (session_id, seq, turn, kind, step, pack_version, input, updates, snapshot, exchanges, resume, finished, created_at) \
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13 \
                 WHERE (SELECT head FROM sessions WHERE id = ?1) = ?2 - 1",
            )
            .bind(id)
            .bind(c.seq as i64)
            .bind(c.turn as i64)
            .bind(c.kind.as_str())
            .bind(c.step.map(i64::from))
            .bind(&c.pack_version)
            .bind(&e.input)
            .bind(&e.updates)
            .bind(&e.snapshot)
            .bind(&e.exchanges)
            .bind(&e.resume)
            .bind(c.finished)
            .bind(c.created_at)
            .execute(&self.pool)
            .await;
            match done {
                Ok(r) if r.rows_affected() == 1 => Ok(()),
                Ok(_) => match self.info_of(id).await? {
                    None => Err(Error::new(ErrorKind::NotFound, format!("no session {id}"))),
                    Some(_) => Err(conflict(id, c.seq)),
                },
                Err(sqlx::Error::Database(d)) if d.is_unique_violation() => Err(conflict(id, c.seq)),
                Err(err) => Err(store_error("cannot write the checkpoint", err)),
            }
        })
    }

    fn truncate<'a>(&'a self, id: &'a str, keep: u64) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
            sqlx::query("DELETE FROM checkpoints WHERE session_id = ?1 AND seq > ?2")
                .bind(id)
                .bind(keep as i64)
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot withdraw checkpoints", e))?;
            sqlx::query("UPDATE sessions SET head = ?2, head_kind = (SELECT kind FROM checkpoints WHERE session_id = ?1 AND seq = ?2) WHERE id = ?1")
                .bind(id)
                .bind(keep as i64)
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot withdraw checkpoints", e))?;
            tx.commit().await.map_err(|e| store_error("cannot commit", e))
        })
    }

    fn checkpoints<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<CheckpointInfo>>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT seq, turn, kind, step, pack_version, updates, exchanges, snapshot IS NOT NULL AS has_snapshot, created_at \
                 FROM checkpoints WHERE session_id = ? ORDER BY seq",
            )
            .bind(id)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| store_error("cannot list checkpoints", e))?;
            rows.iter().map(sql::checkpoint_info).collect()
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let r = sqlx::query("DELETE FROM sessions WHERE id = ?")
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(|e| store_error("cannot delete the session", e))?;
            Ok(r.rows_affected() > 0)
        })
    }

    fn expire(&self, finished_before: i64) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move {
            let r = sqlx::query("DELETE FROM sessions WHERE finished = 1 AND finished_at < ?")
                .bind(finished_before)
                .execute(&self.pool)
                .await
                .map_err(|e| store_error("cannot expire sessions", e))?;
            Ok(r.rows_affected())
        })
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(async move {
            sqlx::query_scalar("SELECT id FROM sessions WHERE head_kind = 'step'")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| store_error("cannot list interrupted turns", e))
        })
    }

    fn lock<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<SessionLock>> {
        // One process writes a SQLite file; the engine serializes its turns in memory.
        Box::pin(std::future::ready(Ok(SessionLock::none())))
    }
}

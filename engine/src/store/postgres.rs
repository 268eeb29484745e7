//! `postgres`: sessions in PostgreSQL, shared by several host replicas.
//!
//! A turn holds a transaction-scoped advisory lock on its session for as long as it runs, so two
//! replicas never run turns on one session at once; if a replica dies, its connection closes and
//! the database releases the lock. Checkpoints are written in their own short transactions, so a
//! long turn's step checkpoints are durable while the turn is still running.

use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};
use tokio::sync::broadcast;

use super::shared::BUMP;
use super::shared::{self as sql, Sql, encode};
use super::{
    Checkpoint, CheckpointInfo, CheckpointKind, Counters, EVENT_BUFFER, Happened, LobbyInputs, PackVersions,
    SessionEvent, SessionIndex, SessionInfo, SessionLock, Store, Stored, Transcripts, conflict, store_error,
};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// Sessions in a PostgreSQL database.
pub struct PostgresStore {
    pub(super) pool: PgPool,
    /// Session events from every replica, relayed from `LISTEN` by a task that listens from the
    /// moment the store opens (and stops when it is dropped).
    events: broadcast::Sender<SessionEvent>,
    relay: tokio::task::AbortHandle,
    /// How the last turn's write went.
    last_write: super::LastWrite,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.relay.abort();
    }
}

/// The channel replicas tell each other about sessions on.
const CHANNEL: &str = "ruleweave_sessions";

/// Tells every replica listening, when (and only if) the transaction `tx` commits.
pub(super) async fn notify(tx: &mut Transaction<'_, Postgres>, event: SessionEvent) -> Result<()> {
    let payload = serde_json::to_string(&event).map_err(|e| store_error("cannot encode a session event", e))?;
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload)
        .execute(&mut **tx)
        .await
        .map_err(|e| store_error("cannot notify the other replicas", e))?;
    Ok(())
}

/// Relays the notifications of every replica to this process's subscribers, for as long as any
/// may come. sqlx reconnects a lost listener by itself; what was sent meanwhile is lost (streams
/// start from the current state, so a follower misses an event, never the state).
async fn relay(mut listener: PgListener, tx: broadcast::Sender<SessionEvent>) {
    loop {
        match listener.recv().await {
            Ok(n) => match serde_json::from_str::<SessionEvent>(n.payload()) {
                Ok(e) => {
                    let _ = tx.send(e);
                }
                Err(e) => tracing::warn!("a session event that does not parse: {e}"),
            },
            Err(e) => {
                tracing::warn!("session events interrupted: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    }
}

/// Holds a session's advisory lock: a transaction, rolled back (releasing the lock) when dropped.
struct PgLock(Option<Transaction<'static, Postgres>>);

impl Drop for PgLock {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = tx.rollback().await;
            });
        }
    }
}

/// The advisory lock key of a session id: FNV-1a, the same in every build of every replica (the
/// standard library's hasher may change between compilers).
fn lock_key(id: &str) -> i64 {
    crate::text::hash(&format!("ruleweave-session\0{id}")) as i64
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:pass@host/db`) and migrates the database.
    pub async fn open(url: &str) -> Result<Self> {
        let cannot = |e| store_error(&format!("cannot connect to {}", super::redact(url)), e);
        let options: PgConnectOptions = url.parse().map_err(cannot)?;
        // One connection first: a server that refuses, or a wrong password, says so at once
        // (the pool would try again until its wait ran out, half a minute later).
        let first = PgConnection::connect_with(&options).await.map_err(cannot)?;
        let _ = first.close().await;
        let pool = PgPoolOptions::new().max_connections(32).connect_with(options).await.map_err(cannot)?;
        // Another crate may keep tables of its own in this database, with its migrations
        // numbered among these (a server's keys and jobs): what it applied is no concern here.
        let mut migrator = sqlx::migrate!("migrations/postgres");
        migrator.set_ignore_missing(true);
        migrator.run(&pool).await.map_err(|e| store_error("cannot migrate the database", e))?;
        let mut listener =
            PgListener::connect_with(&pool).await.map_err(|e| store_error("cannot listen for session events", e))?;
        listener.listen(CHANNEL).await.map_err(|e| store_error("cannot listen for session events", e))?;
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let relay = tokio::spawn(relay(listener, events.clone())).abort_handle();
        Ok(PostgresStore { pool, events, relay, last_write: Default::default() })
    }
}

impl PostgresStore {
    pub(super) fn sql(&self) -> Sql<'_> {
        Sql::Postgres(&self.pool)
    }
}

impl PostgresStore {
    /// `write`, its outcome noted for [`Store::health`].
    async fn noted<T>(&self, write: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let written = write.await;
        self.last_write.note(&written);
        written
    }
}

impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn exclusive(&self) -> bool {
        false
    }

    fn info<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SessionInfo>>> {
        Box::pin(sql::info(self.sql(), id))
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Stored>>> {
        Box::pin(sql::stored(self.sql(), id, None, u64::MAX))
    }

    fn history<'a>(&'a self, id: &'a str, seq: u64) -> BoxFuture<'a, Result<Option<Stored>>> {
        Box::pin(sql::stored(self.sql(), id, Some(0), seq))
    }

    fn truncate<'a>(&'a self, id: &'a str, keep: u64) -> BoxFuture<'a, Result<()>> {
        Box::pin(sql::truncate(self.sql(), id, keep))
    }

    fn checkpoints<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<CheckpointInfo>>> {
        Box::pin(sql::checkpoints(self.sql(), id))
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(sql::pending(self.sql()))
    }

    fn create<'a>(&'a self, info: &'a SessionInfo, start: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.noted(async {
                let e = encode(start);
                let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
                sqlx::query(
                    "INSERT INTO sessions (id, pack, pack_version, options, seed, created_at, updated_at, parent, parent_checkpoint, turns, round_at, edited_turn, variant, player) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
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
                .bind(info.turns as i64)
                .bind(info.lobby.then_some(info.updated_at))
                .bind(info.edited_turn.map(|t| t as i64))
                .bind(&info.variant)
                .bind(&info.player)
                .execute(&mut *tx)
                .await
                .map_err(|err| match &err {
                    sqlx::Error::Database(d) if d.is_unique_violation() => {
                        Error::new(ErrorKind::Conflict, format!("session {} already exists", info.id))
                    }
                    _ => store_error("cannot create the session", err),
                })?;
                sqlx::query(
                    "INSERT INTO checkpoints (session_id, seq, turn, kind, pack_version, body, snapshot, created_at) \
                     VALUES ($1, 0, $2, 'start', $3, $4, $5, $6)",
                )
                .bind(&info.id)
                .bind(start.turn as i64)
                .bind(&start.pack_version)
                .bind(&e.body)
                .bind(&e.snapshot)
                .bind(start.created_at)
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot write the start checkpoint", e))?;
                tx.commit().await.map_err(|e| store_error("cannot commit", e))
            })
            .await
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
            let r = sqlx::query("DELETE FROM sessions WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot delete the session", e))?;
            let deleted = r.rows_affected() > 0;
            if deleted {
                notify(&mut tx, SessionEvent { session: id.to_owned(), what: Happened::Deleted }).await?;
            }
            tx.commit().await.map_err(|e| store_error("cannot commit", e))?;
            Ok(deleted)
        })
    }

    fn append<'a>(&'a self, id: &'a str, c: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.noted(async {
                let e = encode(c);
                let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
                // The session advances only from the checkpoint before this one: a second writer finds
                // the head moved and gets a conflict instead of overwriting.
                let advanced = sqlx::query(
                    "UPDATE sessions SET head = $2, head_kind = $3, \
                     turns = CASE WHEN $3 = 'turn' THEN $4 ELSE turns END, \
                     snapshot_seq = CASE WHEN $5 THEN $2 ELSE snapshot_seq END, \
                     finished = $6, \
                     finished_at = CASE WHEN $6 AND finished_at IS NULL THEN $7 ELSE finished_at END, \
                     round_at = CASE WHEN $3 = 'turn' AND round_at IS NOT NULL THEN $7 ELSE round_at END, \
                     edited_turn = CASE WHEN $3 = 'edit' THEN COALESCE(edited_turn, $4) ELSE edited_turn END, \
                     updated_at = $7 \
                     WHERE id = $1 AND head = $2 - 1",
                )
                .bind(id)
                .bind(c.seq as i64)
                .bind(c.kind.as_str())
                .bind(c.turn as i64)
                .bind(c.snapshot.is_some())
                .bind(c.finished)
                .bind(c.created_at)
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot advance the session", e))?;
                if advanced.rows_affected() == 0 {
                    drop(tx);
                    return match sql::info(self.sql(), id).await? {
                        None => Err(Error::new(ErrorKind::NotFound, format!("no session {id}"))),
                        Some(_) => Err(conflict(id, c.seq)),
                    };
                }
                sqlx::query(
                    "INSERT INTO checkpoints (session_id, seq, turn, kind, step, pack_version, input, body, snapshot, resume, finished, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                )
                .bind(id)
                .bind(c.seq as i64)
                .bind(c.turn as i64)
                .bind(c.kind.as_str())
                .bind(c.step.map(i64::from))
                .bind(&c.pack_version)
                .bind(&e.input)
                .bind(&e.body)
                .bind(&e.snapshot)
                .bind(&e.resume)
                .bind(c.finished)
                .bind(c.created_at)
                .execute(&mut *tx)
                .await
                .map_err(|err| match &err {
                    sqlx::Error::Database(d) if d.is_unique_violation() => conflict(id, c.seq),
                    _ => store_error("cannot write the checkpoint", err),
                })?;
                if c.kind == CheckpointKind::Turn {
                    sqlx::query("DELETE FROM lobby_inputs WHERE session_id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| store_error("cannot close the lobby round", e))?;
                    let what = Happened::Turn { turn: c.turn, checkpoint: c.seq, finished: c.finished };
                    notify(&mut tx, SessionEvent { session: id.to_owned(), what }).await?;
                }
                for b in &c.bumps {
                    sqlx::query(BUMP)
                        .bind(id)
                        .bind(&b.table)
                        .bind(&b.counter)
                        .bind(&b.key)
                        .bind(b.by)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| store_error("cannot count", e))?;
                }
                if c.snapshot.is_some() {
                    sqlx::query(
                        "UPDATE checkpoints SET snapshot = NULL \
                         WHERE session_id = $1 AND seq > 0 AND seq < $2 AND snapshot IS NOT NULL",
                    )
                    .bind(id)
                    .bind(c.seq as i64)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| store_error("cannot prune snapshots", e))?;
                }
                tx.commit().await.map_err(|e| store_error("cannot commit", e))
            })
            .await
        })
    }

    fn health(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let probe = || async {
                sqlx::query(
                    "INSERT INTO write_probes (id, at, payload) VALUES (1, $1, $2) \
                     ON CONFLICT (id) DO UPDATE SET at = excluded.at, payload = excluded.payload",
                )
                .bind(crate::vocab::now_ms())
                .bind(super::probe_payload())
                .execute(&self.pool)
                .await
                .map(|_| ())
                .map_err(|e| store_error("cannot write to the database", e))
            };
            self.last_write.check(probe).await?;
            sqlx::query("SELECT 1 FROM sessions LIMIT 1")
                .execute(&self.pool)
                .await
                .map(|_| ())
                .map_err(|e| store_error("the database does not answer", e))
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.events.subscribe()
    }

    fn lock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SessionLock>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(lock_key(id))
                .execute(&mut *tx)
                .await
                .map_err(|e| store_error("cannot lock the session", e))?;
            Ok(SessionLock::holding(PgLock(Some(tx))))
        })
    }

    fn try_lock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SessionLock>>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
            let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
                .bind(lock_key(id))
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| store_error("cannot lock the session", e))?;
            Ok(got.then(|| SessionLock::holding(PgLock(Some(tx)))))
        })
    }

    fn lobby(&self) -> Option<&dyn LobbyInputs> {
        Some(self)
    }

    fn counters(&self) -> Option<&dyn Counters> {
        Some(self)
    }

    fn transcripts(&self) -> Option<&dyn Transcripts> {
        Some(self)
    }

    fn index(&self) -> Option<&dyn SessionIndex> {
        Some(self)
    }

    fn versions(&self) -> Option<&dyn PackVersions> {
        Some(self)
    }

    fn outcomes(&self) -> Option<&dyn super::Outcomes> {
        Some(self)
    }

    fn sql(&self) -> Option<Sql<'_>> {
        Some(PostgresStore::sql(self))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lock_keys_are_stable_across_builds() {
        // A replica built by another compiler must lock the same key: FNV-1a, computed by hand.
        assert_eq!(super::lock_key("abc"), super::lock_key("abc"));
        assert_eq!(super::lock_key("0123456789abcdef0123"), -3_799_077_962_248_481_314);
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(super::super::redact("postgres://me:secret@db/x"), "postgres://me:***@db/x");
        assert_eq!(super::super::redact("postgres://db/x"), "postgres://db/x");
    }
}

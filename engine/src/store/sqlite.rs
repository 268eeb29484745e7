//! `sqlite`: sessions in one file (WAL mode), the default. One host process writes a file; several
//! replicas share sessions through PostgreSQL instead.
//!
//! Checkpoints are written by one writer task, in batches: the checkpoints of every turn that ends
//! while the previous batch is being written go in together, as one `INSERT ... RETURNING`. Each
//! query to SQLite costs a round trip to sqlx's worker thread (~130 µs on a small VM, whatever the
//! SQL), so under load one round trip serves many turns.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::sql::{self, encode};
use super::{
    Checkpoint, CheckpointInfo, CheckpointKind, EVENT_BUFFER, Expiry, Happened, LobbyInput, OpenRound, SessionEvent,
    SessionInfo, SessionLock, SessionQuery, Store, Stored, TranscriptLink, conflict, store_error,
};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// Sessions in a SQLite file.
pub struct SqliteStore {
    pool: SqlitePool,
    writer: mpsc::UnboundedSender<Write>,
    file: Arc<DbFile>,
    /// One process writes the file, so it is the one to tell.
    events: broadcast::Sender<SessionEvent>,
}

/// The database file as it was opened: a turn is refused once the file is gone (deleted under the
/// server: the open connections would go on writing to a file nobody will find again), replaced,
/// or made read-only.
struct DbFile {
    path: Option<PathBuf>,
    identity: Option<(u64, u64)>,
}

impl DbFile {
    fn new(path: Option<PathBuf>) -> Self {
        let identity = path.as_deref().and_then(identity);
        DbFile { path, identity }
    }

    fn check(&self) -> Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let gone = || {
            Error::new(
                ErrorKind::Store,
                format!("the database file {} was deleted or replaced while the server ran", path.display()),
            )
        };
        let meta = std::fs::metadata(path).map_err(|_| gone())?;
        if self.identity.is_some() && identity(path) != self.identity {
            return Err(gone());
        }
        if meta.permissions().readonly() {
            return Err(Error::new(ErrorKind::Store, format!("the database file {} is read-only", path.display())));
        }
        Ok(())
    }
}

/// A file's device and inode, which a new file at the same path does not share.
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(_: &Path) -> Option<(u64, u64)> {
    None
}

/// A checkpoint waiting for the writer.
struct Write {
    id: String,
    c: CheckpointRow,
    /// Counter bumps to apply if the checkpoint goes in.
    bumps: Vec<super::Bump>,
    done: oneshot::Sender<Result<bool>>,
}

/// A checkpoint's columns in insertion order, as the writer binds them.
struct CheckpointRow {
    seq: i64,
    turn: i64,
    kind: &'static str,
    step: Option<i64>,
    pack_version: String,
    input: Option<String>,
    updates: String,
    snapshot: Option<String>,
    exchanges: String,
    resume: Option<String>,
    finished: bool,
    created_at: i64,
}

/// The most checkpoints one statement writes (13 parameters each, SQLite allows 32766).
const BATCH: usize = 256;

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://PATH`) and migrates it.
    ///
    /// WAL journal with `synchronous = NORMAL`: a committed turn survives the process being
    /// killed; surviving a power cut needs `?synchronous=full` in the URL (`off`, `normal`, `full`
    /// or `extra`, SQLite's `PRAGMA synchronous`).
    pub async fn open(url: &str) -> Result<Self> {
        let (rest, synchronous) = synchronous_of(url)?;
        let options = SqliteConnectOptions::from_str(&rest)
            .map_err(|e| Error::new(ErrorKind::Input, format!("`{url}` is not a SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .synchronous(synchronous);
        let path = options.get_filename().to_path_buf();
        let on_disk = !path.as_os_str().is_empty() && path != Path::new(":memory:");
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|e| store_error(&format!("cannot open {url}"), e))?;
        sqlx::migrate!("migrations/sqlite")
            .run(&pool)
            .await
            .map_err(|e| store_error("cannot migrate the database", e))?;
        let file = Arc::new(DbFile::new(on_disk.then_some(path)));
        let (writer, queue) = mpsc::unbounded_channel();
        tokio::spawn(write_batches(pool.clone(), file.clone(), queue));
        Ok(SqliteStore { pool, writer, file, events: broadcast::channel(EVENT_BUFFER).0 })
    }
}

/// The URL without its `synchronous=` query parameter (which sqlx does not read), and the mode it
/// names: `normal` (the default), `full` or `extra` (fsync at every commit), `off`.
fn synchronous_of(url: &str) -> Result<(String, SqliteSynchronous)> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), SqliteSynchronous::Normal)) };
    let mut mode = SqliteSynchronous::Normal;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("synchronous", v)) => {
                mode = match v.to_ascii_lowercase().as_str() {
                    "off" => SqliteSynchronous::Off,
                    "normal" => SqliteSynchronous::Normal,
                    "full" => SqliteSynchronous::Full,
                    "extra" => SqliteSynchronous::Extra,
                    _ => {
                        return Err(Error::new(
                            ErrorKind::Input,
                            format!("`synchronous={v}` in `{url}`: say off, normal, full or extra"),
                        ));
                    }
                }
            }
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, mode))
}

impl SqliteStore {
    sql::shared_reads!();

    /// A read transaction: SQLite's WAL gives it one consistent snapshot.
    async fn begin_read(&self) -> Result<sqlx::Transaction<'_, sqlx::Sqlite>> {
        self.pool.begin().await.map_err(|e| store_error("cannot begin", e))
    }
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn exclusive(&self) -> bool {
        true
    }

    sql::shared_store!();

    fn append<'a>(&'a self, id: &'a str, c: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let e = encode(c);
            let row = CheckpointRow {
                seq: c.seq as i64,
                turn: c.turn as i64,
                kind: c.kind.as_str(),
                step: c.step.map(i64::from),
                pack_version: c.pack_version.clone(),
                input: e.input,
                updates: e.updates,
                snapshot: e.snapshot,
                exchanges: e.exchanges,
                resume: e.resume,
                finished: c.finished,
                created_at: c.created_at,
            };
            let (done, result) = oneshot::channel();
            self.writer
                .send(Write { id: id.to_owned(), c: row, bumps: c.bumps.clone(), done })
                .map_err(|_| store_error("cannot write the checkpoint", "the writer has stopped"))?;
            let written =
                result.await.map_err(|_| store_error("cannot write the checkpoint", "the writer has stopped"))??;
            if written {
                if c.kind == CheckpointKind::Turn {
                    let what = Happened::Turn { turn: c.turn, checkpoint: c.seq, finished: c.finished };
                    let _ = self.events.send(SessionEvent { session: id.to_owned(), what });
                }
                return Ok(());
            }
            match self.info_of(id).await? {
                None => Err(Error::new(ErrorKind::NotFound, format!("no session {id}"))),
                Some(_) => Err(conflict(id, c.seq)),
            }
        })
    }

    fn health(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            self.file.check()?;
            sqlx::query("SELECT 1 FROM sessions LIMIT 1")
                .execute(&self.pool)
                .await
                .map(|_| ())
                .map_err(|e| store_error("the database cannot be read", e))
        })
    }

    fn lock<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<SessionLock>> {
        // One process writes a SQLite file; the engine serializes its turns in memory.
        Box::pin(std::future::ready(Ok(SessionLock::none())))
    }

    fn add_input<'a>(&'a self, id: &'a str, input: &'a LobbyInput) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            self.file.check()?;
            let r = sqlx::query(sql::ADD_INPUT)
                .bind(id)
                .bind(input.round as i64)
                .bind(&input.player)
                .bind(input.kind.as_str())
                .bind(input.input.to_string())
                .bind(input.created_at)
                .execute(&self.pool)
                .await
                .map_err(|e| store_error("cannot record the lobby input", e))?;
            let added = r.rows_affected() == 1;
            if added {
                let what = Happened::Input { round: input.round, player: input.player.clone(), kind: input.kind };
                let _ = self.events.send(SessionEvent { session: id.to_owned(), what });
            }
            Ok(added)
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.events.subscribe()
    }
}

/// The writer: takes every waiting checkpoint (up to [`BATCH`]) and writes them in one statement.
/// A checkpoint is inserted only if its session's head is the checkpoint before it (the trigger
/// then advances the head); `RETURNING` says which were, so each waiter learns its own outcome.
async fn write_batches(pool: SqlitePool, file: Arc<DbFile>, mut queue: mpsc::UnboundedReceiver<Write>) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match queue.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        if let Err(e) = file.check() {
            // Written there, a turn would be acknowledged and then lost: refuse it instead.
            for w in batch {
                let _ = w.done.send(Err(e.clone()));
            }
            continue;
        }
        // Checkpoints that count go in one by one, each with its counters in one transaction.
        let (counting, mut batch): (Vec<Write>, Vec<Write>) = batch.into_iter().partition(|w| !w.bumps.is_empty());
        for w in counting {
            let r = insert_counting(&pool, &w).await;
            let _ = w.done.send(r);
        }
        if batch.is_empty() {
            continue;
        }
        if batch.len() == 1 {
            // Alone, the checkpoint needs no RETURNING: `execute` says whether it went in, and
            // saves a hand-off to sqlx's worker (~one round trip).
            let w = batch.pop().expect("one");
            let r = insert_in(&pool, &w).await;
            let _ = w.done.send(r);
            continue;
        }
        let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; batch.len()].join(", ");
        let sql = format!(
            "INSERT INTO checkpoints (session_id, seq, turn, kind, step, pack_version, input, updates, snapshot, exchanges, resume, finished, created_at) \
             SELECT * FROM (VALUES {values}) AS v \
             WHERE (SELECT head FROM sessions WHERE id = v.column1) = v.column2 - 1 \
             RETURNING session_id, seq"
        );
        // Built from a fixed template and a count: no data is spliced into the SQL.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for w in &batch {
            let c = &w.c;
            q = q
                .bind(&w.id)
                .bind(c.seq)
                .bind(c.turn)
                .bind(c.kind)
                .bind(c.step)
                .bind(&c.pack_version)
                .bind(&c.input)
                .bind(&c.updates)
                .bind(&c.snapshot)
                .bind(&c.exchanges)
                .bind(&c.resume)
                .bind(c.finished)
                .bind(c.created_at);
        }
        match q.fetch_all(&pool).await {
            Ok(rows) => {
                let written: std::collections::HashSet<(String, i64)> = rows
                    .iter()
                    .filter_map(|r| Some((r.try_get::<String, _>(0).ok()?, r.try_get::<i64, _>(1).ok()?)))
                    .collect();
                for w in batch {
                    let ok = written.contains(&(w.id.clone(), w.c.seq));
                    let _ = w.done.send(Ok(ok));
                }
            }
            Err(e) => {
                let why = e.to_string();
                for w in batch {
                    let err = match &e {
                        sqlx::Error::Database(d) if d.is_unique_violation() => Ok(false),
                        _ => Err(store_error("cannot write the checkpoint", &why)),
                    };
                    let _ = w.done.send(err);
                }
            }
        }
    }
}

/// [`insert_in`], and the checkpoint's counter bumps if it went in, in one transaction.
async fn insert_counting(pool: &SqlitePool, w: &Write) -> Result<bool> {
    let mut tx = pool.begin().await.map_err(|e| store_error("cannot begin", e))?;
    if !insert_in(&mut *tx, w).await? {
        return Ok(false);
    }
    for b in &w.bumps {
        sqlx::query(sql::BUMP)
            .bind(&w.id)
            .bind(&b.table)
            .bind(&b.counter)
            .bind(&b.key)
            .bind(b.by)
            .execute(&mut *tx)
            .await
            .map_err(|e| store_error("cannot count", e))?;
    }
    tx.commit().await.map_err(|e| store_error("cannot commit", e))?;
    Ok(true)
}

/// Inserts one checkpoint if its session's head is the checkpoint before it.
async fn insert_in<'e>(db: impl sqlx::SqliteExecutor<'e>, w: &Write) -> Result<bool> {
    let c = &w.c;
    let done = sqlx::query(
        "INSERT INTO checkpoints (session_id, seq, turn, kind, step, pack_version, input, updates, snapshot, exchanges, resume, finished, created_at) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13 \
         WHERE (SELECT head FROM sessions WHERE id = ?1) = ?2 - 1",
    )
    .bind(&w.id)
    .bind(c.seq)
    .bind(c.turn)
    .bind(c.kind)
    .bind(c.step)
    .bind(&c.pack_version)
    .bind(&c.input)
    .bind(&c.updates)
    .bind(&c.snapshot)
    .bind(&c.exchanges)
    .bind(&c.resume)
    .bind(c.finished)
    .bind(c.created_at)
    .execute(db)
    .await;
    match done {
        Ok(r) => Ok(r.rows_affected() == 1),
        Err(sqlx::Error::Database(d)) if d.is_unique_violation() => Ok(false),
        Err(e) => Err(store_error("cannot write the checkpoint", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `?synchronous=` chooses the durability (what SQLite's `PRAGMA synchronous` then reports on
    /// the store's connections); other query parameters go on to sqlx; a mode it does not know
    /// is refused with the URL.
    #[tokio::test]
    async fn synchronous_is_a_setting_of_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.db");
        for (query, pragma) in
            [("", 1), ("?synchronous=full", 2), ("?synchronous=OFF&mode=rwc", 0), ("?synchronous=extra", 3)]
        {
            let store = SqliteStore::open(&format!("sqlite://{}{query}", file.display())).await.unwrap();
            let got: i64 = sqlx::query_scalar("PRAGMA synchronous").fetch_one(&store.pool).await.unwrap();
            assert_eq!(got, pragma, "{query}");
        }
        let err = SqliteStore::open(&format!("sqlite://{}?synchronous=sometimes", file.display())).await.err().unwrap();
        assert!(
            err.detail().contains("`synchronous=sometimes`") && err.detail().contains("off, normal, full or extra"),
            "{err}"
        );
    }
}

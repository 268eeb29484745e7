//! `sqlite`: sessions in one file (WAL mode), the default. One host process writes a file; several
//! replicas share sessions through PostgreSQL instead.
//!
//! Checkpoints, the write of every turn, go through a connection of the store's own (rusqlite,
//! prepared statements). A turn that finds it free commits right where it ends, with no hand-off;
//! one that finds it busy queues for a writer thread, which commits everything waiting in one
//! transaction once the connection is free (group commit) and answers each turn after the commit.
//! New sessions and deletions are written the same way (a write on another connection would also
//! throw away this one's page cache). The rest (reads, lobby inputs, expiry) goes through sqlx's
//! pool. No commit of a turn copies the WAL into the file: a thread of `wal.rs` does, every 160
//! writes.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use tokio::sync::{broadcast, oneshot};

use super::shared::BUMP;
use super::shared::{self as sql, Sql, encode};
use super::wal::Checkpoints;
use super::{
    Checkpoint, CheckpointInfo, CheckpointKind, Counters, EVENT_BUFFER, Happened, LobbyInputs, PackVersions,
    SessionEvent, SessionIndex, SessionInfo, SessionLock, Store, Stored, Transcripts, conflict, store_error,
};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// Sessions in a SQLite file.
pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    /// The connection checkpoints are written with; a turn that finds it free commits on it at
    /// once, one that finds it busy queues for the writer thread.
    pub(super) conn: Arc<Mutex<rusqlite::Connection>>,
    writer: std::sync::mpsc::Sender<Write>,
    /// Copies the WAL into the file off the turns' path.
    checkpoints: Arc<Checkpoints>,
    pub(super) file: Arc<DbFile>,
    /// One process writes the file, so it is the one to tell.
    pub(super) events: broadcast::Sender<SessionEvent>,
}

/// The database file as it was opened: a turn is refused once the file is gone (deleted under the
/// server: the open connections would go on writing to a file nobody will find again), replaced,
/// or made read-only.
pub(super) struct DbFile {
    path: Option<PathBuf>,
    identity: Option<(u64, u64)>,
    /// How the last commit went.
    last_write: super::LastWrite,
}

impl DbFile {
    fn new(path: Option<PathBuf>) -> Self {
        let identity = path.as_deref().and_then(identity);
        DbFile { path, identity, last_write: Default::default() }
    }

    pub(super) fn check(&self) -> Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let gone = || {
            Error::new(
                ErrorKind::Store,
                format!("the database file {} was deleted or replaced while the server ran", path.display()),
            )
        };
        let meta = std::fs::metadata(path).map_err(|_| gone())?;
        if self.identity.is_some() && identity_of(&meta) != self.identity {
            return Err(gone());
        }
        if meta.permissions().readonly() {
            return Err(Error::new(ErrorKind::Store, format!("the database file {} is read-only", path.display())));
        }
        Ok(())
    }
}

/// A file's device and inode, which a new file at the same path does not share.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().as_ref().and_then(identity_of)
}

#[cfg(unix)]
fn identity_of(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity_of(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// A write waiting for the writer.
struct Write {
    p: Pending,
    done: oneshot::Sender<Result<bool>>,
}

/// A write to a session: the session's id and what to do.
struct Pending {
    id: String,
    op: Op,
}

/// What the writer does to a session.
enum Op {
    /// Insert its row and start checkpoint (it must not exist yet).
    Create(SessionRow, CheckpointRow),
    /// Append a checkpoint (its head must be the checkpoint before it), with counter bumps to
    /// apply if it goes in.
    Append(CheckpointRow, Vec<super::Bump>),
    /// Delete it, its checkpoints with it.
    Delete,
}

/// A new session's columns, as the writer binds them.
struct SessionRow {
    pack: String,
    pack_version: String,
    options: String,
    seed: i64,
    created_at: i64,
    updated_at: i64,
    parent: Option<String>,
    parent_checkpoint: Option<i64>,
    turns: i64,
    /// When its lobby round was asked (its opening), for a lobby pack's session; none otherwise.
    round_at: Option<i64>,
    /// The turn its state was first set by hand in, inherited by a fork.
    edited_turn: Option<i64>,
    variant: Option<String>,
    player: Option<String>,
}

impl Op {
    /// What failed, when it fails.
    fn failure(&self) -> &'static str {
        match self {
            Op::Create(..) => "cannot create the session",
            Op::Append(..) => "cannot write the checkpoint",
            Op::Delete => "cannot delete the session",
        }
    }
}

/// A checkpoint's columns in insertion order, as the writer binds them.
struct CheckpointRow {
    seq: i64,
    turn: i64,
    kind: &'static str,
    step: Option<i64>,
    pack_version: String,
    input: Option<String>,
    body: Vec<u8>,
    /// Compressed as the body is: a snapshot is a turn's largest row (PostgreSQL compresses
    /// its text itself).
    snapshot: Option<Vec<u8>>,
    resume: Option<String>,
    finished: bool,
    created_at: i64,
}

impl CheckpointRow {
    fn of(c: &Checkpoint) -> Self {
        let e = encode(c);
        CheckpointRow {
            seq: c.seq as i64,
            turn: c.turn as i64,
            kind: c.kind.as_str(),
            step: c.step.map(i64::from),
            pack_version: c.pack_version.clone(),
            input: e.input,
            body: e.body,
            snapshot: e.snapshot.map(|s| sql::compress(s.into_bytes())),
            resume: e.resume,
            finished: c.finished,
            created_at: c.created_at,
        }
    }
}

/// The most writes one transaction of the writer commits.
const BATCH: usize = 256;

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` (`sqlite://PATH`) and migrates it.
    ///
    /// WAL journal with `synchronous = NORMAL`: a committed turn survives the process being
    /// killed; surviving a power cut needs `?synchronous=full` in the URL (`off`, `normal`, `full`
    /// or `extra`, SQLite's `PRAGMA synchronous`).
    pub async fn open(url: &str) -> Result<Self> {
        let (rest, pragma, synchronous) = synchronous_of(url)?;
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
        // Another crate may keep tables of its own in this database, with its migrations
        // numbered among these (a server's keys and jobs): what it applied is no concern here.
        let mut migrator = sqlx::migrate!("migrations/sqlite");
        migrator.set_ignore_missing(true);
        migrator.run(&pool).await.map_err(|e| store_error("cannot migrate the database", e))?;
        if !on_disk {
            return Err(Error::new(
                ErrorKind::Input,
                format!("`{url}` names no file: a SQLite store is a file (for sessions kept nowhere, say `memory`)"),
            ));
        }
        let conn = Arc::new(Mutex::new(writer_connection(&path, &pragma)?));
        let checkpoints = Arc::new(Checkpoints::start(&path, &pragma, conn.clone())?);
        let file = Arc::new(DbFile::new(Some(path)));
        let (writer, queue) = std::sync::mpsc::channel();
        let (thread_conn, thread_file, thread_checkpoints) = (conn.clone(), file.clone(), checkpoints.clone());
        std::thread::Builder::new()
            .name("ruleweave-sqlite-writer".into())
            .spawn(move || write_thread(&thread_conn, &thread_file, &thread_checkpoints, queue))
            .map_err(|e| store_error("cannot start the SQLite writer", e))?;
        Ok(SqliteStore { pool, conn, writer, checkpoints, file, events: broadcast::channel(EVENT_BUFFER).0 })
    }
}

/// The URL without its `synchronous=` query parameter (which sqlx does not read from a URL), and
/// the mode it names, checked (`off`, `normal`, `full` or `extra`; `normal` when it names none).
fn synchronous_of(url: &str) -> Result<(String, String, SqliteSynchronous)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut mode = "normal";
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("synchronous", v)) => mode = v,
            _ => kept.push(pair),
        }
    }
    let parsed = SqliteSynchronous::from_str(mode).map_err(|_| {
        Error::new(ErrorKind::Input, format!("`synchronous={mode}` in `{url}`: say off, normal, full or extra"))
    })?;
    let rest = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, mode.to_ascii_uppercase(), parsed))
}

/// The write a health check tries when the last one failed.
const PROBE: &str = "INSERT INTO write_probes (id, at, payload) VALUES (1, ?1, ?2) \
     ON CONFLICT (id) DO UPDATE SET at = excluded.at, payload = excluded.payload";

impl SqliteStore {
    pub(super) fn sql(&self) -> Sql<'_> {
        Sql::Sqlite(&self.pool)
    }

    /// Commits `p` here and now when nobody is writing (no hand-off to the writer thread and
    /// back); `None` when the connection is busy.
    fn write_now(&self, p: &Pending) -> Option<Result<bool>> {
        let conn = match self.conn.try_lock() {
            Ok(conn) => conn,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let written = commit(&conn, &self.file, &self.checkpoints, &[p]);
        Some(written.and_then(|mut each| each.pop().unwrap_or(Ok(false))))
    }

    /// Writes `p` on the store's connection: here and now when it is free, else through the
    /// writer thread's next group commit. Whether it went in (`false`: a checkpoint's session
    /// head was not the checkpoint before it, a new session's id was taken, or there was no
    /// session to delete).
    async fn write(&self, p: Pending) -> Result<bool> {
        if let Some(written) = self.write_now(&p) {
            return written;
        }
        let what = p.op.failure();
        let stopped = || store_error(what, "the writer has stopped");
        let (done, result) = oneshot::channel();
        self.writer.send(Write { p, done }).map_err(|_| stopped())?;
        result.await.map_err(|_| stopped())?
    }
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn exclusive(&self) -> bool {
        true
    }

    fn file(&self) -> Option<&Path> {
        self.file.path.as_deref()
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
            let new = SessionRow {
                pack: info.pack.clone(),
                pack_version: info.pack_version.clone(),
                options: info.options.to_string(),
                seed: info.seed as i64,
                created_at: info.created_at,
                updated_at: info.updated_at,
                parent: info.parent.as_ref().map(|p| p.0.clone()),
                parent_checkpoint: info.parent.as_ref().map(|p| p.1 as i64),
                turns: info.turns as i64,
                round_at: info.lobby.then_some(info.updated_at),
                edited_turn: info.edited_turn.map(|t| t as i64),
                variant: info.variant.clone(),
                player: info.player.clone(),
            };
            let p = Pending { id: info.id.clone(), op: Op::Create(new, CheckpointRow::of(start)) };
            if self.write(p).await? {
                Ok(())
            } else {
                Err(Error::new(ErrorKind::Conflict, format!("session {} already exists", info.id)))
            }
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let deleted = self.write(Pending { id: id.to_owned(), op: Op::Delete }).await?;
            if deleted {
                let _ = self.events.send(SessionEvent { session: id.to_owned(), what: Happened::Deleted });
            }
            Ok(deleted)
        })
    }

    fn append<'a>(&'a self, id: &'a str, c: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let p = Pending { id: id.to_owned(), op: Op::Append(CheckpointRow::of(c), c.bumps.clone()) };
            if self.write(p).await? {
                if c.kind == CheckpointKind::Turn {
                    let what = Happened::Turn { turn: c.turn, checkpoint: c.seq, finished: c.finished };
                    let _ = self.events.send(SessionEvent { session: id.to_owned(), what });
                }
                return Ok(());
            }
            match sql::info(self.sql(), id).await? {
                None => Err(Error::new(ErrorKind::NotFound, format!("no session {id}"))),
                Some(_) => Err(conflict(id, c.seq)),
            }
        })
    }

    fn health(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            self.file.check()?;
            let conn = self.conn.clone();
            let probe = || async move {
                let write = move || {
                    let conn = conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    conn.execute(PROBE, rusqlite::params![crate::vocab::now_ms(), super::probe_payload()]).map(|_| ())
                };
                let wrote = tokio::task::spawn_blocking(write).await.map_err(|e| store_error("cannot probe", e))?;
                wrote.map_err(|e| store_error("cannot write to the database", e))
            };
            self.file.last_write.check(probe).await?;
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

    fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.events.subscribe()
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
        Some(SqliteStore::sql(self))
    }
}

/// The writer thread, for writes that find the connection busy: it takes every waiting write
/// (up to [`BATCH`]) once the connection is free and commits them in one transaction, each in a
/// savepoint so that one that fails leaves the others; then it answers each waiter.
fn write_thread(
    conn: &Mutex<rusqlite::Connection>,
    file: &DbFile,
    checkpoints: &Checkpoints,
    queue: std::sync::mpsc::Receiver<Write>,
) {
    while let Ok(first) = queue.recv() {
        let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match queue.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let pending: Vec<&Pending> = batch.iter().map(|w| &w.p).collect();
        let outcome = commit(&conn, file, checkpoints, &pending);
        drop(conn);
        match outcome {
            Ok(each) => {
                for (w, r) in batch.into_iter().zip(each) {
                    let _ = w.done.send(r);
                }
            }
            Err(e) => {
                for w in batch {
                    let _ = w.done.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Commits `batch` on the store's connection `conn` (held by the caller) when the file is still
/// the store's, and counts the writes for the checkpointer.
fn commit(
    conn: &rusqlite::Connection,
    file: &DbFile,
    checkpoints: &Checkpoints,
    batch: &[&Pending],
) -> Result<Vec<Result<bool>>> {
    // Written to another file, a turn would be acknowledged and then lost: refuse it instead.
    file.check()?;
    let each = write_batch(conn, batch);
    match &each {
        Ok(each) => match each.iter().find(|r| r.is_err()) {
            Some(failed) => file.last_write.note(failed),
            None => file.last_write.note(&Ok(())),
        },
        Err(_) => file.last_write.note(&each),
    }
    let each = each?;
    checkpoints.wrote(batch.len(), conn);
    Ok(each)
}

/// The batch in one transaction: for each write whether it went in (see [`apply`]) or why it
/// failed; an error when the transaction could not commit (then none went in). In a batch of
/// several, each write has a savepoint, so one that fails leaves the others; a lone write (a turn
/// that found the connection free) needs none: its transaction is rolled back instead.
fn write_batch(conn: &rusqlite::Connection, batch: &[&Pending]) -> Result<Vec<Result<bool>>> {
    let failed = |e: rusqlite::Error| store_error("cannot write to the database", e);
    let run = |sql: &str| conn.prepare_cached(sql).and_then(|mut st| st.execute([])).map(|_| ());
    if !conn.is_autocommit() {
        // A rollback that failed left a transaction open: end it, or every write from now on fails.
        let _ = run("ROLLBACK");
    }
    run("BEGIN IMMEDIATE").map_err(failed)?;
    let lone = batch.len() == 1;
    let mut undo = false;
    let mut each = Vec::with_capacity(batch.len());
    for w in batch {
        let r = if lone {
            apply(conn, w).inspect_err(|_| undo = true)
        } else {
            run("SAVEPOINT checkpoint")
                .and_then(|()| apply(conn, w))
                .and_then(|written| run("RELEASE checkpoint").map(|()| written))
                .inspect_err(|_| {
                    let _ = run("ROLLBACK TO checkpoint").and_then(|()| run("RELEASE checkpoint"));
                })
        };
        each.push(outcome(w, r));
    }
    if undo {
        let _ = run("ROLLBACK");
    } else if let Err(e) = run("COMMIT") {
        let _ = run("ROLLBACK");
        return Err(failed(e));
    }
    Ok(each)
}

/// What one write's result means to its caller: the same checkpoint (or session) twice is not
/// an error but a write that did not go in: another writer got there first.
fn outcome(w: &Pending, r: rusqlite::Result<bool>) -> Result<bool> {
    match r {
        Ok(written) => Ok(written),
        Err(rusqlite::Error::SqliteFailure(f, _)) if f.code == rusqlite::ErrorCode::ConstraintViolation => Ok(false),
        Err(e) => Err(store_error(w.op.failure(), e)),
    }
}

/// Does one write: a new session's row and start checkpoint; a checkpoint if its session's head
/// is the checkpoint before it, then its counter bumps; a deletion. Whether it went in.
fn apply(conn: &rusqlite::Connection, w: &Pending) -> rusqlite::Result<bool> {
    match &w.op {
        Op::Create(s, c) => {
            // A session's number keys its checkpoints (see `shared::SQLITE`); numbers are never
            // reused while the session holding one exists.
            conn.prepare_cached(
                "INSERT INTO sessions (id, pack, pack_version, options, seed, created_at, updated_at, parent, parent_checkpoint, turns, round_at, edited_turn, variant, player, number) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, (SELECT coalesce(max(number), 0) + 1 FROM sessions))",
            )?
            .execute(rusqlite::params![
                w.id,
                s.pack,
                s.pack_version,
                s.options,
                s.seed,
                s.created_at,
                s.updated_at,
                s.parent,
                s.parent_checkpoint,
                s.turns,
                s.round_at,
                s.edited_turn,
                s.variant,
                s.player,
            ])?;
            conn.prepare_cached(
                "INSERT INTO checkpoints (key, turn, kind, pack_version, body, snapshot, created_at) \
                 SELECT number * 4294967296, ?2, 'start', ?3, ?4, ?5, ?6 FROM sessions WHERE id = ?1 AND number IS NOT NULL",
            )?
            .execute(rusqlite::params![w.id, c.turn, c.pack_version, c.body, c.snapshot, c.created_at])?;
            Ok(true)
        }
        Op::Append(c, bumps) => {
            let mut insert = conn.prepare_cached(
                "INSERT INTO checkpoints (key, turn, kind, step, pack_version, input, body, snapshot, resume, finished, created_at) \
                 SELECT number * 4294967296 + ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12 \
                 FROM sessions WHERE id = ?1 AND head = ?2 - 1 AND number IS NOT NULL",
            )?;
            if !(1..=i64::from(u32::MAX)).contains(&c.seq) {
                let full = format!("session {} holds the most checkpoints the SQLite store keys (2^32 - 1)", w.id);
                return Err(rusqlite::Error::ToSqlConversionFailure(full.into()));
            }
            let n = insert.execute(rusqlite::params![
                w.id,
                c.seq,
                c.turn,
                c.kind,
                c.step,
                c.pack_version,
                c.input,
                c.body,
                c.snapshot,
                c.resume,
                c.finished,
                c.created_at,
            ])?;
            if n == 0 {
                return Ok(false);
            }
            if !bumps.is_empty() {
                let mut bump = conn.prepare_cached(BUMP)?;
                for b in bumps {
                    bump.execute(rusqlite::named_params! {
                        "$1": w.id, "$2": b.table, "$3": b.counter, "$4": b.key, "$5": b.by,
                    })?;
                }
            }
            Ok(true)
        }
        Op::Delete => Ok(conn.prepare_cached("DELETE FROM sessions WHERE id = ?1")?.execute([&w.id])? > 0),
    }
}

/// The writer's connection to the file the pool opened, with the same settings.
fn writer_connection(path: &Path, synchronous: &str) -> Result<rusqlite::Connection> {
    let failed = |e: rusqlite::Error| store_error(&format!("cannot open {} for writing", path.display()), e);
    let conn = rusqlite::Connection::open(path).map_err(failed)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(failed)?;
    // Checkpoints are the checkpointer's (`wal.rs`), not a turn's commit's.
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = {synchronous}; PRAGMA wal_autocheckpoint = 0;"
    ))
    .map_err(failed)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{session, start, turn};
    use super::*;

    /// Turns never checkpoint the WAL themselves, yet it is copied into the database file and
    /// starts over as they go on: the checkpointer's rounds keep it bounded, and every
    /// checkpoint written is there to read.
    #[tokio::test]
    async fn the_wal_is_checkpointed_off_the_turns_path_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.db");
        let store = SqliteStore::open(&format!("sqlite://{}", file.display())).await.unwrap();
        let s = "wal-test";
        store.create(&session(s), &start()).await.unwrap();
        let autocheckpoint: i64 =
            store.conn.lock().unwrap().query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).unwrap();
        assert_eq!(autocheckpoint, 0, "the writer's commits must not checkpoint");
        // A turn's row of a few kilobytes, as a chat game's turns are (their prompts make it so).
        let long = serde_json::json!({"message": "x".repeat(3000)});
        // Four rounds' worth of writes, each batch waiting for its round (a nudge that comes
        // while a round runs may be folded into it).
        let every = super::super::wal::EVERY;
        let mut writes = 0;
        for round in 1..=4 {
            for _ in 0..every {
                writes += 1;
                let c = Checkpoint { input: Some(long.clone()), ..turn(writes, writes) };
                store.append(s, &c).await.unwrap();
            }
            assert!(store.checkpoints.wait_rounds(round, Duration::from_secs(30)), "round {round} never ran");
        }
        let wal = std::fs::metadata(dir.path().join("s.db-wal")).map_or(0, |m| m.len());
        let db = std::fs::metadata(&file).unwrap().len();
        // Never reset, the WAL would hold every write (about five pages each: 14 MB); it starts
        // over after each round instead, and the pages are in the database file.
        assert!(wal < 6 << 20, "the WAL grew to {wal} bytes");
        assert!(db > 2 << 20, "the database file holds {db} bytes");
        let stored = store.load(s).await.unwrap().unwrap();
        assert_eq!(stored.info.head, writes);
    }

    /// A database written before checkpoints had a compressed body and a key of their
    /// session's number (migrations up to 14) opens migrated: its checkpoints read as they were,
    /// its sessions go on (new rows with a body, beside the old text ones), a new session takes
    /// the next number, and deleting a session deletes its checkpoints and no one else's.
    #[tokio::test]
    async fn checkpoints_stored_before_their_body_are_read_and_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("old.db").display());
        {
            let options = SqliteConnectOptions::from_str(&url).unwrap().create_if_missing(true);
            let pool = SqlitePoolOptions::new().connect_with(options).await.unwrap();
            let mut before = sqlx::migrate!("migrations/sqlite");
            before.migrations =
                before.migrations.iter().filter(|m| m.version <= 14).cloned().collect::<Vec<_>>().into();
            before.run(&pool).await.unwrap();
            // Each session's row, its start checkpoint and one turn, as the build before wrote them.
            let rows = [
                "INSERT INTO sessions (id, pack, pack_version, options, seed, created_at, updated_at) \
                 VALUES ($1, 'p', 'v1', '{}', 7, $2, $2)",
                "INSERT INTO checkpoints (session_id, seq, turn, kind, pack_version, updates, snapshot, exchanges, created_at) \
                 VALUES ($1, 0, 0, 'start', 'v1', '[[\"init\",{\"n\":0}]]', '{\"n\":0,\"log\":[]}', '[]', $2)",
                "INSERT INTO checkpoints (session_id, seq, turn, kind, pack_version, input, updates, exchanges, created_at) \
                 VALUES ($1, 1, 1, 'turn', 'v1', '{\"message\":\"m1\"}', '[[\"a\",{\"n\":1,\"log\":\"m1\"}],[\"b\",{}]]', '[]', $2)",
            ];
            for (id, at) in [("old-a", 1), ("old-b", 2)] {
                for row in rows {
                    sqlx::query(row).bind(id).bind(at).execute(&pool).await.unwrap();
                }
            }
            pool.close().await;
        }
        let store = SqliteStore::open(&url).await.unwrap();
        let info = store.info("old-a").await.unwrap().unwrap();
        assert_eq!((info.turns, info.head), (1, 1), "the session row is as it was");
        store.append("old-a", &turn(2, 2)).await.unwrap();
        assert_eq!(store.append("old-a", &turn(2, 2)).await.unwrap_err().kind(), ErrorKind::Conflict);
        let h = store.history("old-a", 2).await.unwrap().unwrap();
        assert_eq!(h.snapshot, serde_json::json!({"n": 0, "log": []}));
        let after: Vec<_> = h.after.iter().map(|c| (c.seq, c.input.clone(), c.updates[0].1.to_json())).collect();
        assert_eq!(
            after,
            [
                (1, Some(serde_json::json!({"message": "m1"})), serde_json::json!({"n": 1, "log": "m1"})),
                (2, Some(serde_json::json!({"message": "m2"})), serde_json::json!({"n": 2, "log": "m2"})),
            ],
            "the old row read from its text, the new one from its body"
        );
        let listed: Vec<_> =
            store.checkpoints("old-a").await.unwrap().iter().map(|c| (c.seq, c.nodes.clone())).collect();
        assert_eq!(
            listed,
            [(0, vec!["init".to_owned()]), (1, vec!["a".into(), "b".into()]), (2, vec!["a".into(), "b".into()])]
        );
        store.create(&session("new"), &start()).await.unwrap();
        let numbers: Vec<(String, i64)> =
            sqlx::query_as("SELECT id, number FROM sessions ORDER BY number").fetch_all(&store.pool).await.unwrap();
        assert_eq!(numbers, [("old-a".to_owned(), 1), ("old-b".to_owned(), 2), ("new".to_owned(), 3)]);
        assert!(store.delete("old-a").await.unwrap());
        let left: Vec<i64> =
            sqlx::query_scalar("SELECT key >> 32 FROM checkpoints ORDER BY key").fetch_all(&store.pool).await.unwrap();
        assert_eq!(left, [2, 2, 3], "old-b's two checkpoints and the new session's start");
        assert_eq!(store.load("old-b").await.unwrap().unwrap().after.len(), 1);
    }

    /// A full disk (here SQLite's page limit, which fails a write as a full disk does) fails the
    /// health check once a write failed on it, and the check passes again by itself once the
    /// store takes writes again (its probe goes in), before any turn is played.
    #[tokio::test]
    async fn health_fails_while_the_disk_is_full() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap();
        let s = "full-disk";
        store.create(&session(s), &start()).await.unwrap();
        store.health().await.unwrap();
        let pages: i64 = store.conn.lock().unwrap().query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
        store.conn.lock().unwrap().execute_batch(&format!("PRAGMA max_page_count = {pages}")).unwrap();
        // Text that does not compress, as a checkpoint's is stored compressed.
        let mut x = 1u64;
        let noise: String = (0..100_000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                char::from(b'a' + (x >> 59) as u8)
            })
            .collect();
        let big = Checkpoint { input: Some(serde_json::json!({"message": noise})), ..turn(1, 1) };
        let err = store.append(s, &big).await.unwrap_err();
        assert!(err.to_string().contains("full"), "{err}");
        let unhealthy = store.health().await.unwrap_err();
        assert!(unhealthy.to_string().contains("the last write failed"), "{unhealthy}");
        assert!(unhealthy.to_string().contains("full"), "{unhealthy}");

        store.conn.lock().unwrap().execute_batch("PRAGMA max_page_count = 1073741823").unwrap();
        store.health().await.unwrap();
        store.append(s, &big).await.unwrap();
    }

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

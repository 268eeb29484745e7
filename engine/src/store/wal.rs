//! The SQLite store's checkpoints: copying the write-ahead log into the database file, off the
//! turns' path.
//!
//! Left to itself, SQLite checkpoints inside the commit that grows the WAL past 1000 pages, and
//! that commit (a turn's) waits while the log and the database file are synced: a few
//! milliseconds every couple of hundred turns, about a tenth of a persisted turn's time on
//! average. Here the store's writer connection never checkpoints. Every [`EVERY`] writes nudge a
//! thread of this module's, which copies the WAL with a passive checkpoint while turns go on
//! writing, then holds writes for the moment it takes to copy what they wrote meanwhile and let
//! the WAL start over from its beginning (so it does not grow for as long as turns keep coming).
//! Only the turns that arrive in that moment wait, for a copy of a few pages and their sync.
//!
//! Durability is unchanged: a turn is acknowledged once its commit is in the WAL, as before, and
//! the log and the database file are synced before the WAL is reused (`synchronous=normal`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::store_error;
use crate::error::Result;

/// Writes between two checkpoints. A chat game's turn adds about five pages to the WAL, so this
/// keeps it under the 1000 pages at which SQLite's own checkpointing starts: the sqlx pool's
/// connections keep it, for the few writes they make, and would otherwise checkpoint in them.
pub(super) const EVERY: u64 = 160;

/// How long the final step of a round may wait for a reader still in the WAL, holding writes:
/// past it, the round gives up and the next one tries again.
const HOLD: Duration = Duration::from_millis(20);

/// Rounds in a row that may end with the WAL still in a reader's use before that is logged.
const STARVED: u32 = 8;

/// The checkpointer of one database file: the writes it counts, and its thread.
pub(super) struct Checkpoints {
    /// Writes committed since the store opened.
    writes: AtomicU64,
    nudge: SyncSender<()>,
    /// Set when the thread is gone and the writer checkpoints as SQLite would.
    fallen_back: AtomicBool,
    /// Rounds finished, for whoever waits for one (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    rounds: Arc<(Mutex<u64>, Condvar)>,
}

impl Checkpoints {
    /// Starts the checkpointer of the file at `path` (with its own connection, at the same
    /// `synchronous` setting); `writer` is the store's writer connection, held while a round ends.
    pub(super) fn start(path: &Path, synchronous: &str, writer: Arc<Mutex<rusqlite::Connection>>) -> Result<Self> {
        let failed = |e: rusqlite::Error| store_error(&format!("cannot open {} to checkpoint it", path.display()), e);
        let conn = rusqlite::Connection::open(path).map_err(failed)?;
        conn.busy_timeout(HOLD).map_err(failed)?;
        conn.execute_batch(&format!("PRAGMA synchronous = {synchronous};")).map_err(failed)?;
        let (nudge, nudges) = std::sync::mpsc::sync_channel(1);
        let rounds = Arc::new((Mutex::new(0), Condvar::new()));
        let counted = rounds.clone();
        std::thread::Builder::new()
            .name("ruleweave-sqlite-checkpoints".into())
            .spawn(move || run(&conn, &writer, &nudges, &counted))
            .map_err(|e| store_error("cannot start the SQLite checkpointer", e))?;
        Ok(Checkpoints { writes: AtomicU64::new(0), nudge, fallen_back: AtomicBool::new(false), rounds })
    }

    /// Counts `n` writes just committed on `writer` (the store's writer connection, held by the
    /// caller), nudging the checkpointer each time the count passes a multiple of [`EVERY`].
    pub(super) fn wrote(&self, n: usize, writer: &rusqlite::Connection) {
        let n = n as u64;
        let before = self.writes.fetch_add(n, Ordering::Relaxed);
        if before / EVERY == (before + n) / EVERY {
            return;
        }
        // A round already waiting will copy these writes too.
        if let Err(TrySendError::Disconnected(())) = self.nudge.try_send(())
            && !self.fallen_back.swap(true, Ordering::Relaxed)
        {
            tracing::error!("the SQLite checkpointer has stopped; the store's commits checkpoint as SQLite's do");
            if let Err(e) = writer.execute_batch("PRAGMA wal_autocheckpoint = 1000;") {
                tracing::error!("cannot turn SQLite's own checkpoints back on: {e}");
            }
        }
    }

    /// Waits until `n` rounds have finished, for at most `limit`; whether they have.
    #[cfg(test)]
    pub(crate) fn wait_rounds(&self, n: u64, limit: Duration) -> bool {
        let (count, changed) = &*self.rounds;
        let count = count.lock().unwrap_or_else(|p| p.into_inner());
        let (count, _) = changed.wait_timeout_while(count, limit, |c| *c < n).unwrap_or_else(|p| p.into_inner());
        *count >= n
    }
}

/// The checkpointer's thread: a round per nudge, until the store is dropped.
fn run(
    conn: &rusqlite::Connection,
    writer: &Mutex<rusqlite::Connection>,
    nudges: &Receiver<()>,
    rounds: &(Mutex<u64>, Condvar),
) {
    let mut starved = 0;
    while nudges.recv().is_ok() {
        match round(conn, writer) {
            Ok(true) => starved = 0,
            Ok(false) => {
                starved += 1;
                if starved == STARVED {
                    tracing::warn!(
                        "the SQLite WAL has not started over for {STARVED} checkpoints: a reader keeps \
                         using it (a long read?), so it grows"
                    );
                }
            }
            Err(e) => tracing::warn!("a checkpoint of the SQLite store failed (the next one tries again): {e}"),
        }
        let (count, changed) = rounds;
        *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        changed.notify_all();
    }
}

/// One round: the bulk of the copy (and the syncs) while turns write on, then, with writes held,
/// the pages they wrote meanwhile, after which the WAL starts over. Whether it could: a reader
/// still in the WAL keeps it.
fn round(conn: &rusqlite::Connection, writer: &Mutex<rusqlite::Connection>) -> rusqlite::Result<bool> {
    // Busy here means another connection is checkpointing: this round's copy is its.
    checkpoint(conn, "PASSIVE")?;
    let _held = writer.lock().unwrap_or_else(|p| p.into_inner());
    Ok(!checkpoint(conn, "RESTART")?)
}

/// Runs a checkpoint of `mode`; whether it was kept from finishing (SQLite's `busy` column).
fn checkpoint(conn: &rusqlite::Connection, mode: &str) -> rusqlite::Result<bool> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| row.get::<_, i64>(0)).map(|busy| busy != 0)
}

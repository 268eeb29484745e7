//! The SQLite store's checkpoints: copying the write-ahead log into the database file, off the
//! turns' path.
//!
//! Left to itself, SQLite checkpoints inside the commit that grows the WAL past 1000 pages, and
//! that commit (a turn's) waits while the database file is synced: a few milliseconds every
//! couple of hundred turns, about a fifth of a persisted turn's time on average. Here the store's
//! writer connection never checkpoints. Every [`EVERY`] writes nudge a thread of this module's,
//! which copies the WAL with a passive checkpoint while turns go on writing, then holds writes for
//! a moment to copy what they wrote meanwhile and let the WAL start over from its beginning (so it
//! does not grow for as long as turns keep coming).
//!
//! Durability is unchanged: a turn is acknowledged once its commit is in the WAL, as before, and
//! the database file is synced before the WAL is reused (`synchronous=normal`).

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::store_error;
use crate::error::Result;

/// Writes between two checkpoints. A chat game's turn adds about five pages to the WAL, so this is
/// about SQLite's own interval of 1000 pages.
pub(super) const EVERY: u32 = 256;

/// How long the final step of a round may wait for a reader still in the WAL, holding writes:
/// past it, the round gives up and the next one tries again.
const HOLD: Duration = Duration::from_millis(20);

/// The checkpointer of one database file: the writes it counts, and its thread.
pub(super) struct Checkpoints {
    writes: AtomicU32,
    nudge: SyncSender<()>,
    /// Rounds finished, for whoever waits for one (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    rounds: Arc<(Mutex<u64>, Condvar)>,
}

impl Checkpoints {
    /// Starts the checkpointer of the file at `path` (with its own connection, at the same
    /// `synchronous` setting); `writer` is the store's writer connection, held while a round ends.
    pub fn start(path: &Path, synchronous: &str, writer: Arc<Mutex<rusqlite::Connection>>) -> Result<Self> {
        let failed = |e: rusqlite::Error| store_error(&format!("cannot open {} to checkpoint it", path.display()), e);
        let conn = rusqlite::Connection::open(path).map_err(failed)?;
        conn.execute_batch(&format!("PRAGMA synchronous = {synchronous};")).map_err(failed)?;
        let (nudge, nudges) = std::sync::mpsc::sync_channel(1);
        let rounds = Arc::new((Mutex::new(0), Condvar::new()));
        let counted = rounds.clone();
        std::thread::Builder::new()
            .name("ruleweave-sqlite-checkpoints".into())
            .spawn(move || run(&conn, &writer, &nudges, &counted))
            .map_err(|e| store_error("cannot start the SQLite checkpointer", e))?;
        Ok(Checkpoints { writes: AtomicU32::new(0), nudge, rounds })
    }

    /// Counts `n` committed writes, nudging the checkpointer every [`EVERY`].
    pub fn wrote(&self, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        if self.writes.fetch_add(n, Ordering::Relaxed).saturating_add(n) >= EVERY {
            self.writes.store(0, Ordering::Relaxed);
            // A round already waiting will copy these writes too.
            if let Err(TrySendError::Disconnected(())) = self.nudge.try_send(()) {
                tracing::error!("the SQLite checkpointer has stopped; the WAL is no longer copied");
            }
        }
    }

    /// Waits until `n` rounds have finished, for at most `limit`; whether they have.
    #[cfg(test)]
    pub fn wait_rounds(&self, n: u64, limit: Duration) -> bool {
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
    while nudges.recv().is_ok() {
        if let Err(e) = round(conn, writer) {
            tracing::warn!("a checkpoint of the SQLite store failed (the next one tries again): {e}");
        }
        let (count, changed) = rounds;
        *count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        changed.notify_all();
    }
}

/// One round: the bulk of the copy (and the sync of the database file) while turns write on, then
/// the pages they wrote meanwhile with writes held, after which the WAL starts over.
fn round(conn: &rusqlite::Connection, writer: &Mutex<rusqlite::Connection>) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_secs(10))?;
    checkpoint(conn, "PASSIVE")?;
    let _held = writer.lock().unwrap_or_else(|p| p.into_inner());
    conn.busy_timeout(HOLD)?;
    checkpoint(conn, "RESTART")
}

fn checkpoint(conn: &rusqlite::Connection, mode: &str) -> rusqlite::Result<()> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()))
}

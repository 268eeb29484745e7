//! Session stores: where sessions and their checkpoints live between turns.
//!
//! A checkpoint records what a turn (or one step of a long turn) *did*: the updates each node
//! returned, in the order they were folded in, with the turn's input, its model exchanges and the
//! pack version that ran it. The state at any checkpoint is the session's start snapshot with every
//! later checkpoint's updates folded in through the reducers. A full snapshot is also kept every
//! few turns ([`Retention`]), so loading replays only the last few; older snapshots are pruned and
//! a long session stores each message once, not once per turn.
//!
//! Three stores: [`MemoryStore`] (tests, single process), [`SqliteStore`] (the default: one file,
//! WAL, one host process), [`PostgresStore`] (several host replicas sharing sessions). The SQL
//! stores keep a checkpoint's updates and model exchanges as one zstd-compressed JSON body (a
//! pirate turn's 4.9 kB is 1.8 kB), so that a turn's row fits half a page.

mod counters;
mod index;
mod lobby;
mod memory;
mod outcomes;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod shared;
#[cfg(feature = "sqlite")]
mod sqlite;
mod transcripts;
mod versions;
#[cfg(feature = "sqlite")]
mod wal;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use tokio::sync::broadcast;

pub use counters::{Bump, Counters};
pub use index::{Expiry, SessionIndex, SessionQuery};
pub use lobby::{InputKind, LobbyInput, LobbyInputs, OpenRound};
pub use memory::MemoryStore;
pub use outcomes::{Ending, FieldSpread, OutcomeCount, OutcomeQuery, OutcomeRow, Outcomes};
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use shared::Sql;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use transcripts::{TranscriptLink, Transcripts};
pub use versions::PackVersions;

use crate::error::{Error, ErrorKind, Result};
use crate::event::Updates;
use crate::exchange::Exchange;
use crate::llm::BoxFuture;

/// What kind of moment a checkpoint records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    /// The session opened (holds the first state as a snapshot).
    Start,
    /// One step of a turn that checkpoints every step (the turn is not over).
    Step,
    /// A finished turn.
    Turn,
    /// A turn held at a breakpoint (the turn is not over: resuming it goes on from here).
    Break,
    /// The state edited by hand (between turns, or at a breakpoint): each field set outright.
    Edit,
}

impl CheckpointKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckpointKind::Start => "start",
            CheckpointKind::Step => "step",
            CheckpointKind::Turn => "turn",
            CheckpointKind::Break => "break",
            CheckpointKind::Edit => "edit",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Self> {
        match s {
            "start" => Ok(CheckpointKind::Start),
            "step" => Ok(CheckpointKind::Step),
            "turn" => Ok(CheckpointKind::Turn),
            "break" => Ok(CheckpointKind::Break),
            "edit" => Ok(CheckpointKind::Edit),
            other => Err(Error::new(ErrorKind::Store, format!("unknown checkpoint kind `{other}`"))),
        }
    }
}

/// A session as a store keeps it: what it is and how far it got.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    /// The session's id.
    pub id: String,
    /// The pack it plays.
    pub pack: String,
    /// The pack version it was opened on.
    pub pack_version: String,
    /// The options chosen when it opened.
    pub options: Json,
    /// The seed of its randomness.
    pub seed: u64,
    /// Finished turns.
    pub turns: u64,
    /// The number of its newest checkpoint.
    pub head: u64,
    /// The kind of its newest checkpoint (`step` while a long turn is under way).
    pub head_kind: CheckpointKind,
    /// The newest checkpoint holding a full snapshot.
    pub snapshot_seq: u64,
    /// Whether the session is over (a won game).
    pub finished: bool,
    /// When it finished, unix milliseconds.
    pub finished_at: Option<i64>,
    /// When it opened, unix milliseconds.
    pub created_at: i64,
    /// When its newest checkpoint was written, unix milliseconds.
    pub updated_at: i64,
    /// The session and checkpoint it was forked from.
    pub parent: Option<(String, u64)>,
    /// The turn in which its state was first set by hand (an edit, or a fork with a patch), here
    /// or in the session it forked from before the fork: a win on such a state is no real win.
    pub edited_turn: Option<u64>,
    /// Its pack plays in lobby rounds: the store keeps when its round was asked (its newest turn),
    /// for the sweep that closes rounds at their timeout. Other sessions' turns leave that clock
    /// (and its index) alone.
    pub lobby: bool,
    /// The variant of its pack's experiment it plays.
    pub variant: Option<String>,
    /// The hash of the player it was opened for ([`player_hash`](crate::player_hash)).
    pub player: Option<String>,
}

/// One checkpoint.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Its number in the session: 0 for the start, then one per turn (and per step of long turns).
    pub seq: u64,
    /// The turn it belongs to (0 for the start).
    pub turn: u64,
    /// What it records.
    pub kind: CheckpointKind,
    /// For a step checkpoint, the step.
    pub step: Option<u32>,
    /// The pack version that produced it.
    pub pack_version: String,
    /// The turn's input.
    pub input: Option<Json>,
    /// The updates each node returned, in the order they were folded in.
    pub updates: Vec<(String, Updates)>,
    /// The whole state after this checkpoint, when it holds a snapshot.
    pub snapshot: Option<Json>,
    /// The model exchanges it used.
    pub exchanges: Arc<Vec<Exchange>>,
    /// For a step checkpoint: where the turn goes on after a crash.
    pub resume: Option<ResumePoint>,
    /// Whether the session is finished after it.
    pub finished: bool,
    /// When it was written, unix milliseconds.
    pub created_at: i64,
    /// Counter bumps of the session's pack, applied with the checkpoint (not kept in it).
    pub bumps: Vec<Bump>,
    /// Who made it, as the embedding program named them ([`Session::acting_as`]): a server
    /// names the key (`operator`, an issued key's id, `session:ID`), so an operator sees who
    /// edited, held or resumed a session. `None` when nobody was named.
    ///
    /// [`Session::acting_as`]: crate::Session::acting_as
    pub by: Option<String>,
}

/// Something that happened to a session, told to every process sharing the store (through
/// PostgreSQL's `NOTIFY` when several replicas share one database), for event streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// The session.
    pub session: String,
    /// What happened.
    #[serde(flatten)]
    pub what: Happened,
}

/// What happened to a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Happened {
    /// A turn was recorded.
    Turn {
        /// Its number.
        turn: u64,
        /// Its checkpoint.
        checkpoint: u64,
        /// Whether the session is finished after it.
        finished: bool,
    },
    /// A player's lobby input was recorded.
    Input {
        /// The round.
        round: u64,
        /// The player.
        player: String,
        /// What it was.
        kind: InputKind,
    },
    /// The session was deleted (its followers' streams end).
    Deleted,
}

/// How many events a subscriber may fall behind before it misses some (it is told it did).
pub(crate) const EVENT_BUFFER: usize = 1024;

/// A checkpoint as the checkpoint list shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckpointInfo {
    /// Its number.
    pub seq: u64,
    /// The turn it belongs to.
    pub turn: u64,
    /// What it records.
    pub kind: CheckpointKind,
    /// For a step checkpoint, the step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// The pack version that produced it.
    pub pack_version: String,
    /// The nodes whose updates it holds, in order.
    pub nodes: Vec<String>,
    /// How many model exchanges it used.
    pub llm_calls: usize,
    /// Whether it holds a full snapshot.
    pub snapshot: bool,
    /// When it was written, unix milliseconds (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: i64,
    /// Who made it (the key, on a server), when they were named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// Now, in Unix milliseconds: the clock a store's times (`created_at`, `updated_at`) are read in.
pub use crate::vocab::now_ms;

/// Unix milliseconds as an RFC 3339 time in UTC (`2026-11-24T10:44:11.123Z`).
pub fn rfc3339_of(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

fn rfc3339<S: serde::Serializer>(ms: &i64, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339_of(*ms))
}

impl Checkpoint {
    pub(crate) fn info(&self) -> CheckpointInfo {
        CheckpointInfo {
            seq: self.seq,
            turn: self.turn,
            kind: self.kind,
            step: self.step,
            pack_version: self.pack_version.clone(),
            nodes: self.updates.iter().map(|(n, _)| n.clone()).collect(),
            llm_calls: self.exchanges.len(),
            snapshot: self.snapshot.is_some(),
            created_at: self.created_at,
            by: self.by.clone(),
        }
    }
}

/// Where an interrupted turn goes on, as a step checkpoint records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumePoint {
    /// The step reached.
    pub step: u32,
    /// The nodes to run next.
    pub next: Vec<String>,
    /// For each join of the graph, the nodes it has seen finish.
    pub joins: Vec<Vec<String>>,
    /// The position of the turn's randomness (a u128, as text: JSON numbers cannot hold it).
    pub random: String,
    /// When a pause point made it, the node after which the turn paused: the next turn goes on
    /// from here, with its own input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_after: Option<String>,
    /// When a breakpoint made it, where the turn is held: the same turn goes on from here when
    /// it is resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Stop>,
}

/// Where a breakpoint holds a turn: before a node runs, or after it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Before this node's step runs.
    Before(String),
    /// After this node's step ran.
    After(String),
}

impl std::fmt::Display for Stop {
    /// `before generate_response`, `after merit_check`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Before(n) => write!(f, "before {n}"),
            Stop::After(n) => write!(f, "after {n}"),
        }
    }
}

/// What loading a session returns: its info, a snapshot, and the checkpoints after it.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The session.
    pub info: SessionInfo,
    /// The checkpoint the snapshot belongs to (`info.snapshot_seq`, or 0 for a history).
    pub snapshot_seq: u64,
    /// The turns finished at that checkpoint.
    pub snapshot_turn: u64,
    /// The state at that checkpoint.
    pub snapshot: Json,
    /// The pack version that wrote that checkpoint (the version the snapshot's state is on).
    pub snapshot_version: String,
    /// The checkpoints after the snapshot, oldest first.
    pub after: Vec<Checkpoint>,
}

impl Stored {
    /// Whether its newest checkpoint was written on another version of the pack than `version`
    /// (loading it then moves the state onto `version`, running the pack's `migrate` script).
    pub(crate) fn moves_from(&self, version: &str) -> bool {
        self.after.last().map_or(&self.snapshot_version, |c| &c.pack_version) != version
    }
}

/// How much of a session's past the engine keeps in its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A full snapshot every this many turns (older ones are pruned; the start stays).
    pub snapshot_every: u64,
    /// Finished sessions are deleted this long after they finished (`None`: kept).
    pub expire_finished_after: Option<std::time::Duration>,
    /// Unfinished sessions nobody has played for this long are deleted (`None`: kept): one-off
    /// chats and abandoned games, with their conversation links.
    pub expire_idle_after: Option<std::time::Duration>,
    /// The most a session's state may take, in bytes of JSON; a turn, edit or fork that would
    /// leave more is undone with [`crate::ErrorKind::StateTooLarge`],
    /// so one client cannot fill the store. 256 KiB by default.
    pub max_state_bytes: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            snapshot_every: 16,
            expire_finished_after: None,
            expire_idle_after: None,
            max_state_bytes: 256 * 1024,
        }
    }
}

/// Holds a session for one writer until dropped.
pub struct SessionLock(#[allow(dead_code)] Option<Box<dyn std::any::Any + Send>>);

impl SessionLock {
    /// A lock that holds nothing (stores whose process is the only writer).
    pub fn none() -> Self {
        SessionLock(None)
    }

    pub(crate) fn holding(guard: impl std::any::Any + Send) -> Self {
        SessionLock(Some(Box::new(guard)))
    }
}

/// A session store: sessions and their checkpoints. Implementations are shared by every session
/// of an engine.
///
/// The core is what every game needs: create, load, append (with its side effects: a turn's
/// counter bumps and the closing of a lobby round go in the same write), lock, truncate, delete,
/// and the events of those. What only some features need is a capability trait a store may
/// offer: [`LobbyInputs`] (rounds several players answer), [`Counters`] (data tables that count
/// their rows' use), [`Transcripts`] (the chat face), [`SessionIndex`] (listing and expiry),
/// [`PackVersions`] (migrating stored sessions after a pack changed). A store that does not offer
/// one returns `None` from its accessor, and the engine says so when a feature needs it.
///
/// [`MemoryStore`] is the reference implementation; [`SqliteStore`] and [`PostgresStore`] pass
/// the same conformance suite, capability by capability.
pub trait Store: Send + Sync {
    /// `memory`, `sqlite` or `postgres`.
    fn kind(&self) -> &'static str;

    /// Whether this process is the store's only writer (so a session cached in memory is current).
    fn exclusive(&self) -> bool;

    /// The file on this machine the store keeps its data in (a SQLite database), if any: a
    /// [`crate::Watcher`] over pack files leaves it and its journals alone when it lies under the
    /// packs' root.
    fn file(&self) -> Option<&std::path::Path> {
        None
    }

    /// Creates a session with its start checkpoint (seq 0, holding the first state).
    fn create<'a>(&'a self, info: &'a SessionInfo, start: &'a Checkpoint) -> BoxFuture<'a, Result<()>>;

    /// The session's info.
    fn info<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SessionInfo>>>;

    /// The session's newest snapshot and the checkpoints after it.
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Stored>>>;

    /// The start snapshot and every checkpoint up to `seq` (for forks and replays).
    fn history<'a>(&'a self, id: &'a str, seq: u64) -> BoxFuture<'a, Result<Option<Stored>>>;

    /// Appends a checkpoint. Its `seq` must be the session's head + 1: a store never lets two
    /// writers record the same checkpoint, so a lost update is an error, not a silent overwrite.
    /// In the same write, a turn's checkpoint clears the session's lobby inputs, and the
    /// checkpoint's counter bumps are added (by stores that offer those capabilities).
    fn append<'a>(&'a self, id: &'a str, checkpoint: &'a Checkpoint) -> BoxFuture<'a, Result<()>>;

    /// Withdraws the checkpoints after `keep` (the step checkpoints of a turn that then failed),
    /// making `keep` the head again.
    fn truncate<'a>(&'a self, id: &'a str, keep: u64) -> BoxFuture<'a, Result<()>>;

    /// Every checkpoint of the session, oldest first.
    fn checkpoints<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<CheckpointInfo>>>;

    /// Deletes a session with its checkpoints (and lobby inputs and transcript links); false when
    /// there was none.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>>;

    /// The sessions whose newest checkpoint is a step: a long turn a crash interrupted.
    fn pending(&self) -> BoxFuture<'_, Result<Vec<String>>>;

    /// Locks the session against writers in other processes, until the lock is dropped.
    fn lock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SessionLock>>;

    /// [`Store::lock`] when no other process holds the session now; `None` when one does (it
    /// plays a turn). A store whose locks never wait takes the lock.
    fn try_lock<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SessionLock>>> {
        Box::pin(async move { self.lock(id).await.map(Some) })
    }

    /// Events of every session: turns recorded (by any process sharing the store), lobby inputs,
    /// deletions.
    fn subscribe(&self) -> broadcast::Receiver<SessionEvent>;

    /// Whether the store can take writes now; an error says why not (for health checks).
    fn health(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The store's lobby inputs, if it keeps them.
    fn lobby(&self) -> Option<&dyn LobbyInputs> {
        None
    }

    /// The store's shared counters, if it keeps them.
    fn counters(&self) -> Option<&dyn Counters> {
        None
    }

    /// The store's transcript links, if it keeps them.
    fn transcripts(&self) -> Option<&dyn Transcripts> {
        None
    }

    /// The store's session index, if it keeps one.
    fn index(&self) -> Option<&dyn SessionIndex> {
        None
    }

    /// The store's record of pack versions' schemas, if it keeps one.
    fn versions(&self) -> Option<&dyn PackVersions> {
        None
    }

    /// The store's outcome rows of live games, if it keeps them.
    fn outcomes(&self) -> Option<&dyn Outcomes> {
        None
    }

    /// The database a SQL store keeps its sessions in, for tables of an embedder's own that
    /// belong beside them: a server's keys refer to sessions (and go with them, by foreign keys
    /// that cascade). Such tables come with migrations of their own, numbered apart from the
    /// store's (which ignores the ones it does not know); `None` for a store that is no SQL
    /// database.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    fn sql(&self) -> Option<Sql<'_>> {
        None
    }
}

/// A capability a feature needs (`found`, from one of [`Store`]'s accessors), or an error that
/// says the store does not offer it (`what`).
///
/// ```
/// # async fn demo(store: &dyn ruleweave::store::Store) -> ruleweave::Result<()> {
/// let index = ruleweave::store::needs(store, store.index(), "a session index")?;
/// # Ok(()) }
/// ```
pub fn needs<'a, T: ?Sized>(store: &'a dyn Store, found: Option<&'a T>, what: &str) -> Result<&'a T> {
    found.ok_or_else(|| {
        Error::new(ErrorKind::Input, format!("the {} store does not keep {what}, which this needs", store.kind()))
    })
}

/// Whether a store's last write went in. A write that failed in the store itself (a full disk,
/// an I/O error, a lost database; not a conflict) is what [`Store::health`] reports until a later
/// write goes in, so a health check fails while every turn would.
#[derive(Debug, Default)]
pub(crate) struct LastWrite(std::sync::Mutex<Option<String>>);

impl LastWrite {
    /// Notes how a write went.
    pub(crate) fn note<T>(&self, r: &Result<T>) {
        let failed = match r {
            Ok(_) => None,
            Err(e) if e.kind() == ErrorKind::Store => Some(e.to_string()),
            Err(_) => return,
        };
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = failed;
    }

    /// An error when the last write failed in the store and `probe`, a small write, fails too
    /// (a probe that goes in says the store takes writes again).
    pub(crate) async fn check<F: Future<Output = Result<()>>>(&self, probe: impl FnOnce() -> F) -> Result<()> {
        let failed = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let Some(why) = failed else { return Ok(()) };
        let probed = probe().await;
        self.note(&probed);
        probed.map_err(|e| {
            Error::new(ErrorKind::Store, format!("the last write failed ({why}), and so does a probe: {e}"))
        })
    }
}

/// What a health probe writes: 64 KiB that do not compress, about what a chat turn's checkpoint
/// takes, so that a probe goes in only where a turn would (a few bytes fit in a page a full
/// disk still has).
pub(crate) fn probe_payload() -> Vec<u8> {
    let mut x = crate::vocab::now_ms() as u64 | 1;
    (0..64 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A store URL without its password, for logs and messages: `postgres://me:***@db/x`.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user = url[s + 3..at].split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Opens the store a URL names: `memory`, `sqlite://PATH` (created if missing), `postgres://...`.
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    if url == "memory" || url == "memory://" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if url.starts_with("sqlite:") {
        #[cfg(feature = "sqlite")]
        return Ok(Arc::new(SqliteStore::open(url).await?));
        #[cfg(not(feature = "sqlite"))]
        return Err(Error::new(ErrorKind::Input, "this build has no SQLite store (the engine's `sqlite` feature)"));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(PostgresStore::open(url).await?));
        #[cfg(not(feature = "postgres"))]
        return Err(Error::new(
            ErrorKind::Input,
            "this build has no PostgreSQL store (the engine's `postgres` feature)",
        ));
    }
    Err(Error::new(
        ErrorKind::Input,
        format!("`{url}` is not a store URL: use memory, sqlite://PATH or postgres://..."),
    ))
}

pub(crate) fn conflict(id: &str, seq: u64) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("session {id} already has checkpoint {seq}: another turn was recorded first; reload and retry"),
    )
}

pub(crate) fn store_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Store, format!("{what}: {e}"))
}

#[cfg(test)]
mod tests;

//! `memory`: sessions in this process, for tests and for games that need no persistence.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::broadcast;

use super::{
    Checkpoint, CheckpointInfo, CheckpointKind, Counters, EVENT_BUFFER, Happened, LobbyInput, LobbyInputs,
    PackVersions, SessionEvent, SessionIndex, SessionInfo, SessionLock, Store, Stored, Transcripts, conflict,
};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// Sessions kept in memory. Checkpoints stay as the engine made them (no serialization).
pub struct MemoryStore {
    pub(super) sessions: Mutex<HashMap<String, Entry>>,
    /// (pack, table, counter, row key) → value. Locked after `sessions` when both are.
    pub(super) counters: Mutex<HashMap<(String, String, String, String), i64>>,
    /// Transcript key → (session, checkpoint). Locked before `sessions` when both are.
    pub(super) links: Mutex<HashMap<String, (String, u64, bool)>>,
    /// (pack, version) → the recorded state schema.
    pub(super) schemas: Mutex<HashMap<(String, String), serde_json::Value>>,
    /// Session → its live game's outcome row.
    pub(super) outcomes: Mutex<HashMap<String, super::OutcomeRow>>,
    pub(super) events: broadcast::Sender<SessionEvent>,
}

pub(super) struct Entry {
    pub(super) info: SessionInfo,
    /// Every checkpoint, seq 0 first; only the start and the newest snapshot keep their snapshot.
    pub(super) rows: Vec<Checkpoint>,
    /// Lobby inputs waiting for the round to close.
    pub(super) inputs: Vec<LobbyInput>,
    /// When the round under way was asked (its newest turn), for a lobby's session.
    pub(super) round_at: i64,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            sessions: Mutex::default(),
            counters: Mutex::default(),
            links: Mutex::default(),
            schemas: Mutex::default(),
            outcomes: Mutex::default(),
            events: broadcast::channel(EVENT_BUFFER).0,
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    pub(super) fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Entry>) -> R) -> R {
        f(&mut self.sessions.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(super) fn with_outcomes<R>(&self, f: impl FnOnce(&mut HashMap<String, super::OutcomeRow>) -> R) -> R {
        f(&mut self.outcomes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Drops the transcript links of sessions that are gone.
    fn drop_stale_links(&self) {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        self.with(|m| links.retain(|_, (id, _, _)| m.contains_key(id)));
    }

    /// Deletes the sessions `gone` picks, their links with them; how many.
    pub(super) fn remove_where(&self, gone: impl Fn(&Entry) -> bool) -> u64 {
        let removed = self.with(|m| {
            let before = m.len();
            m.retain(|_, e| !gone(e));
            (before - m.len()) as u64
        });
        if removed > 0 {
            self.drop_stale_links();
        }
        removed
    }
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

fn stored(e: &Entry, snapshot_seq: u64, upto: u64) -> Option<Stored> {
    let at = e.rows.get(snapshot_seq as usize)?;
    let snapshot = at.snapshot.clone()?;
    let after = e.rows.iter().filter(|c| c.seq > snapshot_seq && c.seq <= upto).cloned().collect();
    Some(Stored {
        info: e.info.clone(),
        snapshot_seq,
        snapshot_turn: at.turn,
        snapshot,
        snapshot_version: at.pack_version.clone(),
        after,
    })
}

impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn exclusive(&self) -> bool {
        true
    }

    fn create<'a>(&'a self, info: &'a SessionInfo, start: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        ready(self.with(|m| {
            if m.contains_key(&info.id) {
                return Err(Error::new(ErrorKind::Conflict, format!("session {} already exists", info.id)));
            }
            m.insert(
                info.id.clone(),
                Entry { info: info.clone(), rows: vec![start.clone()], inputs: Vec::new(), round_at: info.updated_at },
            );
            Ok(())
        }))
    }

    fn info<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<SessionInfo>>> {
        ready(Ok(self.with(|m| m.get(id).map(|e| e.info.clone()))))
    }

    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Stored>>> {
        ready(Ok(self.with(|m| m.get(id).and_then(|e| stored(e, e.info.snapshot_seq, u64::MAX)))))
    }

    fn history<'a>(&'a self, id: &'a str, seq: u64) -> BoxFuture<'a, Result<Option<Stored>>> {
        ready(Ok(self.with(|m| m.get(id).and_then(|e| stored(e, 0, seq)))))
    }

    fn append<'a>(&'a self, id: &'a str, c: &'a Checkpoint) -> BoxFuture<'a, Result<()>> {
        let done = self.with(|m| {
            let e = m.get_mut(id).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("no session {id}")))?;
            if c.seq != e.info.head + 1 {
                return Err(conflict(id, c.seq));
            }
            if c.snapshot.is_some() {
                // Only the newest snapshot (and the start) is kept: drop the previous one.
                let previous = e.info.snapshot_seq as usize;
                if previous > 0
                    && let Some(old) = e.rows.get_mut(previous)
                {
                    old.snapshot = None;
                }
                e.info.snapshot_seq = c.seq;
            }
            e.rows.push(c.clone());
            e.info.head = c.seq;
            e.info.head_kind = c.kind;
            if c.kind == CheckpointKind::Turn {
                e.info.turns = c.turn;
                e.inputs.clear();
                e.round_at = c.created_at;
            }
            if c.kind == CheckpointKind::Edit && e.info.edited_turn.is_none() {
                e.info.edited_turn = Some(c.turn);
            }
            if c.finished && !e.info.finished {
                e.info.finished_at = Some(c.created_at);
            }
            e.info.finished = c.finished;
            e.info.updated_at = c.created_at;
            if !c.bumps.is_empty() {
                let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
                for b in &c.bumps {
                    let k = (e.info.pack.clone(), b.table.clone(), b.counter.clone(), b.key.clone());
                    *counters.entry(k).or_default() += b.by;
                }
            }
            Ok(())
        });
        if done.is_ok() && c.kind == CheckpointKind::Turn {
            let what = Happened::Turn { turn: c.turn, checkpoint: c.seq, finished: c.finished };
            let _ = self.events.send(SessionEvent { session: id.to_owned(), what });
        }
        ready(done)
    }

    fn truncate<'a>(&'a self, id: &'a str, keep: u64) -> BoxFuture<'a, Result<()>> {
        ready(self.with(|m| {
            let e = m.get_mut(id).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("no session {id}")))?;
            e.rows.truncate(keep as usize + 1);
            let last = e.rows.last().expect("the start checkpoint stays");
            e.info.head = last.seq;
            e.info.head_kind = last.kind;
            Ok(())
        }))
    }

    fn checkpoints<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<CheckpointInfo>>> {
        ready(Ok(self.with(|m| m.get(id).map(|e| e.rows.iter().map(Checkpoint::info).collect()).unwrap_or_default())))
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let removed = self.with(|m| m.remove(id).is_some());
        if removed {
            self.drop_stale_links();
            let _ = self.events.send(SessionEvent { session: id.to_owned(), what: Happened::Deleted });
        }
        ready(Ok(removed))
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        ready(Ok(self.with(|m| {
            m.values().filter(|e| e.info.head_kind == CheckpointKind::Step).map(|e| e.info.id.clone()).collect()
        })))
    }

    fn lock<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<SessionLock>> {
        ready(Ok(SessionLock::none()))
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
}

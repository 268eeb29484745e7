//! `memory`: sessions in this process, for tests and for games that need no persistence.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::broadcast;

use super::{
    Checkpoint, CheckpointInfo, CheckpointKind, EVENT_BUFFER, Expiry, Happened, LobbyInput, OpenRound, SessionEvent,
    SessionInfo, SessionLock, SessionQuery, Store, Stored, TranscriptLink, conflict,
};
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// Sessions kept in memory. Checkpoints stay as the engine made them (no serialization).
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, Entry>>,
    /// (pack, table, counter, row key) → value. Locked after `sessions` when both are.
    counters: Mutex<HashMap<(String, String, String, String), i64>>,
    /// Transcript key → (session, checkpoint). Locked before `sessions` when both are.
    links: Mutex<HashMap<String, (String, u64, bool)>>,
    /// (pack, version) → the recorded state schema.
    schemas: Mutex<HashMap<(String, String), serde_json::Value>>,
    events: broadcast::Sender<SessionEvent>,
}

struct Entry {
    info: SessionInfo,
    /// Every checkpoint, seq 0 first; only the start and the newest snapshot keep their snapshot.
    rows: Vec<Checkpoint>,
    /// Lobby inputs waiting for the round to close.
    inputs: Vec<LobbyInput>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            sessions: Mutex::default(),
            counters: Mutex::default(),
            links: Mutex::default(),
            schemas: Mutex::default(),
            events: broadcast::channel(EVENT_BUFFER).0,
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Entry>) -> R) -> R {
        f(&mut self.sessions.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Drops the transcript links of sessions that are gone.
    fn drop_stale_links(&self) {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        self.with(|m| links.retain(|_, (id, _, _)| m.contains_key(id)));
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
            m.insert(info.id.clone(), Entry { info: info.clone(), rows: vec![start.clone()], inputs: Vec::new() });
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

    fn counters<'a>(&'a self, pack: &'a str, table: &'a str) -> BoxFuture<'a, Result<Vec<(String, String, i64)>>> {
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let rows = counters
            .iter()
            .filter(|((p, t, _, _), _)| p == pack && t == table)
            .map(|((_, _, counter, key), n)| (key.clone(), counter.clone(), *n))
            .collect();
        ready(Ok(rows))
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

    fn expire<'a>(&'a self, finished_before: i64, which: Expiry<'a>) -> BoxFuture<'a, Result<u64>> {
        let expired = self.with(|m| {
            let before = m.len();
            let named = |pack: &str| match which {
                Expiry::Pack(p) => p == pack,
                Expiry::AllBut(but) => !but.iter().any(|b| b == pack),
            };
            m.retain(|_, e| {
                !(named(&e.info.pack) && e.info.finished && e.info.finished_at.is_some_and(|t| t < finished_before))
            });
            (before - m.len()) as u64
        });
        if expired > 0 {
            self.drop_stale_links();
        }
        ready(Ok(expired))
    }

    fn expire_idle(&self, idle_before: i64) -> BoxFuture<'_, Result<u64>> {
        let expired = self.with(|m| {
            let before = m.len();
            m.retain(|_, e| e.info.finished || e.info.updated_at >= idle_before);
            (before - m.len()) as u64
        });
        if expired > 0 {
            self.drop_stale_links();
        }
        ready(Ok(expired))
    }

    fn pending(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        ready(Ok(self.with(|m| {
            m.values().filter(|e| e.info.head_kind == CheckpointKind::Step).map(|e| e.info.id.clone()).collect()
        })))
    }

    fn lock<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<SessionLock>> {
        ready(Ok(SessionLock::none()))
    }

    fn add_input<'a>(&'a self, id: &'a str, input: &'a LobbyInput) -> BoxFuture<'a, Result<bool>> {
        let added = self.with(|m| {
            let e = m.get_mut(id).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("no session {id}")))?;
            let twice =
                e.inputs.iter().any(|i| i.round == input.round && i.player == input.player && i.kind == input.kind);
            if !twice {
                e.inputs.push(input.clone());
            }
            Ok(!twice)
        });
        if let Ok(true) = added {
            let what = Happened::Input { round: input.round, player: input.player.clone(), kind: input.kind };
            let _ = self.events.send(SessionEvent { session: id.to_owned(), what });
        }
        ready(added)
    }

    fn inputs<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<LobbyInput>>> {
        ready(Ok(self.with(|m| m.get(id).map(|e| e.inputs.clone()).unwrap_or_default())))
    }

    fn open_rounds<'a>(&'a self, due: &'a [(String, i64)]) -> BoxFuture<'a, Result<Vec<OpenRound>>> {
        ready(Ok(self.with(|m| {
            m.values()
                .filter(|e| !e.info.finished && e.info.turns > 0)
                .filter(|e| due.iter().any(|(pack, before)| *pack == e.info.pack && e.info.updated_at <= *before))
                .map(|e| OpenRound {
                    session: e.info.id.clone(),
                    pack: e.info.pack.clone(),
                    asked_at: e.info.updated_at,
                })
                .collect()
        })))
    }

    fn list<'a>(&'a self, q: SessionQuery<'a>) -> BoxFuture<'a, Result<Vec<SessionInfo>>> {
        let mut all: Vec<SessionInfo> = self.with(|m| {
            m.values()
                .filter(|e| q.pack.is_none_or(|p| e.info.pack == p))
                .filter(|e| q.before.is_none_or(|(at, id)| (e.info.created_at, e.info.id.as_str()) < (at, id)))
                .map(|e| e.info.clone())
                .collect()
        });
        all.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        all.truncate(q.limit as usize);
        ready(Ok(all))
    }

    fn link_transcript<'a>(&'a self, key: &'a str, id: &'a str, seq: u64) -> BoxFuture<'a, Result<()>> {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let known = self.with(|m| m.contains_key(id));
        if !known {
            return ready(Err(Error::new(ErrorKind::NotFound, format!("no session {id}"))));
        }
        let link = links.entry(key.to_owned()).or_insert_with(|| (id.to_owned(), seq, false));
        if link.0 != id || link.1 != seq {
            link.2 = true;
        }
        ready(Ok(()))
    }

    fn find_transcripts<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<Vec<TranscriptLink>>> {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let found = keys
            .iter()
            .filter_map(|k| {
                let (session, seq, shared) = links.get(k)?;
                Some(TranscriptLink { key: k.clone(), session: session.clone(), seq: *seq, shared: *shared })
            })
            .collect();
        ready(Ok(found))
    }

    fn save_schema<'a>(
        &'a self,
        pack: &'a str,
        version: &'a str,
        schema: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<()>> {
        let mut schemas = self.schemas.lock().unwrap_or_else(|p| p.into_inner());
        schemas.entry((pack.to_owned(), version.to_owned())).or_insert_with(|| schema.clone());
        ready(Ok(()))
    }

    fn schema<'a>(&'a self, pack: &'a str, version: &'a str) -> BoxFuture<'a, Result<Option<serde_json::Value>>> {
        let schemas = self.schemas.lock().unwrap_or_else(|p| p.into_inner());
        ready(Ok(schemas.get(&(pack.to_owned(), version.to_owned())).cloned()))
    }

    fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.events.subscribe()
    }
}

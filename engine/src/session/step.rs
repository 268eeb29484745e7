//! Stepping through a turn: a turn held at breakpoints and resumed as the same turn, and the
//! state edited by hand between turns or at a pause (a checkpoint of kind `edit`). The turn's
//! own machinery is `play.rs`'s; this is the public face of it.

use std::sync::Arc;

use serde_json::Value as Json;

use super::{Breakpoints, Interrupted, Session, TurnResult};
use crate::error::{Error, ErrorKind, Result};
use crate::event::{EventSink, Updates};
use crate::store::{Checkpoint, CheckpointKind};
use crate::value;
use crate::vocab::now_ms;

/// What an edit of the state leaves behind: see [`Session::edit_effects`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EditEffects {
    /// Fields a node that already ran (this turn, or between turns the last one) computed
    /// together with an edited field: they still hold what the old value gave.
    pub derived: Vec<Derived>,
    /// The fields the rest of the turn (between turns: the next turn) writes again, as the nodes
    /// still to run last wrote them: an edit of one of these is overwritten when its node runs.
    pub recomputed_next: Vec<String>,
}

/// A field computed together with an edited one by a node that already ran.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Derived {
    /// The field that still holds what the old value gave (`merit_has_earned_it`).
    pub field: String,
    /// The edited field it was computed with (`merit_score`).
    pub from: String,
    /// The node that wrote both (`merit_check`).
    pub by: String,
}

impl Session {
    /// [`Session::turn`] held at `breaks`: when the turn reaches one, it stops there, recorded,
    /// and the result says where (`paused`, with `breakpoint` set) with the state so far; the
    /// turn goes on with [`Session::resume`]. A break changes nothing the turn does. A node
    /// the graph does not have is an input error naming it; a turn while another is held is a
    /// conflict. Events go to `sink` when given.
    pub async fn turn_breaking(
        &mut self,
        input: Json,
        breaks: Breakpoints,
        sink: Option<EventSink>,
    ) -> Result<TurnResult> {
        self.handed_off(move |s| Box::pin(s.run_turn(input, sink, breaks))).await
    }

    /// Goes on with the turn a breakpoint holds, from where it stopped, held again at `breaks`
    /// (a step is a resume with a break before the next node). At a pause point of the pack it
    /// plays the next turn with `input` (an empty line when `None`), as a new turn would. A
    /// session with nothing paused is a conflict; a failure after resuming leaves the turn held
    /// where it was.
    pub async fn resume(
        &mut self,
        input: Option<Json>,
        breaks: Breakpoints,
        sink: Option<EventSink>,
    ) -> Result<TurnResult> {
        self.handed_off(move |s| Box::pin(s.run_resume(input, sink, breaks))).await
    }

    /// Sets state fields by hand, between turns or while a breakpoint holds a turn: each value
    /// replaces the field's (not through its reducer), checked against the pack's state schema
    /// first (an unknown field, or a value of the wrong type, is an input error naming it, and
    /// nothing is set). Recorded as a checkpoint of kind `edit`, whose number is returned. A
    /// session another process is playing a turn of is a conflict.
    pub async fn edit(&mut self, set: serde_json::Map<String, Json>) -> Result<u64> {
        self.handed_off(move |s| Box::pin(s.run_edit(set))).await
    }

    async fn run_edit(&mut self, set: serde_json::Map<String, Json>) -> Result<u64> {
        if self.pending.is_some() && self.held().is_none() {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("session {} has a turn a crash interrupted; it is finished first (play a turn)", self.id),
            ));
        }
        let store = self.rt.store.clone();
        let Some(_lock) = store.try_lock(&self.id).await? else {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("a turn of session {} is playing; edit its state when it is done", self.id),
            ));
        };
        self.refresh().await?;
        // Between turns, an edit moves the session onto the pack's newest version first, as a
        // turn would (the edit is checked against the fields it has now); a held turn stays on
        // the version it started on.
        let moved = if self.held().is_none() { self.upgrade() } else { None };
        let edited = self.record_edit(set).await;
        if edited.is_err() {
            self.restore_version(moved);
        }
        edited
    }

    async fn record_edit(&mut self, set: serde_json::Map<String, Json>) -> Result<u64> {
        self.rt.record_schema(&self.pack).await?;
        let set = self.pack.schema.checked_edit(&set)?;
        self.pack.schema.check_items(&self.state, &set)?;
        // A lobby's players set by hand obey the lobby's rules as joining does: names only, as
        // many as it holds, each one a player could join with and no two alike.
        if let Some(lobby) = &self.pack.lobby
            && let Some(players) = set.get(lobby.players.as_str())
        {
            let wrong = || Error::input(format!("`{}` is the lobby's players: a list of names", lobby.players));
            let names = players
                .clone()
                .try_cast::<rhai::Array>()
                .ok_or_else(wrong)?
                .into_iter()
                .map(|p| p.into_string().map_err(|_| wrong()))
                .collect::<Result<Vec<String>>>()?;
            if let Some(most) = lobby.max_players.filter(|most| names.len() > *most) {
                return Err(Error::input(format!("the lobby holds at most {most} players, not {}", names.len())));
            }
            lobby.check_players(&names)?;
        }
        let mut state = crate::state::copy(&self.state)?;
        self.pack.schema.overwrite(&mut state, &set)?;
        self.rt.check_state_size(&state)?;
        let now = now_ms();
        let edit = Checkpoint {
            seq: self.seq + 1,
            // An edit while turn n is held belongs to turn n; between turns, to the last one.
            turn: self.held_turn().unwrap_or(self.turns),
            kind: CheckpointKind::Edit,
            step: None,
            pack_version: self.pack.version.clone(),
            input: None,
            updates: vec![("edit".to_owned(), Updates(Arc::new(set)))],
            // The state that moved onto a new version is kept whole here (a load starts from it),
            // unless a pause the next turn goes on from must be read from the checkpoint before.
            snapshot: (self.snapshot_due && self.pending.is_none() && self.paused.is_none())
                .then(|| value::to_json(&state)),
            exchanges: Arc::new(Vec::new()),
            resume: None,
            finished: self.held().is_none() && self.pack.is_finished(&state),
            created_at: now,
            bumps: Vec::new(),
            by: self.by.take(),
        };
        self.rt.store.append(&self.id, &edit).await?;
        self.edited_turn.get_or_insert(edit.turn);
        // A game whose state was set by hand is no real game: its outcome row goes.
        self.record_ending(None).await;
        self.snapshot_due &= edit.snapshot.is_none();
        self.state = state;
        self.seq = edit.seq;
        self.at = now;
        Ok(edit.seq)
    }

    /// What editing `fields` leaves behind, for the person who edits: the fields a node that
    /// already ran wrote together with an edited one (computed from its old value, and not
    /// computed again unless that node runs again), and the fields the rest of the turn will
    /// write (between turns: the next turn), as the nodes still to run last wrote them. Read
    /// from the session's recorded checkpoints: a node that never ran is not counted.
    pub async fn edit_effects(&self, fields: &[String]) -> Result<EditEffects> {
        let Some(history) = self.rt.store.history(&self.id, self.seq).await? else { return Ok(EditEffects::default()) };
        let held = self.held_turn();
        let this_turn = held.unwrap_or(self.turns);
        let ran = |c: &&Checkpoint| {
            c.turn == this_turn && matches!(c.kind, CheckpointKind::Step | CheckpointKind::Break | CheckpointKind::Turn)
        };
        let mut derived: Vec<Derived> = Vec::new();
        let mut ran_now: std::collections::BTreeSet<&str> = Default::default();
        for c in history.after.iter().filter(ran) {
            for (node, updates) in &c.updates {
                ran_now.insert(node);
                let written: Vec<&str> = updates.0.keys().map(|k| k.as_str()).collect();
                for from in fields.iter().filter(|f| written.contains(&f.as_str())) {
                    for field in written.iter().filter(|w| !fields.iter().any(|f| f == *w)) {
                        derived.retain(|d| !(d.field == *field && d.from == *from));
                        derived.push(Derived { field: (*field).to_owned(), from: from.clone(), by: node.clone() });
                    }
                }
            }
        }
        // Still to run: between turns, every node of the next turn; while a turn is held, the
        // nodes it has not run yet. What each wrote the last time it ran.
        let still: Vec<&str> = self.pack.nodes().filter(|n| held.is_none() || !ran_now.contains(n)).collect();
        let mut next = std::collections::BTreeSet::new();
        for node in still {
            let last = history
                .after
                .iter()
                .rev()
                .filter(|c| c.kind != CheckpointKind::Edit && !(held.is_some() && c.turn == this_turn))
                .find_map(|c| c.updates.iter().rev().find(|(n, _)| n == node));
            if let Some((_, updates)) = last {
                next.extend(updates.0.keys().map(|k| k.to_string()));
            }
        }
        Ok(EditEffects { derived, recomputed_next: next.into_iter().collect() })
    }

    /// Whether a turn is under way: held at a breakpoint, or interrupted.
    pub(crate) fn in_turn(&self) -> bool {
        self.pending.is_some()
    }

    /// The turn a breakpoint holds, if one does.
    pub(super) fn held(&self) -> Option<&Interrupted> {
        self.pending.as_ref().filter(|p| p.resume.as_ref().is_some_and(|r| r.held.is_some()))
    }

    /// The number of the turn a breakpoint holds, if one does.
    pub fn held_turn(&self) -> Option<u64> {
        self.held().map(|h| h.turn)
    }
}

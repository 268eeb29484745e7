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
        let mut state = crate::state::copy(&self.state)?;
        self.pack.schema.overwrite(&mut state, &set)?;
        let now = now_ms();
        let edit = Checkpoint {
            seq: self.seq + 1,
            turn: self.turns,
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
        };
        self.rt.store.append(&self.id, &edit).await?;
        self.snapshot_due &= edit.snapshot.is_none();
        self.state = state;
        self.seq = edit.seq;
        self.at = now;
        Ok(edit.seq)
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

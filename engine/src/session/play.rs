//! A turn, top to bottom: the session locked and caught up with the store, the rest of a turn a
//! crash interrupted, the move onto the pack's newest version, the input checked, then the
//! graph's steps, a checkpoint after each step of a long turn, the turn's checkpoint, and undoing
//! it all (in memory and in the store) when anything fails.
//!
//! `Session::turn` (the public call) comes here through [`Session::run_turn`]; a lobby round's
//! closing turn through [`Session::run_locked`], its lock already held.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use rhai::{Dynamic, Map};
use serde_json::Value as Json;
use tracing::Instrument;

use super::{Rollback, Session, TurnResult, View};
use crate::error::{Error, ErrorKind, Result};
use crate::event::{EventSink, Updates};
use crate::exchange::Exchange;
use crate::graph::run::{Breaks, Halt, Run};
use crate::pack::Pack;
use crate::runtime::Runtime;
use crate::state::Undo;
use crate::store::{Checkpoint, CheckpointKind, ResumePoint};
use crate::turn::{TurnCtx, TurnStart};
use crate::value;
use crate::vocab::now_ms;

/// A turn being played: what it records as it goes.
struct Playing {
    rt: Arc<Runtime>,
    pack: Arc<Pack>,
    id: Arc<str>,
    number: u64,
    input: Json,
    turn: Arc<TurnCtx>,
    /// The session's newest checkpoint before the turn, and the turn's newest since.
    first_seq: u64,
    seq: u64,
    /// The model exchanges of the steps recorded so far (an interrupted turn's included).
    exchanges: Vec<Exchange>,
    /// Who plays it (see [`Session::acting_as`]).
    by: Option<String>,
}

/// How a turn's steps ended.
enum Ended {
    /// At END, or at a pause point of the pack (where the next turn goes on).
    Done(Option<ResumePoint>),
    /// Held at a breakpoint: the same turn goes on from here when resumed.
    Held(ResumePoint),
}

/// A turn recorded: its checkpoint, whether the session finished, its events, and where it
/// paused or is held.
struct Recorded {
    checkpoint: u64,
    finished: bool,
    events: Vec<crate::event::Event>,
    ended: Ended,
}

impl Session {
    /// A turn from the top: the session locked against other writers, caught up with the store,
    /// then played (see [`Session::run_locked`]).
    pub(super) async fn run_turn(
        &mut self,
        input: Json,
        live: Option<EventSink>,
        breaks: super::Breakpoints,
    ) -> Result<TurnResult> {
        let store = self.rt.store.clone();
        let _lock = store.lock(&self.id).await?;
        self.refresh().await?;
        self.run_locked_with(input, live, breaks).await
    }

    /// Goes on with the turn a breakpoint holds, from where it is held, as if it had never
    /// stopped (the same turn, steps and randomness), held again at `breaks`; at a pause point
    /// of the pack, plays the next turn with `input` (a person's empty line when none is given),
    /// as a new turn would. A failure leaves the turn held where it was.
    pub(super) async fn run_resume(
        &mut self,
        input: Option<Json>,
        live: Option<EventSink>,
        breaks: super::Breakpoints,
    ) -> Result<TurnResult> {
        let store = self.rt.store.clone();
        let _lock = store.lock(&self.id).await?;
        self.refresh().await?;
        if self.held().is_none() {
            if self.paused.is_none() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("session {} is not paused: there is no turn to resume", self.id),
                ));
            }
            let input = input.unwrap_or_else(|| self.continue_input());
            return self.run_locked_with(input, live, breaks).await;
        }
        if input.is_some() {
            return Err(Error::input(
                "a turn held at a breakpoint goes on with the input it was given; resume it without one",
            ));
        }
        let breaks = Breaks::of(&self.pack.graph, &breaks.before, &breaks.after, breaks.step)?;
        let held = self.pending.take().expect("held above");
        let result = caught(std::pin::pin!(async {
            let checked = self.pack.check_input(&held.input)?;
            let (input, resume, exchanges) = (held.input.clone(), held.resume.clone(), held.exchanges.clone());
            self.play(held.turn, input, checked, resume, exchanges, live, breaks).await
        }))
        .await;
        if result.is_err() && self.pending.is_none() {
            self.pending = Some(held);
        }
        if result.as_ref().is_err_and(|e| e.kind() == ErrorKind::Internal) {
            self.dirty = true;
        }
        result
    }

    /// What a pause point of the pack goes on with when nothing is typed: an empty line for a
    /// pack that reads lines, no fields otherwise.
    fn continue_input(&self) -> Json {
        if self.pack.reads_typed_lines() || self.pack.input_from_text("").is_some() {
            Json::String(String::new())
        } else {
            Json::Object(Default::default())
        }
    }

    /// Runs a turn on a fresh session whose lock the caller holds: first the rest of a turn a
    /// crash interrupted, then the session moves onto the pack's newest version, then the input
    /// is read and checked and the turn played (from the entry, or from where the last turn
    /// paused). A panic in any of it is caught; a failed turn leaves the session where it was.
    pub(super) async fn run_locked(&mut self, input: Json, live: Option<EventSink>) -> Result<TurnResult> {
        self.run_locked_with(input, live, super::Breakpoints::none()).await
    }

    /// [`Session::run_locked`] held at `breaks`, named on the graph of the version the turn plays
    /// (the newest, once the session has moved onto it).
    pub(super) async fn run_locked_with(
        &mut self,
        input: Json,
        live: Option<EventSink>,
        breaks: super::Breakpoints,
    ) -> Result<TurnResult> {
        if let Some(held) = self.held() {
            return Err(held_error(&self.id, held));
        }
        caught(std::pin::pin!(self.finish_pending(live.clone()))).await?;
        let before = self.upgrade();
        if let Err(e) = self.rt.record_schema(&self.pack).await {
            self.restore_version(before);
            return Err(e);
        }
        let result = caught(std::pin::pin!(async {
            let breaks = Breaks::of(&self.pack.graph, &breaks.before, &breaks.after, breaks.step)?;
            if self.pack.is_finished(&self.state) {
                return Err(Error::new(ErrorKind::Finished, self.pack.finished_message()));
            }
            let input = match input {
                Json::String(text) => self.input_from_text(&text)?,
                other => other,
            };
            let checked = self.pack.check_input(&input)?;
            let resume = self.paused.take();
            let result = self.play(self.turns + 1, input, checked, resume.clone(), Vec::new(), live, breaks).await;
            if result.is_err() && self.paused.is_none() {
                // A failed turn leaves the session where it was: still paused.
                self.paused = resume;
            }
            result
        }))
        .await;
        if result.as_ref().is_err_and(|e| e.kind() == ErrorKind::Internal) {
            // Whatever a panic interrupted, the store has the truth: read it again before the next turn.
            self.dirty = true;
        }
        if result.is_err() {
            self.restore_version(before);
        }
        result
    }

    /// After a failed turn, the session stays where it was, on the version it was on.
    pub(super) fn restore_version(&mut self, before: Option<(Arc<Pack>, Dynamic)>) {
        if let Some((pack, state)) = before {
            self.pack = pack;
            self.state = state;
            self.snapshot_due = false;
        }
    }

    /// Plays the rest of a turn a crash interrupted, from its last step checkpoint, without
    /// repeating the model calls of the steps already recorded.
    pub(super) async fn finish_pending(&mut self, live: Option<EventSink>) -> Result<Option<TurnResult>> {
        if self.held().is_some() {
            return Ok(None);
        }
        let Some(p) = self.pending.take() else { return Ok(None) };
        let input = self.pack.check_input(&p.input)?;
        let resume = p.resume.clone().ok_or_else(|| {
            Error::new(ErrorKind::Store, "cannot resume the interrupted turn: its step checkpoint has no resume point")
        })?;
        // The turn a crash interrupted was not this caller's: it is recorded as nobody's, and the
        // caller's own turn after it keeps their name.
        let by = self.by.take();
        let result =
            self.play(p.turn, p.input.clone(), input, Some(resume), p.exchanges.clone(), live, Breaks::default()).await;
        self.by = by;
        if result.is_err() {
            self.pending = Some(p);
        }
        result.map(Some)
    }

    /// Moves the session onto the pack's current version when a reload swapped in a new one: each
    /// field keeps its value if the new version still has it with a fitting type, takes its
    /// default otherwise, and fields the new version dropped go; then the pack's `migrate` script,
    /// if it has one, sees the old state and sets what it returns. Returns the version and state
    /// the session leaves, to put back if the turn fails. A `migrate` that fails keeps the session
    /// on its version (logged), so a broken migration never breaks a game.
    pub(super) fn upgrade(&mut self) -> Option<(Arc<Pack>, Dynamic)> {
        let current = self.rt.packs.current_variant(&self.pack.name, self.variant.as_deref())?;
        if Arc::ptr_eq(&current, &self.pack) || current.version == self.pack.version {
            return None;
        }
        let old = value::to_json(&self.state);
        let state = match moved(&current, &old, &self.pack.version) {
            Ok(state) => state,
            Err(e) => {
                tracing::warn!(
                    session = %self.id,
                    pack = %current.name,
                    "cannot move the session to version {}, it stays on {}: migrate failed: {e}",
                    current.version,
                    self.pack.version
                );
                return None;
            }
        };
        tracing::debug!(session = %self.id, from = %self.pack.version, to = %current.version, "session moved to a new pack version");
        self.snapshot_due = true;
        Some((std::mem::replace(&mut self.pack, current), std::mem::replace(&mut self.state, state)))
    }

    /// Runs turn `number` (from the entry, or from `resume`) and records it, held at `breaks`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn play(
        &mut self,
        number: u64,
        input: Json,
        checked: Map,
        resume: Option<ResumePoint>,
        exchanges: Vec<Exchange>,
        live: Option<EventSink>,
        breaks: Breaks,
    ) -> Result<TurnResult> {
        let start = Instant::now();
        let (rt, pack) = (self.rt.clone(), self.pack.clone());
        let counts = counts(&rt, &pack).await?;
        let who = TurnStart {
            session_id: self.id.clone(),
            turn: number,
            seed: self.seed,
            now_ms: now_ms(),
            options: self.options.clone(),
            input: checked,
            provider: rt.provider_for(&pack),
            live,
        };
        let turn = super::turn_ctx(&rt, &pack, who).counted(counts);
        let mut p = Playing {
            rt,
            pack,
            id: self.id.clone(),
            number,
            input,
            turn: Arc::new(turn),
            first_seq: self.seq,
            seq: self.seq,
            exchanges,
            by: self.by.take(),
        };
        let snapshot_due = self.snapshot_due;
        self.dirty = true;
        let mut guard = Rollback { state: &mut self.state, undo: Some(Undo::default()) };
        let undo = guard.undo.as_mut().expect("set above");
        let span = tracing::info_span!(
            "turn",
            otel.name = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            pack = %p.pack.name,
            pack.version = %p.pack.version,
            session.id = %p.id,
            turn = i64::try_from(number).unwrap_or(i64::MAX),
            outcome = tracing::field::Empty,
            variant = tracing::field::Empty,
            openinference.span.kind = "CHAIN",
        );
        if let Some(v) = self.variant.as_deref() {
            span.record("variant", v);
        }
        if !span.is_disabled() {
            span.record("otel.name", format!("turn {}", p.pack.name));
        }
        let played = async {
            match p.steps(guard.state, undo, resume.as_ref(), breaks).await {
                Ok((updates, Ended::Held(point))) => p.hold(guard.state, updates, point).await,
                Ok((updates, Ended::Done(pause))) => p.commit(guard.state, updates, pause, snapshot_due).await,
                Err(e) => Err(e),
            }
        }
        .instrument(span.clone())
        .await;
        if !span.is_disabled() {
            span.record(
                "outcome",
                match &played {
                    Ok(Recorded { finished: true, .. }) => "finished",
                    Ok(Recorded { ended: Ended::Held(_), .. }) => "held",
                    Ok(Recorded { ended: Ended::Done(Some(_)), .. }) => "paused",
                    Ok(_) => "played",
                    Err(_) => "failed",
                },
            );
            if played.is_err() {
                span.record("otel.status_code", "ERROR");
            }
        }
        match played {
            Ok(Recorded { checkpoint, finished, events, ended }) => {
                guard.undo = None;
                drop(guard);
                self.dirty = false;
                self.seq = checkpoint;
                self.at = now_ms();
                if finished {
                    self.record_ending(Some(number)).await;
                }
                let paused = match ended {
                    Ended::Done(pause) => {
                        self.snapshot_due = false;
                        self.turns = number;
                        let paused = pause.as_ref().map(super::PausedAt::of);
                        self.paused = pause;
                        paused
                    }
                    Ended::Held(point) => {
                        // The turn is not over: the session waits at the breakpoint, with what the
                        // turn asked so far, and its newest version move still to snapshot.
                        let paused = Some(super::PausedAt::of(&point));
                        self.pending = Some(super::Interrupted {
                            turn: number,
                            input: p.input.clone(),
                            resume: Some(point),
                            exchanges: p.exchanges.clone(),
                        });
                        paused
                    }
                };
                let (display, output) = match self.shown {
                    true => (self.view().after(&events), self.output()),
                    false => (View::default(), Json::Null),
                };
                Ok(TurnResult {
                    paused,
                    display,
                    turn: number,
                    output,
                    events,
                    exchanges: p.exchanges,
                    pack_version: p.pack.version.clone(),
                    checkpoint,
                    finished,
                    edited_turn: self.edited_turn,
                    variant: self.variant.as_deref().map(str::to_owned),
                    duration: start.elapsed(),
                })
            }
            Err(e) => {
                let undone = guard.undo();
                drop(guard);
                // Undone and withdrawn, the store agrees with memory again; if not, the session
                // reloads from the store before its next turn.
                self.dirty = !p.withdraw().await || !undone;
                Err(e)
            }
        }
    }
}

/// The counters of the pack's tables that have any, as the store holds them now.
async fn counts(rt: &Runtime, pack: &Pack) -> Result<HashMap<String, Arc<crate::data::Counts>>> {
    let mut out = HashMap::new();
    for (name, table) in pack.tables.iter().filter(|(_, t)| !t.counters.is_empty()) {
        let store = &*rt.store;
        let rows = crate::store::needs(store, store.counters(), "shared counters")?.counts(&pack.name, name).await?;
        out.insert(name.clone(), Arc::new(table.counts(rows)));
    }
    Ok(out)
}

impl Playing {
    /// Runs the graph's steps, recording a checkpoint after each step but the last when the
    /// pack checkpoints every step; returns the updates the turn's own checkpoint records.
    async fn steps(
        &mut self,
        state: &mut Dynamic,
        undo: &mut Undo,
        resume: Option<&ResumePoint>,
        breaks: Breaks,
    ) -> Result<(Vec<(String, Updates)>, Ended)> {
        let (pack, turn) = (self.pack.clone(), self.turn.clone());
        let mut run = Run::new(pack.env(self.rt.packs.natives(), &turn), resume, breaks)?;
        let mut updates: Vec<(String, Updates)> = Vec::new();
        while let Some(done) = run.step(state, undo).await? {
            updates.extend(done.updates.into_iter().map(|(n, u)| (n.to_string(), u)));
            match done.halt {
                Some(Halt::Paused(after)) => {
                    let point = ResumePoint { paused_after: Some(after.to_string()), ..run.resume_point() };
                    return Ok((updates, Ended::Done(Some(point))));
                }
                Some(Halt::Held(stop)) => {
                    return Ok((updates, Ended::Held(ResumePoint { held: Some(stop), ..run.resume_point() })));
                }
                None => {}
            }
            if pack.graph.checkpoint_steps && !run.done() {
                self.rt.check_state_size(state)?;
                let made = turn.take_exchanges();
                self.exchanges.extend(made.iter().cloned());
                let step = Checkpoint {
                    step: Some(done.step),
                    resume: Some(run.resume_point()),
                    input: Some(self.input.clone()),
                    ..self.checkpoint(CheckpointKind::Step, std::mem::take(&mut updates), made)
                };
                self.rt.store.append(&self.id, &step).await?;
                self.seq += 1;
            }
        }
        Ok((updates, Ended::Done(None)))
    }

    /// Records the turn's checkpoint (with a snapshot every `snapshot_every` turns, or when the
    /// session just moved to a new pack version); returns its number, whether the session is
    /// finished, the turn's events and where it paused, if it did.
    async fn commit(
        &mut self,
        state: &Dynamic,
        updates: Vec<(String, Updates)>,
        pause: Option<ResumePoint>,
        snapshot_due: bool,
    ) -> Result<Recorded> {
        self.rt.check_state_size(state)?;
        let recorded = self.turn.take();
        let finished = self.pack.is_finished(state);
        let every = self.rt.retention.snapshot_every.max(1);
        self.exchanges.extend(recorded.exchanges.iter().cloned());
        let last = Checkpoint {
            snapshot: (snapshot_due || self.number.is_multiple_of(every)).then(|| value::to_json(state)),
            input: Some(std::mem::take(&mut self.input)),
            finished,
            bumps: recorded.bumps,
            resume: pause.clone(),
            ..self.checkpoint(CheckpointKind::Turn, updates, recorded.exchanges)
        };
        self.rt.store.append(&self.id, &last).await?;
        Ok(Recorded { checkpoint: last.seq, finished, events: recorded.events, ended: Ended::Done(pause) })
    }

    /// Records the turn held at a breakpoint: what it did so far, and where it goes on. It
    /// carries no snapshot (a session loads from its newest snapshot on, and must see this).
    async fn hold(&mut self, state: &Dynamic, updates: Vec<(String, Updates)>, point: ResumePoint) -> Result<Recorded> {
        self.rt.check_state_size(state)?;
        let recorded = self.turn.take();
        self.exchanges.extend(recorded.exchanges.iter().cloned());
        let held = Checkpoint {
            input: Some(self.input.clone()),
            finished: false,
            bumps: recorded.bumps,
            resume: Some(point.clone()),
            ..self.checkpoint(CheckpointKind::Break, updates, recorded.exchanges)
        };
        self.rt.store.append(&self.id, &held).await?;
        Ok(Recorded { checkpoint: held.seq, finished: false, events: recorded.events, ended: Ended::Held(point) })
    }

    /// The next checkpoint of the turn, of `kind`, with these updates and model exchanges.
    fn checkpoint(
        &self,
        kind: CheckpointKind,
        updates: Vec<(String, Updates)>,
        exchanges: Vec<Exchange>,
    ) -> Checkpoint {
        Checkpoint {
            seq: self.seq + 1,
            turn: self.number,
            kind,
            step: None,
            pack_version: self.pack.version.clone(),
            input: None,
            updates,
            snapshot: None,
            exchanges: Arc::new(exchanges),
            resume: None,
            finished: false,
            created_at: now_ms(),
            bumps: Vec::new(),
            by: self.by.clone(),
        }
    }

    /// A failed turn whose steps were recorded withdraws them, so the turn is undone in the
    /// store as it is in memory; false when the store would not.
    async fn withdraw(&self) -> bool {
        if self.seq == self.first_seq {
            return true;
        }
        match self.rt.store.truncate(&self.id, self.first_seq).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(session = %self.id, "cannot withdraw a failed turn's steps: {e}");
                false
            }
        }
    }
}

/// The answer to a turn asked for while a breakpoint holds another.
fn held_error(id: &str, held: &super::Interrupted) -> Error {
    let at = held.resume.as_ref().map(super::PausedAt::of).map(|p| p.to_string()).unwrap_or_default();
    Error::new(
        ErrorKind::Conflict,
        format!("turn {} of session {id} is held at a breakpoint {at}: resume it before playing another", held.turn),
    )
}

/// `old`, a state of version `from`, moved onto `to`: each field keeps its value if `to` still
/// has it with a fitting type and takes its default otherwise, then `to`'s `migrate` script, if
/// it has one, sees the old state and sets the fields it returns.
pub(super) fn moved(to: &Pack, old: &Json, from: &str) -> Result<Dynamic> {
    let mut state = to.schema.restore(old);
    if let Some(migrate) = &to.migrate {
        let args = (value::from_json(old), Dynamic::from(from.to_owned()));
        let mut this = Dynamic::UNIT;
        let set = to.sandbox.call(migrate, &mut this, args, None)?;
        let map = set
            .try_cast::<Map>()
            .ok_or_else(|| Error::new(ErrorKind::Script, "migrate must return a map of the fields to set"))?;
        to.schema.overwrite(&mut state, &map)?;
    }
    Ok(state)
}

/// Runs a turn's future, turning a panic inside it (a bug in ruleweave, or in a native node the
/// host registered) into an error: the turn is undone like any failed turn, and the host goes on.
/// Callers pin the turn's future where it is and pass it pinned: a turn's future is large, and
/// moving it into a wrapper costs a copy of it.
pub(crate) async fn caught<T>(turn: impl std::future::Future<Output = Result<T>> + Unpin) -> Result<T> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(turn).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => {
            let what = crate::error::panic_text(&*payload).unwrap_or("no message");
            tracing::error!("a turn panicked (a bug; the turn was undone): {what}");
            Err(Error::internal(format!("the turn hit a bug and was undone (it panicked: {what})")))
        }
    }
}

//! Sessions: one running instance of a pack (a game, an interview, a debate) and its turns.
//!
//! A turn is recorded in the engine's store before it returns: the checkpoint holds the updates
//! it made, its input, its model exchanges and the pack version. Until that write succeeds the turn
//! can still be undone, and it is, if anything fails or the turn's future is dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rhai::{Dynamic, Map};
use serde::Serialize;
use serde_json::Value as Json;

use crate::error::{Error, ErrorKind, Result};
use crate::event::{Event, EventSink, Updates};
use crate::store::{ResumePoint, Stop};

mod assign;
mod input;
mod live;
mod play;
mod rounds;
mod step;
pub use step::{Derived, EditEffects};
mod view;

use crate::exchange::Exchange;
pub use crate::pack::OpeningKind;
use crate::pack::Pack;
use crate::runtime::Runtime;
use crate::state::Undo;
use crate::store::{Checkpoint, CheckpointKind, SessionInfo, Stored};
use crate::turn::{TurnCtx, TurnStart};
use crate::value;
use crate::vocab::now_ms;
pub(crate) use assign::Who;
pub use assign::{OpenAs, PLAYER_MAX, VariantChoice, check_player, player_hash};
pub use live::{LiveSession, OwnedSessionGuard, SessionGuard};
pub(crate) use play::caught;
pub use rounds::Posted;
pub(crate) use rounds::{CLOSES_AT_ONCE, HELD_RECHECK_MS, RoundCloser};
pub use view::{Opening, Said, View};

/// One running game or flow: a pack version, the options chosen, the state so far.
pub struct Session {
    pub(crate) rt: Arc<Runtime>,
    pub(crate) id: Arc<str>,
    pub(crate) pack: Arc<Pack>,
    pub(crate) options: Map,
    pub(crate) seed: u64,
    pub(crate) state: Dynamic,
    pub(crate) turns: u64,
    /// The newest checkpoint this object has seen.
    pub(crate) seq: u64,
    /// A long turn a crash interrupted, to finish before anything else; or a turn a breakpoint
    /// holds (its resume point says where), to go on with when resumed.
    pending: Option<Interrupted>,
    /// Where the last turn paused (a pause point of the pack): the next turn goes on from there.
    pub(crate) paused: Option<ResumePoint>,
    /// True while a turn runs: a turn whose future was dropped leaves it set, and the session
    /// reloads from the store (its step checkpoints may be there) before doing anything else.
    dirty: bool,
    /// The state moved to a new pack version: the next turn's checkpoint carries a snapshot, so
    /// the store holds what `migrate` made of it.
    snapshot_due: bool,
    /// When its newest turn was recorded (or it opened), unix milliseconds: when a lobby's round
    /// under way was asked, which its timeout counts from.
    pub(crate) at: i64,
    /// Whether a turn's result shows the game: the pack's display rendered, and its output
    /// fields. A simulation reads neither (its report reads the state) and turns this off; the
    /// result's [`TurnResult::display`] is then empty and its [`TurnResult::output`] null.
    pub(crate) shown: bool,
    /// The turn in which the state was first set by hand (see [`Session::edited_turn`]).
    pub(crate) edited_turn: Option<u64>,
    /// Who the next write is made by (see [`Session::acting_as`]); taken by it.
    pub(crate) by: Option<String>,
    /// The variant of its pack's experiment it plays (see [`Session::variant`]).
    pub(crate) variant: Option<Arc<str>>,
}

/// The models a session's options choose (`model: true` options), checked as it is made against
/// the pack's own models and those the host allows: refused then, naming them, rather than at the
/// first turn that would ask one.
fn chosen_models_allowed(rt: &Runtime, pack: &Pack, options: &Map) -> Result<()> {
    let Some(allowed) = &rt.allowed_models else { return Ok(()) };
    for (name, _) in pack.options.iter().filter(|(_, spec)| spec.model) {
        let chosen = options.get(name.as_str()).and_then(|v| v.clone().into_string().ok()).unwrap_or_default();
        let chosen = chosen.trim();
        if chosen.is_empty()
            || allowed.iter().any(|a| a == chosen)
            || pack.profiles.values().any(|p| p.names_model(chosen))
        {
            continue;
        }
        let mut own: Vec<String> = pack.profiles.values().flat_map(|p| p.models()).collect();
        own.sort();
        own.dedup();
        return Err(Error::input(format!(
            "option `{name}`: model `{chosen}` is not one this host lets a session choose (the pack's own: {}; \
             allowed by its operator: {}; `[llm] allowed_models` in ruleweave.toml)",
            own.join(", "),
            if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }
        )));
    }
    Ok(())
}

/// Where a fork starts: the session and checkpoint it leaves from, the turns done by then, the state.
pub(crate) struct Fork {
    pub from: String,
    pub seq: u64,
    pub turns: u64,
    pub state: Dynamic,
    /// The turn the state was first set by hand in, by then (or by the fork's own patch).
    pub edited_turn: Option<u64>,
}

/// Where a turn stopped: at a pause point of the pack (the next turn goes on from there), or at a
/// breakpoint (the same turn goes on when it is resumed: [`Session::resume`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PausedAt {
    /// The node before which a breakpoint holds the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// The node after which it stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// The nodes that run next.
    pub next: Vec<String>,
    /// A breakpoint holds the turn: resume it (a new turn is refused until then). Not part of
    /// the JSON `paused` (`{"before"|"after", "next"}`): the HTTP API says it as `"held": true`
    /// beside it.
    #[serde(skip)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub breakpoint: bool,
}

impl PausedAt {
    /// What a resume point says of where the turn stopped.
    pub(crate) fn of(point: &ResumePoint) -> Self {
        let (before, after) = match &point.held {
            Some(Stop::Before(n)) => (Some(n.clone()), None),
            Some(Stop::After(n)) => (None, Some(n.clone())),
            None => (None, point.paused_after.clone()),
        };
        PausedAt { before, after, next: point.next.clone(), breakpoint: point.held.is_some() }
    }
}

impl std::fmt::Display for PausedAt {
    /// `before generate_response`, `after merit_check`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.before, &self.after) {
            (Some(n), _) => write!(f, "before {n}"),
            (None, Some(n)) => write!(f, "after {n}"),
            (None, None) => f.write_str("at its start"),
        }
    }
}

/// Where a turn is to stop, by node name, without editing the pack: before a node's step runs,
/// after it ran. A stop holds the turn as it is (recorded, so any replica and a restarted server
/// go on from it); [`Session::resume`] goes on as if it had never stopped.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Breakpoints {
    /// Stop before these nodes run.
    #[serde(default)]
    pub before: Vec<String>,
    /// Stop after these nodes ran.
    #[serde(default)]
    pub after: Vec<String>,
    /// Stop before the next step, once one step has run (a debugger's *step*: resumed with
    /// this, the turn runs one step and stops again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub step: bool,
}

impl Breakpoints {
    /// No breakpoints.
    pub fn none() -> Self {
        Breakpoints::default()
    }

    /// One step: stop before the step after the next.
    pub fn step() -> Self {
        Breakpoints { step: true, ..Breakpoints::default() }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.before.is_empty() && self.after.is_empty() && !self.step
    }
}

/// Where an interrupted (or held) turn stood.
struct Interrupted {
    turn: u64,
    input: Json,
    resume: Option<ResumePoint>,
    exchanges: Vec<Exchange>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("pack", &self.pack.name)
            .field("turns", &self.turns)
            .finish()
    }
}

/// What one turn produced.
#[derive(Debug, Clone, Serialize)]
pub struct TurnResult {
    /// The turn's number (1 for the first).
    pub turn: u64,
    /// Where the turn paused, when it stopped at a pause point of the pack; the next turn goes on
    /// from there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<PausedAt>,
    /// The pack's output fields after the turn.
    pub output: Json,
    /// Everything that happened, in order.
    pub events: Vec<Event>,
    /// The model exchanges the turn used.
    pub exchanges: Vec<Exchange>,
    /// The pack version that ran the turn.
    pub pack_version: String,
    /// The checkpoint that recorded the turn.
    pub checkpoint: u64,
    /// Whether the session is finished now (a won game).
    pub finished: bool,
    /// The turn in which the state was first set by hand, if it was: a win on it is no real win
    /// ([`Session::edited_turn`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_turn: Option<u64>,
    /// The variant of its pack's experiment the session plays ([`Session::variant`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// What a person sees after the turn: the pack's `display:` rendered over the new state,
    /// with the turn's warnings (a node that fell back) among its notes.
    pub display: View,
    /// Wall time of the turn.
    #[serde(serialize_with = "micros")]
    pub duration: Duration,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

/// Runs the pack's `init` (if it has one) on `state` for a new session: the updates it made, and
/// its model exchanges.
async fn run_init(
    rt: &Arc<Runtime>,
    pack: &Arc<Pack>,
    id: &Arc<str>,
    seed: u64,
    now: i64,
    options: &Map,
    state: &mut Dynamic,
) -> Result<(Map, Vec<Exchange>)> {
    let Some(init) = &pack.init else { return Ok((Map::new(), Vec::new())) };
    let start = TurnStart {
        session_id: id.clone(),
        turn: 0,
        seed,
        now_ms: now,
        options: options.clone(),
        input: Map::new(),
        provider: rt.provider_for(pack),
        live: None,
    };
    let turn = Arc::new(turn_ctx(rt, pack, start));
    let env = pack.env(rt.packs.natives(), &turn);
    let made = caught(std::pin::pin!(crate::graph::run::init(&env, init, state))).await?;
    Ok((made, turn.take_exchanges()))
}

/// A turn's context with its pack's settings: the limits on its model calls, who watches them,
/// the providers a profile may name, the search engine, what streams and who speaks, the models a
/// script may choose, whether traces hold content. `init` and every turn get the same.
pub(crate) fn turn_ctx(rt: &Runtime, pack: &Pack, start: TurnStart) -> TurnCtx {
    TurnCtx::new(start)
        .budget(&pack.limits)
        .observed(&pack.name, rt.llm_observers())
        .named(rt.named.clone())
        .searching(rt.search_for(pack))
        .streaming(pack.display.stream.clone())
        .allowing(rt.allowed_models.clone())
        .tracing_content(rt.trace_content)
}

/// A fresh random id: 80 bits from the standard library's randomly keyed hasher.
pub(crate) fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut out = String::new();
    for salt in 0..2u8 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u8(salt);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(20);
    out
}

/// Undoes a turn's changes when dropped, unless the turn committed.
struct Rollback<'a> {
    state: &'a mut Dynamic,
    undo: Option<Undo>,
}

impl Rollback<'_> {
    /// Undoes the turn (once): false when it could not (the session must be read again).
    fn undo(&mut self) -> bool {
        self.undo.take().is_none_or(|undo| undo.rollback(self.state))
    }
}

impl Drop for Rollback<'_> {
    /// A dropped turn: the session is marked to be read again whatever happens here.
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

impl Session {
    /// Opens a session of `pack` with checked `options`: the state starts at the fields'
    /// defaults, the pack's `init` script runs, and the start is recorded in the store.
    pub(crate) async fn open(
        rt: Arc<Runtime>,
        pack: Arc<Pack>,
        options: Map,
        id: Option<String>,
        parent: Option<Fork>,
        who: Who,
    ) -> Result<Self> {
        chosen_models_allowed(&rt, &pack, &options)?;
        let id: Arc<str> = id.unwrap_or_else(new_id).into();
        let seed = crate::text::hash(&id);
        let now = now_ms();
        let mut exchanges = Vec::new();
        let mut updates = Vec::new();
        let renewed: Vec<&str> =
            pack.schema.fields.iter().filter(|(_, f)| f.renewed_on_fork).map(|(k, _)| k.as_str()).collect();
        let edited_turn = parent.as_ref().and_then(|f| f.edited_turn);
        let (state, parent, turns) = match parent {
            Some(f) if renewed.is_empty() => (f.state, Some((f.from, f.seq)), f.turns),
            Some(f) => {
                // The fields a fork must not share with its parent come from a fresh init.
                let mut fresh = pack.schema.initial();
                let (made, calls) = run_init(&rt, &pack, &id, seed, now, &options, &mut fresh).await?;
                exchanges = calls;
                let mut state = f.state;
                let mut kept = Map::new();
                if let Some(mut st) = state.write_lock::<Map>() {
                    for name in &renewed {
                        if let Some(v) = made.get(*name) {
                            st.insert((*name).into(), v.clone());
                            kept.insert((*name).into(), v.clone());
                        }
                    }
                }
                updates.push(("init".to_owned(), Updates(Arc::new(kept))));
                (state, Some((f.from, f.seq)), f.turns)
            }
            None => {
                let mut state = pack.schema.initial();
                if pack.init.is_some() {
                    let (made, calls) = run_init(&rt, &pack, &id, seed, now, &options, &mut state).await?;
                    updates.push(("init".to_owned(), Updates(Arc::new(made))));
                    exchanges = calls;
                }
                if let Some(lobby) = &pack.lobby {
                    lobby.check_players(&rounds::round_and_players(lobby, &state).1)?;
                }
                (state, None, 0)
            }
        };
        let info = SessionInfo {
            id: id.to_string(),
            pack: pack.name.clone(),
            pack_version: pack.version.clone(),
            options: value::map_to_json(&options),
            seed,
            turns,
            head: 0,
            head_kind: CheckpointKind::Start,
            snapshot_seq: 0,
            finished: false,
            finished_at: None,
            created_at: now,
            updated_at: now,
            parent,
            edited_turn,
            lobby: pack.lobby.is_some(),
            variant: who.variant.clone(),
            player: who.player.clone(),
        };
        let start = Checkpoint {
            seq: 0,
            turn: turns,
            kind: CheckpointKind::Start,
            step: None,
            pack_version: pack.version.clone(),
            input: None,
            updates,
            snapshot: Some(value::to_json(&state)),
            exchanges: Arc::new(exchanges),
            resume: None,
            finished: pack.is_finished(&state),
            created_at: now,
            bumps: Vec::new(),
            by: None,
        };
        rt.check_state_size(&state)?;
        rt.record_schema(&pack).await?;
        rt.store.create(&info, &start).await?;
        who.record_opening(&rt, &pack, &id, now).await;
        Ok(Session {
            rt,
            id,
            pack,
            options,
            seed,
            state,
            turns,
            seq: 0,
            pending: None,
            paused: None,
            dirty: false,
            snapshot_due: false,
            at: now,
            shown: true,
            edited_turn,
            by: None,
            variant: who.variant.map(Arc::from),
        })
    }

    /// A session loaded from its store onto `pack` (see [`Session::from_stored`]), with the
    /// schemas recorded for the older versions its checkpoints were written on.
    pub(crate) async fn load(rt: Arc<Runtime>, pack: Arc<Pack>, stored: Stored) -> Result<Self> {
        let mut versions: Vec<String> = Vec::new();
        for v in std::iter::once(&stored.snapshot_version).chain(stored.after.iter().map(|c| &c.pack_version)) {
            if *v != pack.version && !versions.contains(v) {
                versions.push(v.clone());
            }
        }
        let recorded = rt.recorded_schemas(&pack, versions).await?;
        Session::from_stored(rt, pack, stored, &recorded)
    }

    /// A session loaded from its store: the snapshot, with every later checkpoint folded in, each
    /// by the reducers of the pack version that wrote it (`recorded`: the schemas of versions
    /// other than `pack`'s). A state stored on another version than `pack`'s then moves onto it
    /// as a reload moves a live session: fields fitted, then the pack's `migrate` script; the
    /// next turn's checkpoint carries a snapshot of the result. A version whose schema was never
    /// recorded (a store older than the records) is read with `pack`'s fields.
    pub(crate) fn from_stored(
        rt: Arc<Runtime>,
        pack: Arc<Pack>,
        stored: Stored,
        recorded: &HashMap<String, crate::state::Schema>,
    ) -> Result<Self> {
        let Stored { info, snapshot_seq, snapshot_turn, snapshot, snapshot_version, after } = stored;
        let options = match &info.options {
            Json::Object(o) => value::map_of_json(o),
            _ => Map::new(),
        };
        let schema_of = |v: &str| recorded.get(v).unwrap_or(&pack.schema);
        let mut version = snapshot_version;
        let mut state = schema_of(&version).restore(&snapshot);
        let mut pending: Option<Interrupted> = None;
        let mut paused: Option<ResumePoint> = None;
        // What the replayed checkpoints reached (a history may stop before the session's head).
        let mut turns = snapshot_turn;
        let mut seq = snapshot_seq;
        for c in &after {
            seq = c.seq;
            if c.kind == CheckpointKind::Turn {
                turns = c.turn;
            }
            if c.pack_version != version {
                // A reload moved the session between these checkpoints: what followed was
                // written on the new version's fields.
                state = schema_of(&c.pack_version).restore(&value::to_json(&state));
                version = c.pack_version.clone();
            }
            if c.kind == CheckpointKind::Edit {
                // Set by hand: each field's value outright, not through its reducer.
                for (_, u) in &c.updates {
                    let fitting: Map =
                        u.0.iter()
                            .filter(|(k, _)| schema_of(&version).fields.contains_key(k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                    if let Err(e) = schema_of(&version).overwrite(&mut state, &fitting) {
                        tracing::warn!(session = %info.id, "an edit no longer fits the state: {e}");
                    }
                }
                continue;
            }
            for (_, u) in &c.updates {
                schema_of(&version).replay(&mut state, &u.0);
            }
            match c.kind {
                CheckpointKind::Step | CheckpointKind::Break => {
                    let p = pending.get_or_insert_with(|| Interrupted {
                        turn: c.turn,
                        input: c.input.clone().unwrap_or(Json::Null),
                        resume: None,
                        exchanges: Vec::new(),
                    });
                    p.resume = c.resume.clone();
                    p.exchanges.extend(c.exchanges.iter().cloned());
                }
                _ => {
                    pending = None;
                    paused = c.resume.clone().filter(|p| p.paused_after.is_some());
                }
            }
        }
        let snapshot_due = version != pack.version;
        if snapshot_due {
            let old = value::to_json(&state);
            state = play::moved(&pack, &old, &version).unwrap_or_else(|e| {
                tracing::warn!(
                    session = %info.id,
                    pack = %pack.name,
                    "the session stored on version {version} moves to {} without its migrate script: {e}",
                    pack.version
                );
                pack.schema.restore(&old)
            });
        }
        Ok(Session {
            rt,
            id: info.id.as_str().into(),
            pack,
            options,
            seed: info.seed,
            state,
            turns,
            seq,
            pending,
            paused,
            dirty: false,
            snapshot_due,
            at: info.updated_at,
            shown: true,
            edited_turn: info.edited_turn,
            by: None,
            variant: info.variant.as_deref().map(Arc::from),
        })
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The pack version the session runs on.
    pub fn pack(&self) -> &Arc<Pack> {
        &self.pack
    }

    /// Names who makes the next write of this session (a turn, a resume, an edit): its
    /// checkpoints record them as [`Checkpoint::by`](crate::store::Checkpoint::by). The name
    /// holds for that call alone, taken or not (a refused write leaves nothing for the next), so a
    /// later write made without naming anyone records nobody; a turn a crash interrupted, finished
    /// first, is nobody's.
    pub fn acting_as(&mut self, by: Option<String>) {
        self.by = by;
    }

    /// The turn in which the state was first set by hand (an edit, a fork with a patch, or
    /// either in the session this one forked from before the fork), if ever: from then on a win
    /// is reached on an edited state, and faces say so beside the status line.
    pub fn edited_turn(&self) -> Option<u64> {
        self.edited_turn
    }

    /// The variant of its pack's experiment it plays, when the pack had one as it opened.
    pub fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// How many turns have completed.
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// The number of the newest checkpoint.
    pub fn checkpoint(&self) -> u64 {
        self.seq
    }

    /// The options chosen when the session opened.
    pub fn options(&self) -> Json {
        value::map_to_json(&self.options)
    }

    /// The whole state as JSON.
    pub fn state(&self) -> Json {
        value::to_json(&self.state)
    }

    /// A deep copy of the state as the Rhai values it lives in (none while a script holds it):
    /// what a simulated player is handed, without the round trip through JSON.
    pub fn state_copy(&self) -> Option<rhai::Dynamic> {
        self.state.read_lock::<Map>().map(|m| rhai::Dynamic::from_map(m.clone()))
    }

    /// Turns showing the game off (or on again): a turn's result then leaves the pack's display
    /// unrendered and its output null. A simulation reads neither (its report reads the state).
    pub fn show_results(&mut self, shown: bool) {
        self.shown = shown;
    }

    /// One state field as JSON.
    pub fn field(&self, name: &str) -> Option<Json> {
        self.state.read_lock::<Map>().and_then(|m| m.get(name).map(value::to_json))
    }

    /// The pack's output fields as JSON (the whole state when the pack declares no outputs).
    pub fn output(&self) -> Json {
        let map = self.state.read_lock::<Map>();
        let Some(map) = map else { return Json::Null };
        if self.pack.outputs.is_empty() {
            return value::map_to_json(&map);
        }
        Json::Object(
            self.pack
                .outputs
                .iter()
                .map(|k| (k.clone(), map.get(k.as_str()).map_or(Json::Null, value::to_json)))
                .collect(),
        )
    }

    /// Whether the session is finished (the pack's `finish.when` field is true).
    pub fn is_finished(&self) -> bool {
        self.pack.is_finished(&self.state)
    }

    /// Whether a long turn was interrupted (by a crash) and is still to be finished.
    pub fn is_interrupted(&self) -> bool {
        self.pending.is_some() && self.held().is_none()
    }

    /// Renders one of the pack's `display:` templates (`reply`, `status`, `details`,
    /// `finished`) over the state; `None` when the pack has no such template.
    pub fn display(&self, part: &str) -> Option<Result<String>> {
        self.pack.render_display(part, &self.state, &self.options)
    }

    /// Runs one turn with `input` (a map of the pack's input fields, or a line a person typed:
    /// see [`Session::input_from_text`]).
    ///
    /// The turn is played on one of the engine's own threads, not the caller's: scripts and
    /// templates are synchronous work, so the caller's async runtime keeps serving its other
    /// tasks meanwhile. Call it from within a tokio runtime (multi-threaded: the turn's model
    /// calls and store writes are awaited in it). A caller that owns a thread and may block it
    /// plays the turn there with [`Session::blocking_turn`].
    ///
    /// Dropping the future cancels the turn, as with any future: the session is left as it was
    /// before it (the drop waits for the turn's thread to undo its changes, as long as the
    /// synchronous step under way takes), and reads the store again before its next turn.
    pub async fn turn(&mut self, input: Json) -> Result<TurnResult> {
        self.handed_off(move |s| Box::pin(s.run_turn(input, None, Breakpoints::none()))).await
    }

    /// [`Session::turn`], passing every event to `sink` as it happens (model tokens included).
    pub async fn turn_with_events(&mut self, input: Json, sink: EventSink) -> Result<TurnResult> {
        self.handed_off(move |s| Box::pin(s.run_turn(input, Some(sink), Breakpoints::none()))).await
    }

    /// Runs one turn on the calling thread, blocking it until the turn ends: for a caller that
    /// owns its thread (a simulated game, a synchronous binding), which pays no hand-off to
    /// another thread. A tokio runtime must be entered ([`tokio::runtime::Handle::enter`]); the
    /// turn's model calls and store writes are awaited in it.
    ///
    /// # Panics
    ///
    /// When called from within an asynchronous task, as [`tokio::runtime::Handle::block_on`]
    /// does: an async caller uses [`Session::turn`].
    pub fn blocking_turn(&mut self, input: Json) -> Result<TurnResult> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::internal("Session::blocking_turn needs a tokio runtime entered"))?;
        let played = handle.block_on(self.run_turn(input, None, Breakpoints::none()));
        self.by = None;
        played
    }

    /// Finishes a long turn a crash interrupted, from its last step checkpoint, without repeating
    /// the model calls of the steps already recorded. `None` when no turn was interrupted. Played
    /// on the engine's threads, as [`Session::turn`] is.
    pub async fn finish_interrupted(&mut self) -> Result<Option<TurnResult>> {
        self.handed_off(|s| {
            Box::pin(async move {
                let store = s.rt.store.clone();
                let _lock = store.lock(&s.id).await?;
                s.refresh().await?;
                caught(std::pin::pin!(s.finish_pending(None))).await
            })
        })
        .await
    }

    /// Does `work` on this session on one of the engine's threads, which may block (scripts,
    /// templates), within the caller's tokio runtime. The session moves to that thread and back;
    /// meanwhile `self` is a stand-in that reloads from the store when next used, which it only
    /// ever is when this future was dropped (the work then is too, undoing what it changed).
    pub(crate) async fn handed_off<T: Send + 'static>(
        &mut self,
        work: impl for<'a> FnOnce(&'a mut Session) -> futures_util::future::BoxFuture<'a, Result<T>> + Send + 'static,
    ) -> Result<T> {
        let stand_in = self.stand_in();
        let mut session = std::mem::replace(self, stand_in);
        let (session, done) = crate::blocking::run_cancellable(move || async move {
            let done = work(&mut session).await;
            (session, done)
        })
        .await?;
        *self = session;
        // A name given for this write is not left for the next, whether it was taken or the
        // write was refused before it could be.
        self.by = None;
        done
    }

    /// What `self` is while its turn plays elsewhere: the same session as of now, marked to
    /// reload from the store before anything else.
    fn stand_in(&self) -> Session {
        Session {
            rt: self.rt.clone(),
            id: self.id.clone(),
            pack: self.pack.clone(),
            options: self.options.clone(),
            seed: self.seed,
            state: self.state.clone(),
            turns: self.turns,
            seq: self.seq,
            pending: None,
            paused: self.paused.clone(),
            dirty: true,
            snapshot_due: false,
            at: self.at,
            shown: self.shown,
            edited_turn: self.edited_turn,
            by: None,
            variant: self.variant.clone(),
        }
    }

    /// Reloads the session when another writer (a replica sharing the store) recorded checkpoints
    /// since, or when a turn of this one was dropped half-way. Turns do this themselves; call it
    /// before reading a session another process may have moved on.
    pub async fn refresh(&mut self) -> Result<()> {
        let store = self.rt.store.clone();
        if store.exclusive() && !self.dirty {
            return Ok(());
        }
        let info = store.info(&self.id).await?.ok_or_else(|| gone(&self.id))?;
        if info.head != self.seq || self.dirty {
            let stored = store.load(&self.id).await?.ok_or_else(|| gone(&self.id))?;
            let (shown, by) = (self.shown, self.by.take());
            let pack = self.rt.packs.variant(&stored.info.pack, stored.info.variant.as_deref())?;
            *self = Session::load(self.rt.clone(), pack, stored).await?;
            (self.shown, self.by) = (shown, by);
        }
        Ok(())
    }

    /// Where the last turn paused, if it did: the node after which it stopped and the nodes the
    /// next turn starts with; or where a breakpoint holds the turn under way.
    pub fn paused(&self) -> Option<PausedAt> {
        match self.held() {
            Some(held) => held.resume.as_ref().map(PausedAt::of),
            None => self.paused.as_ref().map(PausedAt::of),
        }
    }
}

fn gone(id: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("session {id} no longer exists"))
}

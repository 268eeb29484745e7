//! A session's lobby rounds (see [`crate::lobby`]): posting a player's input, closing a round;
//! and the sweep's bookkeeping, which rounds are due a try and which are being closed
//! ([`RoundCloser`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rhai::{Dynamic, Map};
use serde_json::Value as Json;

use super::Session;
use crate::error::{Error, ErrorKind, Result};
use crate::lobby::{InputKind, Lobby, LobbyStatus, Post};
use crate::session::TurnResult;
use crate::store::{LobbyInput, OpenRound};
use crate::vocab::now_ms;

/// What a post to a lobby did (see [`Session::post`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Posted {
    /// The round after the post (the next one when the post closed the round).
    pub lobby: LobbyStatus,
    /// The turn that closed the round, when the post was the last one it waited for.
    pub closed: Option<TurnResult>,
    /// Why closing the round failed, when it did: the inputs stay, and the round closes again at
    /// its timeout.
    pub close_error: Option<String>,
}

/// How many lobby rounds one sweep closes at once: a slow model in one lobby does not hold up the
/// others' due rounds, and a sweep does not start a turn for every lobby at the same moment.
pub(crate) const CLOSES_AT_ONCE: usize = 8;
/// How many times in a row a round's closing turn may fail before the sweep gives up on it (the
/// next answer posted, or a replica's restart, tries again).
const CLOSE_ATTEMPTS: u32 = 5;
/// The longest wait between two tries at closing a round.
const MOST_CLOSE_BACKOFF_MS: i64 = 10 * 60 * 1000;
/// How long the sweep leaves a lobby whose turn a breakpoint holds before it looks again.
pub(crate) const HELD_RECHECK_MS: i64 = 5_000;

/// The sweep's bookkeeping, one per engine: when each round whose closing turn failed is tried
/// again (after its timeout, at least 5 s, doubling up to 10 minutes; after five failures in a
/// row no more), and which rounds a sweep is closing now, so overlapping sweeps leave them be.
#[derive(Default)]
pub(crate) struct RoundCloser {
    retry: Mutex<HashMap<String, Retry>>,
    closing: Mutex<HashSet<String>>,
}

/// A lobby round whose closing turn failed.
#[derive(Debug, Clone)]
struct Retry {
    /// Not tried again before this time (unix ms); `i64::MAX` once given up.
    at: i64,
    /// How many times in a row it failed.
    failures: u32,
    /// Why, the last time.
    why: String,
}

/// A round claimed by a sweep, until its close ends (or is dropped).
pub(crate) struct Claim<'a> {
    closer: &'a RoundCloser,
    session: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.closer.closing.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.session);
    }
}

impl RoundCloser {
    /// The open rounds to close now, each claimed: those whose retry time has come and no other
    /// sweep of this engine is closing. Failures older than a day are forgotten.
    pub(crate) fn due(&self, open: Vec<OpenRound>, now: i64) -> Vec<(OpenRound, Claim<'_>)> {
        let due: Vec<OpenRound> = {
            let mut retry = self.retry();
            retry.retain(|_, r| r.at == i64::MAX || r.at > now - 24 * 3600 * 1000);
            open.into_iter().filter(|o| retry.get(&o.session).is_none_or(|r| r.at <= now)).collect()
        };
        let mut closing = self.closing.lock().unwrap_or_else(|p| p.into_inner());
        due.into_iter()
            .filter(|open| closing.insert(open.session.clone()))
            .map(|open| {
                let claim = Claim { closer: self, session: open.session.clone() };
                (open, claim)
            })
            .collect()
    }

    /// The round of `session` closed: no more tries owed.
    pub(crate) fn closed(&self, session: &str) {
        self.retry().remove(session);
    }

    /// The round of `session` (whose lobby waits `timeout` for answers) failed to close at `now`.
    pub(crate) fn failed(&self, session: &str, timeout: Option<Duration>, now: i64, e: &Error) {
        let first = timeout.map_or(5_000, |t| (t.as_millis() as i64).max(5_000));
        let mut retry = self.retry();
        let r = retry.entry(session.to_owned()).or_insert(Retry { at: 0, failures: 0, why: String::new() });
        r.failures += 1;
        r.why = e.to_string();
        r.at = if r.failures >= CLOSE_ATTEMPTS {
            tracing::error!(session, "gave up closing the lobby round after {} failed tries: {e}", r.failures);
            i64::MAX
        } else {
            now + first.saturating_mul(1 << (r.failures - 1)).min(MOST_CLOSE_BACKOFF_MS)
        };
    }

    /// The round of `session` cannot close now (a breakpoint holds its turn): not tried again
    /// before `at`, and no failure counted.
    pub(crate) fn later(&self, session: &str, at: i64) {
        let mut retry = self.retry();
        let r = retry.entry(session.to_owned()).or_insert(Retry { at: 0, failures: 0, why: String::new() });
        r.at = r.at.max(at);
    }

    /// Why the sweep gave up on `session`'s round, when it did.
    pub(crate) fn problem(&self, session: &str) -> Option<String> {
        let retry = self.retry();
        let r = retry.get(session).filter(|r| r.at == i64::MAX)?;
        Some(format!("the round could not be closed after {} tries: {}", r.failures, r.why))
    }

    /// A post tries a round the sweep gave up on again.
    pub(crate) fn forget(&self, session: &str) {
        self.retry().remove(session);
    }

    fn retry(&self) -> MutexGuard<'_, HashMap<String, Retry>> {
        self.retry.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How soon after a round closed an answer without a round that repeats the player's answer
/// to it is taken for a retry and refused (see `Session::refuse_repeat`).
const REPEAT_WINDOW_MS: i64 = 10_000;

impl Session {
    /// The pack's lobby, or an error saying the pack has none.
    fn lobby_spec(&self) -> Result<Lobby> {
        self.pack.lobby.clone().ok_or_else(|| {
            Error::input(format!(
                "pack `{}` has no lobby rounds: send each turn's whole input to its turns instead",
                self.pack.name
            ))
        })
    }

    /// The round under way and who is in the lobby, from the state.
    fn round_and_players(&self, lobby: &Lobby) -> (u64, Vec<String>) {
        round_and_players(lobby, &self.state)
    }

    /// Where the session's lobby round stands: `None` when the pack has no lobby.
    pub async fn lobby(&mut self) -> Result<Option<LobbyStatus>> {
        let Some(lobby) = self.pack.lobby.clone() else { return Ok(None) };
        self.refresh().await?;
        let inputs = kept(&*self.rt.store)?.inputs(&self.id).await?;
        let (round, players) = self.round_and_players(&lobby);
        Ok(Some(match self.held() {
            // The held turn may have moved the state's round on already; the round it closes is
            // the one its inputs answered, and its lists are that round's.
            Some(_) => {
                let closing = inputs.iter().map(|i| i.round).max().unwrap_or(round);
                LobbyStatus::of(&lobby, closing, players, &inputs, self.at).held()
            }
            None => LobbyStatus::of(&lobby, round, players, &inputs, self.at),
        }))
    }

    /// Refuses input while a breakpoint holds a turn: it would go to a round not yet open, and
    /// be dropped with the inputs when the held turn ends.
    fn refuse_while_held(&self) -> Result<()> {
        let Some(held) = self.held() else { return Ok(()) };
        let at =
            held.resume.as_ref().and_then(|r| r.held.as_ref()).map(|stop| format!(" ({stop})")).unwrap_or_default();
        Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "turn {} of this lobby is held at a breakpoint{at}: the next round opens, and takes answers, once it is \
                 resumed",
                held.turn
            ),
        ))
    }

    /// Posts one player's answer, joining or leaving to the round under way. Refused: a player
    /// not in the lobby (or already in it, to join), an answer the pack does not allow (invalid
    /// input); a second answer from one player, an answer meant for another round, a full lobby
    /// (conflict). When the post leaves the round waiting for nobody, the round's turn runs
    /// before this returns; if that turn fails, the post stays recorded and the round closes
    /// again at its timeout.
    ///
    /// Played on the engine's threads, as [`Session::turn`] is.
    pub async fn post(&mut self, post: Post) -> Result<Posted> {
        self.handed_off(move |s| Box::pin(s.post_here(post))).await
    }

    async fn post_here(&mut self, post: Post) -> Result<Posted> {
        let lobby = self.lobby_spec()?;
        let store = self.rt.store.clone();
        let _lock = store.lock(&self.id).await?;
        self.refresh().await?;
        if self.pack.is_finished(&self.state) {
            return Err(Error::new(ErrorKind::Finished, self.pack.finished_message()));
        }
        self.refuse_while_held()?;
        let (round, players) = self.round_and_players(&lobby);
        if let Some(meant) = post.round
            && meant != round
        {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("round {meant} is not open: the lobby is at round {round}"),
            ));
        }
        let inputs = kept(&*store)?.inputs(&self.id).await?;
        let answered = |i: &LobbyInput| i.round == round && i.player == post.player && i.kind == InputKind::Answer;
        if post.round.is_none() && post.kind == InputKind::Answer && !inputs.iter().any(answered) {
            self.refuse_repeat(&lobby, round, &post).await?;
        }
        let status = LobbyStatus::of(&lobby, round, players, &inputs, self.at);
        self.admit(&lobby, &status, &post)?;
        let input = match post.kind {
            InputKind::Answer => post.input.clone(),
            _ => Json::Null,
        };
        let record = LobbyInput { round, player: post.player.clone(), kind: post.kind, input, created_at: now_ms() };
        if !kept(&*store)?.add_input(&self.id, &record).await? {
            let what = match post.kind {
                InputKind::Answer => format!("{} already answered round {round}", post.player),
                InputKind::Join => format!("{} already joins after round {round}", post.player),
                InputKind::Leave => format!("{} already left in round {round}", post.player),
            };
            return Err(Error::new(ErrorKind::Conflict, what));
        }
        let mut inputs = inputs;
        inputs.push(record);
        let status = LobbyStatus::of(&lobby, round, status.players, &inputs, self.at);
        if !status.complete() {
            return Ok(Posted { lobby: status, closed: None, close_error: None });
        }
        let closed = self.close(&lobby, &status, &inputs).await;
        self.posted(&lobby, closed).await
    }

    /// Refuses an answer without a round that repeats, soon after, the player's answer to the
    /// round that just closed: a client's retry of a post whose reply it lost, which would
    /// otherwise land in a question the player has not seen. A client that names the round
    /// (`Post::round`) is never refused this way.
    async fn refuse_repeat(&self, lobby: &Lobby, round: u64, post: &Post) -> Result<()> {
        let since = now_ms() - self.at;
        if round < 2 || !(0..REPEAT_WINDOW_MS).contains(&since) {
            return Ok(());
        }
        // The closing turn's input: in the checkpoints after the newest snapshot, unless that
        // turn's checkpoint is the snapshot itself (every `snapshot_every` turns).
        let mut last = None;
        if let Some(stored) = self.rt.store.load(&self.id).await? {
            last = stored.after.into_iter().rev().find_map(|c| c.input);
        }
        if last.is_none()
            && let Some(past) = self.rt.store.history(&self.id, self.seq).await?
        {
            last = past.after.into_iter().rev().find_map(|c| c.input);
        }
        let before = last.as_ref().and_then(|input| input.get(&lobby.answers)).and_then(|a| a.get(&post.player));
        if before != Some(&post.input) {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "{} answered {} to round {}, which has closed, {} s ago: if this is a new answer, to round {round}, \
                 post it with \"round\": {round}",
                post.player,
                post.input,
                round - 1,
                since / 1000
            ),
        ))
    }

    /// Whether `post` may go into the round `status` describes.
    fn admit(&self, lobby: &Lobby, status: &LobbyStatus, post: &Post) -> Result<()> {
        let name = post.player.as_str();
        let listed = status.players.iter().any(|p| p == name);
        let not_in = || Error::input(format!("{name} is not in this lobby (players: {})", status.players.join(", ")));
        match post.kind {
            InputKind::Answer => {
                if !listed {
                    return Err(not_in());
                }
                if let Some(values) = &lobby.values
                    && !values.contains(&post.input)
                {
                    let allowed: Vec<String> = values.iter().map(Json::to_string).collect();
                    return Err(Error::input(format!(
                        "{} is not an answer this lobby takes (answers: {})",
                        post.input,
                        allowed.join(", ")
                    )));
                }
            }
            InputKind::Join => {
                if lobby.join.is_none() {
                    return Err(Error::input(format!("pack `{}` does not let players join", self.pack.name)));
                }
                lobby.check_name(name)?;
                let like = |other: &str| crate::lobby::looks_like(other) == crate::lobby::looks_like(name);
                if let Some(other) = status.players.iter().chain(&status.joining).find(|p| like(p)) {
                    let what = if other == name {
                        format!("{name} is already in this lobby")
                    } else {
                        format!("{name} looks the same as {other}, who is in this lobby")
                    };
                    return Err(Error::new(ErrorKind::Conflict, what));
                }
                let after = status.players.len() + status.joining.len() - status.leaving.len();
                if let Some(max) = lobby.max_players
                    && after >= max
                {
                    return Err(Error::new(ErrorKind::Conflict, format!("the lobby is full ({max} players)")));
                }
            }
            InputKind::Leave => {
                if lobby.leave.is_none() {
                    return Err(Error::input(format!("pack `{}` does not let players leave", self.pack.name)));
                }
                if !listed {
                    return Err(not_in());
                }
            }
        }
        Ok(())
    }

    /// Closes the round if it is due at `now` (its timeout passed since its question was asked,
    /// or nobody is left to wait for): runs its turn with the inputs it has, none when nobody
    /// answered. `None` when the round is not due, or was closed already (by another process).
    /// Played on the engine's threads, as [`Session::turn`] is.
    pub async fn close_due(&mut self, now: i64) -> Result<Option<TurnResult>> {
        self.handed_off(move |s| Box::pin(s.close_due_here(now))).await
    }

    async fn close_due_here(&mut self, now: i64) -> Result<Option<TurnResult>> {
        let Some(lobby) = self.pack.lobby.clone() else { return Ok(None) };
        let store = self.rt.store.clone();
        let _lock = store.lock(&self.id).await?;
        self.refresh().await?;
        // A held turn closes the round when it is resumed; until then its timer waits.
        if self.pack.is_finished(&self.state) || self.held().is_some() {
            return Ok(None);
        }
        let (round, players) = self.round_and_players(&lobby);
        let inputs = kept(&*store)?.inputs(&self.id).await?;
        let status = LobbyStatus::of(&lobby, round, players, &inputs, self.at);
        let due = status.complete() || status.closes_at.is_some_and(|t| t <= now);
        if !due {
            return Ok(None);
        }
        self.close(&lobby, &status, &inputs).await.map(Some)
    }

    /// Runs the turn that closes the round (the caller holds the session's lock).
    async fn close(&mut self, lobby: &Lobby, status: &LobbyStatus, inputs: &[LobbyInput]) -> Result<TurnResult> {
        let input = status.turn_input(lobby, inputs);
        self.run_locked(input, None).await
    }

    /// What a post returns once its round closed (or failed to).
    async fn posted(&mut self, lobby: &Lobby, closed: Result<TurnResult>) -> Result<Posted> {
        let (round, players) = self.round_and_players(lobby);
        let inputs = kept(&*self.rt.store)?.inputs(&self.id).await?;
        let status = LobbyStatus::of(lobby, round, players, &inputs, self.at);
        Ok(match closed {
            Ok(turn) => Posted { lobby: status, closed: Some(turn), close_error: None },
            Err(e) => {
                tracing::warn!(session = %self.id, "cannot close the lobby round: {e}");
                Posted { lobby: status, closed: None, close_error: Some(e.to_string()) }
            }
        })
    }
}

/// The round under way and who is in the lobby, from a session's state.
pub(super) fn round_and_players(lobby: &Lobby, state: &Dynamic) -> (u64, Vec<String>) {
    let map = state.read_lock::<Map>();
    let get = |name: &str| map.as_ref().and_then(|m| m.get(name).cloned()).unwrap_or(Dynamic::UNIT);
    let round = get(&lobby.round).as_int().map_or(0, |r| r.max(0) as u64);
    let players = get(&lobby.players)
        .try_cast::<rhai::Array>()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.into_immutable_string().ok().map(|s| s.to_string()))
        .collect();
    (round, players)
}

/// The store's lobby inputs, or an error that says it keeps none.
fn kept(store: &dyn crate::store::Store) -> Result<&dyn crate::store::LobbyInputs> {
    crate::store::needs(store, store.lobby(), "lobby inputs")
}

//! The API's streams that follow something other than a turn: packs' reloads and one session's
//! moves, as server-sent events.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::stream;
use ruleweave::LiveSession;

use super::access::{Access, Presented};
use super::body::{Diagnostic, Posted, ReloadEvent, Standing};
use super::error::ApiResult;
use super::error::Code;
use super::extract::SessionId;
use super::listen::Peer;
use super::routes::{Facts, I, O, P, S, Streams};
use super::{Shared, StreamSlot, sse};
use ruleweave::ErrorKind;

/// Who may call `events`, and the errors it answers of its own.
pub(super) const EVENTS: Facts = Facts::keys(&[O, I, S])
    .note("reloads of the packs the key sees")
    .answers(&[Code::TooManyStreams])
    .streams(Streams::These(&[("reload", Some("ReloadEvent"))]));

/// `GET /v1/events`: reload events as SSE (`event: reload`), as they happen, for a console to
/// show; a comment every 15 s keeps the stream open.
#[utoipa::path(get, path = "/v1/events", operation_id = "packEvents", tag = "packs", responses(
    (status = 200, description = "Reload events (`event: reload`, data: the pack's event as JSON) as they happen", content_type = "text/event-stream", body = String),
))]
pub(super) async fn events(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    Extension(presented): Extension<Presented>,
    peer: Option<Extension<Peer>>,
) -> ApiResult<Response> {
    let slot = s.stream_slot(peer.map(|p| p.0))?;
    let rx = s.engine.packs().subscribe();
    let shown = access.packs_shown(&s).await?;
    let still = tokio::time::interval_at(tokio::time::Instant::now() + STILL_THERE, STILL_THERE);
    let state = (rx, slot, s.clone(), presented, shown, still);
    let stream = stream::unfold(state, |(mut rx, slot, s, presented, shown, mut still)| async move {
        loop {
            let received = tokio::select! {
                r = rx.recv() => r,
                // A key revoked since the stream opened ends it.
                _ = still.tick() => if presented.still_valid(&s).await { continue } else { return None },
            };
            match received {
                Ok(e) if shown.as_ref().is_some_and(|packs| !packs.contains(&e.pack)) => continue,
                Ok(_) if !presented.still_valid(&s).await => return None,
                Ok(e) => {
                    let event = sse::event(Some("reload"), &reload_event(&e));
                    return Some((Ok::<_, Infallible>(event), (rx, slot, s, presented, shown, still)));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// A reload as the API shows it: diagnostics in the shape `GET /v1/packs` uses.
pub(super) fn reload_event(e: &ruleweave::PackEvent) -> ReloadEvent {
    ReloadEvent {
        pack: e.pack.clone(),
        status: e.status,
        version: e.version.clone(),
        previous: e.previous.clone(),
        diagnostics: e.diagnostics.iter().map(Diagnostic::of).collect(),
        files: e.files.clone(),
        at: e.at,
        took_us: e.took_us,
    }
}

/// Who may call `session_events`, and the errors it answers of its own.
pub(super) const SESSION_EVENTS: Facts = Facts::keys(&[O, I, S, P])
    .note("a player follows the game they are in")
    .answers(&[Code::Engine(ErrorKind::NotFound), Code::TooManyStreams])
    .streams(Streams::These(&[("state", Some("Standing")), ("input", Some("Posted")), ("turn", Some("Standing"))]));

/// `GET /v1/sessions/{id}/events`: the session as SSE, for the players following a lobby.
/// First `state` (the turn, output and lobby as they stand), then `input` when a player answers,
/// joins or leaves (with the lobby after it) and `turn` when a turn is recorded (with its output:
/// a lobby's next question), whichever replica recorded it. After the turn that finishes the
/// session, the stream ends. A follower too slow to keep up gets `state` again.
#[utoipa::path(get, path = "/v1/sessions/{id}/events", operation_id = "sessionEvents", tag = "sessions", params(("id" = String, Path, description = "The session")), responses(
    (status = 200, description = "The session as it moves: `state` first, then `input` and `turn` events, each data a JSON object", content_type = "text/event-stream", body = String),
))]
pub(super) async fn session_events(
    State(s): State<Shared>,
    Extension(presented): Extension<Presented>,
    SessionId(id): SessionId,
    peer: Option<Extension<Peer>>,
) -> ApiResult<Response> {
    let slot = s.stream_slot(peer.map(|p| p.0))?;
    let live = s.engine.session(&id).await?;
    // Subscribed before the first look, so nothing recorded after it is missed.
    let rx = s.engine.session_events();
    let first = snapshot(&live).await?;
    let done = first.finished;
    let first = sse::event(Some("state"), &first);
    let still = tokio::time::interval_at(tokio::time::Instant::now() + STILL_THERE, STILL_THERE);
    let follow =
        Follow { rx, live, id, done, still, store: s.engine.store().clone(), s: s.clone(), presented, _slot: slot };
    let rest = stream::unfold(follow, |mut f| async move {
        let event = f.next().await?;
        Some((Ok::<_, Infallible>(event), f))
    });
    let all = stream::once(async move { Ok::<_, Infallible>(first) }).chain(rest);
    Ok(Sse::new(all).keep_alive(KeepAlive::default()).into_response())
}

/// How often a follower's stream checks that its session is still stored: one expired (which
/// no event announces) ends the stream by then.
const STILL_THERE: std::time::Duration = std::time::Duration::from_secs(30);

/// A follower of one session's events.
struct Follow {
    rx: tokio::sync::broadcast::Receiver<ruleweave::store::SessionEvent>,
    live: LiveSession,
    id: String,
    done: bool,
    still: tokio::time::Interval,
    store: Arc<dyn ruleweave::store::Store>,
    s: Shared,
    /// The key the stream was opened with: one revoked (or a player's who left) ends it.
    presented: Presented,
    _slot: Option<StreamSlot>,
}

impl Follow {
    /// The next event for this session, or `None` once it finished (or the store went away).
    async fn next(&mut self) -> Option<SseEvent> {
        use tokio::sync::broadcast::error::RecvError;
        if self.done {
            return None;
        }
        loop {
            let received = tokio::select! {
                r = self.rx.recv() => r,
                _ = self.still.tick() => match self.store.info(&self.id).await {
                    Ok(None) => return None,
                    _ if !self.presented.still_valid(&self.s).await => return None,
                    _ => continue,
                },
            };
            let what = match received {
                Ok(e) if e.session == self.id && !self.presented.still_valid(&self.s).await => return None,
                Ok(e) if e.session == self.id => e.what,
                Ok(_) => continue,
                Err(RecvError::Lagged(_)) => {
                    let now = snapshot(&self.live).await.ok()?;
                    self.done = now.finished;
                    return Some(sse::event(Some("state"), &now));
                }
                Err(RecvError::Closed) => return None,
            };
            return match what {
                ruleweave::store::Happened::Input { round, player, kind } => {
                    let lobby = self.live.lock().await.lobby().await.ok().flatten();
                    Some(sse::event(Some("input"), &Posted { round, player, kind, lobby }))
                }
                ruleweave::store::Happened::Turn { turn, finished, .. } => {
                    let mut now = snapshot(&self.live).await.ok()?;
                    now.turn = turn;
                    self.done = finished;
                    Some(sse::event(Some("turn"), &now))
                }
                ruleweave::store::Happened::Deleted => None,
            };
        }
    }
}

/// The session as a follower sees it: turns done, output, lobby, whether it finished.
async fn snapshot(live: &LiveSession) -> ApiResult<Standing> {
    let mut session = live.lock().await;
    session.refresh().await?;
    let lobby = session.lobby().await?;
    Ok(Standing {
        turn: session.turns(),
        output: session.output(),
        lobby,
        finished: session.is_finished(),
        display: session.view(),
    })
}

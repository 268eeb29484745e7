//! Stepping through a turn over HTTP: a turn a breakpoint holds goes on (`POST .../resume`, held
//! again where the body says), and the state is edited by hand between turns or at a pause
//! (`PATCH .../state`). A turn sent with `"break"` (see `api::turn`) is where it starts.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::Response;
use ruleweave::{Breakpoints, ErrorKind};
use serde::Deserialize;
use serde_json::Value;

use super::access::Access;
use super::api::answer_turn;
use super::body::{Edited, TurnBody};
use super::error::ApiResult;
use super::error::Code;
use super::extract::{Body, MaybeBody, SessionId};
use super::routes::{Facts, I, O, S};
use super::turns::{Move, failed};
use super::{ApiError, Shared};

/// Going on with a held turn: where to hold it next.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Resume {
    /// Where to hold the turn next (a step: before the node that runs next); none, to the end.
    #[serde(default, rename = "break")]
    #[schema(rename = "break")]
    breaks: Breakpoints,
    /// At a pause point of the pack only: the next turn's input (an empty line when absent).
    #[schema(value_type = Option<Object>)]
    input: Option<Value>,
}

/// An edit of the state: the fields to set.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Patch {
    /// Each field's new value, replacing its value outright (not through its reducer).
    #[schema(value_type = Object)]
    set: serde_json::Map<String, Value>,
}

/// Who may call `resume`, and the errors it answers of its own.
pub(super) const RESUME: Facts =
    Facts::keys(&[O, I, S]).note("on from a pause point; a held turn needs `debug`").plays_turns();

/// `POST /v1/sessions/{id}/resume`: goes on with the turn a breakpoint holds, as if it had never
/// stopped (the same turn, steps and randomness), held again at the body's breakpoints; at a
/// pause point of the pack, plays the next turn as a new turn would.
#[utoipa::path(post, path = "/v1/sessions/{id}/resume", operation_id = "resumeTurn", tag = "sessions", params(("id" = String, Path, description = "The session")), request_body(content = Option<Resume>, description = "Where to hold the turn next; an empty body runs it to its end"), responses(
    (status = 200, description = "The turn's result (`paused` again when a breakpoint holds it); with `Accept: text/event-stream`, its events and `result` last", content(
        (TurnBody = "application/json"),
        (String = "text/event-stream"),
    )),
))]
pub(super) async fn resume(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    SessionId(id): SessionId,
    headers: HeaderMap,
    MaybeBody(req): MaybeBody<Resume>,
) -> ApiResult<Response> {
    // Going on from a pause point of the pack is playing; going on with a held turn (the store's
    // newest checkpoint holds it, or is an edit, itself a debugger's), debugging. A key that may
    // debug is not asked which.
    if !access.rights().contains(&super::access::DEBUG) {
        let head = s.engine.info(&id).await?.head_kind;
        let held = matches!(head, ruleweave::store::CheckpointKind::Break | ruleweave::store::CheckpointKind::Edit);
        if held || !req.breaks.is_empty() {
            access.may_debug("resuming a held turn")?;
        }
    }
    let live = s.engine.session(&id).await?;
    answer_turn(&s, &headers, live, Move::Resume(req.input), req.breaks, access.by()).await
}

/// Who may call `edit`, and the errors it answers of its own.
pub(super) const EDIT: Facts = Facts::keys(&[O, I, S]).note("needs `debug`").answers(&[
    Code::Engine(ErrorKind::NotFound),
    Code::Engine(ErrorKind::Input),
    Code::Engine(ErrorKind::Conflict),
    Code::Engine(ErrorKind::StateTooLarge),
    Code::Engine(ErrorKind::Pack),
    Code::Engine(ErrorKind::Store),
]);

/// `PATCH /v1/sessions/{id}/state`: sets state fields by hand, between turns or while a
/// breakpoint holds a turn; recorded as a checkpoint of kind `edit`.
#[utoipa::path(patch, path = "/v1/sessions/{id}/state", operation_id = "editState", tag = "sessions", params(("id" = String, Path, description = "The session")), request_body = Patch, responses(
    (status = 200, description = "The state after the edit, and the checkpoint that records it", body = Edited),
))]
pub(super) async fn edit(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    SessionId(id): SessionId,
    Body(req): Body<Patch>,
) -> ApiResult<Json<Edited>> {
    access.may_debug("editing the state")?;
    let live = s.engine.session(&id).await?;
    let Some(mut session) = live.try_lock() else {
        let why = format!("a turn of session {id} is playing; edit its state when it is done");
        return Err(ruleweave::Error::new(ErrorKind::Conflict, why).into());
    };
    let pack = session.pack().name().to_owned();
    let fields: Vec<String> = req.set.keys().cloned().collect();
    session.acting_as(access.by());
    let checkpoint = session.edit(req.set).await.map_err(|e| ApiError::from(failed(&s, &pack, e)))?;
    let effects = session.edit_effects(&fields).await?;
    // A player edited off the table loses their key with their place, as a turn that takes
    // them off does.
    if let Some(lobby) = session.lobby().await?
        && let Some(tables) = s.tables().await?
    {
        let keys = &tables.keys;
        keys.keep_player_keys(&id, &lobby.players).await?;
    }
    Ok(Json(Edited {
        state: session.state(),
        checkpoint,
        derived: effects.derived,
        recomputed_next: effects.recomputed_next,
        edited_turn: session.edited_turn(),
    }))
}

//! The handlers of the HTTP API.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use ruleweave::{Breakpoints, ErrorKind, Event, EventSink};
use serde::Deserialize;
use serde_json::Value;

use super::access::{self, Access};
use super::body::{
    CheckpointList, ClosedTurn, ConversationBody, Diagnostic, ForkedFrom, Health, Listed, Opened, PackEntry, PackGraph,
    PackList, PostedBody, ReplayBody, SessionBody, SessionPage, StreamError, StreamErrorDetail, TurnBody,
};
use super::error::{ApiResult, Code};
use super::extract::{Body, MaybeBody, PackName, SessionId};
use super::routes::{Facts, I, O, P, S, Streams};
use super::turns::{self, Move, Played, on_pack_thread, on_turn_thread};
use super::{ApiError, Shared, sse};

/// A new session: the pack it plays and the options it opens with.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewSession {
    /// The pack's name.
    pack: String,
    /// The options, as the pack declares them (missing ones take their defaults).
    #[serde(default)]
    #[schema(value_type = Object)]
    options: serde_json::Map<String, Value>,
    /// A designer's playtest: the session's key may debug it (edit its state, hold and resume
    /// its turns, fork with a patch, replay). Only a key that may debug asks for it.
    #[serde(default)]
    debug: bool,
    /// Who plays it (at most 128 printable characters: an account id, say): for a pack with an
    /// experiment, the key its variant is chosen by, so a player keeps their variant from
    /// session to session (without one, the session's id chooses). Kept only as a hash.
    #[serde(default)]
    #[schema(max_length = 128)]
    player: Option<String>,
}

/// A turn's input: a map of the pack's input fields, or a line a person typed.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewTurn {
    /// The input.
    #[schema(schema_with = turn_input)]
    input: Value,
    /// Where to hold the turn: before or after these nodes (the turn stops there, recorded,
    /// and `POST /v1/sessions/{id}/resume` goes on with it).
    #[serde(default, rename = "break")]
    #[schema(rename = "break")]
    breaks: Breakpoints,
}

/// A turn's input as a schema: the pack's input fields, or a line of text the pack reads.
fn turn_input() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Object).description(Some("The pack's input fields.")))
        .item(ObjectBuilder::new().schema_type(Type::String).description(Some("A line a person typed.")))
        .description(Some("The input: a map of the pack's input fields, or a line a person typed."))
        .into()
}

/// A fork: the checkpoint of the session to start from.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewFork {
    /// The checkpoint.
    checkpoint: u64,
    /// State fields to change in the fork (each value replaces the field's); the session it
    /// leaves is untouched.
    #[serde(default)]
    #[schema(value_type = Object)]
    set: serde_json::Map<String, Value>,
}

/// Who may call `packs`, and the errors it answers of its own.
pub(super) const PACKS: Facts =
    Facts::keys(&[O, I, S]).note("the packs the key sees: an issued key's, a session's own");

/// `GET /v1/packs`: every pack with the version serving, its status (`ok`; `rejected` when the
/// newest edit was refused and an older version serves; `error` when none ever loaded), the
/// newest error and its diagnostics.
#[utoipa::path(get, path = "/v1/packs", operation_id = "listPacks", tag = "packs", responses(
    (status = 200, description = "Every pack", body = PackList),
))]
pub(super) async fn packs(State(s): State<Shared>, Extension(access): Extension<Access>) -> ApiResult<Json<PackList>> {
    // A key limited to some packs (or a session's key, to its session's) sees those alone.
    let shown = access.packs_shown(&s).await?;
    let packs = s
        .engine
        .packs()
        .status()
        .into_iter()
        .filter(|status| shown.as_ref().is_none_or(|packs| packs.contains(&status.name)))
        .map(|status| PackEntry {
            status: match (&status.pack, &status.error) {
                (_, None) => "ok",
                (Some(_), Some(_)) => "rejected",
                (None, Some(_)) => "error",
            },
            last_error: status.error.as_ref().map(|e| e.to_string()),
            diagnostics: status.error.as_ref().map(|e| e.all().map(Diagnostic::of).collect()).unwrap_or_default(),
            reloads: status.reloads,
            warnings: status
                .pack
                .as_ref()
                .map(|p| p.warnings().iter().map(Diagnostic::of).collect())
                .unwrap_or_default(),
            version: status.pack.as_ref().map(|p| p.version().to_owned()),
            declared: status.pack.as_ref().map(|p| p.info()),
            name: status.name,
        })
        .collect();
    Ok(Json(PackList { packs, simulate_turns: s.settings.simulate_turns }))
}

/// Who may call `graph`, and the errors it answers of its own.
pub(super) const GRAPH: Facts = Facts::keys(&[O, I, S])
    .note("the packs the key sees")
    .answers(&[Code::Engine(ErrorKind::NotFound), Code::Engine(ErrorKind::Pack)]);

/// `GET /v1/packs/{pack}/graph`: the pack's graph, as its parts and drawn as SVG (the drawing
/// `ruleweave graph --html` makes), for the console to show and mark a turn's route on.
#[utoipa::path(get, path = "/v1/packs/{pack}/graph", operation_id = "packGraph", tag = "packs", params(("pack" = String, Path, description = "The pack")), responses(
    (status = 200, description = "The graph", body = PackGraph),
))]
pub(super) async fn graph(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    PackName(pack): PackName,
) -> ApiResult<Json<PackGraph>> {
    if let Some(shown) = access.packs_shown(&s).await?
        && !shown.contains(&pack)
    {
        return Err(ApiError::new(Code::Forbidden, format!("this key sees {}, not `{pack}`", shown.join(", "))));
    }
    let drawing = s.engine.packs().get(&pack)?.drawing();
    Ok(Json(PackGraph { svg: crate::drawing::svg(&drawing), drawing }))
}

/// Who may call `create`, and the errors it answers of its own.
pub(super) const CREATE: Facts =
    Facts::keys(&[O, I]).note("an issued key: of its packs; `\"debug\": true` needs `debug`").answers(&[
        Code::Engine(ErrorKind::NotFound),
        Code::Engine(ErrorKind::Input),
        Code::QuotaExceeded,
        Code::Engine(ErrorKind::Script),
        Code::Engine(ErrorKind::Template),
        Code::Engine(ErrorKind::Limit),
        Code::Engine(ErrorKind::Pack),
        Code::Engine(ErrorKind::Store),
        Code::Engine(ErrorKind::StateTooLarge),
    ]);

/// `POST /v1/sessions`: a new session of a pack.
#[utoipa::path(post, path = "/v1/sessions", operation_id = "createSession", tag = "sessions", request_body = NewSession, responses(
    (status = 201, description = "The new session", body = Opened),
))]
pub(super) async fn create(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    Body(req): Body<NewSession>,
) -> ApiResult<(StatusCode, Json<Opened>)> {
    access.may_play(&req.pack)?;
    access.within_quota(&s).await?;
    if req.debug {
        access.may_debug("a session made for debugging")?;
    }
    // Only packs that exist become metric labels: a client cannot grow the metrics by naming more.
    let label = if s.engine.packs().contains(&req.pack) { req.pack.as_str() } else { "unknown" };
    // A new session runs its pack's `init` and renders its opening: pack work, off the workers.
    if let Some(player) = &req.player {
        ruleweave::check_player(player)
            .map_err(|e| ApiError::new(Code::InvalidRequest, format!("`player`: {}", e.detail())))?;
    }
    let engine = s.engine.clone();
    let (pack, options) = (req.pack.clone(), req.options.clone());
    let how = ruleweave::OpenAs { player: req.player.clone(), debug: req.debug, ..ruleweave::OpenAs::default() };
    let (mut opened, players) = on_pack_thread(&s, &req.pack, move || async move {
        let mut session = engine.open_as(&pack, &options, how).await?;
        let players = session.lobby().await?.map(|l| l.players);
        let body = Opened {
            id: session.id().to_owned(),
            key: None,
            player_keys: None,
            pack,
            state: session.state(),
            display: session.view(),
            forked_from: None,
            variant: session.variant().map(str::to_owned),
        };
        engine.keep(session);
        Ok((body, players))
    })
    .await
    .map_err(|e| turns::failed(&s, label, e))?;
    s.metrics.session_opened(&req.pack);
    keyed(&s, &access, &mut opened, players, req.debug).await?;
    Ok((StatusCode::CREATED, Json(opened)))
}

/// Gives a new session (or fork) its key (one that may debug it when `debug`), a key to each of
/// its lobby's players, and its maker.
/// A task of its own, so a client that hangs up leaves no session without its keys; when they
/// cannot be kept, the session goes too (a session nobody's key reaches would be the operator's
/// alone). A store that keeps no keys (an embedder's own) answers none.
async fn keyed(
    s: &Shared,
    access: &Access,
    opened: &mut Opened,
    players: Option<Vec<String>>,
    debug: bool,
) -> ApiResult<()> {
    let Some(keys) = s.tables().await?.map(|t| t.keys.clone()) else { return Ok(()) };
    let (id, owner) = (opened.id.clone(), access.owner());
    let made = s
        .spawn(async move {
            let keys = &*keys;
            let grant = crate::tables::Grant::Session { session: id.clone(), debug };
            let key = access::issue(keys, "session", &grant).await?;
            let mut player_keys = None;
            if let Some(players) = players {
                let mut made = std::collections::BTreeMap::new();
                for player in players {
                    let grant = crate::tables::Grant::Player { session: id.clone(), player: player.clone() };
                    made.insert(player, access::issue(keys, "player", &grant).await?);
                }
                player_keys = Some(made);
            }
            if let Some(owner) = owner {
                keys.set_owner(&id, &owner).await?;
            }
            Ok::<_, ruleweave::Error>((key, player_keys))
        })
        .await
        .map_err(ApiError::internal)?;
    match made {
        Ok((key, player_keys)) => {
            (opened.key, opened.player_keys) = (Some(key), player_keys);
            Ok(())
        }
        Err(e) => {
            tracing::error!(session = %opened.id, "cannot keep the new session's keys, so it goes: {e}");
            let _ = s.engine.delete(&opened.id).await;
            Err(e.into())
        }
    }
}

/// `GET /v1/sessions?pack=&limit=&before=`: the query of a session listing.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct Listing {
    /// Only this pack's sessions.
    pack: Option<String>,
    /// The most sessions on the page: 1 to 500, 50 when not given.
    limit: Option<u32>,
    /// The `next` of the page before.
    before: Option<String>,
}

/// The most sessions one page lists.
const MOST_LISTED: u32 = 500;

/// Who may call `list`, and the errors it answers of its own.
pub(super) const LIST: Facts =
    Facts::keys(&[O, I]).note("an issued key: the sessions it made").answers(&[Code::InvalidRequest]);

/// `GET /v1/sessions`: sessions newest first, `limit` a page (50; at most 500), of one `pack` or
/// all; `next` is the `before` of the next page (`null` after the last).
#[utoipa::path(get, path = "/v1/sessions", operation_id = "listSessions", tag = "sessions", params(Listing), responses(
    (status = 200, description = "A page of sessions, newest first", body = SessionPage),
))]
pub(super) async fn list(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    query: Result<axum::extract::Query<Listing>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<SessionPage>> {
    let bad = |m: String| ApiError::new(Code::InvalidRequest, m);
    let axum::extract::Query(q) = query.map_err(|e| {
        bad(format!("the query does not fit (pack, limit, before): {}", super::error::query_in_words(&e)))
    })?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=MOST_LISTED).contains(&limit) {
        return Err(bad(format!("limit is 1 to {MOST_LISTED}, not {limit}")));
    }
    let before = match &q.before {
        None => None,
        Some(cursor) => Some(
            cursor
                .split_once('.')
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id)))
                .ok_or_else(|| bad(format!("`{cursor}` is not a cursor this listing gave (its `next`)")))?,
        ),
    };
    // An issued key lists the sessions it made; the operator every one.
    let owned = match access.owner() {
        Some(owner) if !access.is_all() => Some(s.keys().await?.owned(&owner).await?),
        _ => None,
    };
    let query = ruleweave::store::SessionQuery { pack: q.pack.as_deref(), limit, before, only: owned.as_deref() };
    let store = &**s.engine.store();
    let found = ruleweave::store::needs(store, store.index(), "a session index")?.list(query).await?;
    let next =
        (found.len() == limit as usize).then(|| found.last().map(|i| format!("{}.{}", i.created_at, i.id))).flatten();
    let sessions = found
        .into_iter()
        .map(|i| Listed {
            created_at: ruleweave::store::rfc3339_of(i.created_at),
            updated_at: ruleweave::store::rfc3339_of(i.updated_at),
            forked_from: i.parent.map(|(id, checkpoint)| ForkedFrom { id, checkpoint }),
            variant: i.variant,
            id: i.id,
            pack: i.pack,
            pack_version: i.pack_version,
            options: i.options,
            turns: i.turns,
            finished: i.finished,
        })
        .collect();
    Ok(Json(SessionPage { sessions, next }))
}

/// Who may call `session`, and the errors it answers of its own.
pub(super) const SESSION: Facts = Facts::keys(&[O, I, S, P])
    .note("a player follows the game they are in")
    .answers(&[Code::Engine(ErrorKind::NotFound)]);

/// `GET /v1/sessions/{id}`: a session's state and how far it got.
#[utoipa::path(get, path = "/v1/sessions/{id}", operation_id = "getSession", tag = "sessions", params(("id" = String, Path, description = "The session")), responses(
    (status = 200, description = "The session", body = SessionBody),
))]
pub(super) async fn session(State(s): State<Shared>, SessionId(id): SessionId) -> ApiResult<Json<SessionBody>> {
    let live = s.engine.session(&id).await?;
    // A running turn holds the live session (a model call may take a minute): read what the
    // store last committed instead of waiting for it.
    let mut body = match live.try_lock() {
        Some(mut session) => {
            session.refresh().await?;
            session_json(&mut session).await?
        }
        None => session_json(&mut s.engine.resume(&id).await?).await?,
    };
    body.lobby_problem = s.engine.close_problem(&id);
    Ok(Json(body))
}

/// A session as `GET /v1/sessions/{id}` shows it.
async fn session_json(session: &mut ruleweave::Session) -> ApiResult<SessionBody> {
    Ok(SessionBody {
        id: session.id().to_owned(),
        pack: session.pack().name().to_owned(),
        pack_version: session.pack().version().to_owned(),
        options: session.options(),
        state: session.state(),
        turns: session.turns(),
        checkpoint: session.checkpoint(),
        finished: session.is_finished(),
        lobby: session.lobby().await?,
        paused: session.paused(),
        held: session.held_turn().is_some(),
        edited: session.edited_turn().is_some(),
        edited_turn: session.edited_turn(),
        display: session.view(),
        lobby_problem: None,
        variant: session.variant().map(str::to_owned),
    })
}

/// Who may call `delete`, and the errors it answers of its own.
pub(super) const DELETE: Facts = Facts::keys(&[O, I, S]).answers(&[Code::Engine(ErrorKind::NotFound)]);

/// `DELETE /v1/sessions/{id}`.
#[utoipa::path(delete, path = "/v1/sessions/{id}", operation_id = "deleteSession", tag = "sessions", params(("id" = String, Path, description = "The session")), responses(
    (status = 204, description = "Deleted"),
))]
pub(super) async fn delete(State(s): State<Shared>, SessionId(id): SessionId) -> ApiResult<StatusCode> {
    s.engine.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who may call `checkpoints`, and the errors it answers of its own.
pub(super) const CHECKPOINTS: Facts = Facts::keys(&[O, I, S]).answers(&[Code::Engine(ErrorKind::NotFound)]);

/// `GET /v1/sessions/{id}/checkpoints`.
#[utoipa::path(get, path = "/v1/sessions/{id}/checkpoints", operation_id = "listCheckpoints", tag = "sessions", params(("id" = String, Path, description = "The session")), responses(
    (status = 200, description = "Its checkpoints, oldest first", body = CheckpointList),
))]
pub(super) async fn checkpoints(State(s): State<Shared>, SessionId(id): SessionId) -> ApiResult<Json<CheckpointList>> {
    let list = s.engine.checkpoints(&id).await?;
    Ok(Json(CheckpointList { id, checkpoints: list }))
}

/// Who may call `conversation`, and the errors it answers of its own.
pub(super) const CONVERSATION: Facts =
    Facts::keys(&[O, I, S]).answers(&[Code::Engine(ErrorKind::NotFound), Code::Engine(ErrorKind::Template)]);

/// `GET /v1/sessions/{id}/conversation`: what a person saw, turn by turn from the start (a fork's
/// from the start of the session it left): each turn's input and its display, rendered by the
/// pack's templates over the state the turn left. Templates only (no script runs), on the
/// engine's threads: a long session renders many.
#[utoipa::path(get, path = "/v1/sessions/{id}/conversation", operation_id = "getConversation", tag = "sessions", params(("id" = String, Path, description = "The session")), responses(
    (status = 200, description = "What a person saw, turn by turn", body = ConversationBody),
))]
pub(super) async fn conversation(
    State(s): State<Shared>,
    SessionId(id): SessionId,
) -> ApiResult<Json<ConversationBody>> {
    let turns = s.engine.conversation(&id).await?;
    Ok(Json(ConversationBody { id, turns }))
}

/// How a replay answers the calls its recording cannot.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplayHow {
    /// Ask the models the pack plays on (the stand-in on a stand-in server) for a call whose
    /// prompt changed or that the recording lacks; otherwise such a call fails, as it would for
    /// real, and is noted.
    #[serde(default)]
    live: bool,
}

/// Who may call `replay`, and the errors it answers of its own.
pub(super) const REPLAY: Facts = Facts::keys(&[O, I, S]).note("needs `debug`").answers(&[
    Code::Engine(ErrorKind::NotFound),
    Code::Engine(ErrorKind::Input),
    Code::Engine(ErrorKind::Script),
    Code::Engine(ErrorKind::Template),
    Code::Engine(ErrorKind::Limit),
]);

/// `POST /v1/sessions/{id}/replay`: the session played again on its pack as it is now, with the
/// recorded model and search answers; what changed, turn by turn, and the state it came to.
#[utoipa::path(post, path = "/v1/sessions/{id}/replay", operation_id = "replaySession", tag = "sessions", params(("id" = String, Path, description = "The session")), request_body(content = Option<ReplayHow>, description = "How calls the recording cannot answer are answered; no body: they fail"), responses(
    (status = 200, description = "What changed, turn by turn", body = ReplayBody),
))]
pub(super) async fn replay(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    SessionId(id): SessionId,
    MaybeBody(how): MaybeBody<ReplayHow>,
) -> ApiResult<Json<ReplayBody>> {
    use ruleweave_lab::replay::{Fallback, Recording, Replayer};
    access.may_debug("a replay")?;
    // Every turn of the session played again: pack work, on the pack's slots, off the workers.
    let pack = s.engine.info(&id).await?.pack;
    let engine = s.engine.clone();
    let body = on_pack_thread(&s, &pack, move || async move {
        let rec = Recording::from_store(&engine, &id).await?;
        let fallback = if how.live { Fallback::Serving } else { Fallback::Fail };
        let diffs = Replayer::new(&engine, &rec.pack, fallback)?.replay(&rec).await?;
        let changed = diffs.iter().filter(|d| !d.is_same()).count();
        let summary: Vec<String> = diffs.iter().map(|d| d.summary()).collect();
        let state = diffs.last().filter(|d| d.error.is_none()).map(|d| d.state.clone());
        let first_changed = diffs.iter().find(|d| !d.is_same()).map(|d| d.turn);
        Ok(ReplayBody { id, pack: rec.pack, changed, turns: diffs, summary, first_changed, state })
    })
    .await?;
    Ok(Json(body))
}

/// Who may call `fork`, and the errors it answers of its own.
pub(super) const FORK: Facts = Facts::keys(&[O, I, S])
    .note("the fork's key is answered; the key that made it reaches it; `set` needs `debug`")
    .answers(&[
        Code::Engine(ErrorKind::NotFound),
        Code::Engine(ErrorKind::Input),
        Code::QuotaExceeded,
        Code::Engine(ErrorKind::Script),
        Code::Engine(ErrorKind::Template),
        Code::Engine(ErrorKind::Limit),
        Code::Engine(ErrorKind::StateTooLarge),
    ]);

/// `POST /v1/sessions/{id}/fork`: a new session from an earlier checkpoint.
#[utoipa::path(post, path = "/v1/sessions/{id}/fork", operation_id = "forkSession", tag = "sessions", params(("id" = String, Path, description = "The session")), request_body = NewFork, responses(
    (status = 201, description = "The new session", body = Opened),
))]
pub(super) async fn fork(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    SessionId(id): SessionId,
    Body(req): Body<NewFork>,
) -> ApiResult<(StatusCode, Json<Opened>)> {
    if !req.set.is_empty() {
        access.may_debug("a fork with `set`")?;
    }
    access.within_quota(&s).await?;
    // A fork made with a key that may debug its session may debug the fork too.
    let debug = matches!(access, Access::Session { debug: true, .. });
    let pack = s.engine.info(&id).await?.pack;
    let engine = s.engine.clone();
    let (seq, set) = (req.checkpoint, req.set);
    let mut body = on_pack_thread(&s, &pack, move || async move {
        let session = engine.fork_with(&id, seq, set).await?;
        let body = Opened {
            id: session.id().to_owned(),
            key: None,
            player_keys: None,
            pack: session.pack().name().to_owned(),
            state: session.state(),
            display: session.view(),
            forked_from: Some(ForkedFrom { id, checkpoint: seq }),
            variant: session.variant().map(str::to_owned),
        };
        engine.keep(session);
        Ok(body)
    })
    .await?;
    keyed(&s, &access, &mut body, None, debug).await?;
    Ok((StatusCode::CREATED, Json(body)))
}

/// Who may call `turn`, and the errors it answers of its own.
pub(super) const TURN: Facts =
    Facts::keys(&[O, I, S]).note("a breakpoint needs `debug`").plays_turns().streams(Streams::Turn);

/// `POST /v1/sessions/{id}/turns`: runs a turn; with `Accept: text/event-stream`, streams its
/// events as they happen and the result last.
#[utoipa::path(post, path = "/v1/sessions/{id}/turns", operation_id = "playTurn", tag = "sessions", params(("id" = String, Path, description = "The session")), request_body = NewTurn, responses(
    (status = 200, description = "The turn's result; with `Accept: text/event-stream`, its events as they happen (named by their `type`: the engine's event kinds) and `result` (the JSON body) or `error` last", content(
        (TurnBody = "application/json"),
        (String = "text/event-stream"),
    )),
))]
pub(super) async fn turn(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    SessionId(id): SessionId,
    headers: HeaderMap,
    Body(req): Body<NewTurn>,
) -> ApiResult<Response> {
    if !req.breaks.is_empty() {
        access.may_debug("a breakpoint")?;
    }
    let live = s.engine.session(&id).await?;
    answer_turn(&s, &headers, live, Move::Input(req.input), req.breaks, access.by()).await
}

/// Plays `what` on `live` and answers it: the turn's JSON body, or (with `Accept:
/// text/event-stream`) its events as they happen and the result last. The turn is a task of its
/// own: it finishes (and is recorded) when its client has gone.
pub(super) async fn answer_turn(
    s: &Shared,
    headers: &HeaderMap,
    live: ruleweave::LiveSession,
    what: Move,
    breaks: Breakpoints,
    by: Option<String>,
) -> ApiResult<Response> {
    let state = s.clone();
    if !sse::accepts(headers, "text/event-stream") {
        let task = s.spawn(async move { turns::play(&state, live, what, breaks, None, by).await });
        let played = task.await.map_err(ApiError::internal)??;
        return Ok(Json(turn_body(played)).into_response());
    }
    let (tx, response) = sse::channel();
    let events = tx.clone();
    let sink: EventSink = Arc::new(move |e: &Event| {
        let _ = events.send(sse::event(Some(e.kind()), e));
    });
    s.spawn(async move {
        let last = match turns::play(&state, live, what, breaks, Some(sink), by).await {
            Ok(played) => sse::event(Some("result"), &turn_body(played)),
            Err(e) => {
                let e = ApiError::from(e);
                let error = StreamErrorDetail { code: e.code(), message: e.message };
                sse::event(Some("error"), &StreamError { error })
            }
        };
        let _ = tx.send(last);
    });
    Ok(response)
}

/// A turn's result as the API answers it: `{turn, output, state, display}`, and `paused`
/// (`{after, next}`) when the turn stopped at a pause point of the pack.
fn turn_body(played: Played) -> TurnBody {
    let Played { result: r, state } = played;
    let held = r.paused.as_ref().is_some_and(|p| p.breakpoint);
    TurnBody {
        turn: r.turn,
        output: r.output,
        state,
        display: r.display,
        paused: r.paused,
        held,
        checkpoint: r.checkpoint,
        edited: r.edited_turn.is_some(),
        edited_turn: r.edited_turn,
        variant: r.variant,
    }
}

/// A player's post to a lobby round: an answer, joining or leaving.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewInput {
    /// The player.
    player: String,
    /// The answer (the pack's input).
    #[serde(default)]
    #[schema(value_type = Object)]
    input: Value,
    /// The round the answer is meant for.
    round: Option<u64>,
    /// The player joins from the next round on.
    #[serde(default)]
    join: bool,
    /// The player leaves.
    #[serde(default)]
    leave: bool,
}

/// Who may call `input`, and the errors it answers of its own.
pub(super) const INPUT: Facts =
    Facts::keys(&[O, I, S, P]).note("a player key: its own answers and leaving").plays_turns();

/// `POST /v1/sessions/{id}/inputs`: one player's answer to the lobby round under way
/// (`{"player", "input"}`, optionally the `round` it is meant for), or their joining
/// (`{"player", "join": true}`) or leaving (`{"player", "leave": true}`). Answers the lobby as
/// it stands after the post, with the turn that closed the round when this post did.
#[utoipa::path(post, path = "/v1/sessions/{id}/inputs", operation_id = "postInput", tag = "sessions", params(("id" = String, Path, description = "The session")), request_body = NewInput, responses(
    (status = 200, description = "The lobby after the post, with the turn that closed the round when this post did", body = PostedBody),
    ))]
pub(super) async fn input(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    SessionId(id): SessionId,
    Body(req): Body<NewInput>,
) -> ApiResult<Json<PostedBody>> {
    let kind = match (req.join, req.leave) {
        (false, false) => ruleweave::lobby::InputKind::Answer,
        (true, false) => ruleweave::lobby::InputKind::Join,
        (false, true) => ruleweave::lobby::InputKind::Leave,
        (true, true) => {
            return Err(ApiError::new(Code::Engine(ErrorKind::Input), "join or leave, not both"));
        }
    };
    if kind == ruleweave::lobby::InputKind::Answer && req.input.is_null() {
        return Err(ApiError::new(Code::Engine(ErrorKind::Input), "an answer needs an `input`"));
    }
    // A player's key answers for its player alone, and leaves; joining is the host's.
    if let Access::Player { player, .. } = &access {
        if kind == ruleweave::lobby::InputKind::Join {
            return Err(ApiError::new(Code::Forbidden, "a player key cannot add players: the host joins them"));
        }
        if *player != req.player {
            return Err(ApiError::new(
                Code::Forbidden,
                format!("this key answers for {player:?}, not {:?}", req.player),
            ));
        }
    }
    let post = ruleweave::lobby::Post { player: req.player.clone(), kind, input: req.input, round: req.round };
    let live = s.engine.session(&id).await?;
    // A player's post gives a round the sweep gave up on another try.
    s.engine.forget_close_failures(&id);
    let keys = s.tables().await?.map(|t| t.keys.clone());
    let posted = on_turn_thread(&s, live, move |session| {
        Box::pin(async move {
            let posted = session.post(post).await?;
            // With the session still locked, so no other post comes in between: a player who
            // joins gets their key, one who leaves keeps none, and so does one the round's turn
            // took off the table.
            let mut key = None;
            if let Some(keys) = keys.as_deref() {
                let (id, player) = (session.id().to_owned(), req.player.clone());
                match kind {
                    ruleweave::lobby::InputKind::Join => {
                        let grant = crate::tables::Grant::Player { session: id, player };
                        key = Some(access::issue(keys, "player", &grant).await?);
                    }
                    ruleweave::lobby::InputKind::Leave => keys.drop_player_key(&id, &player).await?,
                    ruleweave::lobby::InputKind::Answer => {}
                }
            }
            if posted.closed.is_some() {
                turns::tend_player_keys(keys.as_deref(), session).await;
            }
            Ok((posted, key))
        })
    })
    .await;
    let (pack, (posted, key)) = posted.map_err(|(pack, e)| ApiError::from(turns::failed(&s, &pack, e)))?;
    if let Some(turn) = &posted.closed {
        s.metrics.turn(&pack, turn);
    }
    let mut body = posted_json(&posted);
    body.player_key = key;
    Ok(Json(body))
}

fn posted_json(p: &ruleweave::Posted) -> PostedBody {
    PostedBody {
        lobby: p.lobby.clone(),
        closed: p.closed.as_ref().map(|t| ClosedTurn {
            turn: t.turn,
            output: t.output.clone(),
            finished: t.finished,
            display: t.display.clone(),
        }),
        close_error: p.close_error.clone(),
        player_key: None,
    }
}

/// Who may call `metrics`, and the errors it answers of its own.
pub(super) const METRICS: Facts = Facts::keys(&[O]);

/// `GET /metrics`: Prometheus' text format.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", tag = "server", responses(
    (status = 200, description = "The server's metrics, in Prometheus' text format", content_type = "text/plain", body = String),
))]
pub(super) async fn metrics(State(s): State<Shared>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.render()).into_response()
}

/// Who may call `healthz`, and the errors it answers of its own.
pub(super) const HEALTHZ: Facts = Facts::open();

/// `GET /healthz`: 200 while the store takes writes, 503 saying why when it does not (its file
/// deleted or made read-only under the server, a database gone).
#[utoipa::path(get, path = "/healthz", operation_id = "health", tag = "server", security(()), responses(
    (status = 200, description = "The store takes writes", body = Health),
    (status = 503, description = "The store does not take writes, and why", body = Health),
))]
pub(super) async fn healthz(State(s): State<Shared>) -> Response {
    let store = s.engine.store();
    match store.health().await {
        Ok(()) => Json(Health { status: "ok", store: store.kind(), error: None }).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Health { status: "unhealthy", store: store.kind(), error: Some(e.detail().to_owned()) }),
        )
            .into_response(),
    }
}

/// The console page.
const CONSOLE: &str = include_str!("console.html");

/// `GET /`: the web console, with headers that keep it from being framed, sniffed or made to run
/// any script but its own (its one inline script, by hash; it fetches only from this server).
pub(super) async fn console() -> Response {
    static POLICY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        use base64::Engine as _;
        use sha2::Digest as _;
        let script =
            CONSOLE.split_once("<script>").and_then(|(_, rest)| rest.split_once("</script>")).map_or("", |(s, _)| s);
        let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script.as_bytes()));
        format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
    });
    html_page(CONSOLE.to_owned(), &POLICY)
}

/// An HTML page as every one the server sends goes out: with `policy` as its
/// Content-Security-Policy, never framed, never sniffed as something else, sending no referrer.
pub(super) fn html_page(html: String, policy: &str) -> Response {
    let headers = [
        (header::CONTENT_SECURITY_POLICY, policy),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    (headers, Html(html)).into_response()
}

pub(super) async fn no_route() -> ApiError {
    ApiError::new(Code::Engine(ruleweave::ErrorKind::NotFound), "no such route; the API is under /v1 (see README)")
}

pub(super) async fn wrong_method() -> ApiError {
    ApiError::new(Code::MethodNotAllowed, "this route does not take that method")
}

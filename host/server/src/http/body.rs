//! The bodies of the HTTP API as types: what each handler answers, shared with the OpenAPI
//! document (`GET /openapi.json`, `docs/openapi.json`) that is generated from them.
//!
//! Where a pack's own data passes through (a session's state, a turn's output, the options a
//! session opened with) the type is `serde_json::Value`: its shape is the pack's, described by
//! the pack's manifest, not by the API.

use ruleweave::lobby::LobbyStatus;
use ruleweave::store::CheckpointInfo;
use ruleweave::{PausedAt, Said, View};
use ruleweave_lab::replay::TurnDiff;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// An error: `{"error": {"code", "message", "type", "param"}}`, the shape OpenAI's API answers
/// in, so its SDKs raise their usual exceptions on the chat face.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ErrorDetail {
    /// A stable name for the error (`not_found`, `invalid_input`, `conflict`, ...).
    pub code: &'static str,
    /// What happened, in words, naming the place when there is one.
    pub message: String,
    /// The error's class, from its status (`invalid_request_error`, `authentication_error`,
    /// `permission_error`, `rate_limit_error`, `server_error`).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Always `null` (OpenAI's shape has it).
    #[schema(value_type = Option<String>)]
    pub param: Option<()>,
}

/// A session and checkpoint another session was forked from.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(super) struct ForkedFrom {
    /// The session.
    pub id: String,
    /// Its checkpoint the fork starts from.
    pub checkpoint: u64,
}

/// A new session: `POST /v1/sessions` and `POST /v1/sessions/{id}/fork`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Opened {
    /// Its id.
    pub id: String,
    /// Its key, shown once: it (or the operator's token) reads, plays, forks, replays, streams and
    /// deletes this session, and no other (absent only when the store keeps no keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// For a lobby: each starting player's key (a player key answers for its player alone), for
    /// the host to hand out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub player_keys: Option<std::collections::BTreeMap<String, String>>,
    /// Its pack.
    pub pack: String,
    /// Its first state (the pack's fields).
    #[schema(value_type = Object)]
    pub state: Value,
    /// What a person sees: the opening, the status line.
    pub display: View,
    /// For a fork, where it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The variant of its pack's experiment it plays (absent when the pack has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A page of sessions, newest first: `GET /v1/sessions`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SessionPage {
    /// The sessions.
    pub sessions: Vec<Listed>,
    /// The `before` of the next page; `null` after the last.
    pub next: Option<String>,
}

/// A session as a listing shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Listed {
    /// Its id.
    pub id: String,
    /// Its pack.
    pub pack: String,
    /// The pack version its newest turn ran on.
    pub pack_version: String,
    /// The options it opened with.
    #[schema(value_type = Object)]
    pub options: Value,
    /// Finished turns.
    pub turns: u64,
    /// Whether it is over.
    pub finished: bool,
    /// When it opened (RFC 3339).
    pub created_at: String,
    /// When its newest checkpoint was written (RFC 3339).
    pub updated_at: String,
    /// Where it was forked from, if it was.
    pub forked_from: Option<ForkedFrom>,
    /// The variant of its pack's experiment it plays (absent when the pack has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A session's state and how far it got: `GET /v1/sessions/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SessionBody {
    /// Its id.
    pub id: String,
    /// Its pack.
    pub pack: String,
    /// The pack version it is on.
    pub pack_version: String,
    /// The options it opened with.
    #[schema(value_type = Object)]
    pub options: Value,
    /// Its state (the pack's fields).
    #[schema(value_type = Object)]
    pub state: Value,
    /// Finished turns.
    pub turns: u64,
    /// Its newest checkpoint.
    pub checkpoint: u64,
    /// Whether it is over.
    pub finished: bool,
    /// Where its lobby round stands (`null` for a pack without a lobby).
    pub lobby: Option<LobbyStatus>,
    /// Where its last turn paused, or where a breakpoint holds its turn under way (`null` when
    /// neither).
    pub paused: Option<PausedAt>,
    /// A breakpoint holds its turn under way (`paused` says where): `POST .../resume` goes on.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// Its state was set by hand (`PATCH .../state`, or a fork with `set`) at some point: a win
    /// on it is no real win. Absent for a state only turns made.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
    /// The turn the state was first set by hand in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_turn: Option<u64>,
    /// What a person sees.
    pub display: View,
    /// Why the server could not close its lobby round at its timeout, while that lasts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lobby_problem: Option<String>,
    /// The variant of its pack's experiment it plays (absent when the pack has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A turn's result: `POST /v1/sessions/{id}/turns` (and the `result` event of its stream).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TurnBody {
    /// The turn's number.
    pub turn: u64,
    /// What the turn said (the pack's output fields).
    #[schema(value_type = Object)]
    pub output: Value,
    /// The state after it.
    #[schema(value_type = Object)]
    pub state: Value,
    /// What a person sees after it.
    pub display: View,
    /// Where it stopped: at a pause point of the pack, or (with `held`) at a breakpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<PausedAt>,
    /// A breakpoint holds the turn where `paused` says, until `POST /v1/sessions/{id}/resume`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// The checkpoint that recorded it (held at a breakpoint: the one that holds it).
    pub checkpoint: u64,
    /// The session's state was set by hand by then (see `SessionBody::edited`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
    /// The turn the state was first set by hand in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_turn: Option<u64>,
    /// The variant of its pack's experiment it plays (absent when the pack has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A state edited by hand: `PATCH /v1/sessions/{id}/state`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Edited {
    /// The whole state after the edit.
    #[schema(value_type = Object)]
    pub state: Value,
    /// The checkpoint (of kind `edit`) that records it.
    pub checkpoint: u64,
    /// Fields a node that already ran computed together with an edited one (`merit_has_earned_it`
    /// from `merit_score` by `merit_check`): they still hold what the old value gave.
    pub derived: Vec<ruleweave::Derived>,
    /// The fields the rest of the turn (between turns: the next turn) writes again: an edit of
    /// one of them is overwritten when its node runs.
    pub recomputed_next: Vec<String>,
    /// The turn the session's state was first set by hand in (this edit's, or an earlier one's).
    pub edited_turn: Option<u64>,
}

/// A session's checkpoints, oldest first: `GET /v1/sessions/{id}/checkpoints`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CheckpointList {
    /// The session.
    pub id: String,
    /// Its checkpoints.
    pub checkpoints: Vec<CheckpointInfo>,
}

/// What a person saw, turn by turn: `GET /v1/sessions/{id}/conversation`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ConversationBody {
    /// The session.
    pub id: String,
    /// Each turn's input and display, from the start.
    pub turns: Vec<Said>,
}

/// A session played again on its pack as it is now: `POST /v1/sessions/{id}/replay`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReplayBody {
    /// The session.
    pub id: String,
    /// Its pack.
    pub pack: String,
    /// How many turns came out differently.
    pub changed: usize,
    /// Each turn's differences.
    pub turns: Vec<TurnDiff>,
    /// Each turn's differences in a line.
    pub summary: Vec<String>,
    /// The first turn that came out differently, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_changed: Option<u64>,
    /// The state after the last turn replayed (absent when there is none): what the rules as
    /// they are now make of the session's moves, to go on from (`PATCH .../state`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub state: Option<Value>,
}

/// A lobby post's outcome: `POST /v1/sessions/{id}/inputs`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PostedBody {
    /// The lobby as it stands after the post.
    pub lobby: LobbyStatus,
    /// The turn that closed the round, when this post did.
    pub closed: Option<ClosedTurn>,
    /// Why closing the round failed, when it did (the post stays recorded).
    pub close_error: Option<String>,
    /// For a join: the new player's key, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub player_key: Option<String>,
}

/// The turn that closed a lobby round.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ClosedTurn {
    /// Its number.
    pub turn: u64,
    /// What it said.
    #[schema(value_type = Object)]
    pub output: Value,
    /// Whether the session is over after it.
    pub finished: bool,
    /// What a person sees after it.
    pub display: View,
}

/// A pack's graph: `GET /v1/packs/{pack}/graph`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PackGraph {
    /// Its nodes (each with its kind and what it runs) and edges (each with how it is taken).
    pub drawing: ruleweave::Drawing,
    /// The graph drawn as one `<svg>` element: laid out in layers, each node a
    /// `<g data-node="NAME">` in its kind's shape, routes dashed and labelled.
    pub svg: String,
}

/// Every pack: `GET /v1/packs`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PackList {
    /// Each pack.
    pub packs: Vec<PackEntry>,
    /// The most turns one simulate request plays on this server (games × players × a pack's
    /// `max_turns`; `[server] simulate_turns`): a larger batch is refused, or runs as a job.
    pub simulate_turns: usize,
}

/// A pack as the server serves it: what it declares, and how its loading went.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PackEntry {
    /// Its name.
    pub name: String,
    /// The version serving (`null` when none ever loaded).
    pub version: Option<String>,
    /// `ok`; `rejected` when the newest edit was refused and an older version serves; `error`
    /// when none ever loaded.
    pub status: &'static str,
    /// The newest error.
    pub last_error: Option<String>,
    /// The newest error's problems, each with its place.
    pub diagnostics: Vec<Diagnostic>,
    /// How many times it was reloaded.
    pub reloads: u64,
    /// What the version serving loaded with but should be told of.
    pub warnings: Vec<Diagnostic>,
    /// What the version serving declares (nothing when no version ever loaded).
    #[serde(flatten)]
    pub declared: Option<ruleweave::PackInfo>,
}

/// A problem in a pack's files, with its place when it has one.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Diagnostic {
    /// What is wrong.
    pub message: String,
    /// Its kind (`invalid_pack`, `script`, ...).
    pub code: &'static str,
    /// The file, relative to the root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its line (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Its column (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
}

impl Diagnostic {
    /// An engine error as a diagnostic.
    pub(super) fn of(e: &ruleweave::Error) -> Self {
        let origin = e.origin();
        Diagnostic {
            message: e.detail().to_owned(),
            code: e.kind().code(),
            file: origin.map(|o| o.file.clone()),
            line: origin.map(|o| o.line),
            column: origin.map(|o| o.column),
        }
    }
}

/// The server's health: `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Health {
    /// `ok` or `unhealthy`.
    pub status: &'static str,
    /// The store's kind (`memory`, `sqlite`, `postgres`).
    pub store: &'static str,
    /// Why it is unhealthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The packs as models: `GET /v1/models`, in OpenAI's list shape.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    /// Each pack, and each pack with an option's value (`party:nsfw`).
    pub data: Vec<ModelEntry>,
}

/// A pack as a model.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ModelEntry {
    /// The model name a chat request gives: the pack, and options (`debate:strict`).
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// When the server started, unix seconds.
    pub created: u64,
    /// Always `ruleweave`.
    pub owned_by: &'static str,
}

/// A chat completion: one turn of the pack the model names (`POST /v1/chat/completions`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChatCompletion {
    /// `chatcmpl-SESSION-TURN`.
    pub id: String,
    /// Always `chat.completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model the request named.
    pub model: String,
    /// The one reply.
    pub choices: Vec<ChatChoice>,
    /// Tokens the turn's model calls spent.
    pub usage: Usage,
    /// Where the conversation stands in ruleweave's terms.
    pub ruleweave: ChatSession,
}

/// The one reply of a chat completion.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChatChoice {
    /// Always 0.
    pub index: u32,
    /// The reply.
    pub message: AssistantMessage,
    /// Always `stop`.
    pub finish_reason: &'static str,
    /// Always `null`.
    #[schema(value_type = Option<Object>)]
    pub logprobs: Option<()>,
}

/// What the game said.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AssistantMessage {
    /// Always `assistant`.
    pub role: &'static str,
    /// The reply as a person reads it.
    pub content: String,
}

/// Tokens spent, in OpenAI's shape.
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub(super) struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
}

/// A chat's session, checkpoint and turn (also in the `x-ruleweave-session` header).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChatSession {
    /// The session.
    pub session: String,
    /// The turn this reply ends.
    pub turn: u64,
    /// The checkpoint the conversation reached.
    pub checkpoint: u64,
    /// Whether the game is over.
    pub finished: bool,
}

/// One chunk of a streamed chat completion (`stream: true`): the data of each event until
/// `[DONE]`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChatChunk {
    /// `chatcmpl-SESSION`.
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model the request named.
    pub model: String,
    /// The piece of the reply (none in the last chunk, which carries the usage when asked).
    pub choices: Vec<ChunkChoice>,
    /// Tokens spent, in the last chunk when `stream_options.include_usage` asked for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A piece of a streamed reply.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChunkChoice {
    /// Always 0.
    pub index: u32,
    /// The piece: the role first, then text.
    pub delta: Delta,
    /// `stop` in the last piece, else `null`.
    pub finish_reason: Option<&'static str>,
    /// Always `null`.
    #[schema(value_type = Option<Object>)]
    pub logprobs: Option<()>,
}

/// A piece of a streamed reply.
#[derive(Debug, Default, Serialize, ToSchema)]
pub(super) struct Delta {
    /// `assistant`, in the first piece.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// The text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A reload, as `GET /v1/events` sends it (`event: reload`).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReloadEvent {
    /// The pack.
    pub pack: String,
    /// `reloaded`, or `rejected` (the last good version keeps serving).
    pub status: ruleweave::ReloadStatus,
    /// The version serving after it.
    pub version: Option<String>,
    /// The version before it.
    pub previous: Option<String>,
    /// Why a rejected edit was refused, each problem with its place.
    pub diagnostics: Vec<Diagnostic>,
    /// The files whose content changed.
    pub files: Vec<String>,
    /// When, unix milliseconds.
    pub at: i64,
    /// How long loading took, microseconds.
    pub took_us: u64,
}

/// A followed session as it stands: the `state` and `turn` events of
/// `GET /v1/sessions/{id}/events`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Standing {
    /// Finished turns (for `turn`, the turn just recorded).
    pub turn: u64,
    /// The pack's output fields.
    #[schema(value_type = Object)]
    pub output: Value,
    /// Where its lobby round stands (`null` for a pack without a lobby).
    pub lobby: Option<LobbyStatus>,
    /// Whether it is over (the stream ends after this).
    pub finished: bool,
    /// What a person sees.
    pub display: View,
}

/// A player's post to a followed lobby: the `input` event of `GET /v1/sessions/{id}/events`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Posted {
    /// The round.
    pub round: u64,
    /// The player.
    pub player: String,
    /// `answer`, `join` or `leave`.
    pub kind: ruleweave::lobby::InputKind,
    /// The lobby after it.
    pub lobby: Option<LobbyStatus>,
}

/// The `error` event that ends a streamed turn that failed.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct StreamError {
    /// What went wrong.
    pub error: StreamErrorDetail,
}

/// What went wrong in a streamed turn.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct StreamErrorDetail {
    /// A stable name for the error.
    pub code: &'static str,
    /// What happened, in words.
    pub message: String,
}

// ---- the chat face's requests ---------------------------------------------------------------

/// A chat completion request, in OpenAI's shape: the model names a pack (and options), the
/// messages are the conversation so far. Other fields of OpenAI's request are accepted and
/// ignored (a game's rules, not the request, set temperature and the like).
#[derive(serde::Deserialize, ToSchema)]
pub(super) struct ChatRequest {
    /// A pack, with options (`debate:strict`; see `GET /v1/models`).
    pub(super) model: String,
    /// The conversation: `system`, `developer`, `user` and `assistant` messages.
    pub(super) messages: Vec<Message>,
    /// Stream the reply as chunks.
    #[serde(default)]
    pub(super) stream: Option<bool>,
    /// With `include_usage`, the last chunk carries the usage.
    #[serde(default)]
    pub(super) stream_options: Option<StreamOptions>,
    /// Options of the pack, by name, beside those the model names.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub(super) metadata: Option<serde_json::Map<String, Value>>,
    /// How many replies: 1 (a turn has one).
    #[serde(default)]
    pub(super) n: Option<u32>,
    /// Who plays (OpenAI's end-user id; at most 128 printable characters): for a pack with an
    /// experiment, the key a new conversation's variant is chosen by.
    #[serde(default)]
    pub(super) user: Option<String>,
}

/// One message of a conversation.
#[derive(serde::Deserialize, ToSchema)]
pub(super) struct Message {
    /// `system`, `developer`, `user` or `assistant`.
    pub(super) role: String,
    /// Its text, or a list of parts whose text parts are read.
    #[serde(default)]
    #[schema(schema_with = message_content)]
    pub(super) content: Value,
}

/// A message's content as a schema: text, or OpenAI's list of content parts.
fn message_content() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String))
        .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::Object)))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .into()
}

/// How a streamed reply ends.
#[derive(serde::Deserialize, Default, ToSchema)]
pub(super) struct StreamOptions {
    /// The last chunk carries the usage.
    #[serde(default)]
    pub(super) include_usage: bool,
}

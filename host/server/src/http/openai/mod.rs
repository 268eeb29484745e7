//! The chat face: OpenAI's Chat Completions protocol on `serve`, so the chat clients people
//! already use (Open WebUI, LibreChat, the OpenAI SDKs) play packs with no new client.
//!
//! - `GET /v1/models` lists the packs that load (a pack whose newest edit was refused serves its
//!   last good version), and a `pack:value` model for each non-default value of an option that
//!   lists its values (`pirate:hard`; `debate:pause=rounds` when the value is an option's name).
//! - `POST /v1/chat/completions` plays a turn: the model names the pack and its options
//!   (`pirate:hard`, `debate:rounds=2`, and/or the request's `metadata`), the last user message is
//!   the turn's input, the assistant message is the pack's `display.reply`.
//!
//! Chat clients are stateless: they send the whole conversation every time. Each reply is linked,
//! in the store, to where the session stands: the key is a hash of the conversation so far (the
//! model, then each user and assistant message, trimmed). A request looks up the keys of its
//! own prefixes that end with an assistant message and goes on from the longest one found: the
//! same session when it still stands there, else a fork from that checkpoint (a regenerated or
//! edited message). No session is scanned, and every replica on the store finds the same link.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use ruleweave::{ErrorKind, LiveSession, Opening, OpeningKind, Pack, TurnResult};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::access::Access;
use super::body::{self, ChatCompletion, ChatRequest, ModelEntry, ModelList};
use super::error::{ApiResult, Code, Face};
use super::extract::{Body, ModelName};
use super::routes::{Facts, I, O};
use super::turns::{self, Move};
use super::{ApiError, Shared};
use reply::{Say, reply, shown, stream};

mod reply;

/// The header a client pins a session with, and the response names it in.
const SESSION_HEADER: &str = "x-ruleweave-session";

/// The most turns one request plays to catch up with a conversation the store has no record of
/// (or whose end it lost): each is a full turn with its model calls.
const MAX_CATCH_UP: usize = 16;

/// Who said a message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

/// Who may call `models`, and the errors it answers of its own.
pub(super) const MODELS: Facts = Facts::keys(&[O, I]).chat();

/// `GET /v1/models`: the packs as models, in OpenAI's list shape.
#[utoipa::path(get, path = "/v1/models", operation_id = "listModels", tag = "chat", responses(
    (status = 200, description = "The packs as models", body = ModelList),
))]
pub(super) async fn models(State(s): State<Shared>, Extension(access): Extension<Access>) -> Json<ModelList> {
    let mut data = Vec::new();
    for status in s.engine.packs().status() {
        let Some(pack) = status.pack else { continue };
        if access.may_play(pack.name()).is_err() {
            continue;
        }
        data.push(model_entry(pack.name(), s.started));
        for (name, spec) in pack.options() {
            for v in spec.values.iter().flatten() {
                if Some(v) != spec.default.as_ref()
                    && let Some(v) = v.as_str()
                {
                    // A value that is also an option's name would read as that option
                    // (`debate:rounds` as a number of rounds): it is named with its option.
                    let id = if pack.options().contains_key(v) {
                        format!("{}:{name}={v}", pack.name())
                    } else {
                        format!("{}:{v}", pack.name())
                    };
                    data.push(model_entry(&id, s.started));
                }
            }
        }
    }
    Json(ModelList { object: "list", data })
}

fn model_entry(id: &str, created: u64) -> ModelEntry {
    ModelEntry { id: id.to_owned(), object: "model", created, owned_by: "ruleweave" }
}

/// Who may call `model`, and the errors it answers of its own.
pub(super) const MODEL: Facts = Facts::keys(&[O, I]).answers(&[Code::ModelNotFound, Code::InvalidModel]).chat();

/// `GET /v1/models/{model}`: one model, when it names a pack (and options it has).
#[utoipa::path(get, path = "/v1/models/{model}", operation_id = "getModel", tag = "chat",
    params(("model" = String, Path, description = "A pack, with options (`debate:strict`)")),
    responses(
        (status = 200, description = "The model", body = ModelEntry),
    ))]
pub(super) async fn model(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    id: Result<ModelName, ApiError>,
) -> Response {
    let chosen = id.and_then(|ModelName(id)| {
        parse_model(&s, &id, None).and_then(|chosen| access.may_play(chosen.pack.name())).map(|()| id)
    });
    match chosen {
        Ok(id) => Json(model_entry(&id, s.started)).into_response(),
        Err(e) => e.on(Face::Chat).into_response(),
    }
}

/// A model name read: the pack and the options it (and the request's metadata) chose.
struct Chosen {
    pack: Arc<Pack>,
    options: serde_json::Map<String, Value>,
}

/// Reads `pirate`, `pirate:hard` or `debate:rounds=2:strict`: a pack, then options as `name=value`
/// or as a bare value of the one option that lists it. `metadata` adds options by name (its
/// `session` pins a session and is no option).
fn parse_model(s: &Shared, model: &str, metadata: Option<&serde_json::Map<String, Value>>) -> ApiResult<Chosen> {
    let mut parts = model.split(':');
    let name = parts.next().unwrap_or_default().trim();
    let pack = s.engine.packs().get(name).map_err(|e| {
        if e.kind() == ErrorKind::NotFound {
            ApiError::new(Code::ModelNotFound, format!("{}; a model is a pack", e.detail()))
        } else {
            ApiError::from(e)
        }
    })?;
    let mut options = serde_json::Map::new();
    let bad = |m: String| ApiError::new(Code::InvalidModel, m);
    for part in parts.map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((k, v)) = part.split_once('=') {
            let v = pack.option_from_str(k.trim(), v.trim()).map_err(|e| bad(e.detail().to_owned()))?;
            options.insert(k.trim().to_owned(), v);
            continue;
        }
        let holders: Vec<&String> = pack
            .options()
            .iter()
            .filter(|(_, spec)| spec.values.iter().flatten().any(|v| v.as_str() == Some(part)))
            .map(|(k, _)| k)
            .collect();
        match holders.as_slice() {
            [one] => {
                options.insert((*one).clone(), Value::String(part.to_owned()));
            }
            [] => return Err(bad(format!("`{part}` is no value of an option of pack `{name}` ({})", listed(&pack)))),
            many => {
                let names: Vec<&str> = many.iter().map(|k| k.as_str()).collect();
                return Err(bad(format!(
                    "`{part}` is a value of several options ({}): say `name={part}`",
                    names.join(", ")
                )));
            }
        }
    }
    for (k, v) in metadata.into_iter().flatten().filter(|(k, _)| k.as_str() != "session") {
        let v = match v {
            Value::String(raw) => pack.option_from_str(k, raw).map_err(|e| bad(e.detail().to_owned()))?,
            other => other.clone(),
        };
        options.insert(k.clone(), v);
    }
    pack.resolve_options(&options).map_err(|e| bad(e.detail().to_owned()))?;
    Ok(Chosen { pack, options })
}

/// The options a pack lists values for, for a message.
fn listed(pack: &Pack) -> String {
    let all: Vec<String> = pack
        .options()
        .iter()
        .filter_map(|(k, spec)| {
            let values: Vec<&str> = spec.values.as_ref()?.iter().filter_map(Value::as_str).collect();
            Some(format!("{k}: {}", values.join(", ")))
        })
        .collect();
    if all.is_empty() { "it has none to choose by value".into() } else { all.join("; ") }
}

/// The text of a message's content: a string, or the text parts of a list of parts.
fn text_of(content: &Value) -> ApiResult<String> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => out.push_str(p.get("text").and_then(Value::as_str).unwrap_or_default()),
                    other => {
                        return Err(ApiError::new(
                            Code::InvalidRequest,
                            format!(
                                "a message part of type {} is not something a pack can read; send text",
                                other.unwrap_or("(none)")
                            ),
                        ));
                    }
                }
            }
            Ok(out)
        }
        _ => Err(ApiError::new(Code::InvalidRequest, "a message's content is a string or a list of parts")),
    }
}

/// The keys of a conversation's prefixes: `keys[i]` names the conversation up to and including
/// message `i`. Each key hashes the one before it with the next message, so a request's keys
/// cost one pass over it.
/// A key's own conversations (an issued key's) are its alone: its name is hashed in first, so
/// another key's same conversation never finds them.
fn transcript_keys(chosen: &Chosen, scope: Option<&str>, messages: &[(Role, String)]) -> Vec<Key> {
    let options: BTreeMap<&String, &Value> = chosen.options.iter().collect();
    let mut digest = Sha256::new().chain_update(b"ruleweave transcript 1\0");
    if let Some(scope) = scope {
        digest.update(b"scope\0");
        digest.update(scope.as_bytes());
        digest.update(b"\0");
    }
    let mut digest = digest
        .chain_update(chosen.pack.name().as_bytes())
        .chain_update(b"\0")
        .chain_update(serde_json::to_string(&options).unwrap_or_default().as_bytes())
        .finalize();
    messages
        .iter()
        .map(|(role, text)| {
            digest = next_key(&digest, *role, text);
            Key(digest.into())
        })
        .collect()
}

/// A transcript's key: a SHA-256 digest, stored as hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key([u8; 32]);

impl Key {
    fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The key of this conversation followed by the reply `text`.
    fn after(&self, text: &str) -> Key {
        Key(next_key(&self.0, Role::Assistant, text).into())
    }
}

fn next_key(before: &[u8], role: Role, text: &str) -> sha2::digest::Output<Sha256> {
    let text = text.trim();
    Sha256::new()
        .chain_update(before)
        .chain_update([role as u8])
        .chain_update((text.len() as u64).to_le_bytes())
        .chain_update(text.as_bytes())
        .finalize()
}

/// Where a request's turns run, and which of its messages are still to play.
struct Plan {
    live: LiveSession,
    /// Indexes of the user messages to play, in order (the last is the request's own).
    todo: Vec<usize>,
    /// A new session of a pack that opens the conversation: its first message is answered by
    /// the opening, with no turn.
    opening: Option<String>,
}

/// Who may call `completions`, and the errors it answers of its own.
pub(super) const COMPLETIONS: Facts = Facts::keys(&[O, I])
    .note("an issued key: its packs; its own conversations")
    .answers(&[Code::ModelNotFound, Code::InvalidModel, Code::UnknownConversation])
    .plays_turns()
    .chat();

/// `POST /v1/chat/completions`: the conversation's next turn, played on the pack the model
/// names, in the session the conversation so far was played in (or a new one).
#[utoipa::path(post, path = "/v1/chat/completions", operation_id = "createChatCompletion", tag = "chat",
    request_body = ChatRequest,
    responses(
        (status = 200, description = "The reply; with `stream: true`, chunks as server-sent events (each data a `ChatChunk`) and `[DONE]`", content(
            (ChatCompletion = "application/json"),
            (String = "text/event-stream"),
        )),
    ))]
pub(super) async fn completions(
    State(s): State<Shared>,
    Extension(access): Extension<Access>,
    headers: HeaderMap,
    body: Result<Body<ChatRequest>, ApiError>,
) -> Response {
    let answered = match body {
        Ok(Body(req)) => complete(s, access, headers, req).await,
        Err(e) => Err(e),
    };
    answered.unwrap_or_else(|e| e.on(Face::Chat).into_response())
}

async fn complete(s: Shared, access: Access, headers: HeaderMap, req: ChatRequest) -> ApiResult<Response> {
    if req.n.is_some_and(|n| n != 1) {
        return Err(ApiError::new(Code::InvalidRequest, "a turn has one reply: `n` must be 1"));
    }
    if let Some(user) = &req.user {
        ruleweave::check_player(user)
            .map_err(|e| ApiError::new(Code::InvalidRequest, format!("`user`: {}", e.detail())))?;
    }
    let chosen = parse_model(&s, &req.model, req.metadata.as_ref())?;
    access.may_play(chosen.pack.name())?;
    let mut messages = Vec::new();
    for m in &req.messages {
        let role = match m.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            // The game's own rules make its system prompt: a client's is not the game's.
            "system" | "developer" | "tool" | "function" => continue,
            other => {
                return Err(ApiError::new(Code::InvalidRequest, format!("no message role `{other}`")));
            }
        };
        messages.push((role, text_of(&m.content)?));
    }
    if messages.last().is_none_or(|(role, _)| *role != Role::User) {
        return Err(ApiError::new(
            Code::InvalidRequest,
            "the last message must be the player's (role `user`): it is the turn's input",
        ));
    }
    let owner = access.owner();
    let keys = transcript_keys(&chosen, owner.as_deref(), &messages);
    let pinned = req
        .metadata
        .as_ref()
        .and_then(|m| m.get("session"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned));
    let plan = match pinned {
        Some(id) => {
            access.reach(&s, &id).await?;
            Plan { live: s.engine.session(&id).await?, todo: vec![messages.len() - 1], opening: None }
        }
        None => plan(&s, &chosen, &access, &messages, &keys, req.user.clone()).await?,
    };
    let last = messages.len() - 1;
    let mut usage = Usage::default();
    let mut todo = plan.todo.as_slice();
    // A new session that opens the conversation answers its first message with the opening.
    if let (Some(opening), Some((&first, rest))) = (&plan.opening, todo.split_first()) {
        if first == last {
            let (id, seq, turns) = {
                let session = plan.live.lock().await;
                (session.id().to_owned(), session.checkpoint(), session.turns())
            };
            if req.stream == Some(true) {
                return Ok(stream(s, &req, keys, plan.live, Say::Opening(opening.clone()), usage));
            }
            return Ok(reply(&s, &req, &keys, &id, seq, turns, opening.clone(), false, usage).await);
        }
        link_next(&s, &messages, &keys, first, &plan.live).await;
        todo = rest;
    }
    let Some((&final_msg, before)) = todo.split_last() else {
        return Err(ApiError::internal("no message to play"));
    };
    for &i in before {
        // A line the pack refused then is refused again: no turn, and the conversation goes on.
        if let Answer::Played(r, _) = play(&s, &plan.live, Move::Chat(messages[i].1.clone()), None).await? {
            usage.add(&r);
        }
        link_next(&s, &messages, &keys, i, &plan.live).await;
    }
    {
        let mut session = plan.live.lock().await;
        session.refresh().await?;
        if session.is_finished() {
            return Err(ApiError::new(Code::Engine(ErrorKind::Finished), session.pack().finished_message()));
        }
    }
    if req.stream == Some(true) {
        let say = Say::Turn(messages[final_msg].1.clone());
        return Ok(stream(s, &req, keys, plan.live, say, usage));
    }
    match play(&s, &plan.live, Move::Chat(messages[final_msg].1.clone()), None).await? {
        Answer::Played(r, text) => {
            usage.add(&r);
            let id = plan.live.lock().await.id().to_owned();
            Ok(reply(&s, &req, &keys, &id, r.checkpoint, r.turn, text, r.finished, usage).await)
        }
        // The pack's words are the reply, linked where the session stands: the conversation
        // goes on in the same session.
        Answer::Refused(words) => {
            let (id, seq, turns) = {
                let session = plan.live.lock().await;
                (session.id().to_owned(), session.checkpoint(), session.turns())
            };
            Ok(reply(&s, &req, &keys, &id, seq, turns, words, false, usage).await)
        }
    }
}

/// Finds where a conversation goes on (see the module's documentation).
async fn plan(
    s: &Shared,
    chosen: &Chosen,
    access: &Access,
    messages: &[(Role, String)],
    keys: &[Key],
    player: Option<String>,
) -> ApiResult<Plan> {
    let owner = access.owner();
    let owner = owner.as_deref();
    // Each prefix's key once, and where it ends: a lookup per found link, not a scan.
    let ends: HashMap<String, usize> = messages
        .iter()
        .zip(keys)
        .enumerate()
        .filter(|(_, ((role, _), _))| *role == Role::Assistant)
        .map(|(i, (_, k))| (k.hex(), i))
        .collect();
    let asked: Vec<String> = ends.keys().cloned().collect();
    let found = if asked.is_empty() { Vec::new() } else { links(&s.engine)?.find_transcripts(&asked).await? };
    let best = found.iter().filter_map(|link| Some((*ends.get(&link.key)?, link))).max_by_key(|(at, _)| *at);
    if let Some((at, link)) = best
        && let Some(live) = go_on(s, &link.session, link.seq, link.shared, access).await?
    {
        let todo = user_messages(messages, at + 1);
        check_catch_up(&todo)?;
        return Ok(Plan { live, todo, opening: None });
    }
    let todo = user_messages(messages, 0);
    check_catch_up(&todo)?;
    // A new conversation is a new session, counted against its key's quota as one made over REST.
    access.within_quota(s).await?;
    let engine = s.engine.clone();
    let (name, options) = (chosen.pack.name().to_owned(), chosen.options.clone());
    let (live, opening) = turns::on_pack_thread(s, chosen.pack.name(), move || async move {
        let how = ruleweave::OpenAs { player, ..ruleweave::OpenAs::default() };
        let session = engine.open_as(&name, &options, how).await?;
        let opening = session.view().opening;
        Ok((engine.keep(session), opening))
    })
    .await
    .map_err(|e| turns::failed(s, chosen.pack.name(), e))?;
    s.metrics.session_opened(chosen.pack.name());
    owned(s, &live, owner).await?;
    // A pack that opens by playing an input (a party's first question) plays it now: its reply
    // is the opening question. A question answers the first message with itself; after a hint
    // (what to type), the first message is the game's first input.
    // Where the pack opens the conversation, it says what to type (a refusal says it already).
    let opening = match opening {
        Some(Opening { play: Some(input), .. }) => match play(s, &live, Move::Input(input), None).await? {
            Answer::Played(_, shown) => Some(with_help(&chosen.pack, shown)),
            Answer::Refused(words) => Some(words),
        },
        Some(Opening { kind: OpeningKind::Question, text, .. }) => text.map(|t| with_help(&chosen.pack, t)),
        _ => None,
    };
    Ok(Plan { live, todo, opening })
}

/// The session a link points at, when it still stands at the linked checkpoint and the link is
/// no other client's too; else a fork from that checkpoint; `None` when the session is gone.
async fn go_on(s: &Shared, id: &str, seq: u64, shared: bool, access: &Access) -> ApiResult<Option<LiveSession>> {
    if !shared {
        let live = match s.engine.session(id).await {
            Ok(live) => live,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut session = live.lock().await;
        session.refresh().await?;
        if session.checkpoint() == seq {
            return Ok(Some(live.clone()));
        }
    }
    // A conversation that goes on from an earlier reply forks: a new session, counted as one.
    access.within_quota(s).await?;
    match s.engine.fork(id, seq).await {
        Ok(fork) => {
            let live = s.engine.keep(fork);
            owned(s, &live, access.owner().as_deref()).await?;
            Ok(Some(live))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Records which key made a session the chat face opened (or forked), so it reaches and lists it.
async fn owned(s: &Shared, live: &LiveSession, owner: Option<&str>) -> ApiResult<()> {
    if let Some(owner) = owner {
        let id = live.lock().await.id().to_owned();
        s.keys().await?.set_owner(&id, owner).await?;
    }
    Ok(())
}

fn user_messages(messages: &[(Role, String)], from: usize) -> Vec<usize> {
    (from..messages.len()).filter(|&i| messages[i].0 == Role::User).collect()
}

fn check_catch_up(todo: &[usize]) -> ApiResult<()> {
    if todo.len() > MAX_CATCH_UP {
        return Err(ApiError::new(
            Code::UnknownConversation,
            format!(
                "this conversation has {} player messages this server has no record of, more than the {MAX_CATCH_UP} \
                 one request plays to catch up; start a new conversation, or pin a session with `metadata.session`",
                todo.len()
            ),
        ));
    }
    Ok(())
}

/// After the user message `i` was played on `live`: when the client's conversation has an
/// assistant message next, that prefix now stands at the session's newest checkpoint.
async fn link_next(s: &Shared, messages: &[(Role, String)], keys: &[Key], i: usize, live: &LiveSession) {
    if messages.get(i + 1).is_some_and(|(role, _)| *role == Role::Assistant) {
        let (id, seq) = {
            let session = live.lock().await;
            (session.id().to_owned(), session.checkpoint())
        };
        link(s, keys[i + 1], &id, seq).await;
    }
}

/// Links a key; a failure costs the client a catch-up later, not this reply, so it is logged.
async fn link(s: &Shared, key: Key, id: &str, seq: u64) {
    if let Err(e) = async { links(&s.engine)?.link_transcript(&key.hex(), id, seq).await }.await {
        tracing::error!(session = %id, "cannot link the conversation to its session: {e}");
    }
}

/// The key of the whole conversation a request sent (it ends with the player's message).
fn last_key(keys: &[Key]) -> Key {
    keys.last().copied().unwrap_or(Key([0; 32]))
}

/// Tokens a request's model calls spent.
#[derive(Default, Clone, Copy)]
struct Usage {
    prompt: u64,
    completion: u64,
}

impl Usage {
    fn add(&mut self, r: &TurnResult) {
        for e in &r.exchanges {
            if let Some(resp) = e.model().and_then(|m| m.response.as_ref()) {
                self.prompt += u64::from(resp.usage.prompt_tokens);
                self.completion += u64::from(resp.usage.completion_tokens);
            }
        }
    }

    fn body(self) -> body::Usage {
        body::Usage {
            prompt_tokens: self.prompt,
            completion_tokens: self.completion,
            total_tokens: self.prompt + self.completion,
        }
    }
}

/// What a player's message came to: a turn and the reply it shows, or the pack's refusal.
enum Answer {
    Played(Box<TurnResult>, String),
    /// The pack's words (what was wrong, what to type) and its input help: the assistant's reply.
    Refused(String),
}

/// Plays `what` as a turn on `live` (through the server's one turn runner).
async fn play(s: &Shared, live: &LiveSession, what: Move, sink: Option<ruleweave::EventSink>) -> ApiResult<Answer> {
    match turns::play(s, live.clone(), what, ruleweave::Breakpoints::none(), sink, None).await {
        Ok(played) => {
            let shown = shown(&played.result);
            Ok(Answer::Played(Box::new(played.result), shown))
        }
        Err(e) if e.is_refusal() => {
            let pack = live.lock().await.pack().clone();
            Ok(Answer::Refused(with_help(&pack, e.detail().to_owned())))
        }
        Err(e) => Err(e.into()),
    }
}

/// `text`, then the pack's input help (`display.input_help`) when it has one.
fn with_help(pack: &Pack, text: String) -> String {
    match pack.input_help() {
        Some(help) => format!("{text}\n\n(type: {help})"),
        None => text,
    }
}

/// The store's transcript links, which the chat face finds a stateless client's session by.
fn links(engine: &ruleweave::Engine) -> ruleweave::Result<&dyn ruleweave::store::Transcripts> {
    let store = &**engine.store();
    ruleweave::store::needs(store, store.transcripts(), "transcript links")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_key_continues_the_chain() {
        let before = Key(Sha256::digest(b"x").into());
        assert_eq!(before.after(" Arr! "), Key(next_key(&before.0, Role::Assistant, "Arr!").into()));
        assert_ne!(before.after("Arr!"), before.after("Arr?"));
        assert_eq!(before.hex().len(), 64);
    }
}

//! The OpenAPI 3.1 document of the HTTP API, generated from the handlers' annotations and the
//! body types (`body.rs`) by utoipa: served at `GET /openapi.json` and committed as
//! `docs/openapi.json`, which a test keeps current.

use axum::Json;
use axum::extract::State;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::body::{
    AssistantMessage, ChatChoice, ChatChunk, ChatCompletion, ChatSession, CheckpointList, ChunkChoice, ClosedTurn,
    ConversationBody, Delta, ErrorBody, ErrorDetail, ForkedFrom, Health, Listed, ModelEntry, ModelList, Opened,
    PackList, Posted, PostedBody, ReloadEvent, ReplayBody, SessionBody, SessionPage, Standing, StreamError,
    StreamErrorDetail, TurnBody, Usage,
};
use super::{Shared, api, body, openai};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ruleweave",
        description = "Sessions of rules packs (games and conversation flows) played turn by turn. \
            Every error answers `{\"error\": {\"code\", \"message\", \"type\", \"param\"}}`. \
            With a token (`RULEWEAVE_TOKEN`), every route but `/healthz` and `/openapi.json` needs \
            `Authorization: Bearer TOKEN`; without one, none does."
    ),
    paths(
        api::packs,
        api::events,
        api::create,
        api::list,
        api::session,
        api::delete,
        api::turn,
        api::input,
        api::session_events,
        api::checkpoints,
        api::conversation,
        api::fork,
        api::replay,
        super::simulate::simulate,
        api::healthz,
        api::metrics,
        openapi,
        openai::models,
        openai::model,
        openai::completions,
    ),
    components(schemas(
        api::NewSession,
        api::NewTurn,
        api::NewFork,
        api::NewInput,
        super::simulate::NewSimulation,
        Posted,
        ReloadEvent,
        Standing,
        StreamError,
        StreamErrorDetail,
        body::ChatRequest,
        body::Message,
        body::StreamOptions,
        AssistantMessage,
        ChatChoice,
        ChatChunk,
        ChatCompletion,
        ChatSession,
        ChunkChoice,
        Delta,
        ModelEntry,
        ModelList,
        Usage,
        CheckpointList,
        ClosedTurn,
        ConversationBody,
        ErrorBody,
        ErrorDetail,
        ForkedFrom,
        Health,
        Listed,
        Opened,
        PackList,
        PostedBody,
        ReplayBody,
        SessionBody,
        SessionPage,
        TurnBody,
    )),
    modifiers(&Bearer),
    security((), ("bearer" = [])),
    tags(
        (name = "sessions", description = "Opening, playing, listing, forking and replaying sessions"),
        (name = "packs", description = "The packs served, and their reloads"),
        (name = "chat", description = "The chat face: the packs as models of OpenAI's Chat Completions API"),
        (name = "server", description = "The server itself"),
    )
)]
pub struct ApiDoc;

/// The bearer token as a security scheme (optional: a server without a token asks for none).
struct Bearer;

impl Modify for Bearer {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The document as JSON, as committed: the generated one, with the links from a new session to
/// what may be done with it (which clients and fuzzers follow from one call to the next).
pub fn document() -> serde_json::Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    let by_id = |op: &str, what: &str| {
        serde_json::json!({
            "operationId": op,
            "parameters": {"id": "$response.body#/id"},
            "description": format!("The new session's id {what}."),
        })
    };
    let links = serde_json::json!({
        "GetSession": by_id("getSession", "reads it"),
        "PlayTurn": by_id("playTurn", "plays a turn of it"),
        "PostInput": by_id("postInput", "posts to its lobby round"),
        "ListCheckpoints": by_id("listCheckpoints", "lists its checkpoints"),
        "GetConversation": by_id("getConversation", "shows what a person saw"),
        "ForkSession": by_id("forkSession", "forks it"),
        "ReplaySession": by_id("replaySession", "replays it"),
        "DeleteSession": by_id("deleteSession", "deletes it"),
    });
    for path in ["/v1/sessions", "/v1/sessions/{id}/fork"] {
        if let Some(created) = doc.pointer_mut(&format!("/paths/{}/post/responses/201", pointer(path))) {
            created["links"] = links.clone();
        }
    }
    // A pack entry carries what its version declares only when a version serves: say so with
    // `if`/`then` (what utoipa makes of a flattened `Option` would ask for the fields always).
    if let Some(entry) = doc.pointer_mut("/components/schemas/PackEntry/allOf")
        && let Some(parts) = entry.as_array_mut()
    {
        parts.retain(|p| p.get("oneOf").is_none());
        parts.push(serde_json::json!({
            "if": {"properties": {"version": {"type": "string"}}},
            "then": {"$ref": "#/components/schemas/PackInfo"},
        }));
    }
    let chat = "/paths/~1v1~1chat~1completions/post/responses/200/content/text~1event-stream/schema";
    if let Some(schema) = doc.pointer_mut(chat) {
        *schema = serde_json::json!({
            "description": "One server-sent event of a streamed reply: a `ChatChunk` as JSON, and `[DONE]` last.",
            "type": "object",
            "properties": {"data": {"type": "string"}},
            "required": ["data"],
        });
    }
    for (path, method, events) in STREAMS {
        let at = format!("/paths/{}/{method}/responses/200/content/text~1event-stream/schema", pointer(path));
        if let Some(schema) = doc.pointer_mut(&at) {
            *schema = event_schema(events);
        }
    }
    doc
}

/// An event's name, and the schema of its data (`None`: a JSON object).
type EventKind = (&'static str, Option<&'static str>);

/// The event streams: for each, its events and the schema of each one's data (`None`: a JSON
/// object the engine's event says).
const STREAMS: [(&str, &str, &[EventKind]); 3] = [
    ("/v1/events", "get", &[("reload", Some("ReloadEvent"))]),
    (
        "/v1/sessions/{id}/events",
        "get",
        &[("state", Some("Standing")), ("input", Some("Posted")), ("turn", Some("Standing"))],
    ),
    (
        "/v1/sessions/{id}/turns",
        "post",
        &[
            ("node_started", None),
            ("node_finished", None),
            ("route", None),
            ("llm", None),
            ("token", None),
            ("speech", None),
            ("decision", None),
            ("custom", None),
            ("log", None),
            ("search", None),
            ("paused", None),
            ("result", Some("TurnBody")),
            ("error", Some("StreamError")),
        ],
    ),
];

/// One event of a stream, as a schema: its name, and its data, JSON whose schema the name says.
/// (OpenAPI 3.2 names this the media type's `itemSchema`; a 3.1 document has only `schema`,
/// which describes each event here.)
fn event_schema(events: &[EventKind]) -> serde_json::Value {
    let one = |names: Vec<&str>, data: serde_json::Value| {
        serde_json::json!({
            "type": "object",
            "properties": {
                "event": {"type": "string", "enum": names},
                "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data},
            },
            "required": ["event", "data"],
        })
    };
    let mut each: Vec<serde_json::Value> = events
        .iter()
        .filter_map(|(name, schema)| {
            let data = serde_json::json!({"$ref": format!("#/components/schemas/{}", schema.as_ref()?)});
            Some(one(vec![name], data))
        })
        .collect();
    let plain: Vec<&str> = events.iter().filter(|(_, s)| s.is_none()).map(|(n, _)| *n).collect();
    if !plain.is_empty() {
        each.push(one(plain, serde_json::json!({"type": "object"})));
    }
    serde_json::json!({
        "description": "One server-sent event: its name, and its data as JSON.",
        "oneOf": each,
    })
}

/// `path` as a JSON pointer's token.
fn pointer(path: &str) -> String {
    path.replace('~', "~0").replace('/', "~1")
}

/// The document a server serves: the committed one, with the names of the packs it serves as
/// the values a new session's `pack` and a chat request's `model` may take (a model may also
/// name options, `debate:strict`; `GET /v1/models` lists those).
pub fn served(packs: Vec<String>) -> serde_json::Value {
    let mut doc = document();
    for at in ["/components/schemas/NewSession/properties/pack", "/components/schemas/ChatRequest/properties/model"] {
        if let Some(name) = doc.pointer_mut(at) {
            name["enum"] = serde_json::json!(packs);
        }
    }
    doc
}

/// `GET /openapi.json`: the document, naming the packs this server serves now.
#[utoipa::path(get, path = "/openapi.json", operation_id = "openapi", tag = "server", security(()), responses(
    (status = 200, description = "This document, with the packs this server serves as the values of a new session's `pack` and a chat request's `model`", body = Object),
))]
pub async fn openapi(State(s): State<Shared>) -> Json<serde_json::Value> {
    let packs = s.engine.pack_status().into_iter().filter(|p| p.pack.is_some()).map(|p| p.name).collect();
    Json(served(packs))
}

#[cfg(test)]
mod tests {
    /// `docs/openapi.json` is what the server serves (`UPDATE_DOCS=1` rewrites it).
    #[test]
    fn the_committed_document_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
        let text = serde_json::to_string_pretty(&super::document()).unwrap() + "\n";
        if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "docs/openapi.json is not the document the server serves: \
             `UPDATE_DOCS=1 cargo test -p ruleweave openapi` rewrites it"
        );
    }

    /// Every guarded route of the API is in the document, with the error
    /// body for its errors.
    #[test]
    fn every_route_is_documented() {
        let doc = super::document();
        let paths = doc["paths"].as_object().unwrap();
        for (path, method) in [
            ("/v1/packs", "get"),
            ("/v1/events", "get"),
            ("/v1/sessions", "post"),
            ("/v1/sessions", "get"),
            ("/v1/sessions/{id}", "get"),
            ("/v1/sessions/{id}", "delete"),
            ("/v1/sessions/{id}/turns", "post"),
            ("/v1/sessions/{id}/inputs", "post"),
            ("/v1/sessions/{id}/events", "get"),
            ("/v1/sessions/{id}/checkpoints", "get"),
            ("/v1/sessions/{id}/conversation", "get"),
            ("/v1/sessions/{id}/fork", "post"),
            ("/v1/sessions/{id}/replay", "post"),
            ("/v1/models", "get"),
            ("/v1/models/{model}", "get"),
            ("/v1/chat/completions", "post"),
            ("/metrics", "get"),
        ] {
            let op = &paths[path][method];
            assert!(op.is_object(), "{method} {path} is not documented");
            let responses = op["responses"].as_object().unwrap();
            let unauthorized = &responses["401"]["content"]["application/json"]["schema"]["$ref"];
            assert_eq!(unauthorized, "#/components/schemas/ErrorBody", "{method} {path}: 401");
        }
        // And no route of the router is missing from it (the console's page aside).
        let router = include_str!("mod.rs");
        for route in router.split(".route(\"").skip(1).filter_map(|r| r.split('"').next()) {
            assert!(route == "/" || paths.contains_key(route), "the route {route} is not in the document");
        }
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    }
}

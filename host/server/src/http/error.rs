//! Errors as the HTTP API returns them: `{"error": {"code", "message", "type", "param"}}` with a
//! status that fits. One table ([`ANSWERS`]) says, for every code, the status on each face: the
//! REST routes answer a request they understood but cannot take with 422; the chat face answers
//! every bad request 400, as OpenAI's API does (its SDKs raise `BadRequestError`). The engine's
//! error kinds are rows of the same table, so the API, the chat face and the CLI say one thing.
//! docs/api.md's table of errors is generated from it.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ruleweave::{Error, ErrorKind};
use serde_json::json;

/// What a handler answers: its value, or an API error.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// Which face of the server answers: the JSON API, or the chat face (OpenAI's protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Face {
    Rest,
    Chat,
}

/// What went wrong, as a client can tell: a row of [`ANSWERS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// The body is not JSON.
    InvalidJson,
    /// A body or query of the wrong shape.
    InvalidRequest,
    /// A path parameter that is no text (`%ff`).
    InvalidPath,
    UnsupportedMediaType,
    PayloadTooLarge,
    RequestTimeout,
    Unauthorized,
    /// A key that may not call the route, or play the pack.
    Forbidden,
    HostNotAllowed,
    MethodNotAllowed,
    TooManyStreams,
    /// More connections open from one client address than `max_connections_per_client`.
    TooManyConnections,
    /// As many connections open as the server keeps (`max_connections`).
    ServerBusy,
    SimulationRunning,
    /// A job is already running on this replica.
    JobRunning,
    /// A key made as many sessions as the operator lets one key make (an hour's, or kept).
    QuotaExceeded,
    /// A pack's manifest this server cannot write.
    PackNotWritable,
    /// The chat face: a model that names no pack.
    ModelNotFound,
    /// The chat face: a model whose options the pack does not take.
    InvalidModel,
    /// The chat face: a conversation too long to catch up with.
    UnknownConversation,
    /// The engine's own error of this kind.
    Engine(ErrorKind),
}

/// One row of the table: a code, its status on each face, and when it is answered.
pub(crate) struct Answer {
    pub code: Code,
    pub rest: StatusCode,
    pub chat: StatusCode,
    /// When it is answered, in words (docs/api.md's table, the OpenAPI document's error answers).
    pub when: &'static str,
}

const fn row(code: Code, rest: StatusCode, chat: StatusCode, when: &'static str) -> Answer {
    Answer { code, rest, chat, when }
}

use StatusCode as S;

/// Every error the server answers, with its status on each face.
pub(crate) const ANSWERS: &[Answer] = &[
    row(Code::InvalidJson, S::BAD_REQUEST, S::BAD_REQUEST, "the body is not JSON"),
    row(
        Code::InvalidRequest,
        S::UNPROCESSABLE_ENTITY,
        S::BAD_REQUEST,
        "a body or query of the wrong shape (a missing or unknown field, a number out of range)",
    ),
    row(Code::InvalidPath, S::BAD_REQUEST, S::BAD_REQUEST, "a path parameter that is not text (`%ff`)"),
    row(
        Code::Engine(ErrorKind::Input),
        S::UNPROCESSABLE_ENTITY,
        S::BAD_REQUEST,
        "an input or options the pack does not take",
    ),
    row(Code::InvalidModel, S::BAD_REQUEST, S::BAD_REQUEST, "a model name whose options the pack does not take"),
    row(
        Code::UnknownConversation,
        S::BAD_REQUEST,
        S::BAD_REQUEST,
        "more player messages than one request plays to catch up with",
    ),
    row(Code::Unauthorized, S::UNAUTHORIZED, S::UNAUTHORIZED, "the token is missing or wrong"),
    row(Code::Forbidden, S::FORBIDDEN, S::FORBIDDEN, "a key that may not call the route, or play the pack"),
    row(Code::HostNotAllowed, S::FORBIDDEN, S::FORBIDDEN, "a `Host` that is not this machine's (without a token)"),
    row(
        Code::Engine(ErrorKind::NotFound),
        S::NOT_FOUND,
        S::NOT_FOUND,
        "no such pack, session, checkpoint, job, key or route",
    ),
    row(Code::ModelNotFound, S::NOT_FOUND, S::NOT_FOUND, "a model that names no pack"),
    row(Code::MethodNotAllowed, S::METHOD_NOT_ALLOWED, S::METHOD_NOT_ALLOWED, "a route that does not take the method"),
    row(Code::RequestTimeout, S::REQUEST_TIMEOUT, S::REQUEST_TIMEOUT, "a body that did not arrive in time"),
    row(Code::Engine(ErrorKind::Finished), S::CONFLICT, S::CONFLICT, "a turn on a finished session (a won game)"),
    row(
        Code::Engine(ErrorKind::Conflict),
        S::CONFLICT,
        S::CONFLICT,
        "another turn was recorded first, a second answer to a lobby round",
    ),
    row(Code::PayloadTooLarge, S::PAYLOAD_TOO_LARGE, S::PAYLOAD_TOO_LARGE, "a body over the limit"),
    row(
        Code::Engine(ErrorKind::StateTooLarge),
        S::PAYLOAD_TOO_LARGE,
        S::PAYLOAD_TOO_LARGE,
        "a turn, edit or fork that would leave a session's state over `max_state_bytes` (nothing is kept)",
    ),
    row(
        Code::UnsupportedMediaType,
        S::UNSUPPORTED_MEDIA_TYPE,
        S::UNSUPPORTED_MEDIA_TYPE,
        "a body that is not `application/json`",
    ),
    row(
        Code::TooManyStreams,
        S::TOO_MANY_REQUESTS,
        S::TOO_MANY_REQUESTS,
        "more event streams open from one client than `streams_per_client`",
    ),
    row(
        Code::TooManyConnections,
        S::TOO_MANY_REQUESTS,
        S::TOO_MANY_REQUESTS,
        "twice `max_connections_per_client` connections open from one client (`/healthz` still answers)",
    ),
    row(
        Code::ServerBusy,
        S::SERVICE_UNAVAILABLE,
        S::SERVICE_UNAVAILABLE,
        "as many connections open as the server keeps (`max_connections`; `/healthz` still answers)",
    ),
    row(
        Code::SimulationRunning,
        S::TOO_MANY_REQUESTS,
        S::TOO_MANY_REQUESTS,
        "a batch of simulated games is already running",
    ),
    row(
        Code::PackNotWritable,
        S::CONFLICT,
        S::CONFLICT,
        "a pack's manifest this server cannot write (a read-only root)",
    ),
    row(
        Code::JobRunning,
        S::TOO_MANY_REQUESTS,
        S::TOO_MANY_REQUESTS,
        "a job (a tune) is already running on this server",
    ),
    row(
        Code::QuotaExceeded,
        S::TOO_MANY_REQUESTS,
        S::TOO_MANY_REQUESTS,
        "a key made as many sessions as one key may (`sessions_per_key_per_hour`, `sessions_per_key`)",
    ),
    row(Code::Engine(ErrorKind::Script), S::INTERNAL_SERVER_ERROR, S::INTERNAL_SERVER_ERROR, "a script threw"),
    row(Code::Engine(ErrorKind::Template), S::INTERNAL_SERVER_ERROR, S::INTERNAL_SERVER_ERROR, "a template failed"),
    row(
        Code::Engine(ErrorKind::Limit),
        S::INTERNAL_SERVER_ERROR,
        S::INTERNAL_SERVER_ERROR,
        "a script or the graph hit a limit",
    ),
    row(Code::Engine(ErrorKind::Io), S::INTERNAL_SERVER_ERROR, S::INTERNAL_SERVER_ERROR, "reading a file failed"),
    row(Code::Engine(ErrorKind::Internal), S::INTERNAL_SERVER_ERROR, S::INTERNAL_SERVER_ERROR, "a bug in ruleweave"),
    row(
        Code::Engine(ErrorKind::Llm),
        S::BAD_GATEWAY,
        S::BAD_GATEWAY,
        "a model kept failing and the node had no fallback",
    ),
    row(Code::Engine(ErrorKind::Pack), S::SERVICE_UNAVAILABLE, S::SERVICE_UNAVAILABLE, "the pack does not load"),
    row(Code::Engine(ErrorKind::Store), S::SERVICE_UNAVAILABLE, S::SERVICE_UNAVAILABLE, "the store cannot take writes"),
];

impl Code {
    /// The code as clients read it (`invalid_input`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Code::InvalidJson => "invalid_json",
            Code::InvalidRequest => "invalid_request",
            Code::InvalidPath => "invalid_path",
            Code::UnsupportedMediaType => "unsupported_media_type",
            Code::PayloadTooLarge => "payload_too_large",
            Code::RequestTimeout => "request_timeout",
            Code::Unauthorized => "unauthorized",
            Code::Forbidden => "forbidden",
            Code::HostNotAllowed => "host_not_allowed",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::TooManyStreams => "too_many_streams",
            Code::TooManyConnections => "too_many_connections",
            Code::ServerBusy => "server_busy",
            Code::SimulationRunning => "simulation_running",
            Code::JobRunning => "job_running",
            Code::QuotaExceeded => "quota_exceeded",
            Code::PackNotWritable => "pack_not_writable",
            Code::ModelNotFound => "model_not_found",
            Code::InvalidModel => "invalid_model",
            Code::UnknownConversation => "unknown_conversation",
            Code::Engine(kind) => kind.code(),
        }
    }

    /// Its row of [`ANSWERS`]; every code has one (a test holds it).
    fn answer(self) -> &'static Answer {
        ANSWERS.iter().find(|a| a.code == self).unwrap_or(&ANSWERS[ANSWERS.len() - 1])
    }

    /// When the code is answered, in words.
    pub(crate) fn when(self) -> &'static str {
        self.answer().when
    }

    /// The status the code is answered with on `face`.
    pub(crate) fn status(self, face: Face) -> StatusCode {
        let answer = self.answer();
        match face {
            Face::Rest => answer.rest,
            Face::Chat => answer.chat,
        }
    }
}

/// An API error: a code (which says its status on each face) and a message.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) code: Code,
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    /// An error as the REST routes answer it ([`ApiError::on`] answers it on the chat face).
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Self {
        ApiError { code, status: code.status(Face::Rest), message: message.into() }
    }

    /// The same error, with the status `face` answers it with.
    pub(crate) fn on(mut self, face: Face) -> Self {
        self.status = self.code.status(face);
        self
    }

    pub(crate) fn too_large() -> Self {
        ApiError::new(Code::PayloadTooLarge, "the body is larger than this server accepts")
    }

    pub(crate) fn unauthorized() -> Self {
        ApiError::new(
            Code::Unauthorized,
            "this API needs `Authorization: Bearer <key>`: the operator's token, or a key it issued, a session's or a player's",
        )
    }

    /// An engine failure that is no fault of the request: a thread that failed, a result that did
    /// not serialize.
    pub(crate) fn internal(message: impl std::fmt::Display) -> Self {
        ApiError::new(Code::Engine(ErrorKind::Internal), message.to_string())
    }

    /// The code as clients read it.
    pub fn code(&self) -> &'static str {
        self.code.name()
    }

    /// The status it is answered with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The message it is answered with.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<Error> for ApiError {
    /// An engine error as the API answers it: an input refused (by the pack's own words, or by
    /// the engine) says what was wrong and nothing of the script that said it; any other names
    /// its place, for the designer.
    fn from(e: Error) -> Self {
        let message = if e.kind() == ErrorKind::Input { e.detail().to_owned() } else { e.to_string() };
        ApiError::new(Code::Engine(e.kind()), message)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r {
            JsonRejection::JsonSyntaxError(e) => {
                ApiError::new(Code::InvalidJson, format!("the body is not valid JSON: {}", source(&e)))
            }
            JsonRejection::JsonDataError(e) => {
                ApiError::new(Code::InvalidRequest, format!("the body does not fit: {}", in_words(&source(&e))))
            }
            JsonRejection::MissingJsonContentType(_) => {
                ApiError::new(Code::UnsupportedMediaType, "send the body as JSON with `Content-Type: application/json`")
            }
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(),
            other => ApiError::new(Code::InvalidRequest, other.body_text()),
        }
    }
}

/// What the body should have been, for each request type: serde names the Rust type.
const SHAPES: &[(&str, &str)] = &[
    ("NewSession", r#"an object {"pack": "...", "options": {...}}"#),
    ("NewTurn", r#"an object {"input": ...}"#),
    ("NewFork", r#"an object {"checkpoint": n}"#),
    ("NewInput", r#"an object {"player": "...", "input": ...}"#),
    ("ChatRequest", r#"an object {"model": "...", "messages": [...]}"#),
    ("Message", r#"a message {"role": "...", "content": "..."}"#),
];

/// serde's message about a body in the API's words: a missing or unknown field by name, the
/// shape wanted instead of a Rust type (`expected struct NewTurn`), and what came instead of a
/// list's length. The message is cut once into its path (`messages[0]: `), what it says, and
/// where (` at line 1 column 2`).
fn in_words(serde: &str) -> String {
    let (path, rest) = match serde.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') && !path.contains('`') => (path, rest),
        _ => ("", serde),
    };
    let at = |path: &str| if path.is_empty() { String::new() } else { format!("at `{path}`: ") };
    let (message, place) = rest.rfind(" at line ").map_or((rest, ""), |i| rest.split_at(i));
    if let Some(field) = message.strip_prefix("missing field ") {
        return format!("{}{field} is missing{place}", at(path));
    }
    if let Some(field) = message.strip_prefix("unknown field ") {
        let (field, known) = field.split_once(", expected ").unwrap_or((field, ""));
        let known = known.strip_prefix("one of ").unwrap_or(known);
        let known = if known.is_empty() { String::new() } else { format!(" (fields: {known})") };
        // The path ends at the unknown field itself: where it stands is the path before it.
        let name = field.trim_matches('`');
        let parent = path.strip_suffix(name).map_or(path, |p| p.trim_end_matches('.'));
        return format!("{}{field} is not a field here{known}{place}", at(parent));
    }
    let Some(at_struct) = message.find("expected struct ") else { return serde.to_owned() };
    let name: String =
        message[at_struct + "expected struct ".len()..].chars().take_while(|c| c.is_alphanumeric()).collect();
    let Some((_, shape)) = SHAPES.iter().find(|(n, _)| *n == name) else { return serde.to_owned() };
    let got = if let Some(rest) = message.strip_prefix("invalid type: ") {
        rest.split(", expected").next().unwrap_or("something else")
    } else if message.starts_with("invalid length") {
        "a list"
    } else {
        return serde.to_owned();
    };
    format!("{}expected {shape}, not {got}{place}", at(path))
}

/// A query string's error in the API's words: `limit: not a whole number`, not axum's
/// "Failed to deserialize query string: limit: invalid digit found in string".
pub(super) fn query_in_words(e: &axum::extract::rejection::QueryRejection) -> String {
    source(e)
        .replace("invalid digit found in string", "not a whole number")
        .replace("number too large to fit in target type", "a number too large")
        .replace("cannot parse integer from empty string", "empty")
}

/// The innermost message of a rejection (serde's, with its line and column).
fn source(e: &dyn std::error::Error) -> String {
    let mut s: &dyn std::error::Error = e;
    while let Some(next) = s.source() {
        s = next;
    }
    s.to_string()
}

impl ApiError {
    /// The error's body: `{"error": {"code", "message", "type", "param"}}`, which is also the
    /// shape OpenAI's API answers in (`type` from the status), so its SDKs raise their usual
    /// exceptions on the chat face.
    pub fn body(&self) -> serde_json::Value {
        let kind = match self.status.as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            500.. => "server_error",
            _ => "invalid_request_error",
        };
        json!({"error": {"code": self.code(), "message": self.message, "type": kind, "param": null}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// The table of errors as docs/api.md shows it.
#[cfg(test)]
fn table_in_markdown() -> String {
    let mut out = String::from("| code | REST | chat face | when |\n| --- | --- | --- | --- |\n");
    for a in ANSWERS {
        out.push_str(&format!("| `{}` | {} | {} | {} |\n", a.code.name(), a.rest.as_u16(), a.chat.as_u16(), a.when));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_row() {
        let mut codes: Vec<Code> = ErrorKind::ALL.iter().map(|k| Code::Engine(*k)).collect();
        codes.extend([
            Code::InvalidJson,
            Code::InvalidRequest,
            Code::InvalidPath,
            Code::UnsupportedMediaType,
            Code::PayloadTooLarge,
            Code::RequestTimeout,
            Code::Unauthorized,
            Code::Forbidden,
            Code::HostNotAllowed,
            Code::MethodNotAllowed,
            Code::TooManyStreams,
            Code::TooManyConnections,
            Code::ServerBusy,
            Code::SimulationRunning,
            Code::JobRunning,
            Code::QuotaExceeded,
            Code::PackNotWritable,
            Code::ModelNotFound,
            Code::InvalidModel,
            Code::UnknownConversation,
        ]);
        for code in &codes {
            let rows = ANSWERS.iter().filter(|a| a.code == *code).count();
            assert_eq!(rows, 1, "{code:?} has {rows} rows");
        }
        assert_eq!(codes.len(), ANSWERS.len(), "a row for a code the list above lacks");
        // Each name once, so a client tells them apart.
        let mut names: Vec<&str> = ANSWERS.iter().map(|a| a.code.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ANSWERS.len());
    }

    /// docs/api.md's table of errors is this table (`UPDATE_DOCS=1` rewrites it).
    #[test]
    fn the_documented_table_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/api.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (start, end) = ("<!-- errors (generated) -->\n", "<!-- end of errors -->");
        let from = doc.find(start).expect("docs/api.md marks where the table of errors goes") + start.len();
        let to = doc.find(end).expect("and where it ends");
        let wanted = format!("{}{}{}", &doc[..from], table_in_markdown(), &doc[to..]);
        if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &wanted).unwrap();
        }
        assert!(
            doc == wanted,
            "docs/api.md's table of errors is not the one the server answers by: \
             `UPDATE_DOCS=1 cargo test -p ruleweave-server error` rewrites it"
        );
    }

    #[test]
    fn the_faces_differ_only_on_bad_requests() {
        for a in ANSWERS {
            if a.rest != a.chat {
                assert_eq!((a.rest, a.chat), (S::UNPROCESSABLE_ENTITY, S::BAD_REQUEST), "{:?}", a.code);
            }
        }
        let input = ApiError::from(Error::new(ErrorKind::Input, "no"));
        assert_eq!(input.status(), S::UNPROCESSABLE_ENTITY);
        assert_eq!(input.on(Face::Chat).status(), S::BAD_REQUEST);
    }

    #[test]
    fn serde_is_put_in_words() {
        for (serde, words) in [
            (
                "invalid length 0, expected struct NewTurn with 1 element at line 1 column 2",
                r#"expected an object {"input": ...}, not a list at line 1 column 2"#,
            ),
            (
                "invalid type: string \"x\", expected struct NewFork at line 1 column 3",
                r#"expected an object {"checkpoint": n}, not string "x" at line 1 column 3"#,
            ),
            (
                "messages[0]: invalid type: integer `3`, expected struct Message at line 1 column 30",
                r#"at `messages[0]`: expected a message {"role": "...", "content": "..."}, not integer `3` at line 1 column 30"#,
            ),
            (
                "inptu: unknown field `inptu`, expected `input` at line 1 column 8",
                "`inptu` is not a field here (fields: `input`) at line 1 column 8",
            ),
            (
                "unknown field `pak`, expected one of `pack`, `options` at line 1 column 6",
                "`pak` is not a field here (fields: `pack`, `options`) at line 1 column 6",
            ),
            ("missing field `input` at line 1 column 2", "`input` is missing at line 1 column 2"),
            (
                "messages[1]: missing field `role` at line 1 column 40",
                "at `messages[1]`: `role` is missing at line 1 column 40",
            ),
        ] {
            assert_eq!(super::in_words(serde), words, "{serde}");
        }
        let other = "something serde said at line 1 column 3";
        assert_eq!(super::in_words(other), other);
    }
}

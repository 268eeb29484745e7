//! Errors as the HTTP API returns them: `{"error": {"code": "...", "message": "..."}}` with a
//! status that fits. One mapping from the engine's error kinds, so the API and the console say
//! what the CLI says.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ruleweave::{Error, ErrorKind};
use serde_json::json;

/// An API error: a status, a stable code, a message.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    pub fn too_large() -> Self {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "the body is larger than this server accepts")
    }

    pub fn too_many(message: String) -> Self {
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", message)
    }

    pub fn unauthorized() -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "this API needs `Authorization: Bearer <token>`")
    }
}

/// The status for each kind of engine error.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::Input => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Finished | ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Llm => StatusCode::BAD_GATEWAY,
        ErrorKind::Pack | ErrorKind::Store => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Script | ErrorKind::Template | ErrorKind::Limit | ErrorKind::Io | ErrorKind::Internal => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError::new(status_of(e.kind()), e.kind().code(), e.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r {
            JsonRejection::JsonSyntaxError(e) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("the body is not valid JSON: {}", source(&e)),
            ),
            JsonRejection::JsonDataError(e) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                format!("the body does not fit: {}", in_words(&source(&e))),
            ),
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with `Content-Type: application/json`",
            ),
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body is larger than this server accepts",
            ),
            other => ApiError::new(other.status(), "invalid_request", other.body_text()),
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
        json!({"error": {"code": self.code, "message": self.message, "type": kind, "param": null}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
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

//! Every route of the server, declared once. A handler's `#[utoipa::path]` says its method, path,
//! parameters, body and what it answers on success; its [`Facts`], declared beside it, say the
//! rest: which keys may call it, the errors it answers (by their codes in the error table), and
//! what it streams. [`Routes`] collects both: the router serves it, the guard reads who may call
//! what from it, and the OpenAPI document (with each operation's error answers, derived from the
//! error table) and docs/security.md's table are made from it. A new route is its handler, its
//! facts, and one line in `routes()`.

use axum::http::Method;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use super::Shared;
use ruleweave::ErrorKind;

use super::error::{Code, Face};

/// A kind of key, as a route's facts name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Operator,
    Issued,
    Session,
    Player,
}

impl Who {
    /// The name the OpenAPI document's security schemes and docs/security.md use.
    pub(crate) fn scheme(self) -> &'static str {
        match self {
            Who::Operator => "operatorToken",
            Who::Issued => "issuedKey",
            Who::Session => "sessionKey",
            Who::Player => "playerKey",
        }
    }
}

/// The keys, as routes' facts name them: the operator's token, an issued key, a session's key, a
/// player's key.
pub(crate) const O: Who = Who::Operator;
pub(crate) const I: Who = Who::Issued;
pub(crate) const S: Who = Who::Session;
pub(crate) const P: Who = Who::Player;

/// An event a stream sends: its name, and the schema of its data (`None`: one of the engine's
/// events, a JSON object whose `type` is the name).
pub(crate) type EventKind = (&'static str, Option<&'static str>);

/// What a route streams, when asked for `text/event-stream`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Streams {
    /// Nothing.
    Nothing,
    /// These events.
    These(&'static [EventKind]),
    /// A turn's: each of the engine's events as it happens (`ruleweave::Event::KINDS`), then
    /// `result` or `error`.
    Turn,
}

/// What a route is beyond its handler's `#[utoipa::path]`.
#[derive(Debug)]
pub(crate) struct Facts {
    /// Which keys may call it when the server has a token (the operator's token calls every
    /// route); none for a route that is never behind the token.
    pub who: &'static [Who],
    /// What a key reaches there, beyond the route (a limit its handler checks), for the docs.
    #[cfg_attr(not(test), allow(dead_code))]
    pub note: &'static str,
    /// The errors it answers besides those every route of its kind does (a key refused, a path
    /// parameter or a body that cannot be read): see [`Routes::answers`].
    pub answers: &'static [Code],
    /// What it streams.
    pub streams: Streams,
    /// The face whose statuses its errors take.
    pub face: Face,
    /// Whether it plays a turn, and so answers every error a turn may end in ([`TURN_ERRORS`]).
    pub plays: bool,
}

/// The errors a turn may end in, whichever route plays it.
pub(crate) const TURN_ERRORS: &[Code] = &[
    Code::Engine(ErrorKind::NotFound),
    Code::Engine(ErrorKind::Input),
    Code::Engine(ErrorKind::Conflict),
    Code::Engine(ErrorKind::Finished),
    Code::Engine(ErrorKind::StateTooLarge),
    Code::Engine(ErrorKind::Script),
    Code::Engine(ErrorKind::Template),
    Code::Engine(ErrorKind::Limit),
    Code::Engine(ErrorKind::Llm),
    Code::Engine(ErrorKind::Pack),
    Code::Engine(ErrorKind::Store),
];

impl Facts {
    /// A route these keys may call.
    pub(crate) const fn keys(who: &'static [Who]) -> Facts {
        Facts { who, note: "", answers: &[], streams: Streams::Nothing, face: Face::Rest, plays: false }
    }

    /// A route never behind the token.
    pub(crate) const fn open() -> Facts {
        Facts::keys(&[])
    }

    /// What a key reaches there.
    pub(crate) const fn note(self, note: &'static str) -> Facts {
        Facts { note, ..self }
    }

    /// The errors it answers of its own.
    pub(crate) const fn answers(self, answers: &'static [Code]) -> Facts {
        Facts { answers, ..self }
    }

    /// What it streams.
    pub(crate) const fn streams(self, streams: Streams) -> Facts {
        Facts { streams, ..self }
    }

    /// A route that plays a turn.
    pub(crate) const fn plays_turns(self) -> Facts {
        Facts { plays: true, ..self }
    }

    /// A route of the chat face, whose errors take that face's statuses.
    pub(crate) const fn chat(self) -> Facts {
        Facts { face: Face::Chat, ..self }
    }
}

/// One route: its method and path (from its handler's annotation), whether it is behind the
/// token, and its facts.
#[derive(Debug)]
pub(crate) struct Route {
    pub method: Method,
    pub path: String,
    pub guarded: bool,
    pub facts: &'static Facts,
}

/// Every route of the server.
pub struct Routes {
    /// The routes behind a key, when the server has a token.
    pub(crate) guarded: OpenApiRouter<Shared>,
    /// The routes never behind it.
    pub(crate) open: OpenApiRouter<Shared>,
    /// Each route's facts.
    pub(crate) table: Vec<Route>,
}

impl Default for Routes {
    fn default() -> Self {
        Routes { guarded: OpenApiRouter::new(), open: OpenApiRouter::new(), table: Vec::new() }
    }
}

impl Routes {
    /// Adds a route behind the keys its facts name.
    pub(crate) fn guarded(self, handler: UtoipaMethodRouter<Shared>, facts: &'static Facts) -> Self {
        self.add(true, handler, facts)
    }

    /// Adds a route no token guards.
    pub(crate) fn open(self, handler: UtoipaMethodRouter<Shared>, facts: &'static Facts) -> Self {
        self.add(false, handler, facts)
    }

    /// The handler's one operation (a handler is one method on one path) with its facts.
    fn add(mut self, guarded: bool, handler: UtoipaMethodRouter<Shared>, facts: &'static Facts) -> Self {
        let found: Vec<(String, Method, Option<String>)> = handler
            .1
            .paths
            .iter()
            .flat_map(|(path, item)| operations(item).map(move |(m, op)| (path.clone(), m, op.operation_id.clone())))
            .collect();
        let [(path, method, operation)] = <[_; 1]>::try_from(found).unwrap_or_else(|f| {
            panic!("a handler is one #[utoipa::path] of one method: {:?}", f.iter().map(|o| &o.0).collect::<Vec<_>>())
        });
        assert!(operation.is_some(), "{method} {path} has no operation_id");
        self.table.push(Route { method, path, guarded, facts });
        match guarded {
            true => self.guarded = self.guarded.routes(handler),
            false => self.open = self.open.routes(handler),
        }
        self
    }

    /// Every error `route` answers, each with the status its face gives it: those of its facts,
    /// and those every route of its kind answers (behind the token: a missing or refused key; a
    /// path parameter: one that is no text; a body: one that is not JSON, too large, not
    /// `application/json`, or of the wrong shape). `body` says whether it takes one.
    pub(crate) fn answers(route: &Route, body: bool) -> Vec<Code> {
        let mut codes = Vec::new();
        if route.guarded {
            codes.extend([Code::Unauthorized, Code::Forbidden]);
        }
        if route.path.contains('{') {
            codes.push(Code::InvalidPath);
        }
        if body {
            codes.extend([Code::InvalidJson, Code::PayloadTooLarge, Code::UnsupportedMediaType, Code::InvalidRequest]);
        }
        let turns = if route.facts.plays { TURN_ERRORS } else { &[] };
        for code in route.facts.answers.iter().chain(turns) {
            if !codes.contains(code) {
                codes.push(*code);
            }
        }
        codes
    }
}

/// The route of `table` the router matched for `method` on `path` (its pattern:
/// `/v1/sessions/{id}`).
pub(crate) fn find<'a>(table: &'a [Route], method: &Method, path: &str) -> Option<&'a Route> {
    table.iter().find(|r| r.method == *method && r.path == path)
}

/// A path's operations, with their methods.
fn operations(item: &PathItem) -> impl Iterator<Item = (Method, &Operation)> {
    [
        (Method::GET, &item.get),
        (Method::POST, &item.post),
        (Method::PUT, &item.put),
        (Method::PATCH, &item.patch),
        (Method::DELETE, &item.delete),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.as_ref().map(|op| (m, op)))
}

#[cfg(test)]
mod tests {
    use axum::extract::Path;
    use ruleweave::ErrorKind;
    use tower::ServiceExt as _;
    use utoipa_axum::routes;

    use super::*;

    /// A route of the test's own: echoes its id.
    #[utoipa::path(get, path = "/v1/throwaway/{id}", operation_id = "throwaway", tag = "server",
        params(("id" = String, Path, description = "Anything")),
        responses((status = 200, description = "The id", body = String)))]
    async fn throwaway(Path(id): Path<String>) -> String {
        id
    }

    const THROWAWAY: Facts = Facts::keys(&[O, I]).answers(&[Code::Engine(ErrorKind::NotFound)]);

    fn with_throwaway() -> Routes {
        super::super::routes().guarded(routes!(throwaway), &THROWAWAY)
    }

    /// A route is its handler, its facts and one line in the table: the router serves it, the
    /// guard holds it to the keys its facts name, and the document shows it with its keys and
    /// the errors it answers, worded by the error table.
    #[tokio::test]
    async fn a_route_added_in_one_place_is_served_guarded_and_documented() {
        let doc = super::super::openapi::document_of(with_throwaway());
        let op = &doc["paths"]["/v1/throwaway/{id}"]["get"];
        assert_eq!(op["operationId"], "throwaway");
        let schemes: Vec<String> =
            op["security"].as_array().unwrap().iter().flat_map(|s| s.as_object().unwrap().keys().cloned()).collect();
        assert_eq!(schemes, ["operatorToken", "issuedKey"]);
        let said = |status: &str| op["responses"][status]["description"].as_str().unwrap_or("").to_owned();
        assert_eq!(said("200"), "The id");
        assert_eq!(said("401"), "The token is missing or wrong");
        assert_eq!(said("403"), "A key that may not call the route, or play the pack");
        assert_eq!(said("400"), "A path parameter that is not text (`%ff`)");
        assert_eq!(said("404"), "No such pack, session, checkpoint, job, key or route");
        assert!(op["responses"].get("415").is_none(), "no body, no body's errors: {op}");

        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let engine = ruleweave::Engine::builder(root).build();
        let settings = super::super::Settings { token: Some("a-token-of-sixteen".into()), ..Default::default() };
        let app =
            super::super::app_of(std::sync::Arc::new(super::super::AppState::new(engine, settings)), with_throwaway());
        let ask = |method: &str, path: &str, key: &str, body: &str| {
            axum::http::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "localhost")
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body.to_owned()))
                .unwrap()
        };
        let text = |r: axum::response::Response| async move {
            let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
            String::from_utf8(bytes.to_vec()).unwrap()
        };
        let r = app.clone().oneshot(ask("GET", "/v1/throwaway/ahoy", "a-token-of-sixteen", "")).await.unwrap();
        assert_eq!((r.status().as_u16(), text(r).await), (200, "ahoy".to_owned()));
        let r = app.clone().oneshot(ask("GET", "/v1/throwaway/ahoy", "no-such-key", "")).await.unwrap();
        assert_eq!(r.status(), 401);
        // A session's key may not call it: its facts name the operator's and issued keys.
        let made = app.clone().oneshot(ask("POST", "/v1/sessions", "a-token-of-sixteen", r#"{"pack": "pirate"}"#));
        let made: serde_json::Value = serde_json::from_str(&text(made.await.unwrap()).await).unwrap();
        let key = made["key"].as_str().expect("a session made with the token has a key");
        let r = app.clone().oneshot(ask("GET", "/v1/throwaway/ahoy", key, "")).await.unwrap();
        assert_eq!(r.status(), 403);
        assert!(text(r).await.contains("a session key may not call GET /v1/throwaway/{id}"));
    }
}

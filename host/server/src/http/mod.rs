//! The HTTP API, the web console and the chat face: the route table, the router and the run
//! loop here, one file per concern beside it.
//!
//! [`routes()`] is the table of every route, from which the router, the guard and the OpenAPI
//! document are made; [`app`] builds the router from a [`Shared`] state, so tests call it without
//! a socket; [`run`] binds it, finishes interrupted long turns, expires finished sessions, and
//! shuts down gracefully (requests and turns in flight finish first).

mod access;
mod api;
mod body;
mod error;
mod extract;
mod follow;
mod jobs;
mod keys;
mod lab;
mod listen;
mod metrics;
mod openai;
pub mod openapi;
mod outcomes;
mod params;
mod routes;
mod simulate;
mod spending;
mod sse;
mod state;
mod stepping;
mod turns;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::Semaphore;
use utoipa_axum::routes;

pub use crate::config::Settings;
pub use error::ApiError;
use error::Code;
pub use metrics::Metrics;
use routes::Route;
pub use routes::Routes;
pub use state::{AppState, Shared, StreamSlot};

/// An engine on `root`'s packs that plays on their stand-in models (and search stand-ins), into
/// a store of its own, with the shipped native nodes and scorers: what the server's batches of
/// simulated games run on.
pub async fn standin_engine(root: &std::path::Path) -> ruleweave::Result<ruleweave::Engine> {
    use ruleweave::embed::{self, Model, Options};
    let options = Options { root: root.to_owned(), store: "memory".into(), model: Model::Standin };
    embed::open_engine(options, ruleweave_natives::register).await
}

/// The table of routes (the console's page, which is no API, aside): each handler with its
/// facts, declared beside it (see `routes.rs`).
pub fn routes() -> Routes {
    Routes::default()
        .guarded(routes!(keys::whoami), &keys::WHOAMI)
        .guarded(routes!(api::packs), &api::PACKS)
        .guarded(routes!(api::graph), &api::GRAPH)
        .guarded(routes!(follow::events), &follow::EVENTS)
        .guarded(routes!(api::create), &api::CREATE)
        .guarded(routes!(api::list), &api::LIST)
        .guarded(routes!(api::session), &api::SESSION)
        .guarded(routes!(api::delete), &api::DELETE)
        .guarded(routes!(api::turn), &api::TURN)
        .guarded(routes!(stepping::resume), &stepping::RESUME)
        .guarded(routes!(stepping::edit), &stepping::EDIT)
        .guarded(routes!(api::input), &api::INPUT)
        .guarded(routes!(follow::session_events), &follow::SESSION_EVENTS)
        .guarded(routes!(api::checkpoints), &api::CHECKPOINTS)
        .guarded(routes!(api::conversation), &api::CONVERSATION)
        .guarded(routes!(api::fork), &api::FORK)
        .guarded(routes!(api::replay), &api::REPLAY)
        .guarded(routes!(simulate::simulate), &simulate::SIMULATE)
        .guarded(routes!(jobs::start), &jobs::START)
        .guarded(routes!(jobs::start_sweep), &jobs::START_SWEEP)
        .guarded(routes!(outcomes::outcomes), &outcomes::OUTCOMES)
        .guarded(routes!(outcomes::erase_player), &outcomes::ERASE_PLAYER)
        .guarded(routes!(params::write_weights), &params::WRITE_WEIGHTS)
        .guarded(routes!(params::write), &params::WRITE)
        .guarded(routes!(jobs::job), &jobs::JOB)
        .guarded(routes!(jobs::stop), &jobs::STOP)
        .guarded(routes!(jobs::events), &jobs::EVENTS)
        .guarded(routes!(api::metrics), &api::METRICS)
        .guarded(routes!(openai::models), &openai::MODELS)
        .guarded(routes!(openai::model), &openai::MODEL)
        .guarded(routes!(openai::completions), &openai::COMPLETIONS)
        .guarded(routes!(keys::issue), &keys::ISSUE)
        .guarded(routes!(keys::list), &keys::LIST)
        .guarded(routes!(keys::revoke), &keys::REVOKE)
        .open(routes!(api::healthz), &api::HEALTHZ)
        .open(routes!(openapi::openapi), &openapi::OPENAPI)
}

/// The router: the [`routes()`] (the guarded ones behind the token when there is one), the console
/// at `/`, and the limits every request meets.
pub fn app(state: Shared) -> Router {
    app_of(state, routes())
}

/// The router of `routes`: what [`app`] serves, and a test's table with a route of its own.
fn app_of(state: Shared, routes: Routes) -> Router {
    let Routes { guarded, open, table } = routes;
    let table: Arc<[Route]> = table.into();
    let (guarded, _) = guarded
        .route_layer(middleware::from_fn_with_state(state.clone(), access::guard))
        .route_layer(axum::Extension(table))
        .split_for_parts();
    let (open, _) = open.split_for_parts();
    Router::new()
        .merge(guarded)
        .merge(open)
        .route("/", get(api::console))
        .route_layer(middleware::from_fn(crate::telemetry::request_span))
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::wrong_method)
        .layer(DefaultBodyLimit::max(state.settings.body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), bounded_body))
        .layer(middleware::from_fn_with_state(state.clone(), known_host))
        .with_state(state)
}

/// Without a token, a request must name this machine in its `Host` (or a name the settings
/// allow): a page on another site whose name a DNS rebinding points here cannot drive the API.
async fn known_host(State(state): State<Shared>, req: Request, next: Next) -> Response {
    if state.settings.token.is_none() {
        let host = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        // A request line in absolute form (`GET http://other.example/...`) names its host too.
        let target = req.uri().authority().map(|a| a.as_str());
        if !allowed_host(host, &state.settings.allowed_hosts)
            || target.is_some_and(|t| !allowed_host(t, &state.settings.allowed_hosts))
        {
            return ApiError::new(
                Code::HostNotAllowed,
                "this server answers requests for localhost only; set a token, or list the name in \
                 [server] allowed_hosts",
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// Whether `host` (a `Host` header: a name or address, maybe with a port) is a loopback name or
/// one of `allowed`. It is read as an authority (`name[:port]`, `[v6][:port]`), whole: anything
/// after an address in brackets but its port (`[::1].evil.example`), or a user's part, is no
/// host of this machine.
fn allowed_host(host: &str, allowed: &[String]) -> bool {
    let Some((name, v6)) = host_of(&host.trim().to_ascii_lowercase()) else { return false };
    let loopback = match v6 {
        true => name.parse::<std::net::Ipv6Addr>().is_ok_and(|ip| ip.is_loopback()),
        false => {
            name == "localhost"
                || name.ends_with(".localhost")
                || name.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
        }
    };
    loopback || (!v6 && allowed.contains(&name))
}

/// The host of an authority (`name`, `name:port`, `[v6]`, `[v6]:port`), and whether it was an
/// address in brackets; `None` for anything else (more after the brackets than a port, a port
/// that is no number, a user's part, an empty name).
fn host_of(authority: &str) -> Option<(String, bool)> {
    let port_ok = |p: &str| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = authority.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            _ if after.is_empty() => Some((ip.to_owned(), true)),
            Some(port) if port_ok(port) => Some((ip.to_owned(), true)),
            _ => None,
        };
    }
    let name = match authority.rsplit_once(':') {
        Some((name, port)) if port_ok(port) => name,
        Some(_) => return None,
        None => authority,
    };
    let bad = |c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_');
    (!name.is_empty() && !name.contains(bad)).then(|| (name.to_owned(), false))
}

/// Reads a request's body before the handler sees it: refused at once (413) when its
/// `Content-Length` is over the limit, refused (408) when it does not arrive within the body
/// timeout. A client that starts a body and never finishes cannot hold a connection for good.
/// With a token, the key is checked from the headers first: a request with a body and no key
/// the server knows is answered 401 and its body never read (no open route takes a body), so
/// nobody without a key has anything buffered; the key found rides along for the guard.
async fn bounded_body(State(state): State<Shared>, mut req: Request, next: Next) -> Response {
    let limit = state.settings.body_limit;
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return ApiError::too_large().into_response();
    }
    let has_body = declared.is_some_and(|n| n > 0) || req.headers().contains_key(header::TRANSFER_ENCODING);
    if !has_body || req.method() == Method::GET {
        return next.run(req).await;
    }
    if let Some(token) = &state.settings.token {
        let bearer = access::bearer(&req);
        match access::identify(&state, token, &bearer).await {
            Ok(found) => {
                req.extensions_mut().insert(found);
            }
            Err(e) => return e.into_response(),
        }
    }
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(state.settings.body_timeout, axum::body::to_bytes(body, limit)).await {
        Err(_) => ApiError::new(
            Code::RequestTimeout,
            format!("the body did not arrive within {} ms", state.settings.body_timeout.as_millis()),
        )
        .into_response(),
        Ok(Err(e)) if too_long(&e) => ApiError::too_large().into_response(),
        Ok(Err(e)) => ApiError::new(Code::InvalidRequest, format!("cannot read the body: {e}")).into_response(),
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
    }
}

/// Whether reading a body failed because it was longer than the limit.
fn too_long(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// Compares two secrets in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Serves `state` on `addr` until Ctrl-C or SIGTERM.
pub async fn run(state: Shared, addr: std::net::SocketAddr) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    serve(state, listener).await
}

/// Serves `state` on `listener` (bound already: port 0 picks a free one) until Ctrl-C or SIGTERM.
pub async fn serve(state: Shared, listener: tokio::net::TcpListener) -> Result<()> {
    let bound = listener.local_addr()?;
    // The keys and jobs tables, migrated before the first request needs them.
    state.tables().await?;
    match state.engine.finish_interrupted().await {
        Ok(0) => {}
        Ok(n) => tracing::info!("finished {n} turn(s) a crash had interrupted"),
        Err(e) => tracing::error!("cannot look for interrupted turns: {e}"),
    }
    let expiry = {
        let engine = state.engine.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tick.tick().await;
                match engine.expire_finished().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!("expired {n} finished session(s)"),
                    Err(e) => tracing::error!("cannot expire sessions: {e}"),
                }
            }
        })
    };
    let rounds = tokio::spawn(close_rounds(state.clone()));
    eprintln!("ruleweave: listening on http://{bound}");
    listen(state.clone(), listener, shutdown()).await;
    expiry.abort();
    rounds.abort();
    // A job stops at its next game and records that it was cancelled, before the tasks are waited for.
    state.job.stop_all();
    state.tasks.close();
    state.tasks.wait().await;
    // And the work no task waits for any more: a lobby post whose client left, the last sweep.
    state.engine.settled().await;
    eprintln!("ruleweave: stopped");
    Ok(())
}

/// Answers requests on `listener` as `serve` does (the same router behind the same listener:
/// header and body deadlines, the connection caps, each request's peer address) until `shutdown`
/// completes, then waits for the requests in flight; without `serve`'s own work (finishing
/// interrupted turns, expiring sessions, closing lobby rounds), which a caller may do itself.
pub async fn listen(state: Shared, listener: tokio::net::TcpListener, shutdown: impl std::future::Future<Output = ()>) {
    let caps =
        listen::Caps { total: state.settings.max_connections, per_client: state.settings.max_connections_per_client };
    let header_timeout = state.settings.header_timeout;
    listen::serve(listener, app(state), header_timeout, caps, shutdown).await;
}

/// Closes lobby rounds whose timeout passed, four times a second, whichever replica their
/// answers reached: the store says which rounds are open, and a session's lock makes one replica
/// close each. The closing turns run on the engine's threads, as every turn does. A sweep does not
/// wait for the one before (a round whose model is slow is left to the sweep closing it, so it
/// holds up no round that falls due meanwhile); at most [`SWEEPS_AT_ONCE`] run at once.
async fn close_rounds(state: Shared) {
    let sweeps = Arc::new(Semaphore::new(SWEEPS_AT_ONCE));
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Ok(permit) = sweeps.clone().try_acquire_owned() else { continue };
        let state = state.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match state.engine.close_due_rounds().await {
                Ok(closed) => {
                    for (id, result) in closed {
                        let pack = state.engine.info(&id).await.map(|i| i.pack).unwrap_or_default();
                        match result {
                            Ok(turn) => state.metrics.turn(&pack, &turn),
                            Err(e) => {
                                let e = turns::turn_failed(&state, &pack, e);
                                tracing::error!(session = %id, "cannot close the lobby round: {e}");
                            }
                        }
                    }
                }
                Err(e) => tracing::error!("cannot look for lobby rounds to close: {e}"),
            }
        });
    }
}

/// How many lobby sweeps may run at once (each closes up to eight rounds at once).
const SWEEPS_AT_ONCE: usize = 4;

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    eprintln!("ruleweave: shutting down; finishing the turns in flight");
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_loopback_hosts_and_allowed_names_pass() {
        let allowed = vec!["game.local".to_owned()];
        for ok in
            ["localhost", "localhost:8080", "127.0.0.1:9", "[::1]:8080", "LOCALHOST", "a.localhost", "game.local:80"]
        {
            assert!(super::allowed_host(ok, &allowed), "{ok}");
        }
        for no in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "",
            "[::2]:80",
            "localhost.evil.example",
            "[::1].evil.example",
            "[::1]evil.example:80",
            "[::1]:80.evil.example",
            "localhost:80:80",
            "evil@localhost",
            "127.0.0.1:http",
        ] {
            assert!(!super::allowed_host(no, &allowed), "{no}");
        }
    }

    /// The auth guard holds every route of the real table: without the token each guarded
    /// operation answers 401 (before any handler runs), and the open ones answer without it.
    #[tokio::test]
    async fn the_token_guards_every_route_of_the_table_but_the_open_ones() {
        use tower::ServiceExt as _;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let engine = ruleweave::Engine::builder(root).build();
        let settings = super::Settings { token: Some("a-token-of-sixteen".into()), ..Default::default() };
        let app = super::app(std::sync::Arc::new(super::AppState::new(engine, settings)));
        let ask = |method: &str, path: &str| {
            let path =
                path.replace("{id}", "0123456789abcdef").replace("{pack}", "pirate").replace("{model}", "pirate");
            axum::http::Request::builder()
                .method(method.to_ascii_uppercase().as_str())
                .uri(path)
                .header("host", "localhost")
                .header("content-type", "application/json")
                .body(axum::body::Body::from("{}"))
                .unwrap()
        };
        let super::Routes { guarded, open, .. } = super::routes();
        let mut walked = Vec::new();
        for (path, item) in &guarded.into_openapi().paths.paths {
            for method in super::openapi::tests::methods(item) {
                let r = app.clone().oneshot(ask(method, path)).await.unwrap();
                assert_eq!(r.status(), 401, "{method} {path} answers without the token");
                walked.push(format!("{method} {path}"));
            }
        }
        for must in ["post /v1/packs/{pack}/simulate", "post /v1/chat/completions", "get /metrics"] {
            assert!(walked.iter().any(|w| w == must), "the walk missed {must}: {walked:?}");
        }
        for (path, item) in &open.into_openapi().paths.paths {
            for method in super::openapi::tests::methods(item) {
                let r = app.clone().oneshot(ask(method, path)).await.unwrap();
                assert_ne!(r.status(), 401, "{method} {path} is open");
            }
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(super::same(b"abc", b"abc"));
        assert!(!super::same(b"abc", b"abd"));
        assert!(!super::same(b"abc", b"abcd"));
        assert!(!super::same(b"", b"a"));
    }
}

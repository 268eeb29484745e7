//! `ruleweave serve`: the HTTP API, the web console, health and metrics.
//!
//! [`app`] builds the router from a [`Shared`] state, so tests call it without a socket;
//! [`run`] binds it, finishes interrupted long turns, expires finished sessions, and shuts down
//! gracefully (requests and turns in flight finish first).

mod api;
mod error;
mod metrics;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ruleweave::Engine;
use tokio_util::task::TaskTracker;

pub use error::ApiError;
pub use metrics::Metrics;

/// What every request shares.
pub struct AppState {
    pub engine: Engine,
    pub metrics: Metrics,
    /// Turns in flight: they finish (and are recorded) even when their client has gone, and a
    /// graceful shutdown waits for them.
    pub tasks: TaskTracker,
    pub token: Option<String>,
    pub body_limit: usize,
}

/// The state handlers see.
pub type Shared = Arc<AppState>;

impl AppState {
    pub fn new(engine: Engine, token: Option<String>, body_limit: usize) -> Self {
        let state = AppState { engine, metrics: Metrics::default(), tasks: TaskTracker::new(), token, body_limit };
        state.load_packs();
        state
    }

    /// Loads every pack (the engine keeps how each fared, for `GET /v1/packs`).
    pub fn load_packs(&self) {
        match self.engine.load_all() {
            Ok(all) => {
                for (name, result) in all {
                    if let Err(e) = result {
                        tracing::error!(pack = %name, "the pack did not load: {e}");
                    }
                }
            }
            Err(e) => tracing::error!("cannot list the packs: {e}"),
        }
    }
}

/// The router: the API under `/v1` (behind the token when there is one), `/metrics`,
/// `/healthz`, and the console at `/`.
pub fn app(state: Shared) -> Router {
    let guarded = Router::new()
        .route("/v1/packs", get(api::packs))
        .route("/v1/events", get(api::events))
        .route("/v1/sessions", post(api::create))
        .route("/v1/sessions/{id}", get(api::session).delete(api::delete))
        .route("/v1/sessions/{id}/turns", post(api::turn))
        .route("/v1/sessions/{id}/checkpoints", get(api::checkpoints))
        .route("/v1/sessions/{id}/fork", post(api::fork))
        .route("/metrics", get(api::metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .merge(guarded)
        .route("/healthz", get(api::healthz))
        .route("/", get(api::console))
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::wrong_method)
        .layer(DefaultBodyLimit::max(state.body_limit))
        .with_state(state)
}

/// Lets a request through when it carries the token (or when there is none).
async fn auth(State(state): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = req
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same(given.as_bytes(), token.as_bytes()) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(req).await
}

/// Compares two secrets in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Serves `state` on `addr` until Ctrl-C or SIGTERM.
pub async fn run(state: Shared, addr: std::net::SocketAddr) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
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
    eprintln!("ruleweave: listening on http://{bound}");
    axum::serve(listener, app(state.clone())).with_graceful_shutdown(shutdown()).await?;
    expiry.abort();
    state.tasks.close();
    state.tasks.wait().await;
    eprintln!("ruleweave: stopped");
    Ok(())
}

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
    fn secrets_compare_whole() {
        assert!(super::same(b"abc", b"abc"));
        assert!(!super::same(b"abc", b"abd"));
        assert!(!super::same(b"abc", b"abcd"));
        assert!(!super::same(b"", b"a"));
    }
}

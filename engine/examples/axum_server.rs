//! An axum server embedding ruleweave: the engine shared as the router's state, the session
//! store opened from a URL, the session looked up per request, a turn's events streamed as
//! server-sent events, and the packs reloaded as their files are saved. `docs/embedding.md` walks
//! through it; `engine/tests/embedding.rs` drives it.
//!
//! ```sh
//! cargo run -p ruleweave-engine --example axum_server      # http://127.0.0.1:3000, the stand-in model
//! curl -s localhost:3000/games -H 'content-type: application/json' -d '{"pack": "pirate"}'
//! curl -sN localhost:3000/games/ID/moves -H 'content-type: application/json' -d '{"message": "Ahoy!"}'
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use ruleweave::{Engine, ErrorKind, Event, EventSink, LlmChoice};
use serde_json::{Value, json};

/// The routes: `POST /games` opens a session, `POST /games/{id}/moves` plays a turn and streams it.
pub fn app(engine: Engine) -> Router {
    Router::new().route("/games", post(new_game)).route("/games/{id}/moves", post(play)).with_state(engine)
}

/// `{"pack": "pirate", "options": {"difficulty": "hard"}}` → `{"id": "..."}`.
async fn new_game(State(engine): State<Engine>, Json(body): Json<Value>) -> Result<Json<Value>, Problem> {
    let pack = body["pack"].as_str().unwrap_or_default();
    let options = body["options"].as_object().cloned().unwrap_or_default();
    let session = engine.open(pack, &options).await?;
    let id = session.id().to_owned();
    // Kept live in the engine: the next request finds it without reading the store.
    engine.keep(session);
    Ok(Json(json!({ "id": id })))
}

/// The move is the turn's input; the answer is a stream: an `event` per thing the turn did (a
/// node, a model call, a token of a streamed reply), then `result` (or `error`).
async fn play(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Json(input): Json<Value>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, Problem> {
    // Any replica finds the session: from memory when it is live here, else from the store.
    let live = engine.session(&id).await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<SseEvent>();
    let events = tx.clone();
    let sink: EventSink = Arc::new(move |e: &Event| {
        let _ = events.send(SseEvent::default().event("event").data(serde_json::to_string(e).unwrap_or_default()));
    });
    // The engine plays the turn on its own threads, so a slow pack never stalls the server's
    // other requests. Turns on one session run one at a time. (Spawned, not awaited: the stream
    // answers, and the turn finishes even if the client leaves.)
    tokio::spawn(async move {
        let mut session = live.lock().await;
        let last = match session.turn_with_events(input, sink).await {
            // `display` is what a person sees: the pack's reply, status line and details.
            Ok(turn) => SseEvent::default().event("result").data(
                json!({"turn": turn.turn, "output": turn.output, "display": turn.display, "finished": turn.finished})
                    .to_string(),
            ),
            Err(e) => SseEvent::default().event("error").data(json!({"error": e.to_string()}).to_string()),
        };
        let _ = tx.send(last);
    });
    Ok(Sse::new(stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) })))
}

/// An engine error as an HTTP answer: its kind says the status.
pub struct Problem(ruleweave::Error);

impl From<ruleweave::Error> for Problem {
    fn from(e: ruleweave::Error) -> Self {
        Problem(e)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = match self.0.kind() {
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Input => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::Finished | ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Llm => StatusCode::BAD_GATEWAY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, Json(json!({"error": self.0.to_string()}))).into_response()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // `sqlite://games.db`, `postgres://...` for several replicas, or `memory`.
    let url = std::env::var("STORE").unwrap_or_else(|_| "memory".into());
    let store = ruleweave::store::open(&url).await?;
    let engine = Engine::builder(root).llm(LlmChoice::from_env()?).store(store).build();
    for (pack, loaded) in engine.packs().load_all()? {
        if let Err(e) = loaded {
            eprintln!("{pack} does not load:\n{e}");
        }
    }
    // Hot reload: a save that validates is live on the next turn; one that does not is refused
    // and the last good version goes on serving.
    let _watcher = ruleweave::Watcher::start(engine.packs())?;
    let mut reloads = engine.packs().subscribe();
    tokio::spawn(async move {
        while let Ok(e) = reloads.recv().await {
            eprintln!("{} {:?} (version {})", e.pack, e.status, e.version.as_deref().unwrap_or("none"));
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    eprintln!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app(engine)).await?;
    Ok(())
}

//! One way to run a turn over HTTP, for the JSON API and the chat face alike: a pack's work runs
//! on a blocking thread in one of its pack's slots, every turn and failure is counted, and
//! internal and store failures are logged, whichever face asked. Each face then answers the
//! outcome in its own shape (see `error.rs` for the statuses).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use ruleweave::store::Store;
use ruleweave::{ErrorKind, EventSink, LiveSession, Session, TurnResult};
use serde_json::Value;

use super::Shared;

/// What a turn plays.
pub(crate) enum Move {
    /// The pack's input: a map of its fields, or a line of text the engine reads as a person's.
    Input(Value),
    /// A chat message: a JSON object is the input's fields as they are; other text goes to the
    /// pack's one text field (or its `typed:` reader).
    Chat(String),
}

/// A turn played: its result, and the state it left.
pub(crate) struct Played {
    pub result: TurnResult,
    pub state: Value,
}

/// Plays `what` on `live` (waiting for the turns before it), streaming its events to `sink`, and
/// counts it. A failure comes back as the engine's error, counted and (when it is the server's
/// own) logged.
pub(crate) async fn play(
    s: &Shared,
    live: LiveSession,
    what: Move,
    sink: Option<EventSink>,
) -> ruleweave::Result<Played> {
    let store = s.engine.store().clone();
    let turn = on_turn_thread(s, live, move |session| {
        Box::pin(async move {
            let input = match what {
                Move::Input(input) => input,
                Move::Chat(text) => chat_input(session, &text)?,
            };
            let result = match sink {
                Some(sink) => session.turn_with_events(input, sink).await?,
                None => session.turn(input).await?,
            };
            tend_player_keys(&store, session).await;
            Ok(Played { result, state: session.state() })
        })
    })
    .await;
    match turn {
        Ok((pack, played)) => {
            s.metrics.turn(&pack, &played.result);
            Ok(played)
        }
        Err((pack, e)) => {
            s.metrics.failed_turn(&pack);
            Err(failed(s, &pack, e))
        }
    }
}

/// A lobby's player keys kept to the players at its table and those joining it: a player a turn
/// took off the table (the party's `-fox`) has a key that opens nothing any more. Called with the
/// session locked, so no join or leave comes in between; a failure is logged (the turn stands).
pub(crate) async fn tend_player_keys(store: &Arc<dyn Store>, session: &mut Session) {
    let Some(keys) = store.keys() else { return };
    let tended = async {
        let Some(lobby) = session.lobby().await? else { return Ok(()) };
        let table: Vec<String> = lobby.players.into_iter().chain(lobby.joining).collect();
        keys.keep_player_keys(session.id(), &table).await
    };
    if let Err(e) = tended.await {
        tracing::error!(session = %session.id(), "cannot drop the keys of players who left: {e}");
    }
}

/// A chat message as a turn's input (see [`Move::Chat`]).
fn chat_input(session: &Session, text: &str) -> ruleweave::Result<Value> {
    let trimmed = text.trim();
    if trimmed.starts_with('{')
        && let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(trimmed)
    {
        return Ok(Value::Object(fields));
    }
    // A line the pack does not read says what to send instead; a reader that fails otherwise (a
    // script that throws, a limit) fails as it would on the JSON API.
    session.input_from_text(text).map_err(|e| match e.kind() {
        ErrorKind::Input if !e.is_refusal() => ruleweave::Error::new(
            ErrorKind::Input,
            format!(
                "{}; send the message as a JSON object of those fields (the pack is not played by text alone)",
                e.detail()
            ),
        ),
        _ => e,
    })
}

/// An engine failure of `pack`'s, counted by its code, and logged when it is the server's own
/// (a bug, a store that fails) rather than the request's or the pack's.
pub(crate) fn failed(s: &Shared, pack: &str, e: ruleweave::Error) -> ruleweave::Error {
    s.metrics.error(pack, e.kind().code());
    if matches!(e.kind(), ErrorKind::Internal | ErrorKind::Store) {
        tracing::error!(pack, "{e}");
    }
    // A refusal answers the player in the pack's words; where the script said it is the designer's.
    if e.is_refusal() {
        tracing::info!(pack, place = ?e.origin().map(ToString::to_string), "refused: {}", e.detail());
    }
    e
}

/// Pack work that is no turn of a live session (a new session's `init`, a fork's, a replay, a
/// conversation's opening): on a blocking thread in one of the pack's slots, as a turn is, so a
/// pack whose scripts spin stalls neither the server's workers nor the other packs. A name that
/// is no pack gets no slot (the work fails at once, and names grow no table).
pub(crate) async fn on_pack_thread<T, F>(
    s: &Shared,
    pack: &str,
    work: impl FnOnce() -> F + Send + 'static,
) -> ruleweave::Result<T>
where
    T: Send + 'static,
    F: Future<Output = ruleweave::Result<T>>,
{
    let slot = if s.engine.has_pack(pack) { Some(s.turn_slot(pack).await) } else { None };
    ruleweave::blocking::run_async(move || async move {
        let _slot = slot;
        work().await
    })
    .await
    .unwrap_or_else(|e| Err(e.into()))
}

/// Work on a session that may run a turn: done on a blocking thread, in one of its pack's
/// slots. Scripts and templates are synchronous work, and a pack whose scripts spin into their
/// wall limit must not stall the server's other requests, nor take every thread from the other
/// packs. Returns the pack's name with the outcome.
pub(crate) async fn on_turn_thread<T: Send + 'static>(
    s: &Shared,
    live: LiveSession,
    work: impl for<'a> FnOnce(&'a mut Session) -> BoxFuture<'a, ruleweave::Result<T>> + Send + 'static,
) -> Result<(String, T), (String, ruleweave::Error)> {
    let mut session = live.lock_owned().await;
    let pack = session.pack().name().to_owned();
    let slot = s.turn_slot(&pack).await;
    // The slot goes with the work: a request dropped while it waits does not free it early.
    let done = ruleweave::blocking::run_async(move || async move {
        let _slot = slot;
        work(&mut session).await
    })
    .await
    .unwrap_or_else(|e| Err(e.into()));
    match done {
        Ok(v) => Ok((pack, v)),
        Err(e) => Err((pack, e)),
    }
}

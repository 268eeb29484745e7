//! One way to run a turn over HTTP, for the JSON API and the chat face alike: a pack's work runs
//! in one of its pack's slots (the engine plays it on its own threads), every turn and failure is counted, and
//! internal and store failures are logged, whichever face asked. Each face then answers the
//! outcome in its own shape (see `error.rs` for the statuses).

use crate::tables::Keys;
use futures_util::future::BoxFuture;
use ruleweave::{Breakpoints, ErrorKind, EventSink, LiveSession, Session, TurnResult};
use serde_json::Value;
use tracing::Instrument as _;

use super::Shared;

/// What a turn plays.
pub(crate) enum Move {
    /// The pack's input: a map of its fields, or a line of text the engine reads as a person's.
    Input(Value),
    /// A chat message: a JSON object is the input's fields as they are; other text goes to the
    /// pack's one text field (or its `typed:` reader).
    Chat(String),
    /// The turn a breakpoint holds, resumed; at a pause point of the pack, the next turn with
    /// this input (an empty line when none).
    Resume(Option<Value>),
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
    breaks: Breakpoints,
    sink: Option<EventSink>,
    by: Option<String>,
) -> ruleweave::Result<Played> {
    let keys = s.tables().await?.map(|t| t.keys.clone());
    let turn = on_turn_thread(s, live, move |session| {
        Box::pin(async move {
            session.acting_as(by);
            let result = match what {
                Move::Input(input) => session.turn_breaking(input, breaks, sink).await?,
                Move::Chat(text) => {
                    let input = chat_input(session, &text)?;
                    session.turn_breaking(input, breaks, sink).await?
                }
                Move::Resume(input) => session.resume(input, breaks, sink).await?,
            };
            tend_player_keys(keys.as_deref(), session).await;
            Ok(Played { result, state: session.state() })
        })
    })
    .await;
    match turn {
        Ok((pack, played)) => {
            s.metrics.turn(&pack, &played.result);
            Ok(played)
        }
        Err((pack, e)) => Err(turn_failed(s, &pack, e)),
    }
}

/// A lobby's player keys kept to the players at its table and those joining it: a player a turn
/// took off the table (the party's `-fox`) has a key that opens nothing any more. Called with the
/// session locked, so no join or leave comes in between; a failure is logged (the turn stands).
pub(crate) async fn tend_player_keys(keys: Option<&dyn Keys>, session: &mut Session) {
    let Some(keys) = keys else { return };
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
    // A pack's `typed:` script reads the line in the turn, on the engine's threads, and fails as
    // it would on the JSON API; a line the pack does not read says what to send instead.
    if session.pack().reads_typed_lines() {
        return Ok(Value::String(text.to_owned()));
    }
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

/// A turn of `pack`'s that failed, whoever played it (a request, the round sweep): counted as a
/// failed turn, and as [`failed`] counts every failure.
pub(crate) fn turn_failed(s: &Shared, pack: &str, e: ruleweave::Error) -> ruleweave::Error {
    s.metrics.failed_turn(pack);
    failed(s, pack, e)
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
/// conversation's opening), in one of the pack's slots, as a turn is: a pack whose scripts spin
/// takes no more than its slots from the other packs. The engine plays the scripts on its own
/// threads, so the server's workers stay free. A name that is no pack gets no slot (the work
/// fails at once, and names grow no table).
pub(crate) async fn on_pack_thread<T, F>(
    s: &Shared,
    pack: &str,
    work: impl FnOnce() -> F + Send + 'static,
) -> ruleweave::Result<T>
where
    T: Send + 'static,
    F: Future<Output = ruleweave::Result<T>> + Send + 'static,
{
    let slot = if s.engine.packs().contains(pack) { Some(s.turn_slot(pack).await) } else { None };
    // A task of its own, holding the slot: a request dropped while it runs does not free the
    // slot early, nor leave the work half-done.
    let done = tokio::spawn(
        async move {
            let _slot = slot;
            work().await
        }
        .in_current_span(),
    );
    done.await.unwrap_or_else(|e| Err(ruleweave::Error::new(ErrorKind::Internal, format!("pack work failed: {e}"))))
}

/// Work on a session that may run a turn, in one of its pack's slots (see [`on_pack_thread`]),
/// with the session locked. Returns the pack's name with the outcome.
pub(crate) async fn on_turn_thread<T: Send + 'static>(
    s: &Shared,
    live: LiveSession,
    work: impl for<'a> FnOnce(&'a mut Session) -> BoxFuture<'a, ruleweave::Result<T>> + Send + 'static,
) -> Result<(String, T), (String, ruleweave::Error)> {
    let mut session = live.lock_owned().await;
    let pack = session.pack().name().to_owned();
    let slot = s.turn_slot(&pack).await;
    let done = tokio::spawn(
        async move {
            let _slot = slot;
            work(&mut session).await
        }
        .in_current_span(),
    );
    match done.await.unwrap_or_else(|e| Err(ruleweave::Error::new(ErrorKind::Internal, format!("a turn failed: {e}"))))
    {
        Ok(v) => Ok((pack, v)),
        Err(e) => Err((pack, e)),
    }
}

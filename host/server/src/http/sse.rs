//! Server-sent events and what a request asks for: one event made from JSON, a channel whose
//! receiving end is the response, whether a request's `Accept` names a media type, and the
//! server's clock. The JSON API's streams and the chat face's share them.

use std::convert::Infallible;

use axum::http::{HeaderMap, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use tokio::sync::mpsc;

/// An event named `name` (none for the chat face's chunks) whose data is `data` as JSON.
pub(crate) fn event(name: Option<&str>, data: &impl serde::Serialize) -> Event {
    // The name before the data, as every stream of the API has written them.
    let event = match name {
        Some(name) => Event::default().event(name),
        None => Event::default(),
    };
    event.data(serde_json::to_string(data).unwrap_or_default())
}

/// An event whose data is `text` as it is (the chat face's `[DONE]`, an error body already made).
pub(crate) fn text(text: &str) -> Event {
    Event::default().data(text)
}

/// A stream answered as it is written: the sender, and the response that sends what it is given
/// (a comment every 15 s keeps it open) and ends when every sender is dropped.
pub(crate) fn channel() -> (mpsc::UnboundedSender<Event>, Response) {
    let (tx, rx) = mpsc::unbounded_channel::<Event>();
    let events = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx)) });
    (tx, Sse::new(events).keep_alive(KeepAlive::default()).into_response())
}

/// Whether the request's `Accept` names `media` (`text/event-stream`, `text/html`).
pub(crate) fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').any(|t| t.split(';').next().unwrap_or("").trim() == media))
}

/// Now, in unix seconds: the chat face's `created`, the server's start.
pub(crate) fn unix_now() -> u64 {
    (unix_ms() / 1000) as u64
}

/// Now, in unix milliseconds: when a key was issued.
pub(crate) use ruleweave::store::now_ms as unix_ms;

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue, header};

    #[test]
    fn accept_names_a_media_type_among_others() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(super::accepts(&with("text/event-stream"), "text/event-stream"));
        assert!(super::accepts(&with("application/json, text/html;q=0.9"), "text/html"));
        assert!(!super::accepts(&with("application/json"), "text/html"));
        assert!(!super::accepts(&with("text/html-like"), "text/html"));
        assert!(!super::accepts(&HeaderMap::new(), "text/event-stream"));
    }
}

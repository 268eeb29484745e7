//! The chat face's replies: a whole completion, or a stream of chunks as the turn speaks.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::http::HeaderValue;
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use ruleweave::{LiveSession, TurnResult};
use serde_json::Value;

use super::super::Shared;
use super::super::body::{
    AssistantMessage, ChatChoice, ChatChunk, ChatCompletion, ChatRequest, ChatSession, ChunkChoice, Delta,
};
use super::super::error::Face;
use super::super::sse::{self, unix_now};
use super::super::turns::Move;
use super::{Answer, Key, SESSION_HEADER, Usage, last_key, link, play};

/// What a turn shows: the pack's `display.reply` (or its one text output), then what follows it.
pub(super) fn shown(r: &TurnResult) -> String {
    let reply = match &r.display.reply {
        Some(t) => t.clone(),
        None => match r.output.as_object().map(|o| o.values().filter_map(Value::as_str).collect::<Vec<_>>()) {
            Some(texts) if texts.len() == 1 => texts[0].to_owned(),
            _ => r.output.to_string(),
        },
    };
    std::iter::once(reply).chain(after_reply(r, &[])).collect::<Vec<_>>().join("\n\n")
}

/// What follows a turn's reply: each note a person should know of (a node that fell back) not
/// already sent, and the closing words when the turn ended the session.
fn after_reply(r: &TurnResult, sent_notes: &[String]) -> Vec<String> {
    let notes = r.display.notes.iter().filter(|n| !sent_notes.contains(n)).map(|n| format!("(⚠ {n})"));
    notes.chain(r.display.finished.clone()).collect()
}

/// A whole reply: links it, and answers it in OpenAI's shape.
#[allow(clippy::too_many_arguments)]
pub(super) async fn reply(
    s: &Shared,
    req: &ChatRequest,
    keys: &[Key],
    id: &str,
    seq: u64,
    turn: u64,
    text: String,
    finished: bool,
    usage: Usage,
) -> Response {
    link(s, last_key(keys).after(&text), id, seq).await;
    let body = ChatCompletion {
        id: format!("chatcmpl-{id}-{turn}"),
        object: "chat.completion",
        created: unix_now(),
        model: req.model.clone(),
        choices: vec![ChatChoice {
            index: 0,
            message: AssistantMessage { role: "assistant", content: text },
            finish_reason: "stop",
            logprobs: None,
        }],
        usage: usage.body(),
        ruleweave: ChatSession { session: id.to_owned(), turn, checkpoint: seq, finished },
    };
    let mut r = Json(body).into_response();
    if let Ok(v) = HeaderValue::from_str(id) {
        r.headers_mut().insert(SESSION_HEADER, v);
    }
    r
}

/// What a streamed reply says: a turn played on the player's message, or the opening.
pub(super) enum Say {
    Turn(String),
    Opening(String),
}

/// A streamed reply: the role first, then the text as the pack's streamed nodes produce it
/// (`display.stream`; one blank line between calls), or the whole reply in one piece when it
/// streams none, then the end with `finish_reason`, the usage when asked, and `[DONE]`. The
/// conversation is linked to what was sent.
pub(super) fn stream(
    s: Shared,
    req: &ChatRequest,
    keys: Vec<Key>,
    live: LiveSession,
    say: Say,
    usage: Usage,
) -> Response {
    let (tx, response) = sse::channel();
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let model = req.model.clone();
    let task = s.clone();
    s.spawn(async move {
        let s = task;
        let (session_id, seq) = {
            let session = live.lock().await;
            (session.id().to_owned(), session.checkpoint())
        };
        let chunks = Chunks { id: format!("chatcmpl-{session_id}"), model, created: unix_now() };
        let _ = tx.send(chunks.delta(Delta { role: Some("assistant"), content: Some(String::new()) }, None));
        let sent = Arc::new(Mutex::new(Sent::default()));
        let (rest, seq, usage) = match say {
            Say::Opening(text) => (text, seq, usage),
            Say::Turn(text) => {
                let sink: ruleweave::EventSink = {
                    let (sent, tx, chunks) = (sent.clone(), tx.clone(), chunks.clone());
                    Arc::new(move |e: &ruleweave::Event| {
                        let piece = match e {
                            ruleweave::Event::Speech { node, speaker, text, start } => {
                                let who = speaker.as_deref().unwrap_or(node);
                                sent.lock().unwrap_or_else(|p| p.into_inner()).speech(who, text, *start)
                            }
                            ruleweave::Event::Log { node, level, message } if level == "warn" => {
                                sent.lock().unwrap_or_else(|p| p.into_inner()).note(&format!("{node}: {message}"))
                            }
                            _ => return,
                        };
                        let _ = tx.send(chunks.delta(Delta { role: None, content: Some(piece) }, None));
                    })
                };
                match play(&s, &live, Move::Chat(text), Some(sink)).await {
                    Ok(Answer::Refused(words)) => (words, seq, usage),
                    Ok(Answer::Played(r, _)) => {
                        let mut usage = usage;
                        usage.add(&r);
                        let sent = sent.lock().unwrap_or_else(|p| p.into_inner());
                        // Nothing streamed: the whole reply. Streamed: the notes not sent yet and
                        // the closing words.
                        let rest = if sent.text.is_empty() {
                            shown(&r)
                        } else {
                            after_reply(&r, &sent.notes).iter().map(|p| format!("\n\n{p}")).collect()
                        };
                        (rest, r.checkpoint, usage)
                    }
                    Err(e) => {
                        let _ = tx.send(sse::text(&e.on(Face::Chat).body().to_string()));
                        let _ = tx.send(sse::text("[DONE]"));
                        return;
                    }
                }
            }
        };
        let mut all = std::mem::take(&mut sent.lock().unwrap_or_else(|p| p.into_inner()).text);
        if !rest.is_empty() {
            let _ = tx.send(chunks.delta(Delta { role: None, content: Some(rest.clone()) }, None));
        }
        all.push_str(&rest);
        link(&s, last_key(&keys).after(&all), &session_id, seq).await;
        let _ = tx.send(chunks.delta(Delta::default(), Some("stop")));
        if include_usage {
            let _ = tx.send(chunks.usage(usage));
        }
        let _ = tx.send(sse::text("[DONE]"));
    });
    response
}

/// The chunks of one streamed reply.
#[derive(Clone)]
struct Chunks {
    id: String,
    model: String,
    created: u64,
}

impl Chunks {
    fn delta(&self, delta: Delta, finish: Option<&'static str>) -> SseEvent {
        self.event(vec![ChunkChoice { index: 0, delta, finish_reason: finish, logprobs: None }], None)
    }

    fn usage(&self, usage: Usage) -> SseEvent {
        self.event(Vec::new(), Some(usage))
    }

    fn event(&self, choices: Vec<ChunkChoice>, usage: Option<Usage>) -> SseEvent {
        let chunk = ChatChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices,
            usage: usage.map(Usage::body),
        };
        sse::event(None, &chunk)
    }
}

/// The text streamed so far, and the notes in it.
#[derive(Default)]
struct Sent {
    text: String,
    notes: Vec<String>,
}

impl Sent {
    /// Records a piece of a speech; what to send: a new speech after a blank line, with its
    /// speaker (`pro: `).
    fn speech(&mut self, who: &str, piece: &str, start: bool) -> String {
        let out = match (start, self.text.is_empty()) {
            (true, true) => format!("{who}: {piece}"),
            (true, false) => format!("\n\n{who}: {piece}"),
            (false, _) => piece.to_owned(),
        };
        self.text.push_str(&out);
        out
    }

    /// Records a note (a speech sent back) as it happens; what to send.
    fn note(&mut self, note: &str) -> String {
        let out = format!("{}(⚠ {note})", if self.text.is_empty() { "" } else { "\n\n" });
        self.notes.push(note.to_owned());
        self.text.push_str(&out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_speech_comes_after_a_blank_line_under_its_speaker() {
        let mut sent = Sent::default();
        assert_eq!(sent.speech("pro", "A", true), "pro: A");
        assert_eq!(sent.speech("pro", "b", false), "b");
        assert_eq!(sent.note("judge: sent back"), "\n\n(⚠ judge: sent back)");
        assert_eq!(sent.speech("pro", "C", true), "\n\npro: C");
        assert_eq!(sent.text, "pro: Ab\n\n(⚠ judge: sent back)\n\npro: C");
        assert_eq!(sent.notes, ["judge: sent back"]);
    }
}

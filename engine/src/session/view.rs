//! What a person sees of a session: the pack's `display:` templates rendered over its state, so
//! no client has to guess which output field is the game's reply.

use rhai::{Dynamic, Map};
use serde::Serialize;
use serde_json::Value as Json;

use super::Session;
use crate::event::Event;
use crate::pack::{OpeningKind, Pack};

/// A session as a person sees it: the reply, the status line, the details on demand, and, where
/// they apply, the opening before the first turn and the closing words of a finished session.
///
/// Every part is the pack's `display:` template of that name rendered over the state; a part the
/// pack has no template for is `None`. A template that fails to render leaves its part `None` and
/// says why in `notes`, so a broken template never hides the turn it describes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct View {
    /// What the game says (`display.reply`), trimmed.
    pub reply: Option<String>,
    /// One line of where the game stands (`display.status`).
    pub status: Option<String>,
    /// The machinery behind the turn, shown on demand (`display.details`).
    pub details: Option<String>,
    /// The closing words of a finished session (`display.finished`, else the pack's
    /// `finish.message`), once it is finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// How the pack opens the conversation, before the first turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opening: Option<Opening>,
    /// What a person should know of that went wrong or was noted on the way: a node that fell
    /// back (a model reply that could not be read, a script that failed), a script's `warn`, a
    /// template that would not render. Each is `node: message`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// How a pack opens a conversation (its manifest's `display.opening` and `display.play_on_open`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Opening {
    /// Whether the text before the first turn is a question the player answers or a hint of what
    /// to type; a chat client's first message answers the one and is the first input after the other.
    pub kind: OpeningKind,
    /// The reply before the first turn (`None` when it renders to nothing).
    pub text: Option<String>,
    /// An input every face plays as soon as the session opens (a party's first question needs
    /// no answer from anyone), or `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<serde_json::Value>))]
    pub play: Option<Json>,
}

impl Session {
    /// The session as a person sees it now: the pack's `display:` rendered over the state (with
    /// the opening before the first turn, and the closing words once finished).
    pub fn view(&self) -> View {
        self.pack.view(&self.state, &self.options, self.turns)
    }

    /// The lines the pack's `simulate.thresholds` draw on its tracked fields' charts, as this
    /// session's state renders them (the pirate's merit: the threshold of its difficulty).
    pub fn thresholds(&self) -> Vec<(String, f64)> {
        self.pack.thresholds(&self.state, &self.options)
    }
}

/// One turn of a conversation as a person saw it: what was sent and what the game showed after.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Said {
    /// The turn's number.
    pub turn: u64,
    /// Its input, as the store kept it.
    #[cfg_attr(feature = "openapi", schema(value_type = serde_json::Value))]
    pub input: Json,
    /// The display after it, rendered by the pack as it is now.
    pub display: View,
}

impl Pack {
    /// One of the pack's `display:` templates (`reply`, `status`, `details`, `finished`)
    /// rendered over `state`; `None` when the pack has no such template.
    pub(crate) fn render_display(
        &self,
        part: &str,
        state: &Dynamic,
        options: &Map,
    ) -> Option<crate::error::Result<String>> {
        let d = &self.display;
        let has = match part {
            "reply" => d.reply,
            "status" => d.status,
            "details" => d.details,
            "finished" => d.finished,
            _ => false,
        };
        has.then(|| self.prompts.render(&format!("display.{part}"), state, options, &Map::new(), None))
    }

    /// The lines the pack's `simulate.thresholds` draw, rendered over `state`: each field's that
    /// renders to a number.
    pub(crate) fn thresholds(&self, state: &Dynamic, options: &Map) -> Vec<(String, f64)> {
        self.simulate
            .thresholds
            .iter()
            .filter_map(|field| {
                let text =
                    self.prompts.render(&format!("simulate.threshold.{field}"), state, options, &Map::new(), None);
                Some((field.clone(), text.ok()?.trim().parse().ok()?))
            })
            .collect()
    }

    /// The `display:` of this pack rendered over `state`, a session's after `turns` turns.
    pub(crate) fn view(&self, state: &Dynamic, options: &Map, turns: u64) -> View {
        let mut notes = Vec::new();
        let mut part = |name: &str| match self.render_display(name, state, options)? {
            Ok(text) => Some(text.trim().to_owned()).filter(|t| !t.is_empty()),
            Err(e) => {
                notes.push(format!("display.{name} failed: {}", e.detail()));
                None
            }
        };
        let reply = part("reply");
        let status = part("status");
        let details = part("details");
        // A pack without closing words of its own closes with its `finish.message`.
        let finished = if self.is_finished(state) {
            part("finished").or_else(|| Some(self.finished_message().to_owned()))
        } else {
            None
        };
        let d = &self.display;
        let opening =
            (turns == 0).then(|| Opening { kind: d.opening, text: reply.clone(), play: d.play_on_open.clone() });
        View { reply, status, details, finished, opening, notes }
    }
}

impl View {
    /// The view after a turn, with the turn's warnings first among its notes: a node that fell
    /// back or a script's `warn`, each once, in the order they happened.
    pub(crate) fn after(mut self, events: &[Event]) -> Self {
        let mut seen = Vec::new();
        for e in events {
            if let Event::Log { node, level, message } = e
                && level == "warn"
            {
                let line = format!("{node}: {message}");
                if !seen.contains(&line) {
                    seen.push(line);
                }
            }
        }
        seen.append(&mut self.notes);
        self.notes = seen;
        self
    }
}

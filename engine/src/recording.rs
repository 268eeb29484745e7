//! A session's record: its options, and per turn the input, the answers its model calls and
//! searches got, the nodes that ran and the state it left, read from a store
//! ([`Recording::from_store`]) or written by hand as a pack's test case. What a person saw of a
//! session ([`Engine::conversation`]) and its states turn by turn ([`Engine::turn_states`]) are
//! read from it; replaying one on the current rules is the lab's (`ruleweave_lab::replay`).

use serde::{Deserialize, Serialize};
use serde_json::{Map as JsonMap, Value as Json};

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::exchange::Exchange;
use crate::llm::Message;
use crate::store::{CheckpointKind, Stop};
use crate::value;

/// A recorded session, or a test case: what to play, and what each call answered.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Recording {
    /// The pack.
    pub pack: String,
    /// The session's id (it seeds the session's randomness); a new one when empty.
    #[serde(default)]
    pub id: String,
    /// The options the session opened with.
    #[serde(default)]
    pub options: JsonMap<String, Json>,
    /// Its turns, in order.
    pub turns: Vec<RecordedTurn>,
    /// Where a fork started: the state and the turns of the session it left, at the checkpoint
    /// it left from. A replay starts there, not from a new session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Base>,
    /// Edits of the state made after the last turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<RecordedEdit>,
    /// The variant of the pack's experiment it played: a replay plays it again (none: the
    /// pack's own rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A hand edit of the state, as a recording holds it: the fields set outright, and where a
/// breakpoint held the turn when it was made (none: before the turn began).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedEdit {
    /// The fields set, with their values.
    pub set: JsonMap<String, Json>,
    /// Where the turn was held when the edit was made; absent between turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Stop>,
}

/// The start of a forked session: the state it was handed and the turns done by then.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Base {
    /// The state at the fork.
    pub state: Json,
    /// The turns done by then (the fork's first turn is the next one).
    pub turns: u64,
}

/// One recorded turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecordedTurn {
    /// The turn's number in its session (0 in a hand-written case).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turn: u64,
    /// The turn's input.
    pub input: Json,
    /// Edits of the state made before the turn began or while a breakpoint held it, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edits: Vec<RecordedEdit>,
    /// The answers the turn's model calls and searches got, in the order they were made.
    #[serde(default)]
    pub answers: Vec<Answer>,
    /// The state after the turn, as recorded (absent in a hand-written case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Json>,
    /// The nodes that ran, in order, as recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The turn failed, with an error saying this (a case's `expect_error`; the store keeps no
    /// failed turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One answer of a recording: to a call of `profile` (`search` for a web search).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The profile called (`judge`), or `search`.
    pub profile: String,
    /// What was asked (the messages; a search's query is its one user message), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<Vec<Message>>,
    /// The reply's text (a search's results as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Or why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Answer {
    /// What a recorded call answered, as a recording keeps it.
    pub fn of(e: &Exchange) -> Answer {
        match e {
            Exchange::Model(m) => Answer {
                profile: m.request.profile.clone(),
                asked: Some(m.request.messages.clone()),
                reply: m.response.as_ref().map(|r| r.content.clone()),
                error: m.error.clone(),
            },
            Exchange::Search(s) => Answer {
                profile: "search".into(),
                asked: Some(vec![Message::new("user", &s.query)]),
                reply: s.results.as_ref().map(|r| serde_json::to_string(r).unwrap_or_default()),
                error: s.error.clone(),
            },
        }
    }
}

impl Recording {
    /// Session `id` as `engine`'s store holds it: its options, and per turn the input, the model
    /// exchanges and searches, the nodes that ran and the state it left.
    pub async fn from_store(engine: &Engine, id: &str) -> Result<Self> {
        let head = engine.info(id).await?.head;
        Self::from_store_until(engine, id, head).await
    }

    /// Session `id` as [`Recording::from_store`] reads it, up to its checkpoint `seq`.
    pub async fn from_store_until(engine: &Engine, id: &str, seq: u64) -> Result<Self> {
        let info = engine.info(id).await?;
        let store = engine.store();
        let stored = store
            .history(id, seq)
            .await?
            .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("there is no session {id}")))?;
        let pack = engine.packs().variant(&info.pack, info.variant.as_deref())?;
        let base = info.parent.is_some().then(|| Base { state: stored.snapshot.clone(), turns: stored.snapshot_turn });
        let mut state = pack.schema.restore(&stored.snapshot);
        let mut turns = Vec::new();
        let mut current = RecordedTurn::default();
        // Where a breakpoint holds the turn being read, if one does.
        let mut held: Option<Stop> = None;
        for c in &stored.after {
            if c.kind == CheckpointKind::Edit {
                for (_, u) in &c.updates {
                    // An edit of fields the pack has since dropped or retyped sets what still fits.
                    let fitting: rhai::Map =
                        u.0.iter()
                            .filter(|(k, v)| pack.schema.fields.get(k.as_str()).is_some_and(|f| f.ty.admits(v)))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                    pack.schema.overwrite(&mut state, &fitting)?;
                    let set = value::to_json(&rhai::Dynamic::from_map((*u.0).clone()));
                    let set = set.as_object().cloned().unwrap_or_default();
                    current.edits.push(RecordedEdit { set, at: held.clone() });
                }
                continue;
            }
            for (_, u) in &c.updates {
                pack.schema.replay(&mut state, &u.0);
            }
            if c.kind == CheckpointKind::Break {
                held = c.resume.as_ref().and_then(|r| r.held.clone());
            }
            if !matches!(c.kind, CheckpointKind::Turn | CheckpointKind::Step | CheckpointKind::Break) {
                continue;
            }
            current.nodes.extend(c.updates.iter().map(|(n, _)| n.clone()));
            current.answers.extend(c.exchanges.iter().map(Answer::of));
            if c.kind == CheckpointKind::Turn {
                held = None;
                current.turn = c.turn;
                current.input = c.input.clone().unwrap_or(Json::Null);
                current.state = Some(value::to_json(&state));
                turns.push(std::mem::take(&mut current));
            }
        }
        // Edits after the last turn (those of a turn still held are that turn's, not yet recorded).
        let edits = current.edits.into_iter().filter(|e| e.at.is_none()).collect();
        Ok(Recording {
            pack: info.pack.clone(),
            id: info.id.clone(),
            options: info.options.as_object().cloned().unwrap_or_default(),
            turns,
            base,
            edits,
            variant: info.variant.clone(),
        })
    }
}

/// How many forks back a conversation is followed to its start.
const MOST_FORKS_BACK: usize = 32;

impl Engine {
    /// The state after each turn of session `id`, as its checkpoints record it, oldest first,
    /// with the turn's number: states from real sessions, for benchmarks and replays.
    pub async fn turn_states(&self, id: &str) -> Result<Vec<(u64, Json)>> {
        let rec = Recording::from_store(self, id).await?;
        Ok(rec.turns.into_iter().map(|t| (t.turn, t.state.unwrap_or_default())).collect())
    }

    /// What a person saw of session `id`, turn by turn, from its start: for a fork, the turns of
    /// the session it left up to where it left, then its own. The displays are the pack's
    /// templates, as it is now, over each turn's state; no script runs. Rendered on the engine's
    /// threads, as a turn is played: a long session renders many.
    pub async fn conversation(&self, id: &str) -> Result<Vec<crate::session::Said>> {
        let (engine, id) = (self.clone(), id.to_owned());
        crate::blocking::run_cancellable(move || async move { engine.conversation_here(&id).await }).await?
    }

    async fn conversation_here(&self, id: &str) -> Result<Vec<crate::session::Said>> {
        let mut legs = Vec::new();
        let (mut at, mut until) = (id.to_owned(), None);
        while legs.len() < MOST_FORKS_BACK {
            let info = self.info(&at).await?;
            let rec = Recording::from_store_until(self, &at, until.unwrap_or(info.head)).await?;
            legs.push(rec);
            match info.parent {
                Some((parent, seq)) => (at, until) = (parent, Some(seq)),
                None => break,
            }
        }
        let mut said = Vec::new();
        for rec in legs.into_iter().rev() {
            let pack = self.packs().variant(&rec.pack, rec.variant.as_deref())?;
            let options = value::from_json(&Json::Object(rec.options.clone()));
            let options = options.try_cast::<rhai::Map>().unwrap_or_default();
            for t in rec.turns {
                let Some(state) = &t.state else { continue };
                let state = pack.schema.restore(state);
                said.push(crate::session::Said {
                    turn: t.turn,
                    input: t.input,
                    display: pack.view(&state, &options, t.turn),
                });
            }
        }
        Ok(said)
    }
}

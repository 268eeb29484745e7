//! Replaying a recording against the pack as it is now: what did an edit change?
//!
//! A [`Recording`] is a session's inputs and the model (and search) answers each turn got, with
//! the state each turn left when it was recorded: read from a store ([`Recording::from_store`]),
//! or written as a pack test case. A [`Replayer`] plays it again on the pack's current files, in
//! memory, with the session's own id (so its seeded randomness is the same), answering every model
//! call from the recording by profile and order. What the recording cannot answer — a call the
//! edited rules make that was never made, or a prompt that changed — is noted; then the call goes
//! to the fallback (the pack's stand-in for tests, the real provider for `--live`) or fails as a
//! real call would (its node's fallback answers, or the turn fails).
//!
//! The report is per turn: the fields whose value changed, the nodes that ran when they differ,
//! the notes, and a turn that now fails.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Map as JsonMap, Value as Json};

use ruleweave::llm::BoxFuture;
use ruleweave::llm::{EmbedRequest, EmbedResponse, LlmRequest, LlmResponse, Message, Provider, TokenSink, Usage};
use ruleweave::search::{Search, SearchChoice, SearchResult};
use ruleweave::store::Stop;
use ruleweave::{Engine, Error, ErrorKind, Event, OpenAs, Result, Session, VariantChoice};

pub use ruleweave::recording::{Answer, Base, RecordedEdit, RecordedTurn, Recording};

/// What a replayed turn did differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnDiff {
    /// The turn's number.
    pub turn: u64,
    /// The fields whose value changed: `(field, recorded, now)`.
    pub changes: Vec<Change>,
    /// The nodes that ran, as recorded and now, when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<Vec<String>>>))]
    pub route: Option<(Vec<String>, Vec<String>)>,
    /// What the recording could not answer, and what answered instead.
    pub notes: Vec<String>,
    /// Why the turn fails now, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How the recording says the turn failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_error: Option<String>,
    /// The state after the replayed turn.
    #[serde(skip)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub state: Json,
    /// The profiles of the recorded answers the turn no longer asked for, one per answer (each
    /// profile's last ones: answers are taken in order).
    #[serde(skip)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub unused: Vec<String>,
    /// The nodes that ran now, in order (none when the turn failed).
    #[serde(skip)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub ran: Vec<String>,
}

/// One field that changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Change {
    /// The field.
    pub field: String,
    /// Its recorded value (`null` when it did not exist).
    #[cfg_attr(feature = "openapi", schema(value_type = serde_json::Value))]
    pub before: Json,
    /// Its value now.
    #[cfg_attr(feature = "openapi", schema(value_type = serde_json::Value))]
    pub after: Json,
}

impl TurnDiff {
    /// Whether the turn did exactly what was recorded: the same changes, route, and outcome (a
    /// turn recorded as failing still fails with the error it recorded).
    pub fn is_same(&self) -> bool {
        self.changes.is_empty() && self.route.is_none() && self.fails_as_recorded()
    }

    /// Whether the turn fails now exactly when the recording says it failed, and with its error.
    fn fails_as_recorded(&self) -> bool {
        match (&self.recorded_error, &self.error) {
            (None, None) => true,
            (Some(want), Some(got)) => got.contains(want.as_str()),
            _ => false,
        }
    }

    /// The turn's changes on one line: `turn 4: merit_score 55 → 62; outcome "continue" → "won_score"`.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> =
            self.changes.iter().map(|c| format!("{} {} → {}", c.field, short(&c.before), short(&c.after))).collect();
        if let Some((before, after)) = &self.route {
            parts.push(format!("route {} → {}", before.join(" › "), after.join(" › ")));
        }
        match (&self.recorded_error, &self.error) {
            (None, Some(e)) => parts.push(format!("now fails: {e}")),
            (Some(was), None) => parts.push(format!("now succeeds (it failed: {was})")),
            (Some(_), Some(e)) if !self.fails_as_recorded() => parts.push(format!("fails otherwise now: {e}")),
            _ => {}
        }
        if parts.is_empty() {
            parts.push("unchanged".into());
        }
        format!("turn {}: {}", self.turn, parts.join("; "))
    }
}

/// A value as a diff line shows it: JSON, cut to 60 characters.
fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.chars().count() <= 60 { s } else { format!("{}…", s.chars().take(59).collect::<String>()) }
}

/// Who answers what the recording cannot.
#[derive(Clone)]
pub enum Fallback {
    /// Nobody: the call fails, as a real one would.
    Fail,
    /// The pack's stand-in model and search (pack tests).
    Standin,
    /// These (a real provider and search engine, for `--live`).
    Live(Arc<dyn Provider>, SearchChoice),
    /// The models and search the pack plays on in the engine replaying it (the stand-in on a
    /// stand-in server), asked as `Live` asks: for what the recording lacks, and where a prompt
    /// changed.
    Serving,
}
/// The answers of the turn being replayed, handed out by profile in order.
#[derive(Default)]
struct Script {
    answers: VecDeque<Answer>,
    notes: Vec<String>,
}

impl Script {
    /// The next recorded answer to `profile`, noting a changed question.
    fn take(&mut self, profile: &str, asked: &[Message]) -> Option<Answer> {
        let i = self.answers.iter().position(|a| a.profile == profile)?;
        let a = self.answers.remove(i)?;
        if let Some(recorded) = &a.asked
            && recorded.as_slice() != asked
        {
            let what = if profile == "search" { "query" } else { "prompt" };
            self.notes.push(format!("{profile}: the {what} changed since the recording"));
        }
        Some(a)
    }
}

/// The provider and search engine of a replay: the recording's answers, then the fallback.
struct Recorded {
    script: Mutex<Script>,
    model: Option<Arc<dyn Provider>>,
    search: Option<Arc<dyn Search>>,
    live: bool,
}

impl Recorded {
    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The recorded answer for a call, unless its question changed and a live fallback should
    /// answer instead; notes what the recording could not answer.
    fn recorded(&self, profile: &str, asked: &[Message]) -> Option<Answer> {
        let mut script = self.script();
        let notes = script.notes.len();
        let answer = script.take(profile, asked);
        let changed = script.notes.len() > notes;
        match answer {
            Some(a) if !(changed && self.live) => Some(a),
            Some(_) => {
                script.notes.push(format!("{profile}: asked the live provider instead"));
                None
            }
            None => {
                let to = if self.model.is_some() || self.search.is_some() {
                    "the fallback answered"
                } else {
                    "the call failed"
                };
                script.notes.push(format!("{profile}: a call the recording does not have ({to})"));
                None
            }
        }
    }
}

fn answered(a: Answer, model: &str) -> Result<LlmResponse> {
    match (a.reply, a.error) {
        (Some(content), _) => {
            Ok(LlmResponse { content, model: model.to_owned(), usage: Usage::default(), attempts: 1 })
        }
        (None, why) => Err(Error::new(ErrorKind::Llm, why.unwrap_or_else(|| "the recorded call failed".into()))),
    }
}

impl Provider for Recorded {
    fn name(&self) -> &str {
        "recording"
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        match self.recorded(&request.profile, &request.messages) {
            Some(a) => Box::pin(std::future::ready(answered(a, &request.model))),
            None => match &self.model {
                Some(m) => m.complete(request, tokens),
                None => Box::pin(std::future::ready(Err(Error::new(
                    ErrorKind::Llm,
                    format!("the recording has no answer for this call to `{}`", request.profile),
                )))),
            },
        }
    }

    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        match &self.model {
            Some(m) => m.embed(request),
            None => Box::pin(std::future::ready(Err(Error::new(ErrorKind::Llm, "a replay does not embed")))),
        }
    }
}

struct RecordedSearch(Arc<Recorded>);

impl Search for RecordedSearch {
    fn name(&self) -> &str {
        "recording"
    }

    fn search<'a>(&'a self, query: &'a str, max: usize) -> BoxFuture<'a, Result<Vec<SearchResult>>> {
        let asked = [Message::new("user", query)];
        match self.0.recorded("search", &asked) {
            Some(a) => {
                let r = answered(a, "search").and_then(|r| {
                    serde_json::from_str(&r.content).map_err(|e| {
                        Error::new(ErrorKind::Llm, format!("a recorded search is not a result list ({e})"))
                    })
                });
                Box::pin(std::future::ready(r))
            }
            None => match &self.0.search {
                Some(s) => s.search(query, max),
                None => Box::pin(std::future::ready(Err(Error::new(
                    ErrorKind::Llm,
                    "the recording has no answer for this search",
                )))),
            },
        }
    }
}

/// Replays recordings of one pack on its current files.
pub struct Replayer {
    engine: Engine,
    recorded: Arc<Recorded>,
}

impl Replayer {
    /// A replayer reading packs where `engine` does, answering what recordings cannot with
    /// `fallback`.
    pub fn new(engine: &Engine, pack: &str, fallback: Fallback) -> Result<Self> {
        let current = engine.packs().get(pack)?;
        let (model, search, live) = match fallback {
            Fallback::Fail => (None, None, false),
            Fallback::Standin => (current.standin(), current.search_standin(), false),
            Fallback::Live(p, s) => {
                let search = match s {
                    SearchChoice::Engine(s) => Some(s),
                    SearchChoice::Standin => current.search_standin(),
                };
                (Some(p), search, true)
            }
            Fallback::Serving => (Some(engine.provider_for(&current)), engine.search_for(&current), true),
        };
        let recorded = Arc::new(Recorded { script: Mutex::default(), model, search, live });
        // The serving engine's packs: the version serving now, not a reload from disk.
        let replaying = Engine::builder(engine.root())
            .provider(recorded.clone())
            .search(SearchChoice::Engine(Arc::new(RecordedSearch(recorded.clone()))))
            .build_on(engine.packs().clone());
        Ok(Replayer { engine: replaying, recorded })
    }

    /// Plays `rec` again and reports, turn by turn, what differs from the recording (every turn
    /// of a hand-written case, which records no states, reports only its notes and errors).
    pub async fn replay(&self, rec: &Recording) -> Result<Vec<TurnDiff>> {
        let id = (!rec.id.is_empty()).then(|| rec.id.clone());
        // The rules it played: its variant's, or the pack's own.
        let variant = rec.variant.clone().map_or(VariantChoice::Rules, VariantChoice::Named);
        let how = OpenAs { id, variant, ..OpenAs::default() };
        let mut session = match &rec.base {
            None => self.engine.open_as(&rec.pack, &rec.options, how).await?,
            // A fork replays from the state it was handed, as it played.
            Some(base) => self.engine.open_from(&rec.pack, &rec.options, how, &rec.id, &base.state, base.turns).await?,
        };
        let mut out = Vec::with_capacity(rec.turns.len());
        for (i, t) in rec.turns.iter().enumerate() {
            *self.recorded.script() = Script { answers: t.answers.iter().cloned().collect(), notes: Vec::new() };
            let (result, missed) = play_with_edits(&mut session, t).await;
            let mut script = std::mem::take(&mut *self.recorded.script());
            script.notes.extend(missed);
            let unused: Vec<String> = script.answers.iter().map(|a| a.profile.clone()).collect();
            for profile in &unused {
                script.notes.push(format!("{profile}: a recorded call the rules no longer make"));
            }
            let state = session.state();
            let (nodes, error) = match &result {
                Ok(nodes) => (nodes.clone(), None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
            let changes = match &t.state {
                Some(before) => diff(before, &state),
                None => Vec::new(),
            };
            let route =
                (!t.nodes.is_empty() && result.is_ok() && t.nodes != nodes).then(|| (t.nodes.clone(), nodes.clone()));
            let recorded_error = t.error.clone();
            out.push(TurnDiff {
                turn: rec.base.as_ref().map_or(0, |b| b.turns) + i as u64 + 1,
                changes,
                route,
                notes: script.notes,
                error,
                recorded_error,
                state,
                unused,
                ran: nodes,
            });
        }
        for e in &rec.edits {
            if let Err(err) = session.edit(e.set.clone()).await {
                // Said with the last turn's notes: the replay itself stands.
                if let Some(last) = out.last_mut() {
                    last.notes.push(format!("an edit after the last turn no longer applies: {err}"));
                }
            }
        }
        // The replay's session was the replayer's own; the next replay of this recording opens it again.
        self.engine.delete(session.id()).await?;
        Ok(out)
    }
}

/// Plays recorded turn `t` with its edits: those made before it first, then the turn, held at
/// each place an edit was made there to make it again. Returns the nodes that ran, and notes
/// of edits the turn never stopped for (its route changed).
async fn play_with_edits(session: &mut Session, t: &RecordedTurn) -> (Result<Vec<String>>, Vec<String>) {
    let mut missed = Vec::new();
    for e in t.edits.iter().filter(|e| e.at.is_none()) {
        if let Err(err) = session.edit(e.set.clone()).await {
            missed.push(format!("an edit before the turn no longer applies: {err}"));
        }
    }
    let mut held: VecDeque<&RecordedEdit> = t.edits.iter().filter(|e| e.at.is_some()).collect();
    let breaks_at = |next: Option<&&RecordedEdit>| match next.and_then(|e| e.at.as_ref()) {
        Some(Stop::Before(n)) => ruleweave::Breakpoints { before: vec![n.clone()], ..Default::default() },
        Some(Stop::After(n)) => ruleweave::Breakpoints { after: vec![n.clone()], ..Default::default() },
        None => ruleweave::Breakpoints::none(),
    };
    let mut nodes = Vec::new();
    let mut result = session.turn_breaking(t.input.clone(), breaks_at(held.front()), None).await;
    loop {
        let r = match result {
            Ok(r) => r,
            Err(e) => return (Err(e), missed),
        };
        nodes.extend(r.events.iter().filter_map(finished_node));
        if !r.paused.as_ref().is_some_and(|p| p.breakpoint) {
            break;
        }
        // Held where the first edit still to make was made: make the edits made there.
        let at = held.front().and_then(|e| e.at.clone());
        while held.front().is_some_and(|e| e.at == at) {
            let Some(e) = held.pop_front() else { break };
            if let Err(err) = session.edit(e.set.clone()).await {
                missed.push(format!("an edit while the turn was held no longer applies: {err}"));
            }
        }
        result = session.resume(None, breaks_at(held.front()), None).await;
    }
    for at in held.iter().filter_map(|e| e.at.as_ref()) {
        missed.push(format!("the turn no longer stops {at}: an edit made there was not made"));
    }
    (Ok(nodes), missed)
}

fn finished_node(e: &Event) -> Option<String> {
    match e {
        Event::NodeFinished { node, .. } => Some(node.clone()),
        _ => None,
    }
}

/// The top-level fields of two states whose values differ, in the order of the newer state (then
/// the fields only the older has).
pub fn diff(before: &Json, after: &Json) -> Vec<Change> {
    let empty = JsonMap::new();
    let (b, a) = (before.as_object().unwrap_or(&empty), after.as_object().unwrap_or(&empty));
    let mut out = Vec::new();
    for (k, v) in a {
        let old = b.get(k).cloned().unwrap_or(Json::Null);
        if &old != v {
            out.push(Change { field: k.clone(), before: old, after: v.clone() });
        }
    }
    for (k, v) in b {
        if !a.contains_key(k) {
            out.push(Change { field: k.clone(), before: v.clone(), after: Json::Null });
        }
    }
    out
}

//! Sessions: one running instance of a pack (a game, an interview, a debate) and its turns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rhai::{Dynamic, Map};
use serde::Serialize;
use serde_json::Value as Json;

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::event::{Event, EventSink};
use crate::graph;
use crate::llm::Exchange;
use crate::pack::Pack;
use crate::turn::TurnCtx;
use crate::value;

/// One running game or flow: a pack version, the options chosen, the state so far.
pub struct Session {
    pub(crate) engine: Engine,
    pub(crate) id: Arc<str>,
    pub(crate) pack: Arc<Pack>,
    pub(crate) options: Map,
    pub(crate) seed: u64,
    pub(crate) state: Dynamic,
    pub(crate) turns: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("pack", &self.pack.name)
            .field("turns", &self.turns)
            .finish()
    }
}

/// What one turn produced.
#[derive(Debug, Clone, Serialize)]
pub struct TurnResult {
    /// The turn's number (1 for the first).
    pub turn: u64,
    /// The pack's output fields after the turn.
    pub output: Json,
    /// Everything that happened, in order.
    pub events: Vec<Event>,
    /// The model exchanges the turn used.
    pub exchanges: Vec<Exchange>,
    /// The pack version that ran the turn.
    pub pack_version: String,
    /// Whether the session is finished now (a won game).
    pub finished: bool,
    /// Wall time of the turn.
    #[serde(serialize_with = "micros")]
    pub duration: Duration,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

/// A fresh random id: 80 bits from the standard library's randomly keyed hasher.
pub(crate) fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut out = String::new();
    for salt in 0..2u8 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u8(salt);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(20);
    out
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Session {
    /// Opens a session of `pack` with checked `options`: the state starts at the fields'
    /// defaults, then the pack's `init` script runs.
    pub(crate) async fn open(engine: Engine, pack: Arc<Pack>, options: Map, id: Option<String>) -> Result<Self> {
        let id: Arc<str> = id.unwrap_or_else(new_id).into();
        let seed = crate::text::hash(&id);
        let mut state = pack.schema.initial();
        if let Some(init) = &pack.init {
            let turn = Arc::new(TurnCtx::new(
                id.clone(),
                0,
                seed,
                now_ms(),
                options.clone(),
                Map::new(),
                engine.provider_for(&pack),
                None,
            ));
            graph::run::init(&pack, init, &turn, &mut state).await?;
        }
        Ok(Session { engine, id, pack, options, seed, state, turns: 0 })
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The pack version the session runs on.
    pub fn pack(&self) -> &Arc<Pack> {
        &self.pack
    }

    /// How many turns have completed.
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// The options chosen when the session opened.
    pub fn options(&self) -> Json {
        value::map_to_json(&self.options)
    }

    /// The whole state as JSON.
    pub fn state(&self) -> Json {
        value::to_json(&self.state)
    }

    /// One state field as JSON.
    pub fn field(&self, name: &str) -> Option<Json> {
        self.state.read_lock::<Map>().and_then(|m| m.get(name).map(value::to_json))
    }

    /// The pack's output fields as JSON (the whole state when the pack declares no outputs).
    pub fn output(&self) -> Json {
        let map = self.state.read_lock::<Map>();
        let Some(map) = map else { return Json::Null };
        if self.pack.outputs.is_empty() {
            return value::map_to_json(&map);
        }
        Json::Object(
            self.pack
                .outputs
                .iter()
                .map(|k| (k.clone(), map.get(k.as_str()).map_or(Json::Null, value::to_json)))
                .collect(),
        )
    }

    /// Whether the session is finished (the pack's `finish.when` field is true).
    pub fn is_finished(&self) -> bool {
        self.pack.is_finished(&self.state)
    }

    /// Renders one of the pack's `display:` templates (`reply`, `status`, `details`,
    /// `finished`) over the state; `None` when the pack has no such template.
    pub fn display(&self, part: &str) -> Option<Result<String>> {
        let has = match part {
            "reply" => self.pack.display.reply,
            "status" => self.pack.display.status,
            "details" => self.pack.display.details,
            "finished" => self.pack.display.finished,
            _ => false,
        };
        if !has {
            return None;
        }
        let map = self.state.read_lock::<Map>()?;
        Some(self.pack.prompts.render(&format!("display.{part}"), &map, &self.options, &Map::new(), None))
    }

    /// Runs one turn with `input` (a map of the pack's input fields).
    pub async fn turn(&mut self, input: Json) -> Result<TurnResult> {
        self.run_turn(input, None).await
    }

    /// Runs one turn, passing every event to `sink` as it happens (model tokens included).
    pub async fn turn_with_events(&mut self, input: Json, sink: EventSink) -> Result<TurnResult> {
        self.run_turn(input, Some(sink)).await
    }

    async fn run_turn(&mut self, input: Json, live: Option<EventSink>) -> Result<TurnResult> {
        let start = Instant::now();
        let pack = self.pack.clone();
        if pack.is_finished(&self.state) {
            return Err(Error::new(ErrorKind::Finished, pack.finished_message()));
        }
        let input = pack.check_input(&input)?;
        let number = self.turns + 1;
        let turn = Arc::new(TurnCtx::new(
            self.id.clone(),
            number,
            self.seed,
            now_ms(),
            self.options.clone(),
            input,
            self.engine.provider_for(&pack),
            live,
        ));
        let result = graph::run::run(&pack, self.engine.natives(), &turn, &mut self.state).await;
        let recorded = turn.take();
        result?;
        self.turns = number;
        Ok(TurnResult {
            turn: number,
            output: self.output(),
            events: recorded.events,
            exchanges: recorded.exchanges,
            pack_version: pack.version.clone(),
            finished: pack.is_finished(&self.state),
            duration: start.elapsed(),
        })
    }
}

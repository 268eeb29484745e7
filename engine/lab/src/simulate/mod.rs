//! Simulation: a pack's scripted players (`scripts/<pack>/players/`) play many games on the rules
//! as they are, and the report says how the games ended (each outcome's share with a 95%
//! interval), in how many turns, where the tracked numbers stood at the end and turn by turn,
//! and what the models cost. The command line's `simulate`, the server's
//! `POST /packs/{pack}/simulate` (the console's Simulate panel) and every embedding play through
//! [`play`].
//!
//! A player is `fn play(view, state)` in `scripts/<pack>/players/NAME.rhai`: it gets what a
//! person sees (the display) and the state, and returns the next input (a map of input fields,
//! or a line of text). Its `random()` is seeded by the game's id and the turn, and the game's id
//! by the seed, the player and the game's number, so a seed gives the same report every time,
//! however many games run at once. Games end at the pack's `finish:` or `simulate.max_turns`: a
//! game of a pack that finishes which the cap stopped is the outcome `unfinished`, whatever its
//! outcome field said then, and is left out of the turns games took to finish.

mod against;
mod changes;
mod stats;
mod sweep;
pub mod tune;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rhai::Dynamic;
use serde_json::{Map, Value};

use crate::spend::{REFUSED, Spend, Spent, Stop};
pub use against::compare;
use ruleweave::{Engine, Event, LlmChoice, Pack, ScriptCall, Session};
use ruleweave::{Error, ErrorKind, Result};
pub use stats::wilson;
use stats::{histogram, spread};

pub use crate::spend::Price;

/// A player of a pack, ready to play.
pub struct Player {
    name: String,
    play: ScriptCall,
    /// Whether its script reads the game's `view`: rendering the display each turn is skipped
    /// for one that does not (it gets `()`).
    reads_view: bool,
    /// Whether its script reads the `state`: copying the state each turn is skipped for one that
    /// does not (it gets `()`).
    reads_state: bool,
}

impl std::fmt::Debug for Player {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Player").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Player {
    /// The player's name (`liar`, `model:smuggler`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The players `names` of `pack`, or every scripted player it ships when `names` is empty. A
/// name `model:PROFILE` is a model player: the pack's `llm:` profile, with its persona in
/// `prompts/<pack>/players/PROFILE.j2` (see [`ScriptCall::model_player`]).
pub fn players(engine: &Engine, pack: &Pack, names: &[String]) -> Result<Vec<Player>> {
    let shipped = pack.players();
    let names = if names.is_empty() { shipped.clone() } else { names.to_vec() };
    if names.is_empty() {
        return Err(Error::input(format!(
            "pack `{}` ships no players: write one as scripts/{}/players/NAME.rhai (fn play(view, state))",
            pack.name(),
            pack.name()
        )));
    }
    names
        .into_iter()
        .map(|name| {
            let play = match name.strip_prefix("model:") {
                Some(profile) => ScriptCall::model_player(engine, pack.name(), profile)?,
                None if !shipped.contains(&name) => {
                    return Err(Error::input(format!(
                        "pack `{}` has no player `{name}` (players: {})",
                        pack.name(),
                        shipped.join(", ")
                    )));
                }
                None => ScriptCall::new(engine, pack.name(), &format!("players/{name}.rhai::play"), 2)?,
            };
            let (reads_view, reads_state) = (play.reads_param(0), play.reads_param(1));
            Ok(Player { name, play, reads_view, reads_state })
        })
        .collect()
}

/// The most games per player one batch plays: every game's result is held until the report.
pub const MOST_GAMES: u32 = 100_000;

/// A batch of games as an embedding asks for one (the Python and Node packages' `simulate`).
#[derive(Debug, Clone)]
pub struct Batch {
    /// The pack to play.
    pub pack: String,
    /// Games per player (1 to [`MOST_GAMES`]).
    pub games: u32,
    /// The players (`liar`, `model:smuggler`); every scripted player the pack ships when empty.
    pub players: Vec<String>,
    /// What seeds the games' randomness.
    pub seed: String,
    /// The session options every game opens with.
    pub options: Map<String, Value>,
    /// Games played at once (one per core when `None`).
    pub jobs: Option<usize>,
    /// What models cost, for the report's `cost`.
    pub prices: BTreeMap<String, Price>,
}

/// Plays `batch` on `engine`, each game on a thread of its own with `handle`'s runtime entered,
/// and reports how the games ended; a player's game that fails is the batch's error. The games
/// play on the pack `engine` serves; on a copy of the rules ([`Engine::with_params`]) its
/// stand-in's answers are kept across games and batches.
pub fn run(handle: &tokio::runtime::Handle, engine: &Engine, batch: &Batch) -> Result<Report> {
    if !(1..=MOST_GAMES).contains(&batch.games) {
        return Err(Error::input(format!("games is 1 to {MOST_GAMES} per player, not {}", batch.games)));
    }
    let pack = engine.packs().get(&batch.pack)?;
    pack.resolve_options(&batch.options)?;
    let players = players(engine, &pack, &batch.players)?;
    let plan = Plan::of(batch, &pack);
    let rules = Rules { engine, options: &batch.options };
    let played = play(handle, &plan, &players, &rules, &batch.prices, &|| {}, &AtomicBool::new(false));
    if let Some(e) = played.iter().find_map(|p| p.error.clone()) {
        return Err(e.error);
    }
    let mut report = report(&plan, &played);
    report.models = models(engine, &pack);
    Ok(report)
}

/// What to play: how many games per player, from which seed, how many at once.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The pack played.
    pub pack: String,
    /// Games per player.
    pub games: u32,
    /// The number of each player's first game: its games are numbered `first..first + games`.
    /// A tune plays a value's games in batches, each numbered on from the one before, so its
    /// first n games at a value are the games `simulate --param` plays there with the same seed.
    pub first: u32,
    /// What seeds the games' randomness.
    pub seed: String,
    /// Games played at once (threads); at least 1.
    pub jobs: usize,
    /// The pack's `simulate:` block: the outcome field, the tracked fields, the turn cap.
    pub spec: ruleweave::Simulate,
    /// Keep each game in the engine's store as `sim-SEED-PLAYER-GAME` (replacing a game of that
    /// id from an earlier run), to open with `replay` or the console; otherwise a game is deleted
    /// once counted.
    pub record: bool,
    /// The account its real models' calls are paid from, when they are capped: once a call is
    /// refused, games end at their next turn boundary (one whose turn met the refusal ends
    /// before that turn) and are listed apart, uncounted.
    pub spend: Option<Arc<Spend>>,
}

impl Plan {
    /// The plan of `batch` on `pack`: its games, seed and jobs (one per core when it names
    /// none), the pack's `simulate:` block, nothing recorded.
    pub fn of(batch: &Batch, pack: &Pack) -> Plan {
        let jobs = batch.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)).max(1);
        Plan {
            pack: batch.pack.clone(),
            games: batch.games,
            first: 0,
            seed: batch.seed.clone(),
            jobs,
            spec: pack.simulate().clone(),
            record: false,
            spend: None,
        }
    }

    /// Whether the run's account stopped it.
    fn stopped(&self) -> bool {
        self.spend.as_ref().is_some_and(|s| s.stopped().is_some())
    }

    /// The id of `player`'s game number `game`: the same on every copy of the rules, so the
    /// games' randomness (the stand-in's, the player's) is the same on both.
    pub fn game_id(&self, player: &str, game: u32) -> String {
        format!("sim-{}-{player}-{game}", self.seed)
    }
}

/// One copy of the rules the games are played on: an engine and the session options.
pub struct Rules<'a> {
    /// The engine holding this copy of the rules.
    pub engine: &'a Engine,
    /// The session options every game opens with.
    pub options: &'a Map<String, Value>,
}

/// One player's games on one copy of the rules.
#[derive(Debug, Clone)]
pub struct Played {
    /// The player's name.
    pub name: String,
    outcomes: Vec<String>,
    /// The turns each game took, and whether it finished in them (not stopped by the cap).
    turns: Vec<(f64, bool)>,
    /// Each tracked field's value at the end of each game (none when it was no number).
    track: Vec<(String, Vec<Option<f64>>)>,
    /// Each tracked field's values after each turn: `[turn - 1][game]`.
    per_turn: Vec<(String, Vec<Vec<f64>>)>,
    /// The tokens each game's model calls spent (prompt and completion).
    tokens: Vec<f64>,
    /// What each game cost, while every model it called has a price.
    costs: Vec<f64>,
    /// Models called without a price in `[prices]`: no cost is reported then.
    unpriced: BTreeSet<String>,
    /// The line each tracked field's chart draws (`simulate.thresholds`), as the first game
    /// rendered it.
    thresholds: BTreeMap<String, f64>,
    /// The games the run's spending cap stopped before they ended (by number), uncounted.
    stopped: Vec<u32>,
    /// Why the player's games stopped, when one failed; the games before it are counted.
    pub error: Option<GameError>,
}

/// How one game went: its end, the spending cap's stop, or why it failed.
type GameResult = Result<Ended, Box<GameError>>;

/// A game played to its end, or stopped by the run's spending cap at a turn boundary.
enum Ended {
    Game(Game),
    Stopped,
}

/// One game's end.
struct Game {
    outcome: String,
    turns: u32,
    /// Whether the game finished (rather than reaching the turn cap).
    finished: bool,
    /// The tracked fields' lines (`simulate.thresholds`), rendered on the game's last state.
    thresholds: Vec<(String, f64)>,
    /// Each tracked field at the end.
    end: Vec<Option<f64>>,
    /// Each tracked field after each turn.
    by_turn: Vec<Vec<Option<f64>>>,
    tokens: u64,
    /// The cost, or the models that had no price.
    cost: std::result::Result<f64, BTreeSet<String>>,
}

impl Played {
    /// The games counted (ended, not stopped nor failed).
    pub fn games(&self) -> usize {
        self.outcomes.len()
    }

    fn new(name: &str, track: &[String]) -> Self {
        Played {
            name: name.to_owned(),
            outcomes: Vec::new(),
            turns: Vec::new(),
            track: track.iter().map(|t| (t.clone(), Vec::new())).collect(),
            per_turn: track.iter().map(|t| (t.clone(), Vec::new())).collect(),
            tokens: Vec::new(),
            costs: Vec::new(),
            unpriced: BTreeSet::new(),
            thresholds: BTreeMap::new(),
            stopped: Vec::new(),
            error: None,
        }
    }

    fn count(&mut self, game: Game) {
        self.outcomes.push(game.outcome);
        self.turns.push((f64::from(game.turns), game.finished));
        for ((_, values), x) in self.track.iter_mut().zip(game.end) {
            values.push(x);
        }
        for (field, line) in game.thresholds {
            self.thresholds.entry(field).or_insert(line);
        }
        for (turn, fields) in game.by_turn.into_iter().enumerate() {
            for ((_, by_turn), x) in self.per_turn.iter_mut().zip(fields) {
                if let Some(x) = x {
                    by_turn.resize_with(by_turn.len().max(turn + 1), Vec::new);
                    by_turn[turn].push(x);
                }
            }
        }
        self.tokens.push(game.tokens as f64);
        match game.cost {
            Ok(c) => self.costs.push(c),
            Err(models) => self.unpriced.extend(models),
        }
    }
}

/// The stack a game's thread gets: deep Rhai recursion needs more than the default.
const STACK: usize = 16 << 20;

/// Why a player's games stopped: which game, at what, and the engine's error with its kind and
/// place.
#[derive(Debug, Clone)]
pub struct GameError {
    /// The player whose game stopped.
    pub player: String,
    /// The game's number (from 0).
    pub game: u32,
    /// Where in the game it stopped.
    pub at: Stopped,
    /// The engine's error, with its kind and place.
    pub error: ruleweave::Error,
}

/// Where in a game it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The game did not open (the pack's `init`).
    Opening,
    /// The player's script failed choosing its move for this turn.
    Move(u64),
    /// The player's move is no input the pack reads.
    Input(u64),
    /// The pack failed playing this turn.
    Turn(u64),
}

impl GameError {
    fn new(player: &Player, game: u32, at: Stopped, error: ruleweave::Error) -> Box<Self> {
        Box::new(GameError { player: player.name.clone(), game, at, error })
    }
}

impl std::fmt::Display for GameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (player, game, e) = (&self.player, self.game, &self.error);
        match self.at {
            Stopped::Opening => write!(f, "game {game} of player `{player}` did not open: {e}"),
            Stopped::Move(_) => write!(f, "player `{player}` failed in game {game}: {e}"),
            Stopped::Input(_) => write!(f, "player `{player}` gave no input the pack reads in game {game}: {e}"),
            Stopped::Turn(turn) => write!(f, "game {game} of player `{player}` failed at turn {turn}: {e}"),
        }
    }
}

impl std::error::Error for GameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Plays every player's games on one copy of the rules, `plan.jobs` at a time, and calls `tick`
/// after each game; a game not begun when `stop` is set is not played. The result is the same
/// whatever the number of jobs: games are counted in their order, and a player whose game fails has its later games left unplayed and uncounted
/// (the other players go on).
pub fn play(
    handle: &tokio::runtime::Handle,
    plan: &Plan,
    players: &[Player],
    rules: &Rules<'_>,
    prices: &BTreeMap<String, Price>,
    tick: &(dyn Fn() + Sync),
    stop: &AtomicBool,
) -> Vec<Played> {
    let games = plan.games as usize;
    let total = games * players.len();
    let next = AtomicUsize::new(0);
    let first_failure: Vec<AtomicUsize> = players.iter().map(|_| AtomicUsize::new(usize::MAX)).collect();
    let results: Mutex<Vec<Option<GameResult>>> = Mutex::new((0..total).map(|_| None).collect());
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= total || stop.load(Ordering::Relaxed) || plan.stopped() {
                break;
            }
            let (p, g) = (i / games, i % games);
            if g < first_failure[p].load(Ordering::Relaxed) {
                let r = game(handle, plan, &players[p], plan.first + g as u32, rules, prices);
                if r.is_err() {
                    first_failure[p].fetch_min(g, Ordering::Relaxed);
                }
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            }
            tick();
        }
    };
    std::thread::scope(|s| {
        let mut started = 0;
        for _ in 0..plan.jobs.clamp(1, total.max(1)) {
            if std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, work).is_ok() {
                started += 1;
            }
        }
        if started == 0 {
            work();
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    players
        .iter()
        .enumerate()
        .map(|(p, player)| {
            let mut played = Played::new(&player.name, &plan.spec.track);
            for g in 0..games {
                match results[p * games + g].take() {
                    Some(Ok(Ended::Game(game))) => played.count(game),
                    Some(Ok(Ended::Stopped)) => played.stopped.push(plan.first + g as u32),
                    Some(Err(e)) => {
                        played.error = Some(*e);
                        break;
                    }
                    None => break,
                }
            }
            played
        })
        .collect()
}

/// One game, from its opening to `finish:` or the turn cap. Played on this thread with the
/// runtime entered, each of the engine's steps blocked on: a model player waits for its model
/// here too, outside the runtime's async context.
fn game(
    handle: &tokio::runtime::Handle,
    plan: &Plan,
    player: &Player,
    number: u32,
    rules: &Rules<'_>,
    prices: &BTreeMap<String, Price>,
) -> GameResult {
    let id = plan.game_id(&player.name, number);
    let _runtime = handle.enter();
    if plan.record {
        // A game of this id from an earlier run gives way; there is none the first time.
        let _ = handle.block_on(rules.engine.delete(&id));
    }
    let mut session = handle
        .block_on(rules.engine.open_here(&plan.pack, rules.options, Some(id.clone())))
        .map_err(|e| GameError::new(player, number, Stopped::Opening, e))?;
    // A player that reads the display is shown it below; nothing reads the turn's own, nor its
    // output (the report reads the state).
    session.show_results(false);
    let result = turns(plan, player, number, &id, &mut session, prices);
    if !plan.record {
        let _ = handle.block_on(rules.engine.delete(&id));
    }
    result
}

fn turns(
    plan: &Plan,
    player: &Player,
    number: u32,
    id: &str,
    session: &mut Session,
    prices: &BTreeMap<String, Price>,
) -> GameResult {
    let spec = &plan.spec;
    let read = |session: &Session| -> Vec<Option<f64>> {
        spec.track.iter().map(|f| session.field(f).and_then(|v| v.as_f64())).collect()
    };
    let mut by_turn = Vec::new();
    let (mut tokens, mut cost, mut unpriced) = (0u64, 0.0, BTreeSet::new());
    // What a call spent: its tokens, and its price (the stand-in's is nothing), or its model
    // noted as one without a price.
    let spend = |call: &ruleweave::LlmEvent, tokens: &mut u64, cost: &mut f64, unpriced: &mut BTreeSet<String>| {
        *tokens += u64::from(call.prompt_tokens) + u64::from(call.completion_tokens);
        match prices.get(&call.model) {
            _ if call.standin => {}
            Some(price) => *cost += price.of(call.prompt_tokens, call.completion_tokens),
            None => {
                unpriced.insert(call.model.clone());
            }
        }
    };
    while (by_turn.len() as u32) < spec.max_turns && !session.is_finished() {
        if plan.stopped() {
            return Ok(Ended::Stopped);
        }
        let turn = by_turn.len() as u64 + 1;
        let stopped = |at: fn(u64) -> Stopped, e| GameError::new(player, number, at(turn), e);
        let view = match player.reads_view {
            true => serde_json::to_value(session.view())
                .map_err(|e| stopped(Stopped::Move, ruleweave::Error::new(ErrorKind::Internal, e.to_string())))?,
            false => Value::Null,
        };
        // The player's own deep copy of the state: what it changes in it stays with it (Rhai lets
        // a function change its arguments, read-only or not), as it did with the state's JSON.
        let state = match player.reads_state {
            true => session.state_copy(),
            false => Some(Dynamic::UNIT),
        };
        let state = state.ok_or_else(|| stopped(Stopped::Move, ruleweave::Error::internal("the state is in use")))?;
        let (next, player_calls) = player
            .play
            .call_as_with(id, turn, vec![ruleweave::values::from_json(&view), state])
            .map_err(|e| stopped(Stopped::Move, e))?;
        // A model player's calls are part of what the game cost.
        for call in &player_calls {
            spend(call, &mut tokens, &mut cost, &mut unpriced);
        }
        if refused(&player_calls) {
            return Ok(Ended::Stopped);
        }
        let input = session.input_from(next).map_err(|e| stopped(Stopped::Input, e))?;
        let result = match session.blocking_turn(input) {
            Err(_) if plan.stopped() => return Ok(Ended::Stopped),
            played => played.map_err(|e| stopped(Stopped::Turn, e))?,
        };
        let calls = result.events.iter().filter_map(|e| match e {
            Event::Llm(call) => Some(call),
            _ => None,
        });
        if refused(calls) {
            return Ok(Ended::Stopped);
        }
        for event in &result.events {
            if let Event::Llm(call) = event {
                spend(call, &mut tokens, &mut cost, &mut unpriced);
            }
        }
        by_turn.push(read(session));
    }
    // A game the cap stopped did not end as the pack ends games: its outcome field says where it
    // stood, not how it came out.
    let finished = session.is_finished();
    let outcome = match &spec.outcome {
        _ if !finished && session.pack().finishes() => UNFINISHED.into(),
        Some(field) => match session.field(field) {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => "none".into(),
        },
        None if finished => "finished".into(),
        None => UNFINISHED.into(),
    };
    Ok(Ended::Game(Game {
        outcome,
        turns: by_turn.len() as u32,
        finished,
        thresholds: session.thresholds(),
        end: read(session),
        by_turn,
        tokens,
        cost: if unpriced.is_empty() { Ok(cost) } else { Err(unpriced) },
    }))
}

/// Whether the run's spending cap refused one of `calls`: a turn that met it is not the game's
/// (a node's fallback may have answered in the model's place).
fn refused<'a>(calls: impl IntoIterator<Item = &'a ruleweave::LlmEvent>) -> bool {
    calls.into_iter().any(|c| c.error.as_deref().is_some_and(|e| e.contains(REFUSED)))
}

/// The outcome of a game stopped by the turn cap (`simulate.max_turns`) before it finished.
pub const UNFINISHED: &str = "unfinished";

/// An outcome as a person reads it: a game the cap stopped says the cap
/// (`unfinished (cap 20 turns)`).
pub fn outcome_label(outcome: &str, max_turns: u32) -> String {
    if outcome == UNFINISHED { format!("{outcome} (cap {max_turns} turns)") } else { outcome.to_owned() }
}

/// What a batch of games came to: the contract of `simulate --json` and of
/// `POST /v1/packs/{pack}/simulate`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Report {
    /// The pack played.
    pub pack: String,
    /// Games per player.
    pub games: u32,
    /// What seeded the games: the same seed, the same report.
    pub seed: String,
    /// The most turns a game was played for (`simulate.max_turns`): a game of a pack that
    /// finishes still going then is `unfinished`.
    pub max_turns: u32,
    /// Each player's games, in the order asked.
    pub players: Vec<PlayerReport>,
    /// The same games on another copy of the rules, when there is one (null otherwise).
    pub against: Option<Against>,
    /// What played each of the pack's model profiles: `stand-in`, or the provider (`openai`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, String>,
    /// What the real models' calls cost, when the run was capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
    /// Why the run stopped before its games were done: `budget_usd` or `max_calls`. The games
    /// it stopped are listed apart (each player's `stopped`) and counted in no share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stop>,
    /// How the run used its cache of the real models' answers, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::cache::CacheUse>,
    /// The headline of the pack version's calibration (`ruleweave calibrate`), when the store
    /// keeps one: how far the stand-ins that played are from their models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::calibrate::Headline>,
}

/// One player's games.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlayerReport {
    /// The player's name (`liar`, `model:smuggler`).
    pub name: String,
    /// The games counted (fewer than asked when one failed: see `error`).
    pub games: usize,
    /// Each outcome (the pack's `simulate.outcome` field at the end, or `unfinished` for a game
    /// the cap stopped) and its share.
    pub outcomes: BTreeMap<String, Share>,
    /// The turns the games that finished took (those the cap stopped are not counted: see the
    /// outcome `unfinished`).
    pub turns: Spread,
    /// How many finished games took each number of turns: the first entry counts those of 1 turn.
    pub turns_histogram: Vec<usize>,
    /// Each tracked field (`simulate.track`) at the end of the games, and after each turn.
    pub track: indexmap::IndexMap<String, Tracked>,
    /// The tokens a game's model calls spent (prompt and completion, as the providers reported).
    pub tokens: Spread,
    /// What a game cost by `[prices]` (the stand-in is free); null when a model had no price.
    pub cost: Option<Spread>,
    /// The models called that have no price in `[prices]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced: Vec<String>,
    /// Why the player's games stopped; the games before it are counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The games (by number) the run's spending cap stopped before they ended: not counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<u32>,
}

/// A share of the games, with its 95% (Wilson) interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Share {
    /// The share of the games, 0 to 1.
    pub share: f64,
    /// The interval's low end.
    pub low: f64,
    /// The interval's high end.
    pub high: f64,
}

/// The median and the 10th and 90th percentiles (nearest rank); null for no values.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Spread {
    /// The median.
    pub median: Option<f64>,
    /// The 10th percentile.
    pub p10: Option<f64>,
    /// The 90th percentile.
    pub p90: Option<f64>,
}

/// A tracked field: its spread at the end of the games, and after each turn over the games
/// still going then.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tracked {
    #[serde(flatten)]
    /// The spread at the end of the games.
    pub end: Spread,
    /// After each turn, the spread over the games still going then.
    pub per_turn: Vec<Spread>,
    /// The line its chart draws (`simulate.thresholds`: the pirate's merit, the difficulty's
    /// threshold), when the pack names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}

/// The same games on another copy of the rules, and how the outcomes differ.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Against {
    /// The other copy's root.
    pub root: String,
    /// Its players' games, in the same order.
    pub players: Vec<PlayerReport>,
    /// Each outcome's share here less there.
    pub differences: Vec<Difference>,
    /// Each tracked field (and `turns`) here less there, game by game.
    pub tracked: Vec<TrackedDifference>,
    /// What differs between the two copies of the pack: its manifest's values, key by key, and
    /// the first differing line of each other file.
    pub changes: Vec<Change>,
    /// Every changed line of each file that differs, as a unified diff (these rules → the other
    /// copy), the manifest first.
    pub diff: Vec<FileDiff>,
}

/// One file's changes between two copies of a pack, as a unified diff.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FileDiff {
    /// The file, from the root (`config/pirate.yaml`).
    pub file: String,
    /// The unified diff, three lines of context: `--- FILE (these rules)`, `+++ FILE (ROOT)`,
    /// then the hunks.
    pub unified: String,
}

/// A tracked field (or `turns`) on these rules less the other copy's, over the same games (the
/// same ids, so the same moves where the rules let them be): `delta` is the median of the
/// game-by-game differences, with the sign test's 95% interval (exact, assuming nothing of the
/// field's distribution); beyond noise when the interval leaves out 0. `turns` pairs the games
/// that finished on both copies.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrackedDifference {
    /// The player.
    pub player: String,
    /// The tracked field, or `turns`.
    pub field: String,
    /// The games paired (both copies have a number for the field).
    pub games: usize,
    /// The median of the game-by-game differences (none without a pair).
    pub delta: Option<f64>,
    /// The interval's low end (none for fewer than 6 pairs).
    pub low: Option<f64>,
    /// The interval's high end.
    pub high: Option<f64>,
    /// Whether the interval leaves out 0.
    pub beyond_noise: bool,
}

/// One difference between the two copies of a pack. In the manifest, `key` is the value's dotted
/// path (`params.thresholds.easy`) and `ours`/`theirs` the values; in another file (a script, a
/// template, a data file), `key` is `line N` of its first differing line, and the lines. A side
/// without the value or the file is null.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Change {
    /// The file, from the root (`config/pirate.yaml`).
    pub file: String,
    /// The manifest's dotted key, or `line N` of another file.
    pub key: String,
    /// This copy's value or line (null: none).
    pub ours: Value,
    /// The other copy's.
    pub theirs: Value,
}

/// One outcome's share on these rules less the other copy's, with a 95% interval (Newcombe's
/// hybrid score interval); beyond noise when the interval leaves out 0.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Difference {
    /// The player.
    pub player: String,
    /// The outcome.
    pub outcome: String,
    /// This copy's share less the other's.
    pub delta: f64,
    /// The interval's low end.
    pub low: f64,
    /// The interval's high end.
    pub high: f64,
    /// Whether the interval leaves out 0.
    pub beyond_noise: bool,
}

/// The report of `played`, without a comparison.
pub fn report(plan: &Plan, played: &[Played]) -> Report {
    Report {
        pack: plan.pack.clone(),
        games: plan.games,
        seed: plan.seed.clone(),
        max_turns: plan.spec.max_turns,
        players: played.iter().map(Played::report).collect(),
        against: None,
        models: BTreeMap::new(),
        spent: plan.spend.as_ref().map(|s| s.spent()),
        stopped: plan.spend.as_ref().and_then(|s| s.stopped()),
        cache: plan.spend.as_ref().and_then(|s| s.cache()),
        calibration: None,
    }
}

/// What plays each of `pack`'s model profiles on `engine`: `stand-in` (or `none` for a pack
/// without one), or the provider's name.
pub fn models(engine: &Engine, pack: &Pack) -> BTreeMap<String, String> {
    let standin = if pack.has_standin() { "stand-in" } else { "none" };
    pack.profiles()
        .map(|p| {
            let by = match engine.llm() {
                LlmChoice::Standin => standin.to_owned(),
                LlmChoice::Provider(provider) => provider.name().to_owned(),
                LlmChoice::ByProfile(chosen) => chosen.get(&p.name).map_or(standin.to_owned(), |c| c.name().to_owned()),
            };
            (p.name.clone(), by)
        })
        .collect()
}

impl Played {
    /// The player's games: outcomes with their intervals, turns, tracked fields, tokens, cost.
    fn report(&self) -> PlayerReport {
        let n = self.outcomes.len();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for o in &self.outcomes {
            *counts.entry(o.as_str()).or_default() += 1;
        }
        let outcomes = counts
            .into_iter()
            .map(|(o, k)| {
                let (low, high) = wilson(k, n);
                (o.to_owned(), Share { share: k as f64 / n as f64, low, high })
            })
            .collect();
        let track = self
            .track
            .iter()
            .zip(&self.per_turn)
            .map(|((f, at_end), (_, by_turn))| {
                let at_end: Vec<f64> = at_end.iter().flatten().copied().collect();
                let tracked = Tracked {
                    end: spread(&at_end),
                    per_turn: by_turn.iter().map(|v| spread(v)).collect(),
                    threshold: self.thresholds.get(f).copied(),
                };
                (f.clone(), tracked)
            })
            .collect();
        let finished: Vec<f64> = self.turns.iter().filter(|(_, done)| *done).map(|(t, _)| *t).collect();
        PlayerReport {
            name: self.name.clone(),
            games: n,
            outcomes,
            turns: spread(&finished),
            turns_histogram: histogram(&finished),
            track,
            tokens: spread(&self.tokens),
            // A cost per game only when every game's every model had a price.
            cost: (self.unpriced.is_empty() && !self.costs.is_empty()).then(|| spread(&self.costs)),
            unpriced: self.unpriced.iter().cloned().collect(),
            error: self.error.as_ref().map(ToString::to_string),
            stopped: self.stopped.clone(),
        }
    }
}

#[cfg(test)]
mod tests;

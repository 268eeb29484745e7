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
mod report;
mod stats;
mod sweep;
pub mod tune;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rhai::Dynamic;
use serde_json::{Map, Value};

use crate::spend::{REFUSED, Spend};
pub use against::compare;
pub use report::{
    Against, Change, Difference, FileDiff, PlayerReport, Report, Share, Spread, Tracked, TrackedDifference, models,
    report,
};
use ruleweave::{Engine, Event, Pack, ScriptCall, Session};
use ruleweave::{Error, ErrorKind, Result};
pub(crate) use stats::newcombe;
pub use stats::wilson;

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
    /// The games the run's spending cap stopped before they ended, or before they began (by
    /// number), uncounted.
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
                    // Not begun because the cap had stopped the run: stopped as well, uncounted.
                    None if plan.stopped() => played.stopped.push(plan.first + g as u32),
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

#[cfg(test)]
mod tests;

//! Asking for the value: sweeps (the same games at each value of a parameter) and `tune` (the
//! value whose outcome share is the one a designer wants).
//!
//! Both play every value on the same games: the same seeds, so the same game ids and the same
//! moves wherever the rules let them be the same (common random numbers), and a difference
//! between two values is the rules', not the dice's.
//!
//! `tune` spends games where they decide the answer. A coarse sweep of up to nine values at
//! [`FIRST_GAMES`] games each finds where the share crosses the target; its two neighbours get
//! more games, doubling, until each one's 95% (Wilson) interval lies on one side of the target
//! (or inside the band); bisection, each midpoint played the same way, narrows the crossing to
//! two neighbouring values (integers) or a thousandth of the range; then the nearer of the two,
//! and the other after it, get more games until an interval lies inside `share ± within`
//! (found), wholly outside it, or the games allowed run out. When no value is found, the answer
//! is the evaluation nearest the target, with why.
//!
//! What "found" promises: at the answer, the share's 95% interval from its own games lies inside
//! the band. The search looks at several values and stops when one fits, so across the whole
//! search that is a strong indication rather than a 95% guarantee; a second run with another seed
//! (or `simulate --param NAME=VALUE --seed S`) confirms it.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde_json::{Map, Value};

pub use super::sweep::{MOST_VALUES, Range, Sweep, SweepPoint, SweepReport, sweep};
use super::sweep::{json_of, num, tidy};
use super::{Batch, Plan, Price, Rules, UNFINISHED, play, players, wilson};
use ruleweave::{Engine, NumericParam, ParamValues};
use ruleweave::{Error, Result};

/// The games each value gets first, and the step by which a value's games double.
pub const FIRST_GAMES: u32 = 100;

/// What `tune` aims at: a player's share of an outcome (or of the outcomes a prefix names).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Target {
    /// The player whose games count.
    pub player: String,
    /// The outcome; ending in `*`, every outcome it begins (`won_*`).
    pub outcome: String,
    /// The share wanted, 0 to 1.
    pub share: f64,
    /// How far from it is close enough.
    pub within: f64,
}

impl Target {
    /// `PLAYER:OUTCOME=SHARE` (`liar:won_*=0.3`), close enough `within` of it.
    pub fn parse(text: &str, within: f64) -> Result<Target> {
        let shape = || Error::input(format!("a target is PLAYER:OUTCOME=SHARE (liar:won_*=0.3), not `{text}`"));
        let (who, share) = text.split_once('=').ok_or_else(shape)?;
        let (player, outcome) = who.rsplit_once(':').ok_or_else(shape)?;
        let share: f64 = share.trim().parse().map_err(|_| shape())?;
        if !(0.0..=1.0).contains(&share) {
            return Err(Error::input(format!("a target's share is 0 to 1, not {share}")));
        }
        if !(within > 0.0 && within < 0.5) {
            return Err(Error::input(format!("--within is more than 0 and less than 0.5, not {within}")));
        }
        let (player, outcome) = (player.trim(), outcome.trim());
        if player.is_empty() || outcome.is_empty() || outcome == "*" {
            return Err(shape());
        }
        Ok(Target { player: player.to_owned(), outcome: outcome.to_owned(), share, within })
    }

    /// Whether a game that ended in `outcome` counts.
    fn counts(&self, outcome: &str) -> bool {
        match self.outcome.strip_suffix('*') {
            Some(prefix) => outcome.starts_with(prefix),
            None => outcome == self.outcome,
        }
    }
}

/// A tune to run: vary one parameter over a range until the target's share is found.
#[derive(Debug, Clone)]
pub struct Tune {
    /// The pack, the seed, the options, other parameter values already set (by the engine given),
    /// games at once; its `games` and `players` are not used (the target names the player).
    pub pack: String,
    /// The parameter and its range (its step is not used: `tune` chooses the values).
    pub vary: Range,
    /// The share wanted.
    pub target: Target,
    /// What seeds the games: the same seed, the same answer.
    pub seed: String,
    /// The session options every game opens with.
    pub options: Map<String, Value>,
    /// The most games one value gets.
    pub games_max: u32,
    /// The most games the whole tune plays.
    pub budget: u64,
    /// Games played at once (one per core when `None`).
    pub jobs: Option<usize>,
    /// The account real models' calls are paid from, when they play (see [`Plan::spend`]): a
    /// tune its cap stops ends with the values it tried, found nothing, and says so.
    pub spend: Option<std::sync::Arc<crate::spend::Spend>>,
}

/// The default most games for one value (a ±3% interval at a share of 0.3).
pub const GAMES_MAX: u32 = 3_200;

/// One value tried, with the share its games gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Evaluation {
    /// The value.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub value: Value,
    /// The target outcome's share of its games.
    pub share: f64,
    /// The 95% interval's low end.
    pub low: f64,
    /// Its high end.
    pub high: f64,
    /// The games played at the value.
    pub games: u32,
    /// How the value's games used the cache of real models' answers, when the tune has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::cache::CacheUse>,
}

/// What `tune` found.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TuneReport {
    /// The pack.
    pub pack: String,
    /// The parameter varied.
    pub param: String,
    /// The value found, or when none was, the evaluation nearest the target.
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub value: Value,
    /// What was aimed at.
    pub target: Target,
    /// Whether the value's 95% interval lies inside the target's share ± within.
    pub found: bool,
    /// The value's share, interval and games.
    pub share: Evaluation,
    /// Why nothing was found (the shares at the range's ends, a cliff between two values, the
    /// budget); none when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// When nothing was found because the share crosses the target between two neighbouring
    /// values tried (a cliff), those two, lower value first, each with its share and interval:
    /// either may be the one to use. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<Evaluation>,
    /// Every value tried, in the range's order.
    pub evaluations: Vec<Evaluation>,
    /// The games played in all.
    pub games_played: u64,
    /// How long it took.
    pub seconds: f64,
    /// What seeded the games.
    pub seed: String,
    /// What played each of the pack's model profiles: `stand-in`, or the provider.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, String>,
    /// What the real models' calls cost, when they played.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<crate::spend::Spent>,
    /// Why the tune stopped before it was done: `budget_usd`, `max_calls` or `max_time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::spend::Stop>,
    /// How the tune used its cache of real models' answers, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::cache::CacheUse>,
    /// The headline of the pack version's calibration, when the store keeps one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::calibrate::Headline>,
}

/// Where a tune is: the value it is trying, and the games its budget has left.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneProgress {
    /// The value being played.
    pub value: f64,
    /// Games left in the budget.
    pub games_left: u64,
}

/// A value's games so far: how many, how many counted for the target, at which doubling.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    games: u32,
    hits: u32,
    /// The batches played: batch 0 has [`FIRST_GAMES`] games, batch k ≥ 1 `FIRST_GAMES·2^(k-1)`
    /// (so the games double), numbered on from the batch before, the same at every value.
    batches: u32,
}

impl Tally {
    fn share(&self) -> f64 {
        if self.games == 0 { 0.0 } else { f64::from(self.hits) / f64::from(self.games) }
    }

    fn interval(&self) -> (f64, f64) {
        wilson(self.hits as usize, self.games as usize)
    }
}

/// The games a tune plays, value by value, on the same seeds at every value.
struct Tuner<'a> {
    handle: &'a tokio::runtime::Handle,
    engine: &'a Engine,
    tune: &'a Tune,
    param: &'a NumericParam,
    plan: Plan,
    /// Each value tried: its copy of the rules (with the player as that copy loads it, so a
    /// player reading the parameter sees the value) and its games so far.
    values: Vec<Tried>,
    played: u64,
    /// Outcomes any game ended in, to refuse a target none matches.
    seen: std::collections::BTreeSet<String>,
    progress: &'a (dyn Fn(&TuneProgress) + Sync),
    stop: &'a AtomicBool,
}

/// One value tried.
struct Tried {
    value: f64,
    copy: Engine,
    player: super::Player,
    tally: Tally,
    /// Its games' use of the cache.
    cache: Option<crate::cache::CacheUse>,
}

impl Tuner<'_> {
    fn tally(&self, x: f64) -> Tally {
        self.values.iter().find(|v| v.value == x).map(|v| v.tally).unwrap_or_default()
    }

    /// Plays `x`'s next batch of games; false when the budget or the value's most games would be
    /// passed (nothing is played then).
    fn more(&mut self, x: f64) -> Result<bool> {
        if self.plan.stopped() {
            return Ok(false);
        }
        let t = self.tally(x);
        let games = u64::from(FIRST_GAMES) << t.batches.saturating_sub(1).min(20);
        let most = u64::from(self.tune.games_max.clamp(FIRST_GAMES, super::MOST_GAMES));
        if u64::from(t.games) + games > most || self.played + games > self.tune.budget {
            return Ok(false);
        }
        if !self.values.iter().any(|v| v.value == x) {
            let values = ParamValues::from([(self.tune.vary.param.clone(), json_of(self.param, x))]);
            let copy = self.engine.with_params(&self.tune.pack, values)?;
            let pack = copy.packs().get(&self.tune.pack)?;
            let player = players(&copy, &pack, std::slice::from_ref(&self.tune.target.player))?
                .pop()
                .ok_or_else(|| Error::internal("no player"))?;
            self.values.push(Tried { value: x, copy, player, tally: Tally::default(), cache: None });
        }
        let tried = self.values.iter().find(|v| v.value == x).ok_or_else(|| Error::internal("a value not kept"))?;
        let games = games as u32;
        // Numbered on from the value's games so far, on the tune's own seed: the value's games
        // are the ones `simulate --param` plays there.
        let plan = Plan { games, first: t.games, ..self.plan.clone() };
        let rules = Rules { engine: &tried.copy, options: &self.tune.options };
        let left = self.tune.budget - self.played;
        let done = std::sync::atomic::AtomicU64::new(0);
        let tick = || {
            let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            (self.progress)(&TuneProgress { value: x, games_left: left.saturating_sub(d) });
        };
        let cached = || self.plan.spend.as_ref().and_then(|s| s.cache());
        let before = cached();
        let played =
            play(self.handle, &plan, std::slice::from_ref(&tried.player), &rules, &BTreeMap::new(), &tick, self.stop);
        let used = cached()
            .zip(before)
            .map(|(now, was)| crate::cache::CacheUse { hits: now.hits - was.hits, misses: now.misses - was.misses });
        let played = played.into_iter().next().ok_or_else(|| Error::internal("a batch played no player"))?;
        if let Some(e) = played.error {
            return Err(e.error);
        }
        if self.stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::input("the tune was stopped"));
        }
        let hits = played.outcomes.iter().filter(|o| self.tune.target.counts(o)).count() as u32;
        self.seen.extend(played.outcomes.iter().cloned());
        // A batch the spending cap stopped counts the games it finished; the tune ends there.
        let games = played.outcomes.len() as u32;
        self.played += u64::from(games);
        if let Some(v) = self.values.iter_mut().find(|v| v.value == x) {
            v.tally = Tally { games: v.tally.games + games, hits: v.tally.hits + hits, batches: t.batches + 1 };
            v.cache = match (v.cache, used) {
                (Some(a), Some(b)) => {
                    Some(crate::cache::CacheUse { hits: a.hits + b.hits, misses: a.misses + b.misses })
                }
                (a, b) => a.or(b),
            };
        }
        Ok(!self.plan.stopped())
    }

    /// `x`'s share, playing its first games when it has none.
    fn share(&mut self, x: f64) -> Result<Option<f64>> {
        if self.tally(x).games == 0 && !self.more(x)? {
            return Ok(None);
        }
        Ok(Some(self.tally(x).share()))
    }

    fn evaluation(&self, x: f64) -> Evaluation {
        let t = self.tally(x);
        let (low, high) = t.interval();
        let cache = self.values.iter().find(|v| v.value == x).and_then(|v| v.cache);
        Evaluation { value: json_of(self.param, x), share: t.share(), low, high, games: t.games, cache }
    }
}

/// What [`tune`] checks before it plays a game: the pack loads and takes the options, the
/// parameter is one of its numbers and the range lies within its bounds (and is more than one
/// value), the target's outcome is one the pack declares and its player one it has. A server
/// answers these at once, before it starts the job. The pack and the parameter, checked.
pub fn check(engine: &Engine, tune: &Tune) -> Result<(std::sync::Arc<ruleweave::Pack>, NumericParam)> {
    let pack = engine.packs().get(&tune.pack)?;
    pack.resolve_options(&tune.options)?;
    let param = pack.numeric_param(&tune.vary.param)?.clone();
    tune.vary.ends(&param)?;
    if tune.vary.lo == tune.vary.hi {
        return Err(Error::input(format!("the range of `{}` is one value: nothing to tune", tune.vary.param)));
    }
    let target = &tune.target;
    let declared = &pack.simulate().outcomes;
    if !declared.is_empty() && !declared.iter().chain(std::iter::once(&UNFINISHED.to_owned())).any(|o| target.counts(o))
    {
        return Err(Error::input(format!(
            "pack `{}` has no outcome `{}` (its outcomes: {})",
            tune.pack,
            target.outcome,
            declared.join(", ")
        )));
    }
    // The player is checked here, and loaded with each value's copy of the rules.
    players(engine, &pack, std::slice::from_ref(&target.player))?;
    Ok((pack, param))
}

/// Finds a value of `tune.vary.param` (within its range) at which `tune.target`'s share is the
/// one wanted, or says why there is none (see the module's doc for how). `progress` is called
/// after each game.
pub fn tune(
    handle: &tokio::runtime::Handle,
    engine: &Engine,
    tune: &Tune,
    progress: &(dyn Fn(&TuneProgress) + Sync),
    stop: &AtomicBool,
) -> Result<TuneReport> {
    let started = Instant::now();
    let (pack, param) = check(engine, tune)?;
    let target = &tune.target;
    let declared = &pack.simulate().outcomes;
    let batch = Batch {
        pack: tune.pack.clone(),
        games: FIRST_GAMES,
        players: vec![target.player.clone()],
        seed: tune.seed.clone(),
        options: tune.options.clone(),
        jobs: tune.jobs,
        prices: BTreeMap::<String, Price>::new(),
    };
    let mut t = Tuner {
        handle,
        engine,
        tune,
        param: &param,
        plan: Plan { spend: tune.spend.clone(), ..Plan::of(&batch, &pack) },
        values: Vec::new(),
        played: 0,
        seen: Default::default(),
        progress,
        stop,
    };
    let why = seek(&mut t)?;
    let stopped = tune.spend.as_ref().and_then(|s| s.stopped());
    let why = match stopped {
        Some(_) => Some(
            "the real models' spending cap stopped it (--budget-usd, --max-calls, --max-time): the values it tried stand".into(),
        ),
        None => why,
    };
    if declared.is_empty() && !t.seen.iter().any(|o| target.counts(o)) {
        return Err(Error::input(format!(
            "no game of `{}` ended in `{}` at any value tried (they ended in: {})",
            target.player,
            target.outcome,
            t.seen.iter().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let mut tried: Vec<f64> = t.values.iter().map(|v| v.value).collect();
    tried.sort_by(f64::total_cmp);
    let evaluations: Vec<Evaluation> = tried.iter().map(|x| t.evaluation(*x)).collect();
    let inside = |e: &Evaluation| e.low >= target.share - target.within && e.high <= target.share + target.within;
    let found = why.is_none();
    let best = match evaluations.iter().filter(|e| inside(e)).max_by_key(|e| e.games) {
        Some(e) if found => e.clone(),
        _ => evaluations
            .iter()
            .min_by(|a, b| (a.share - target.share).abs().total_cmp(&(b.share - target.share).abs()))
            .cloned()
            .ok_or_else(|| Error::input("the budget does not cover one value's first games"))?,
    };
    let neighbours = if found { Vec::new() } else { neighbours(&evaluations, target.share) };
    let why = match why {
        Some(why) if !neighbours.is_empty() => Some(format!("{why}{}", elsewhere(&pack, &param))),
        why => why,
    };
    Ok(TuneReport {
        pack: tune.pack.clone(),
        param: tune.vary.param.clone(),
        value: best.value.clone(),
        target: target.clone(),
        found,
        share: best,
        why,
        neighbours,
        evaluations,
        games_played: t.played,
        seconds: started.elapsed().as_secs_f64(),
        seed: tune.seed.clone(),
        models: super::models(engine, &pack),
        spent: tune.spend.as_ref().map(|s| s.spent()),
        stopped,
        cache: tune.spend.as_ref().and_then(|s| s.cache()),
        calibration: None,
    })
}

/// The two values tried on either side of where the share crosses `goal` (one at or above it,
/// the next value tried below it, or the other way round), the pair with the most games when
/// the share crosses more than once; none when it never does.
fn neighbours(evaluations: &[Evaluation], goal: f64) -> Vec<Evaluation> {
    evaluations
        .windows(2)
        .filter(|w| (w[0].share >= goal) != (w[1].share >= goal))
        .max_by_key(|w| w[0].games + w[1].games)
        .map(|w| w.to_vec())
        .unwrap_or_default()
}

/// What else could land between two neighbouring values, said after a cliff: the pack's other
/// numbers that may be varied, floats first (they move by less than an integer's step), then the
/// others the manifest bounds. Empty when it declares none.
fn elsewhere(pack: &ruleweave::Pack, varied: &NumericParam) -> String {
    let others = || pack.numeric_params().iter().filter(|p| p.path != varied.path);
    let bounded = |p: &&NumericParam| p.min.is_some() || p.max.is_some();
    let floats: Vec<String> = others().filter(|p| !p.integer && bounded(p)).map(|p| format!("`{}`", p.path)).collect();
    let more: Vec<String> = others().filter(|p| p.integer && bounded(p)).map(|p| format!("`{}`", p.path)).collect();
    match (floats.is_empty(), more.is_empty()) {
        (false, _) => format!("; a float parameter can land between them: {}", floats.join(", ")),
        (true, false) => {
            format!("; no float parameter is declared; the pack's other bounded numbers: {}", more.join(", "))
        }
        (true, true) => String::new(),
    }
}

/// Where a value's share stands against the band, once its games say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Its interval lies inside the band: the answer.
    Inside,
    /// At or above the goal (its interval, or, when the games allowed did not decide, its share).
    Above,
    /// Below the goal.
    Below,
}

/// The search itself: `None` once a value's interval lies inside the band, or why none does.
fn seek(t: &mut Tuner<'_>) -> Result<Option<String>> {
    let (lo, hi) = (t.tune.vary.lo, t.tune.vary.hi);
    let goal = t.tune.target.share;
    let integer = t.param.integer;
    // 1. A coarse sweep: up to nine values, the ends included, on their first games.
    let coarse: Vec<f64> = {
        let n = if integer { ((hi - lo) + 1.0).min(9.0) as usize } else { 9 };
        let mut v: Vec<f64> = (0..n)
            .map(|i| {
                let x = lo + (hi - lo) * i as f64 / (n - 1).max(1) as f64;
                if integer { x.round() } else { tidy(x) }
            })
            .collect();
        v.dedup();
        v
    };
    for &x in &coarse {
        if t.share(x)?.is_none() {
            return Ok(Some("the budget does not cover the first sweep: allow more with --budget".into()));
        }
    }
    // 2. Where the share crosses the goal: neighbours whose games place them on either side of
    // it. A value given more games may change sides, so the first sweep is read again until two
    // neighbours agree with their games, or none cross.
    let above = |t: &Tuner<'_>, x: f64| t.tally(x).share() >= goal;
    let bracket = loop {
        let Some((x0, x1)) = coarse.windows(2).find(|w| above(t, w[0]) != above(t, w[1])).map(|w| (w[0], w[1])) else {
            break None;
        };
        let (s0, s1) = (stand(t, x0)?, stand(t, x1)?);
        if s0 == Standing::Inside || s1 == Standing::Inside {
            let x = if s0 == Standing::Inside { x0 } else { x1 };
            return finish(t, &[x]);
        }
        if s0 != s1 {
            break Some((x0, x1, s0));
        }
    };
    let Some((mut a, mut b, a_side)) = bracket else {
        // No crossing: a value already close may still be the answer.
        let mut near = coarse.clone();
        near.sort_by(|x, y| (t.tally(*x).share() - goal).abs().total_cmp(&(t.tally(*y).share() - goal).abs()));
        let close: Vec<f64> = near.into_iter().take(1).collect();
        if finish(t, &close)?.is_none() {
            return Ok(None);
        }
        let (first, last) = (t.evaluation(lo), t.evaluation(hi));
        let direction = if coarse.iter().all(|x| above(t, *x)) { "above" } else { "below" };
        return Ok(Some(format!(
            "no value in {}..{} gives {}: the share stays {direction} it (the share is {} at {} and {} at {})",
            num(lo),
            num(hi),
            pct(goal),
            pct(first.share),
            num(lo),
            pct(last.share),
            num(hi)
        )));
    };
    // 3. Bisection between them, each midpoint played until its side is known.
    let resolution = if integer { 1.0 } else { (hi - lo) / 1000.0 };
    while b - a > resolution * 1.000_001 {
        let m = if integer { ((a + b) / 2.0).floor() } else { tidy((a + b) / 2.0) };
        if m <= a || m >= b {
            break;
        }
        match stand(t, m)? {
            Standing::Inside => return Ok(None),
            side if side == a_side => a = m,
            _ => b = m,
        }
    }
    // 4. The two neighbours each side of the goal: the nearer first, played until its interval
    // lies inside the band or outside it.
    finish(t, &[a, b])
}

/// The last step: each of `candidates`, nearest the goal first, played until its interval lies
/// inside the band (`None`: found), wholly outside it, or the games allowed run out; why none
/// is the answer, otherwise.
fn finish(t: &mut Tuner<'_>, candidates: &[f64]) -> Result<Option<String>> {
    let (goal, within) = (t.tune.target.share, t.tune.target.within);
    let mut order = candidates.to_vec();
    order.sort_by(|x, y| (t.tally(*x).share() - goal).abs().total_cmp(&(t.tally(*y).share() - goal).abs()));
    let mut undecided = Vec::new();
    for &x in &order {
        loop {
            let (low, high) = t.tally(x).interval();
            if low >= goal - within && high <= goal + within {
                return Ok(None);
            }
            if high < goal - within || low > goal + within {
                break;
            }
            if !t.more(x)? {
                undecided.push(x);
                break;
            }
        }
    }
    let band = format!("{}–{}", pct(goal - within), pct(goal + within));
    let show = |t: &Tuner<'_>, x: f64| {
        let e = t.evaluation(x);
        format!("{} at {} ({}–{}, {} games)", pct(e.share), num(x), pct(e.low), pct(e.high), e.games)
    };
    if !undecided.is_empty() {
        let at: Vec<String> = undecided.iter().map(|x| show(t, *x)).collect();
        return Ok(Some(format!(
            "the games allowed do not tell whether the share is within {band}: {} (allow more with --games-max \
             or --budget)",
            at.join("; ")
        )));
    }
    let mut at = order;
    at.sort_by(f64::total_cmp);
    let shown: Vec<String> = at.iter().map(|x| show(t, *x)).collect();
    Ok(Some(match shown.as_slice() {
        [one] => format!("the nearest value gives {one}, outside {band}"),
        _ => format!("no value gives {band}: the share jumps between neighbouring values ({})", shown.join(" → ")),
    }))
}

/// Plays `x` until its interval lies inside the band or wholly on one side of the goal; when
/// the games allowed run out first, its share says which side.
fn stand(t: &mut Tuner<'_>, x: f64) -> Result<Standing> {
    let (goal, within) = (t.tune.target.share, t.tune.target.within);
    loop {
        let (low, high) = t.tally(x).interval();
        if t.tally(x).games > 0 && low >= goal - within && high <= goal + within {
            return Ok(Standing::Inside);
        }
        if t.tally(x).games > 0 && (low > goal || high < goal) {
            return Ok(if low > goal { Standing::Above } else { Standing::Below });
        }
        if !t.more(x)? {
            return Ok(if t.tally(x).share() >= goal { Standing::Above } else { Standing::Below });
        }
    }
}

fn pct(x: f64) -> String {
    format!("{}%", ruleweave::text::decimals(x * 100.0, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(integer: bool) -> NumericParam {
        NumericParam { path: "t".into(), value: 60.0, integer, min: Some(0.0), max: Some(100.0) }
    }

    #[test]
    fn ranges_read_and_step() {
        let r: Range = "t=40..44".parse().unwrap();
        assert_eq!(r.values(&param(true)).unwrap(), vec![40.0, 41.0, 42.0, 43.0, 44.0]);
        let r: Range = "t=0..1".parse().unwrap();
        assert_eq!(r.values(&param(false)).unwrap().len(), 11);
        assert_eq!(r.values(&param(false)).unwrap()[3], 0.3);
        let r: Range = "t=40..60:10".parse().unwrap();
        assert_eq!(r.values(&param(true)).unwrap(), vec![40.0, 50.0, 60.0]);
    }

    #[test]
    fn bad_ranges_say_what_is_wrong() {
        let e = |text: &str, integer| {
            text.parse::<Range>().and_then(|r| r.values(&param(integer))).unwrap_err().detail().to_owned()
        };
        assert_eq!(e("t=80..40", true), "the range of `t` runs from low to high: 40..80, not 80..40");
        assert_eq!(e("t=40..120", true), "parameter `t` is 0 to 100 (param_bounds), not 120");
        assert_eq!(e("t=40..50:0.5", true), "`t` is an integer: its step is too, not 0.5");
        assert!(e("t=40", true).starts_with("a range is NAME=LO..HI[:STEP]"));
    }

    #[test]
    fn targets_read_prefixes() {
        let t = Target::parse("liar:won_*=0.3", 0.05).unwrap();
        assert!(t.counts("won_score") && t.counts("won_agreement") && !t.counts("continue"));
        assert!(Target::parse("liar:won=1.3", 0.05).unwrap_err().detail().contains("0 to 1"));
        assert!(Target::parse("liar=0.3", 0.05).unwrap_err().detail().starts_with("a target is"));
        let model = Target::parse("model:smuggler:won_*=0.3", 0.05).unwrap();
        assert_eq!((model.player.as_str(), model.outcome.as_str()), ("model:smuggler", "won_*"));
    }
}

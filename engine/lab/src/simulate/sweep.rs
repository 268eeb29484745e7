//! Sweeps: the ranges of a pack's numbers (`thresholds.medium=40..80`), the same games at each
//! value of one or two of them (a grid for two), as `simulate --sweep` plays them and a server's
//! sweep job does, and the table that reads them at a glance. `tune` searches the same ranges.

use std::sync::atomic::AtomicBool;

use serde_json::{Map, Value};

use super::{Batch, Plan, PlayerReport, Rules, outcome_label, play, players, report, wilson};
use ruleweave::{Engine, NumericParam, ParamValues};
use ruleweave::{Error, Result};

/// A range of values for one of a pack's numbers: `thresholds.medium=40..80` (a step of 1 for
/// an integer, a tenth of the range otherwise) or `rate=0..1:0.25`.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    /// The parameter's dotted path.
    pub param: String,
    /// The first value.
    pub lo: f64,
    /// The last value.
    pub hi: f64,
    /// The step between values, when given.
    pub step: Option<f64>,
}

/// The most values one range may have.
pub const MOST_VALUES: usize = 1_000;

impl std::str::FromStr for Range {
    type Err = Error;

    /// `NAME=LO..HI` or `NAME=LO..HI:STEP`.
    fn from_str(text: &str) -> Result<Range> {
        let shape = || Error::input(format!("a range is NAME=LO..HI[:STEP] (thresholds.medium=40..80), not `{text}`"));
        let (param, range) = text.split_once('=').ok_or_else(shape)?;
        let (range, step) = match range.split_once(':') {
            Some((r, s)) => (r, Some(s)),
            None => (range, None),
        };
        let (lo, hi) = range.split_once("..").ok_or_else(shape)?;
        let number = |s: &str| s.trim().parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(shape);
        Ok(Range {
            param: param.trim().to_owned(),
            lo: number(lo)?,
            hi: number(hi)?,
            step: step.map(number).transpose()?,
        })
    }
}

impl Range {
    /// The range's values for `p`: checked against its bounds and type, in order.
    pub fn values(&self, p: &NumericParam) -> Result<Vec<f64>> {
        self.ends(p)?;
        let (lo, hi) = (self.lo, self.hi);
        if hi == lo {
            return Ok(vec![lo]);
        }
        let step = self.step.unwrap_or(if p.integer { 1.0 } else { (hi - lo) / 10.0 });
        if step <= 0.0 || (hi > lo && step == 0.0) {
            return Err(Error::input(format!("the step of `{}` is more than 0, not {step}", self.param)));
        }
        if p.integer && step.fract() != 0.0 {
            return Err(Error::input(format!("`{}` is an integer: its step is too, not {step}", self.param)));
        }
        let n = ((hi - lo) / step + 1e-9).floor() + 1.0;
        if !n.is_finite() || n > MOST_VALUES as f64 {
            return Err(Error::input(format!(
                "{n} values of `{}` is more than {MOST_VALUES}: take a longer step",
                self.param
            )));
        }
        let n = n as usize;
        Ok((0..n).map(|i| if p.integer { lo + step * i as f64 } else { tidy(lo + step * i as f64) }).collect())
    }

    /// The ends checked: in order, within the parameter's bounds, integers for an integer.
    pub(super) fn ends(&self, p: &NumericParam) -> Result<()> {
        if !(self.hi - self.lo).is_finite() {
            return Err(Error::input(format!("the range of `{}` is too wide to step through", self.param)));
        }
        if self.lo > self.hi {
            return Err(Error::input(format!(
                "the range of `{}` runs from low to high: {}..{}, not {}..{}",
                self.param,
                num(self.hi),
                num(self.lo),
                num(self.lo),
                num(self.hi)
            )));
        }
        p.check(self.lo)?;
        p.check(self.hi)?;
        Ok(())
    }
}

/// `x` without the float noise of adding steps (0.30000000000000004 → 0.3).
pub(super) fn tidy(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

pub(super) fn num(x: f64) -> String {
    ruleweave::text::decimals(x, 6)
}

/// A value as JSON: an integer parameter's as an integer.
pub(super) fn json_of(p: &NumericParam, x: f64) -> Value {
    if p.integer { Value::from(x as i64) } else { Value::from(x) }
}

/// Games on several values of one or two parameters: a [`Batch`] (its pack, games, players, seed,
/// options) at each value, on the same games.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// What to play at each value.
    pub batch: Batch,
    /// One range, or two (a grid of every pair).
    pub ranges: Vec<Range>,
}

/// One value of a sweep and its games.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepPoint {
    /// The value: a number for one parameter, `{"A": a, "B": b}` for two.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub value: Value,
    /// Each player's games at that value, as a report gives them.
    pub players: Vec<PlayerReport>,
}

/// A sweep's answer: a report's shape (`simulate --sweep --json`, the API's sweeps), its games
/// under each value rather than under `players`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SweepReport {
    /// The pack played.
    pub pack: String,
    /// Games per player at each value.
    pub games: u32,
    /// What seeded the games: the same seed, the same games at every value.
    pub seed: String,
    /// The most turns a game was played for.
    pub max_turns: u32,
    /// Always empty: a sweep's games are under each value.
    pub players: Vec<PlayerReport>,
    /// The parameters varied, by dotted path.
    pub params: Vec<String>,
    /// Each value, in order, with each player's games there.
    pub sweep: Vec<SweepPoint>,
}

impl SweepReport {
    /// The sweep at a glance, as `simulate --sweep` prints it first and its page shows it: the
    /// column heads (each parameter varied, `player`, each outcome any game ended in; a game the
    /// cap stopped is `unfinished (cap N turns)`), then a row per value (or grid cell) and player,
    /// each outcome's cell its share and 95% interval (`63.4% (60.3–66.4%)`).
    pub fn table(&self) -> Vec<Vec<String>> {
        let pct = |x: f64| ruleweave::text::decimals(x * 100.0, 1);
        let outcomes: std::collections::BTreeSet<&String> =
            self.sweep.iter().flat_map(|p| &p.players).flat_map(|p| p.outcomes.keys()).collect();
        let value_of = |v: &Value, param: &str| match v {
            Value::Object(m) => m.get(param).map(ToString::to_string).unwrap_or_default(),
            v => v.to_string(),
        };
        let mut head: Vec<String> = self.params.clone();
        head.push("player".into());
        head.extend(outcomes.iter().map(|o| outcome_label(o, self.max_turns)));
        let mut rows = vec![head];
        for point in &self.sweep {
            for player in &point.players {
                let mut row: Vec<String> = self.params.iter().map(|p| value_of(&point.value, p)).collect();
                row.push(player.name.clone());
                for outcome in &outcomes {
                    let (share, low, high) = match player.outcomes.get(*outcome) {
                        Some(s) => (s.share, s.low, s.high),
                        None => (0.0, 0.0, wilson(0, player.games).1),
                    };
                    row.push(format!("{}% ({}–{}%)", pct(share), pct(low), pct(high)));
                }
                rows.push(row);
            }
        }
        rows
    }
}

impl Sweep {
    /// How many values the sweep plays (checked as [`sweep`] checks them).
    pub fn values(&self, engine: &Engine) -> Result<usize> {
        Ok(grid(engine, &self.batch.pack, &self.ranges)?.len())
    }

    /// The answer of this sweep's `points`, for a pack whose games stop at `max_turns`.
    pub fn report(&self, max_turns: u32, points: Vec<SweepPoint>) -> SweepReport {
        SweepReport {
            pack: self.batch.pack.clone(),
            games: self.batch.games,
            seed: self.batch.seed.clone(),
            max_turns,
            players: Vec::new(),
            params: self.ranges.iter().map(|r| r.param.clone()).collect(),
            sweep: points,
        }
    }
}

/// The values of `ranges` (one, or every pair of two) as parameter values and their JSON.
fn grid(engine: &Engine, pack: &str, ranges: &[Range]) -> Result<Vec<(ParamValues, Value)>> {
    let pack = engine.packs().get(pack)?;
    let axes = ranges
        .iter()
        .map(|r| {
            let p = pack.numeric_param(&r.param)?;
            Ok(r.values(p)?.into_iter().map(|x| (r.param.clone(), json_of(p, x))).collect::<Vec<_>>())
        })
        .collect::<Result<Vec<_>>>()?;
    match axes.as_slice() {
        [one] => Ok(one.iter().map(|(k, v)| (ParamValues::from([(k.clone(), v.clone())]), v.clone())).collect()),
        [a, b] => {
            if ranges[0].param == ranges[1].param {
                return Err(Error::input(format!("`{}` is swept twice", ranges[0].param)));
            }
            if a.len() * b.len() > MOST_VALUES {
                return Err(Error::input(format!(
                    "a grid of {} values is more than {MOST_VALUES}: take longer steps",
                    a.len() * b.len()
                )));
            }
            Ok(a.iter()
                .flat_map(|(ka, va)| {
                    b.iter().map(move |(kb, vb)| {
                        let values = ParamValues::from([(ka.clone(), va.clone()), (kb.clone(), vb.clone())]);
                        let shown = Value::Object(Map::from_iter([(ka.clone(), va.clone()), (kb.clone(), vb.clone())]));
                        (values, shown)
                    })
                })
                .collect())
        }
        _ => Err(Error::input("a sweep varies one parameter, or two (a grid)")),
    }
}

/// Plays `sweep` on `engine`: the same games at each value, `tick` after each game. The values
/// are checked before any game is played.
pub fn sweep(
    handle: &tokio::runtime::Handle,
    engine: &Engine,
    sweep: &Sweep,
    tick: &(dyn Fn() + Sync),
    stop: &AtomicBool,
) -> Result<Vec<SweepPoint>> {
    let batch = &sweep.batch;
    let points = grid(engine, &batch.pack, &sweep.ranges)?;
    let pack = engine.packs().get(&batch.pack)?;
    pack.resolve_options(&batch.options)?;
    players(engine, &pack, &batch.players)?;
    let plan = Plan::of(batch, &pack);
    let mut out = Vec::with_capacity(points.len());
    for (values, shown) in points {
        let copy = engine.with_params(&batch.pack, values)?;
        // The players as this copy loads them: a player reading the parameter sees the value.
        let players = players(&copy, &*copy.packs().get(&batch.pack)?, &batch.players)?;
        let rules = Rules { engine: &copy, options: &batch.options };
        let played = play(handle, &plan, &players, &rules, &batch.prices, tick, stop);
        if let Some(e) = played.iter().find_map(|p| p.error.clone()) {
            return Err(e.error);
        }
        out.push(SweepPoint { value: shown, players: report(&plan, &played).players });
    }
    Ok(out)
}

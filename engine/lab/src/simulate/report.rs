//! What a batch of games came to: the report `simulate --json` prints and the server answers,
//! made from the games each player played.

use std::collections::BTreeMap;

use ruleweave::{Engine, LlmChoice, Pack};
use serde_json::Value;

use super::stats::{histogram, spread, wilson};
use super::{Plan, Played};
use crate::spend::{Spent, Stop};

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
    /// Why the run stopped before its games were done: `budget_usd`, `max_calls` or `max_time`.
    /// The games it stopped are listed apart (each player's `stopped`) and counted in no share.
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
    /// The games (by number) the run's spending cap stopped before they ended or began: not
    /// counted.
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
    pub(super) fn report(&self) -> PlayerReport {
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

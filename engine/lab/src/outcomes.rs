//! How live games ended, by variant of a pack's experiment: each variant's games made and
//! finished, each outcome's share with its 95% interval, the tracked fields' spread, and against
//! the control each outcome's difference in share with its interval, whether it is beyond noise,
//! and how many more finished games would tell a 5-point difference from none.
//!
//! The store counts the games and ranks the tracked fields' values (in SQL, on SQLite and
//! PostgreSQL alike, so every replica on one database reports the same): a report reads a few
//! rows per variant, however many games were played.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use ruleweave::store::{OutcomeQuery, Outcomes};
use ruleweave::{Pack, Result};

use crate::simulate::{Share, Spread, newcombe, wilson};

/// The difference in share a report says how many games it takes to tell from none.
pub const DETECT: f64 = 0.05;

/// How live games of a pack ended, by variant: `ruleweave outcomes --json` and
/// `GET /v1/packs/{pack}/outcomes`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutcomesReport {
    /// The pack.
    pub pack: String,
    /// Its experiment's name, when it has one.
    pub experiment: Option<String>,
    /// The control's name, when it has an experiment.
    pub control: Option<String>,
    /// Only games opened at or after this (unix milliseconds), when asked.
    pub since: Option<i64>,
    /// Only games opened before this, when asked.
    pub until: Option<i64>,
    /// Only games opened at this version of the pack, when asked.
    pub version: Option<String>,
    /// Each variant (the experiment's in the manifest's order, then any its games name that it
    /// no longer has); one without a name for a pack without an experiment.
    pub variants: Vec<VariantOutcomes>,
    /// What the pack's scripted players predict of each variant's effect, when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Predicted>,
}

/// The effects the pack's scripted players predict: each player's games played on the
/// control's rules and on each variant's (the same games: the same seed), and the difference.
/// Live players are not the scripted ones, so what compares is the effect, not the shares.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Predicted {
    /// Games per player on each variant's rules.
    pub games: u32,
    /// What seeded them.
    pub seed: String,
    /// Each variant's effect on each player's share of each outcome.
    pub effects: Vec<PredictedEffect>,
}

impl Predicted {
    /// What the scripted players predict of `variant`'s effect on `outcome`, lowest first.
    pub fn effects_on(&self, variant: &str, outcome: &str) -> Vec<&PredictedEffect> {
        let mut effects: Vec<&PredictedEffect> =
            self.effects.iter().filter(|e| e.variant == variant && e.outcome == outcome).collect();
        effects.sort_by(|a, b| a.delta.total_cmp(&b.delta));
        effects
    }
}

/// A variant's predicted effect on one scripted player's share of an outcome.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PredictedEffect {
    /// The variant.
    pub variant: String,
    /// The scripted player.
    pub player: String,
    /// The outcome.
    pub outcome: String,
    /// The player's share on the variant's rules less its share on the control's.
    pub delta: f64,
    /// The 95% interval's low end (Newcombe's).
    pub low: f64,
    /// Its high end.
    pub high: f64,
}

/// One variant's live games.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VariantOutcomes {
    /// Its name (none for the games of a pack without an experiment).
    pub name: Option<String>,
    /// Its weight now (none for a variant the experiment no longer has).
    pub weight: Option<f64>,
    /// The numbers of `params:` it sets now, by dotted path (none for the control, or a variant
    /// the experiment no longer has).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub params: BTreeMap<String, serde_json::Value>,
    /// Games made.
    pub made: u64,
    /// Games that ended.
    pub finished: u64,
    /// Each outcome's share of the games that ended, with its 95% (Wilson) interval.
    pub outcomes: BTreeMap<String, Share>,
    /// Each tracked field's median and spread as the games ended.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub tracked: IndexMap<String, Spread>,
    /// Against the control (none for the control itself), outcome by outcome.
    pub against_control: Vec<LiveDifference>,
}

/// An outcome's share in a variant less its share in the control.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LiveDifference {
    /// The outcome.
    pub outcome: String,
    /// The variant's share less the control's.
    pub delta: f64,
    /// The 95% interval's low end (Newcombe's hybrid score interval).
    pub low: f64,
    /// Its high end.
    pub high: f64,
    /// Whether the interval leaves out 0.
    pub beyond_noise: bool,
    /// How many more finished games each of the two needs for a difference of 5 points to be
    /// told from none (at 95% confidence, 80% power, at the control's share): stopping at the
    /// first exciting peek is how a difference that is noise gets shipped.
    pub more_games: u64,
}

impl LiveDifference {
    /// The difference in words, as the command line and the report's page say it: beyond noise,
    /// or within it and how many more games would tell 5 points.
    pub fn verdict(&self) -> String {
        match (self.beyond_noise, self.more_games) {
            (true, _) => "beyond noise".to_owned(),
            (false, 0) => "within noise".to_owned(),
            (false, more) => format!("within noise; {more} more finished games each to tell 5 points"),
        }
    }
}

/// A share's difference in points, signed: `+3.2`, `-100`, `0`.
pub fn points(delta: f64) -> String {
    let n = ruleweave::text::decimals(100.0 * delta, 1);
    if delta > 0.0 { format!("+{n}") } else { n }
}

/// The report of `pack`'s live games that `query` names, from `store`.
pub async fn report(store: &dyn Outcomes, pack: &Pack, query: OutcomeQuery<'_>) -> Result<OutcomesReport> {
    let counts = store.outcome_counts(query).await?;
    let tracked_fields = &pack.simulate().track;
    let mut spreads = Vec::with_capacity(tracked_fields.len());
    for field in tracked_fields {
        spreads.push(store.outcome_spreads(query, field).await?);
    }
    let experiment = pack.experiment();
    let mut names: Vec<Option<String>> = match experiment {
        Some(e) => e.variants.iter().map(|v| Some(v.name.clone())).collect(),
        None => Vec::new(),
    };
    for c in &counts {
        if !names.contains(&c.variant) {
            names.push(c.variant.clone());
        }
    }
    if names.is_empty() {
        names.push(None);
    }
    let mut variants: Vec<(VariantOutcomes, BTreeMap<String, u64>)> = names
        .into_iter()
        .map(|name| {
            let of = |c: &&ruleweave::store::OutcomeCount| c.variant == name;
            let made = counts.iter().filter(of).map(|c| c.games).sum();
            let ended: BTreeMap<String, u64> =
                counts.iter().filter(of).filter_map(|c| Some((c.outcome.clone()?, c.games))).collect();
            let finished: u64 = ended.values().sum();
            let outcomes = ended
                .iter()
                .map(|(o, &k)| {
                    let (low, high) = wilson(k as usize, finished as usize);
                    (o.clone(), Share { share: k as f64 / finished as f64, low, high })
                })
                .collect();
            let tracked = tracked_fields
                .iter()
                .zip(&spreads)
                .map(|(f, by_variant)| {
                    let s = by_variant.iter().find(|s| s.variant == name);
                    let spread = Spread { median: s.map(|s| s.median), p10: s.map(|s| s.p10), p90: s.map(|s| s.p90) };
                    (f.clone(), spread)
                })
                .collect();
            let declared = experiment.and_then(|e| e.variant(name.as_deref()?));
            let (weight, params) = (declared.map(|v| v.weight), declared.map(|v| v.params.clone()).unwrap_or_default());
            let against_control = Vec::new();
            (VariantOutcomes { name, weight, params, made, finished, outcomes, tracked, against_control }, ended)
        })
        .collect();
    let control = experiment.map(|e| e.control().name.clone());
    if let Some(c) = variants.iter().position(|(v, _)| v.name == control).map(|i| variants[i].clone()) {
        for (v, ended) in variants.iter_mut().filter(|(v, _)| v.name != c.0.name) {
            v.against_control = differences((v.finished, ended), (c.0.finished, &c.1), &c.0.outcomes);
        }
    }
    let variants = variants.into_iter().map(|(v, _)| v).collect();
    Ok(OutcomesReport {
        pack: pack.name().to_owned(),
        experiment: experiment.map(|e| e.name.clone()),
        control,
        since: query.since,
        until: query.until,
        version: query.version.map(str::to_owned),
        variants,
        predicted: None,
    })
}

/// The effects `pack`'s scripted players predict of each variant of its experiment (on
/// `engine`, which serves it): `games` games per player on the control's rules and on each
/// variant's, seeded by `seed`, played here (the caller's thread blocks, `handle`'s runtime runs
/// the games). `None` for a pack without an experiment.
pub fn predict(
    handle: &tokio::runtime::Handle,
    engine: &ruleweave::Engine,
    pack: &str,
    games: u32,
    seed: &str,
) -> Result<Option<Predicted>> {
    let loaded = engine.packs().get(pack)?;
    let Some(experiment) = loaded.experiment() else { return Ok(None) };
    let batch = crate::simulate::Batch {
        pack: pack.to_owned(),
        games,
        players: Vec::new(),
        seed: seed.to_owned(),
        options: Default::default(),
        jobs: None,
        prices: Default::default(),
    };
    let played = |params: &ruleweave::ParamValues| -> Result<crate::simulate::Report> {
        crate::simulate::run(handle, &engine.with_params(pack, params.clone())?, &batch)
    };
    let control = played(&experiment.control().params)?;
    let mut effects = Vec::new();
    for v in experiment.variants.iter().filter(|v| !v.is_control()) {
        let variant = played(&v.params)?;
        for (here, base) in variant.players.iter().zip(&control.players) {
            let mut outcomes: Vec<&String> = here.outcomes.keys().chain(base.outcomes.keys()).collect();
            outcomes.sort();
            outcomes.dedup();
            // A share is k of the games counted: k back from it, exactly.
            let k = |p: &crate::simulate::PlayerReport, o: &str| {
                p.outcomes.get(o).map_or(0, |s| (s.share * p.games as f64).round() as usize)
            };
            for o in outcomes {
                let (delta, low, high) = newcombe(k(here, o), here.games, k(base, o), base.games);
                effects.push(PredictedEffect {
                    variant: v.name.clone(),
                    player: here.name.clone(),
                    outcome: o.clone(),
                    delta,
                    low,
                    high,
                });
            }
        }
    }
    Ok(Some(Predicted { games, seed: seed.to_owned(), effects }))
}

/// Each outcome either side has: the variant's share less the control's (each side its games
/// finished and their count by outcome), its interval, and the games each would need to tell a
/// 5-point difference at the control's share.
fn differences(
    (n1, v): (u64, &BTreeMap<String, u64>),
    (n2, control): (u64, &BTreeMap<String, u64>),
    shares: &BTreeMap<String, Share>,
) -> Vec<LiveDifference> {
    let mut outcomes: Vec<&String> = v.keys().chain(control.keys()).collect();
    outcomes.sort();
    outcomes.dedup();
    let count = |side: &BTreeMap<String, u64>, o: &str| side.get(o).copied().unwrap_or(0) as usize;
    outcomes
        .into_iter()
        .map(|o| {
            let (delta, low, high) = newcombe(count(v, o), n1 as usize, count(control, o), n2 as usize);
            // With no games yet, the most a share can vary: at a half.
            let base = shares.get(o).map_or(0.5, |s| s.share);
            let more_games = games_to_detect(base, DETECT).saturating_sub(n1.min(n2));
            LiveDifference { outcome: o.clone(), delta, low, high, beyond_noise: low > 0.0 || high < 0.0, more_games }
        })
        .collect()
}

/// A time as a report's range takes it: an RFC 3339 time (`2026-12-01T09:00:00Z`, or a date's
/// midnight: `2026-12-01`), or a span back from now (`24h`, `7d`); unix milliseconds. `None`
/// for anything else.
pub fn time_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let full = if text.len() == 10 { format!("{text}T00:00:00Z") } else { text.to_owned() };
    if let Ok(at) = humantime::parse_rfc3339_weak(&full) {
        return Some(at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64));
    }
    let span = ruleweave::duration::parse(text).ok()?;
    Some(ruleweave::store::now_ms().saturating_sub(span.as_millis() as i64))
}

/// The finished games each of two groups needs for a difference of `delta` from a share of
/// `p` to be told from none by a two-sided test at 95% confidence with 80% power:
/// (z₀.₉₇₅ + z₀.₈)² (p₁q₁ + p₂q₂) / δ², the second share `delta` nearer a half than `p`.
pub fn games_to_detect(p: f64, delta: f64) -> u64 {
    const Z: f64 = 1.959_963_985 + 0.841_621_234;
    let p1 = p.clamp(0.0, 1.0);
    let p2 = if p1 <= 0.5 { p1 + delta } else { p1 - delta };
    let variance = p1 * (1.0 - p1) + p2 * (1.0 - p2);
    (Z * Z * variance / (delta * delta)).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook figure: telling 50% from 55% takes 1,562 games a group (the formula with
    /// unpooled variances, 7.849 × 0.4975 / 0.0025 = 1,561.9).
    #[test]
    fn games_to_detect_five_points_at_a_half() {
        assert_eq!(games_to_detect(0.5, 0.05), 1_562);
        // Near the ends a share varies less, and fewer games tell the same 5 points.
        assert!(games_to_detect(0.1, 0.05) < games_to_detect(0.5, 0.05));
        assert_eq!(games_to_detect(0.9, 0.05), games_to_detect(0.1, 0.05));
    }

    #[test]
    fn times_are_rfc_3339_dates_or_spans_back() {
        assert_eq!(time_ms("2026-12-01T00:00:01Z"), Some(1_796_083_201_000));
        assert_eq!(time_ms("2026-12-01"), Some(1_796_083_200_000));
        let day_ago = time_ms("24h").unwrap();
        assert!((ruleweave::store::now_ms() - day_ago - 86_400_000).abs() < 60_000);
        assert_eq!(time_ms("yesterday"), None);
        assert_eq!(time_ms("2026-13-01"), None);
    }
}

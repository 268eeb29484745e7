//! Calibration: how far a profile's stand-in is from the model it stands in for, on what the
//! model really answered.
//!
//! Each call a real model answered (recorded in a session, or made in a live game) is given to
//! the profile's stand-in too, and both answers are read as the node reads them (its JSON, with
//! the fences and prose a model wraps it in taken off). For each number of the answer (the
//! judge's `total_score` and its parts): the mean difference, model minus stand-in, with its 95%
//! interval, the mean absolute difference and the rank correlation; for each category or flag (a
//! string with a few values, a boolean): how often they agree, and the table of which the model
//! said against which the stand-in did. Then the same sessions are replayed with the stand-in in
//! the model's place, and the turns that would have routed or ended otherwise are counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ruleweave::Exchange;
use ruleweave::llm::{BoxFuture, EmbedRequest, EmbedResponse, LlmRequest, LlmResponse, Provider, TokenSink};
use ruleweave::{Engine, Pack, Result};
use serde_json::Value as Json;

use crate::replay::{Fallback, Recording, Replayer};

/// The most distinct values a string field may take and still be read as a category (a longer
/// tail is free text, which no table compares).
const MOST_CATEGORIES: usize = 12;

/// One call answered twice: by the model, and by the profile's stand-in.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// The profile called.
    pub profile: String,
    /// The model's reply.
    pub model: String,
    /// The stand-in's reply to the same request.
    pub standin: String,
}

/// How far a pack's stand-ins are from its models: the contract of `calibrate --json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Calibration {
    /// The pack.
    pub pack: String,
    /// Its version (the hash of its files) when calibrated.
    pub version: String,
    /// The sessions read (recorded), or the games played (`--live`).
    pub sessions: usize,
    /// Each profile a real model answered, by name.
    pub profiles: BTreeMap<String, ProfileCalibration>,
    /// The same sessions replayed with the stand-ins in the models' place (recorded sessions
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed: Option<Replayed>,
    /// What the live games' real models cost (`--live`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<crate::spend::Spent>,
    /// Why the live games stopped before they were done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::spend::Stop>,
}

/// What a simulate or tune report carries of the calibration of its pack's version: per
/// profile, each number's mean difference (model − stand-in) with its interval, and each
/// category's agreement.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Headline {
    /// The sessions (or live games) it read.
    pub sessions: usize,
    /// Each profile: its numbers' gaps and its categories' agreement.
    pub profiles: BTreeMap<String, ProfileHeadline>,
}

/// One profile's headline.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProfileHeadline {
    /// Each number: model − stand-in, and its 95% interval (`[mean, low, high]`).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub numbers: BTreeMap<String, [Option<f64>; 3]>,
    /// Each category: the share of calls where the two agree.
    pub categories: BTreeMap<String, f64>,
}

impl Calibration {
    /// What reports of the same pack version carry of it.
    pub fn headline(&self) -> Headline {
        let profiles = self
            .profiles
            .iter()
            .map(|(name, p)| {
                let numbers =
                    p.numbers.iter().map(|(f, g)| (f.clone(), [Some(g.mean_difference), g.low, g.high])).collect();
                let categories = p.categories.iter().map(|(f, a)| (f.clone(), a.agreement)).collect();
                (name.clone(), ProfileHeadline { numbers, categories })
            })
            .collect();
        Headline { sessions: self.sessions, profiles }
    }
}

/// One profile's answers compared.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProfileCalibration {
    /// The calls compared.
    pub calls: usize,
    /// The replies the node could not read as JSON (the model's or the stand-in's): compared
    /// by nothing.
    pub unread: usize,
    /// Each number of the answer, model against stand-in.
    pub numbers: BTreeMap<String, NumberGap>,
    /// Each category or flag, model against stand-in.
    pub categories: BTreeMap<String, Agreement>,
}

/// A number the model and the stand-in both gave, over the calls where both did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NumberGap {
    /// The calls where both gave it.
    pub pairs: usize,
    /// The mean of model minus stand-in.
    pub mean_difference: f64,
    /// The 95% interval of that mean (Student's t), when there are at least two pairs.
    pub low: Option<f64>,
    /// Its high end.
    pub high: Option<f64>,
    /// The mean of |model − stand-in|.
    pub mean_absolute: f64,
    /// Spearman's rank correlation of the two (none when either never varies, or under three
    /// pairs): whether the stand-in orders the calls as the model does, whatever its offset.
    pub rank_correlation: Option<f64>,
}

/// A category or flag the model and the stand-in both gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Agreement {
    /// The calls where both gave it.
    pub pairs: usize,
    /// The share of them where the two agree.
    pub agreement: f64,
    /// How often the model said each value (the outer key) when the stand-in said each (inner).
    pub confusion: BTreeMap<String, BTreeMap<String, usize>>,
}

/// The same sessions replayed with the stand-ins in the models' place.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Replayed {
    /// The turns replayed.
    pub turns: usize,
    /// Those that ran other nodes than they did.
    pub routed_differently: usize,
    /// Those after which the pack's outcome field (`simulate.outcome`) differs: a game won,
    /// lost or still going where it was not.
    pub ended_differently: usize,
    /// Sessions that could not be replayed, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

/// The calls of `profiles` (every profile when empty) a real model answered in the sessions
/// `ids` of `engine`'s store, each with the stand-in's answer to the same request.
pub async fn recorded_pairs(engine: &Engine, pack: &Pack, ids: &[String], profiles: &[String]) -> Result<Vec<Pair>> {
    let standin = pack
        .standin()
        .ok_or_else(|| ruleweave::Error::input(format!("pack `{}` has no stand-in model to calibrate", pack.name())))?;
    let mut pairs = Vec::new();
    for id in ids {
        let info = engine.info(id).await?;
        let Some(stored) = engine.store().history(id, info.head).await? else { continue };
        for checkpoint in &stored.after {
            for exchange in checkpoint.exchanges.iter() {
                let Exchange::Model(m) = exchange else { continue };
                let wanted = profiles.is_empty() || profiles.contains(&m.request.profile);
                let (Some(answer), true, false) = (&m.response, wanted, m.provider == "standin") else { continue };
                let theirs = standin.complete(&m.request, None).await?;
                pairs.push(Pair {
                    profile: m.request.profile.clone(),
                    model: answer.content.clone(),
                    standin: theirs.content,
                });
            }
        }
    }
    Ok(pairs)
}

/// The comparison of `pairs`, profile by profile.
pub fn compare(pairs: &[Pair]) -> BTreeMap<String, ProfileCalibration> {
    let mut by_profile: BTreeMap<&str, Vec<&Pair>> = BTreeMap::new();
    for p in pairs {
        by_profile.entry(&p.profile).or_default().push(p);
    }
    by_profile.into_iter().map(|(profile, pairs)| (profile.to_owned(), profile_of(&pairs))).collect()
}

fn profile_of(pairs: &[&Pair]) -> ProfileCalibration {
    let mut unread = 0;
    // Each field's values, model and stand-in, over the calls both read.
    let mut numbers: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut words: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for p in pairs {
        let read = |text: &str| ruleweave::values::parse_json_reply(text).ok().filter(Json::is_object);
        let (Some(Json::Object(model)), Some(Json::Object(standin))) = (read(&p.model), read(&p.standin)) else {
            unread += 1;
            continue;
        };
        for (field, m) in &model {
            match (m, standin.get(field)) {
                (Json::Number(a), Some(Json::Number(b))) => {
                    if let (Some(a), Some(b)) = (a.as_f64(), b.as_f64()) {
                        numbers.entry(field.clone()).or_default().push((a, b));
                    }
                }
                (Json::String(a), Some(Json::String(b))) => {
                    words.entry(field.clone()).or_default().push((a.clone(), b.clone()));
                }
                (Json::Bool(a), Some(Json::Bool(b))) => {
                    words.entry(field.clone()).or_default().push((a.to_string(), b.to_string()));
                }
                _ => {}
            }
        }
    }
    let categories = words
        .into_iter()
        .filter(|(_, said)| {
            let mut values: Vec<&String> = said.iter().flat_map(|(a, b)| [a, b]).collect();
            values.sort_unstable();
            values.dedup();
            values.len() <= MOST_CATEGORIES
        })
        .map(|(field, said)| (field, agreement(&said)))
        .collect();
    ProfileCalibration {
        calls: pairs.len(),
        unread,
        numbers: numbers.into_iter().map(|(f, xs)| (f, gap(&xs))).collect(),
        categories,
    }
}

fn gap(pairs: &[(f64, f64)]) -> NumberGap {
    let n = pairs.len();
    let d: Vec<f64> = pairs.iter().map(|(a, b)| a - b).collect();
    let mean = d.iter().sum::<f64>() / n as f64;
    let (low, high) = if n >= 2 {
        let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t975(n - 1) * (var / n as f64).sqrt();
        (Some(mean - half), Some(mean + half))
    } else {
        (None, None)
    };
    let (a, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    NumberGap {
        pairs: n,
        mean_difference: mean,
        low,
        high,
        mean_absolute: d.iter().map(|x| x.abs()).sum::<f64>() / n as f64,
        rank_correlation: spearman(&a, &b),
    }
}

fn agreement(said: &[(String, String)]) -> Agreement {
    let mut confusion: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for (m, s) in said {
        *confusion.entry(m.clone()).or_default().entry(s.clone()).or_default() += 1;
    }
    let agree = said.iter().filter(|(m, s)| m == s).count();
    Agreement { pairs: said.len(), agreement: agree as f64 / said.len().max(1) as f64, confusion }
}

/// The 97.5th percentile of Student's t with `df` degrees of freedom (a table to 30, then the
/// normal's 1.96 with its first correction).
fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        _ => 1.959_964 + 2.372 / df as f64,
    }
}

/// Spearman's rank correlation (ties share their mean rank); none under three pairs or when
/// either side never varies.
fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 3 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let mean = (a.len() as f64 + 1.0) / 2.0;
    let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb) {
        cov += (x - mean) * (y - mean);
        va += (x - mean).powi(2);
        vb += (y - mean).powi(2);
    }
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&i, &j| xs[i].total_cmp(&xs[j]));
    let mut ranks = vec![0.0; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && xs[order[j + 1]] == xs[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for k in &order[i..=j] {
            ranks[*k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// The sessions `ids` replayed on `engine` with the stand-in answering the calls of `profiles`
/// (every profile when empty) and the recorded answers the others: the turns that would have gone
/// otherwise.
pub async fn replay_on_standins(engine: &Engine, pack: &Pack, ids: &[String], profiles: &[String]) -> Result<Replayed> {
    let replayer = Replayer::new(engine, pack.name(), Fallback::Standin)?;
    let outcome = pack.simulate().outcome.clone();
    let mut out = Replayed { turns: 0, routed_differently: 0, ended_differently: 0, failed: Vec::new() };
    for id in ids {
        let mut rec = match Recording::from_store(engine, id).await {
            Ok(rec) => rec,
            Err(e) => {
                out.failed.push(format!("{id}: {e}"));
                continue;
            }
        };
        for turn in &mut rec.turns {
            turn.answers.retain(|a| match profiles.is_empty() {
                true => a.profile == "search",
                false => !profiles.contains(&a.profile),
            });
        }
        match replayer.replay(&rec).await {
            Ok(diffs) => {
                out.turns += diffs.len();
                out.routed_differently += diffs.iter().filter(|d| d.route.is_some() || d.error.is_some()).count();
                out.ended_differently += diffs
                    .iter()
                    .filter(|d| outcome.as_ref().is_some_and(|o| d.changes.iter().any(|c| &c.field == o)))
                    .count();
            }
            Err(e) => out.failed.push(format!("{id}: {e}")),
        }
    }
    Ok(out)
}

/// A profile's real model, with its stand-in asked the same: the model's answer drives the game,
/// and both are kept (`calibrate --live`).
pub struct Both {
    model: Arc<dyn Provider>,
    standin: Arc<dyn Provider>,
    pairs: Arc<Mutex<Vec<Pair>>>,
}

impl Both {
    /// `model` answering, `standin` asked too, each pair kept in `pairs`.
    pub fn new(model: Arc<dyn Provider>, standin: Arc<dyn Provider>, pairs: Arc<Mutex<Vec<Pair>>>) -> Both {
        Both { model, standin, pairs }
    }
}

impl Provider for Both {
    fn name(&self) -> &str {
        self.model.name()
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(async move {
            let answer = self.model.complete(request, tokens).await?;
            if let Ok(theirs) = self.standin.complete(request, None).await {
                let pair =
                    Pair { profile: request.profile.clone(), model: answer.content.clone(), standin: theirs.content };
                self.pairs.lock().unwrap_or_else(|p| p.into_inner()).push(pair);
            }
            Ok(answer)
        })
    }

    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        self.model.embed(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(model: &str, standin: &str) -> Pair {
        Pair { profile: "judge".into(), model: model.into(), standin: standin.into() }
    }

    /// A model 10 above the stand-in, with the same order: a mean difference of 10 with a
    /// narrow interval around it, a perfect rank correlation; a category read as one, free
    /// text not; an unreadable reply counted apart.
    #[test]
    fn numbers_categories_and_unread_replies_are_compared() {
        let mut pairs: Vec<Pair> = (0..20)
            .map(|i| {
                let mood = if i % 4 == 0 { "angry" } else { "calm" };
                let said = if i % 5 == 0 { "angry" } else { "calm" };
                pair(
                    &format!(
                        r#"{{"total_score": {}, "mood": "{mood}", "ok": true, "reasoning": "model {i}"}}"#,
                        30 + i * 2 + 10
                    ),
                    &format!(
                        r#"```json
{{"total_score": {}, "mood": "{said}", "ok": true, "reasoning": "stand-in {i}"}}
```"#,
                        30 + i * 2
                    ),
                )
            })
            .collect();
        pairs.push(pair("I cannot judge that.", r#"{"total_score": 5}"#));
        let judge = &compare(&pairs)["judge"];
        assert_eq!((judge.calls, judge.unread), (21, 1));
        let total = &judge.numbers["total_score"];
        assert_eq!((total.pairs, total.mean_difference, total.mean_absolute), (20, 10.0, 10.0));
        assert_eq!((total.low, total.high, total.rank_correlation), (Some(10.0), Some(10.0), Some(1.0)));
        let mood = &judge.categories["mood"];
        // Agree where both say calm (i not a multiple of 4 nor 5) or both angry (i = 0).
        let agree = (0..20).filter(|i| (i % 4 == 0) == (i % 5 == 0)).count();
        assert_eq!(mood.agreement, agree as f64 / 20.0);
        assert_eq!(mood.confusion["angry"]["calm"], (0..20).filter(|i| i % 4 == 0 && i % 5 != 0).count());
        assert_eq!(judge.categories["ok"].agreement, 1.0);
        assert!(!judge.categories.contains_key("reasoning"), "free text is no category");
    }

    #[test]
    fn spearman_ranks_ties_together_and_needs_variation() {
        assert_eq!(spearman(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]), Some(-1.0));
        assert_eq!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 3.0]), [3.5, 1.0, 3.5, 2.0]);
    }
}

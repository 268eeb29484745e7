//! Jobs on real models: who may start one (the operator, or a key with the `spend` right), the
//! profiles and providers a request names, the budget and time it may spend, and the cache of
//! answers it reads first. The models' providers and prices are the server's (`[prices]`,
//! `[providers.<name>]`); a request names them, never configures them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::access::Access;
use super::error::{ApiResult, Code};
use super::lab::unprocessable;
use super::{ApiError, Shared};

/// The longest a request may let a job on real models run, in seconds (a day).
pub(super) const MOST_SECONDS: u64 = 86_400;

/// What a request's body says of the real models a job plays on (its `models`, `budget_usd`,
/// `max_seconds` and `cache`).
pub(super) struct Asked<'a> {
    pub(super) models: &'a BTreeMap<String, String>,
    pub(super) budget_usd: Option<f64>,
    pub(super) max_seconds: Option<u64>,
    pub(super) cache: Option<bool>,
}

/// A job's real models: the engine's choice of them, and the account they are paid from.
pub(super) struct RealJob {
    pub(super) llm: ruleweave::LlmChoice,
    pub(super) spend: Arc<ruleweave_lab::spend::Spend>,
    /// The budget, held from the key's `spend_limit_usd` while the job runs.
    pub(super) usd: f64,
    /// Games played at once: one per call in flight.
    pub(super) games_at_once: usize,
}

impl Asked<'_> {
    /// The real models this asks for a job of `pack`, checked (who may spend, the profiles, the
    /// providers, their prices); `None` for a job on the stand-ins. `cached` is whether the job
    /// keeps its answers when the request does not say.
    pub(super) fn real(&self, s: &Shared, access: &Access, pack: &str, cached: bool) -> ApiResult<Option<RealJob>> {
        use ruleweave_lab::spend::{Limits, Spend};
        let usd = match (self.models.is_empty(), self.budget_usd) {
            (true, None) if self.max_seconds.is_none() && self.cache.is_none() => return Ok(None),
            (true, _) => {
                return Err(unprocessable(
                    "`budget_usd`, `max_seconds` and `cache` are for a job on real models: name them in `models` \
                     ({\"judge\": \"openai\"})"
                        .into(),
                ));
            }
            (false, None) => {
                return Err(unprocessable(
                    "a job on real models (`models`) needs `budget_usd`, the most it may spend".into(),
                ));
            }
            (false, Some(usd)) => usd,
        };
        if !access.rights().contains(&super::access::SPEND) {
            return Err(ApiError::new(
                Code::Forbidden,
                "a job on real models spends money: it needs the operator's token or a key with the `spend` right",
            ));
        }
        if !(usd.is_finite() && usd > 0.0) {
            return Err(unprocessable(format!("`budget_usd` is an amount above 0, not {usd}")));
        }
        if let Some(t) = self.max_seconds
            && !(1..=MOST_SECONDS).contains(&t)
        {
            return Err(ApiError::new(Code::InvalidRequest, format!("`max_seconds` is 1 to {MOST_SECONDS}, not {t}")));
        }
        let Some(real) = &s.settings.real_models else {
            return Err(unprocessable("this server plays its jobs on the stand-ins only".into()));
        };
        let loaded = s.engine.packs().get(pack)?;
        let asked = self.models.iter().map(|(profile, provider)| (profile.as_str(), provider.as_str()));
        let chosen = ruleweave_lab::spend::providers_for(&loaded, asked, &real.named)
            .map_err(|why| unprocessable(format!("`models`: {why}")))?;
        if let Some((profile, model)) = ruleweave_lab::spend::unpriced(&loaded, chosen.keys(), &real.prices) {
            return Err(unprocessable(format!(
                "`budget_usd`: profile `{profile}` calls model `{model}`, which has no price in the server's [prices]"
            )));
        }
        let cache = match self.cache.unwrap_or(cached) {
            true => Some(ruleweave_lab::cache::Cache::open(&real.cache)?),
            false => None,
        };
        let max_time = self.max_seconds.map(std::time::Duration::from_secs);
        let spend = Spend::new(Limits { budget_usd: Some(usd), max_calls: None, max_time }, real.prices.clone(), cache);
        let concurrency =
            |name: &str| real.concurrency.get(name).copied().unwrap_or(crate::config::DEFAULT_CONCURRENCY);
        let most = chosen.values().map(|p| concurrency(p.name())).max().unwrap_or(1);
        Ok(Some(RealJob {
            llm: ruleweave_lab::spend::metered(chosen, &spend, concurrency),
            spend,
            usd,
            games_at_once: ruleweave_lab::spend::games_at_once(most),
        }))
    }
}

//! What a run on real models may spend, and the providers it pays through.
//!
//! A playtest on real models ([`LlmChoice::ByProfile`](ruleweave::LlmChoice::ByProfile): the
//! judge on OpenAI, say, the rest on the stand-ins) calls its models through [`Metered`]: at most
//! so many calls in flight per provider (a game waiting on a model holds a thread, not a core),
//! and each call paid for before it is sent. A call reserves the most it can cost, its prompt's
//! bytes at the input price (a token is at least a byte) and its `max_tokens` at the output price,
//! and settles at what the provider says it used; a call that would take the run past its budget
//! (or its count of calls) is refused, unsent, and the run stops: its games end at the turn
//! boundary before it (see [`Plan::spend`](crate::simulate::Plan::spend)). So the budget is never
//! exceeded while a provider keeps to `max_tokens`.
//!
//! A run may also have a time: waiting out a provider's rate limits has no cap of its own, so a
//! run that must end by a time ([`Limits::max_time`]) stops as a spent budget does once it is up,
//! a call still waiting (for its slot, or on a rate limit) given up and counted at the most it
//! could have cost.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ruleweave::llm::{BoxFuture, EmbedRequest, EmbedResponse, LlmRequest, LlmResponse, Provider, TokenSink};
use ruleweave::{Error, ErrorKind, Result};

use crate::cache::Cache;

/// What a model's tokens cost, per million, in whatever currency the operator counts in
/// (`ruleweave.toml`'s `[prices]`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million completion tokens.
    pub output: f64,
}

impl Price {
    /// What a call with these token counts cost.
    pub fn of(&self, prompt: u32, completion: u32) -> f64 {
        (f64::from(prompt) * self.input + f64::from(completion) * self.output) / 1e6
    }
}

/// What a run may spend: dollars (by `[prices]`), calls, or both; nothing means no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// The most the run's model calls may cost, in the currency of `[prices]`.
    pub budget_usd: Option<f64>,
    /// The most model calls the run may make.
    pub max_calls: Option<u64>,
    /// The longest the run's model calls may go on, from when its account opens.
    pub max_time: Option<Duration>,
}

/// Why a run stopped before its games were done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The next call would have taken it past `--budget-usd`.
    BudgetUsd,
    /// It had made `--max-calls` calls.
    MaxCalls,
    /// Its `--max-time` was up.
    MaxTime,
}

/// What a run spent on real models, as its report gives it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Spent {
    /// The calls sent to real models (the stand-ins' are free and not counted).
    pub calls: u64,
    /// What they cost by `[prices]`, as the providers counted their tokens.
    pub usd: f64,
    /// The run's budget, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// The run's most calls, when it had a cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<u64>,
}

/// What a refused call's error says first: a game whose turn met one stops there.
pub const REFUSED: &str = "the run's spending cap";

/// A run's account: what it may spend, what it has, what is reserved by calls in flight.
#[derive(Debug)]
pub struct Spend {
    limits: Limits,
    prices: BTreeMap<String, Price>,
    /// The answers kept from earlier runs, asked before any call is paid for.
    cache: Option<Cache>,
    ledger: Mutex<Ledger>,
    stopped: OnceLock<Stop>,
    /// When the run's time is up, when it has one.
    deadline: Option<tokio::time::Instant>,
}

#[derive(Debug, Default)]
struct Ledger {
    /// Paid: calls that were answered (or failed), at what they used.
    usd: f64,
    /// Held by calls in flight, at the most each may cost.
    reserved: f64,
    /// Calls sent (or in flight).
    calls: u64,
}

impl Spend {
    /// An account with `limits`, pricing calls by `prices` (by model name), answering what it
    /// can from `cache` first.
    pub fn new(limits: Limits, prices: BTreeMap<String, Price>, cache: Option<Cache>) -> Arc<Spend> {
        let deadline = limits.max_time.map(|t| tokio::time::Instant::now() + t);
        Arc::new(Spend { limits, prices, cache, ledger: Mutex::default(), stopped: OnceLock::new(), deadline })
    }

    /// How the run used its cache, when it has one.
    pub fn cache(&self) -> Option<crate::cache::CacheUse> {
        self.cache.as_ref().map(Cache::used)
    }

    /// The caps.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Why the run stopped, once a call was refused.
    pub fn stopped(&self) -> Option<Stop> {
        self.stopped.get().copied()
    }

    /// What was spent so far.
    pub fn spent(&self) -> Spent {
        let ledger = self.ledger();
        Spent {
            calls: ledger.calls,
            usd: ledger.usd,
            budget_usd: self.limits.budget_usd,
            max_calls: self.limits.max_calls,
        }
    }

    /// The most a call to `model` with `prompt_bytes` of prompt and `max_tokens` of reply can
    /// cost; `None` when the model has no price.
    pub fn most(&self, model: &str, prompt_bytes: usize, max_tokens: u32) -> Option<f64> {
        let price = self.prices.get(model)?;
        Some(price.of(u32::try_from(prompt_bytes).unwrap_or(u32::MAX), max_tokens))
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds what a call may cost at most before it is sent, or refuses it (and stops the run).
    fn reserve(&self, model: &str, most: Option<f64>) -> Result<f64> {
        let mut ledger = self.ledger();
        let refuse = |stop: Stop, why: String| {
            let _ = self.stopped.set(stop);
            Err(Error::new(ErrorKind::Llm, format!("{REFUSED}: {why}")))
        };
        if let Some(stop) = self.stopped() {
            return refuse(stop, "the run has stopped".into());
        }
        if self.deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return refuse(Stop::MaxTime, "the run's --max-time is up".into());
        }
        if let Some(cap) = self.limits.max_calls
            && ledger.calls >= cap
        {
            return refuse(Stop::MaxCalls, format!("{cap} calls made, the most --max-calls allows"));
        }
        let most = match (self.limits.budget_usd, most) {
            (Some(_), None) => return refuse(Stop::BudgetUsd, format!("model `{model}` has no price in [prices]")),
            (_, most) => most.unwrap_or(0.0),
        };
        if let Some(budget) = self.limits.budget_usd
            && ledger.usd + ledger.reserved + most > budget
        {
            let left = budget - ledger.usd - ledger.reserved;
            return refuse(
                Stop::BudgetUsd,
                format!("a call to `{model}` may cost {most:.6}, and {left:.6} of the {budget} budget is left"),
            );
        }
        ledger.reserved += most;
        ledger.calls += 1;
        Ok(most)
    }

    /// Settles a call that held `reserved`: at what it used by the provider's count of tokens
    /// (nothing for a failed call, which providers do not charge for).
    fn settle(&self, reserved: f64, model: &str, used: Option<(u32, u32)>) {
        let cost = used.and_then(|(prompt, reply)| self.prices.get(model).map(|p| p.of(prompt, reply))).unwrap_or(0.0);
        let mut ledger = self.ledger();
        ledger.reserved = (ledger.reserved - reserved).max(0.0);
        ledger.usd += cost;
    }

    /// `work` (a call, or the wait for its slot) until the run's time is up: then the run stops,
    /// and the call is refused.
    async fn in_time<T>(&self, work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let Some(deadline) = self.deadline else { return work.await };
        match tokio::time::timeout_at(deadline, work).await {
            Ok(done) => done,
            Err(_) => {
                let _ = self.stopped.set(Stop::MaxTime);
                Err(Error::new(ErrorKind::Llm, format!("{REFUSED}: the run's --max-time was up while a call waited")))
            }
        }
    }

    /// Runs a paid call: reserves the most it can cost, sends it (until the run's time is up),
    /// and settles at what the provider counted; a call given up when the time ran out is
    /// counted at its most, since the provider may have answered it.
    async fn pay<T>(
        &self,
        model: &str,
        most: Option<f64>,
        call: impl std::future::Future<Output = Result<T>>,
        used: impl Fn(&T) -> (u32, u32),
    ) -> Result<T> {
        let reserved = self.reserve(model, most)?;
        let answered = self.in_time(call).await;
        match &answered {
            Err(e) if e.detail().starts_with(REFUSED) => {
                let mut ledger = self.ledger();
                ledger.reserved = (ledger.reserved - reserved).max(0.0);
                ledger.usd += reserved;
            }
            _ => self.settle(reserved, model, answered.as_ref().ok().map(&used)),
        }
        answered
    }
}

/// A real model's provider as a lab run calls it: at most `slots` calls in flight, each paid for
/// from the run's [`Spend`] before it is sent.
pub struct Metered {
    inner: Arc<dyn Provider>,
    spend: Arc<Spend>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl Metered {
    /// `inner`, paid from `spend`, sharing `slots` with the run's other calls to the same
    /// provider.
    pub fn new(inner: Arc<dyn Provider>, spend: Arc<Spend>, slots: Arc<tokio::sync::Semaphore>) -> Metered {
        Metered { inner, spend, slots }
    }

    /// A place among the provider's calls in flight.
    async fn slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>> {
        self.slots.acquire().await.map_err(|_| Error::internal("the run's call slots are closed"))
    }
}

/// `chosen` (profile → its real model's provider) as an engine's choice of models: each
/// provider [`Metered`] from `spend`, with `concurrency(name)` calls in flight at once (one set
/// of slots per provider, shared by every profile it plays), every other profile on its pack's
/// stand-in.
pub fn metered(
    chosen: BTreeMap<String, Arc<dyn Provider>>,
    spend: &Arc<Spend>,
    concurrency: impl Fn(&str) -> usize,
) -> ruleweave::LlmChoice {
    let mut slots: BTreeMap<String, Arc<tokio::sync::Semaphore>> = BTreeMap::new();
    let metered = chosen
        .into_iter()
        .map(|(profile, provider)| {
            let name = provider.name().to_owned();
            let slots = slots
                .entry(name.clone())
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(concurrency(&name).max(1))));
            (profile, Arc::new(Metered::new(provider, spend.clone(), slots.clone())) as Arc<dyn Provider>)
        })
        .collect();
    ruleweave::LlmChoice::ByProfile(Arc::new(metered))
}

/// The providers `asked` names for `pack`'s profiles (profile → provider name), made by `named`;
/// or why one cannot be: `PROFILE=PROVIDER: ` and the pack's profiles, or why the provider is
/// not set up (its key is not set, say).
pub fn providers_for<'a>(
    pack: &ruleweave::Pack,
    asked: impl IntoIterator<Item = (&'a str, &'a str)>,
    named: &ruleweave::llm::NamedProviders,
) -> std::result::Result<BTreeMap<String, Arc<dyn Provider>>, String> {
    let mut chosen = BTreeMap::new();
    for (profile, provider) in asked {
        if !pack.profiles().any(|p| p.name == profile) {
            let known: Vec<&str> = pack.profiles().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "{profile}={provider}: pack `{}` has no profile `{profile}` (profiles: {})",
                pack.name(),
                known.join(", ")
            ));
        }
        let made = named.get(provider).map_err(|why| format!("{profile}={provider}: {why}"))?;
        chosen.insert(profile.to_owned(), made);
    }
    Ok(chosen)
}

/// The first of `profiles` of `pack` that calls a model without a price: `(profile, model)`.
/// A budget needs every one priced.
pub fn unpriced<'a>(
    pack: &ruleweave::Pack,
    profiles: impl IntoIterator<Item = &'a String>,
    prices: &BTreeMap<String, Price>,
) -> Option<(String, String)> {
    let profiles: Vec<&String> = profiles.into_iter().collect();
    pack.profiles()
        .filter(|p| profiles.contains(&&p.name))
        .find_map(|p| p.models().into_iter().find(|m| !prices.contains_key(m)).map(|m| (p.name.clone(), m)))
}

/// How many games a run on real models plays at once: a game waiting on a model holds a
/// thread, not a core, so one per call in flight (`concurrency`), and at least one per core.
pub fn games_at_once(concurrency: usize) -> usize {
    std::thread::available_parallelism().map_or(1, usize::from).max(concurrency).max(1)
}

/// The reply tokens a call reserves when its profile sets no `max_tokens`.
pub const UNCAPPED_REPLY: u32 = 4096;

impl Provider for Metered {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(async move {
            // An answer kept from an earlier run costs nothing and waits for no slot.
            let kept = self.spend.cache.as_ref().map(|c| (c, c.slot(self.inner.name(), request)));
            if let Some((cache, slot)) = &kept
                && let Some(answer) = cache.get(slot)
            {
                return Ok(answer);
            }
            let _slot = self.spend.in_time(self.slot()).await?;
            let prompt: usize = request.messages.iter().map(|m| m.content.len() + 8).sum();
            let most = self.spend.most(&request.model, prompt, request.max_tokens.unwrap_or(UNCAPPED_REPLY));
            let call = self.inner.complete(request, tokens);
            let answered = self
                .spend
                .pay(&request.model, most, call, |r| (r.usage.prompt_tokens, r.usage.completion_tokens))
                .await;
            if let (Ok(answer), Some((cache, slot))) = (&answered, kept) {
                cache.keep(slot, answer);
            }
            answered
        })
    }

    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        Box::pin(async move {
            let _slot = self.spend.in_time(self.slot()).await?;
            let bytes: usize = request.texts.iter().map(String::len).sum();
            let most = self.spend.most(&request.model, bytes, 0);
            self.spend.pay(&request.model, most, self.inner.embed(request), |r| (r.prompt_tokens, 0)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend(budget: Option<f64>, calls: Option<u64>) -> Arc<Spend> {
        let prices = BTreeMap::from([("m".to_owned(), Price { input: 1.0, output: 2.0 })]);
        Spend::new(Limits { budget_usd: budget, max_calls: calls, max_time: None }, prices, None)
    }

    /// A call reserves its most before it is sent, so calls in flight together never take the
    /// run past its budget; settling frees what a call did not use.
    #[test]
    fn reservations_keep_the_run_within_its_budget() {
        // Each call may cost 1,000,000 prompt bytes x $1/M + 500,000 reply tokens x $2/M = $2.
        let s = spend(Some(5.0), None);
        let most = s.most("m", 1_000_000, 500_000);
        assert_eq!(most, Some(2.0));
        let (a, b) = (s.reserve("m", most).unwrap(), s.reserve("m", most).unwrap());
        let refused = s.reserve("m", most).unwrap_err();
        assert!(refused.detail().starts_with(REFUSED), "{refused}");
        assert_eq!(s.stopped(), Some(Stop::BudgetUsd));
        // Both answered with a tenth of what they could have used.
        s.settle(a, "m", Some((100_000, 50_000)));
        s.settle(b, "m", Some((100_000, 50_000)));
        let spent = s.spent();
        assert_eq!((spent.calls, spent.usd), (2, 0.4));
        assert!(s.reserve("m", most).is_err(), "a stopped run sends nothing more");
    }

    #[test]
    fn a_cap_on_calls_stops_at_that_many() {
        let s = spend(None, Some(3));
        for _ in 0..3 {
            let r = s.reserve("m", Some(0.1)).unwrap();
            s.settle(r, "m", Some((10, 10)));
        }
        assert!(s.reserve("m", Some(0.1)).is_err());
        assert_eq!((s.stopped(), s.spent().calls), (Some(Stop::MaxCalls), 3));
    }

    #[test]
    fn a_budget_refuses_a_model_without_a_price() {
        let s = spend(Some(1.0), None);
        let refused = s.reserve("unpriced", s.most("unpriced", 10, 10)).unwrap_err();
        assert!(refused.detail().contains("has no price"), "{refused}");
        // Without a budget, an unpriced model is only counted.
        let free = spend(None, None);
        assert_eq!(free.reserve("unpriced", None).unwrap(), 0.0);
    }

    /// A provider that never answers: a rate limit waited out for ever.
    struct Stuck;

    impl Provider for Stuck {
        fn name(&self) -> &str {
            "stuck"
        }

        fn complete<'a>(&'a self, _: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
            Box::pin(std::future::pending())
        }
    }

    /// A run's time bounds a call that waits for ever: the call is given up, counted at the most
    /// it could have cost, and the run stops; so does a call still waiting for its slot.
    #[tokio::test]
    async fn a_run_s_time_gives_up_a_call_that_waits() {
        let prices = BTreeMap::from([("m".to_owned(), Price { input: 1.0, output: 2.0 })]);
        let limits = Limits { budget_usd: Some(1.0), max_calls: None, max_time: Some(Duration::from_millis(20)) };
        let s = Spend::new(limits, prices, None);
        let metered = Metered::new(Arc::new(Stuck), s.clone(), Arc::new(tokio::sync::Semaphore::new(1)));
        let request = LlmRequest {
            provider: None,
            default_model: None,
            profile: "judge".into(),
            model: "m".into(),
            messages: Vec::new(),
            temperature: None,
            max_tokens: Some(1000),
            json: false,
            schema: None,
        };
        let (first, second) = tokio::join!(metered.complete(&request, None), metered.complete(&request, None));
        for refused in [first.unwrap_err(), second.unwrap_err()] {
            assert!(refused.detail().starts_with(REFUSED), "{refused}");
        }
        assert_eq!(s.stopped(), Some(Stop::MaxTime));
        // One call was sent (the other never had a slot), and it is counted at its most: no
        // prompt, 1,000 reply tokens at $2 a million.
        let spent = s.spent();
        assert_eq!((spent.calls, spent.usd), (1, 0.002));
        assert!(s.reserve("m", Some(0.0)).is_err(), "a run whose time is up sends nothing more");
    }
}

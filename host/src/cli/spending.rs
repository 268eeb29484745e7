//! Real models in a lab run (`simulate --model judge=openai`): which profiles they play, how many
//! of their calls are in flight at once, what the run may spend, and the estimate printed before
//! the first call.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use ruleweave::{Engine, LlmChoice, Pack};
use ruleweave_lab::spend::{Limits, Spend, UNCAPPED_REPLY};

use crate::config::{Config, DEFAULT_CONCURRENCY};

/// The flags that put real models in a run.
#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
pub(super) struct Flags {
    /// A profile a real model plays, PROFILE=PROVIDER (repeatable): --model judge=openai. The
    /// pack's other profiles stay on its stand-in. Without it, RULEWEAVE_LLM (or OPENAI_API_KEY)
    /// puts every profile on one provider.
    #[arg(long = "model", value_name = "PROFILE=PROVIDER")]
    models: Vec<String>,
    /// The most the run's model calls may cost, by ruleweave.toml's [prices]: each call holds the
    /// most it can cost before it is sent, so the run never spends more; when the next call would,
    /// its games stop at a turn boundary (listed apart, uncounted) and it exits with 3.
    #[arg(long, value_name = "USD")]
    budget_usd: Option<f64>,
    /// The most model calls the run may make (it stops as --budget-usd does).
    #[arg(long, value_name = "N")]
    max_calls: Option<u64>,
    /// The longest the run's model calls may go on (`90s`, `20m`, `2h`): a run waits out rate
    /// limits with no cap of its own, and stops as --budget-usd does when this is up.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_time: Option<std::time::Duration>,
    /// Model calls in flight at once, per provider (default: [providers.<name>] concurrency, or 8).
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// Start even when the estimate is over --budget-usd (the run stops at the budget).
    #[arg(long)]
    yes: bool,
    /// Keep the real models' answers in DIR, and answer from it what an earlier run asked: the
    /// same games again make no new calls (each asking of a request above temperature 0 is a
    /// sample of its own).
    #[arg(long, value_name = "DIR")]
    cache: Option<std::path::PathBuf>,
}

/// A run's real models: the engine's choice of providers, the account they are paid from, and
/// how many calls each provider takes at once.
pub(super) struct Real {
    pub(super) llm: LlmChoice,
    pub(super) spend: Arc<Spend>,
    concurrency: usize,
    /// The profiles real models play, with their provider's name.
    profiles: BTreeMap<String, String>,
}

impl Flags {
    /// The real models these flags (or the environment) put in a run of `pack`; `None` when every
    /// profile plays on the stand-in.
    pub(super) fn real(&self, config: &Config, pack: &Pack) -> Result<Option<Real>> {
        if let Some(usd) = self.budget_usd
            && !(usd.is_finite() && usd > 0.0)
        {
            bail!("--budget-usd is an amount above 0, not {usd}");
        }
        if self.concurrency == Some(0) || self.max_calls == Some(0) {
            bail!("--concurrency and --max-calls are at least 1");
        }
        // A run waits out a provider's rate limits rather than lose a game's call to one.
        let named = config.named_providers().waiting_out_rate_limits();
        let mut asked = Vec::new();
        for model in &self.models {
            let Some(pair) = model.split_once('=') else {
                bail!("--model {model}: say which profile and which provider, PROFILE=PROVIDER (judge=openai)");
            };
            asked.push(pair);
        }
        let mut chosen =
            ruleweave_lab::spend::providers_for(pack, asked, &named).map_err(|why| anyhow::anyhow!("--model {why}"))?;
        // Without --model, the environment's provider plays every profile.
        if chosen.is_empty()
            && let LlmChoice::Provider(p) = &config.llm
        {
            // Made again by its name, to wait out rate limits as the run's others do.
            let p = named.get(p.name()).unwrap_or_else(|_| p.clone());
            for profile in pack.profiles() {
                chosen.insert(profile.name.clone(), p.clone());
            }
        }
        if chosen.is_empty() {
            if self.budget_usd.is_some()
                || self.max_calls.is_some()
                || self.max_time.is_some()
                || self.concurrency.is_some()
                || self.cache.is_some()
            {
                bail!(
                    "--budget-usd, --max-calls, --max-time, --concurrency and --cache are for real models, and every profile plays on \
                     the stand-in: name one with --model PROFILE=PROVIDER (or set RULEWEAVE_LLM)"
                );
            }
            return Ok(None);
        }
        let cache = self.cache.as_deref().map(ruleweave_lab::cache::Cache::open).transpose()?;
        let limits = Limits { budget_usd: self.budget_usd, max_calls: self.max_calls, max_time: self.max_time };
        let spend = Spend::new(limits, config.prices.clone(), cache);
        if self.budget_usd.is_some()
            && let Some((profile, model)) = ruleweave_lab::spend::unpriced(pack, chosen.keys(), &config.prices)
        {
            bail!(
                "--budget-usd: profile `{profile}` calls model `{model}`, which has no price in ruleweave.toml's [prices] \
                 (\"{model}\" = {{ input = ..., output = ... }}, per million tokens)"
            );
        }
        let concurrency_of = |name: &str| {
            self.concurrency.or_else(|| config.concurrency.get(name).copied()).unwrap_or(DEFAULT_CONCURRENCY)
        };
        let profiles: BTreeMap<String, String> =
            chosen.iter().map(|(p, by)| (p.clone(), by.name().to_owned())).collect();
        let concurrency = profiles.values().map(|name| concurrency_of(name)).max().unwrap_or(1);
        let llm = ruleweave_lab::spend::metered(chosen, &spend, concurrency_of);
        Ok(Some(Real { llm, spend, concurrency, profiles }))
    }

    /// Whether a run whose estimate is over its budget may start.
    pub(super) fn yes(&self) -> bool {
        self.yes
    }

    /// The cache `dir` when no --cache is given (a tune's, which asks the same games again at
    /// every value it tries).
    pub(super) fn caching_by_default(mut self, dir: std::path::PathBuf) -> Self {
        self.cache.get_or_insert(dir);
        self
    }

    /// Whether real models would play (a --model is named, or the environment's provider).
    pub(super) fn names_models(&self, config: &Config) -> bool {
        !self.models.is_empty() || matches!(config.llm, LlmChoice::Provider(_))
    }
}

/// What a run on real models is expected to spend: its calls of the real models' profiles, and
/// what they may cost at most, from the same games played first on the stand-ins.
#[derive(Debug, Default)]
pub(super) struct Estimate {
    calls: u64,
    prompt_tokens: u64,
    /// The most the calls may cost (their prompts and their `max_tokens`), when every model has
    /// a price.
    usd: Option<f64>,
}

impl Real {
    /// How many games to play at once: one per call the providers take in flight, and at least
    /// one per core.
    pub(super) fn games_at_once(&self) -> usize {
        ruleweave_lab::spend::games_at_once(self.concurrency)
    }

    /// Counts the calls `standin` makes of the real models' profiles while `dry_run` plays the
    /// same games on the stand-ins.
    pub(super) fn estimate(&self, standin: &Engine, pack: &Pack, config: &Config, dry_run: impl FnOnce()) -> Estimate {
        let seen = Arc::new(std::sync::Mutex::new(Estimate { usd: Some(0.0), ..Estimate::default() }));
        let (profiles, name) = (self.profiles.clone(), pack.name().to_owned());
        // Each profile's reply cap and price (its first model's: the stand-in names none).
        let profile: BTreeMap<String, (u32, Option<ruleweave_lab::simulate::Price>)> = pack
            .profiles()
            .map(|p| {
                let price = p.models().first().and_then(|m| config.prices.get(m)).copied();
                (p.name.clone(), (p.max_tokens.unwrap_or(UNCAPPED_REPLY), price))
            })
            .collect();
        let counted = seen.clone();
        standin.on_llm_call(move |pack: &str, call: &ruleweave::LlmEvent| {
            if pack != name || !profiles.contains_key(&call.profile) {
                return;
            }
            let mut e = counted.lock().unwrap_or_else(|p| p.into_inner());
            e.calls += 1;
            e.prompt_tokens += u64::from(call.prompt_tokens);
            let (most, price) = profile.get(&call.profile).copied().unwrap_or((UNCAPPED_REPLY, None));
            e.usd = match (e.usd, price) {
                (Some(usd), Some(price)) => Some(usd + price.of(call.prompt_tokens, most)),
                _ => None,
            };
        });
        dry_run();
        std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// `models: judge on openai` for the terminal.
    pub(super) fn describe(&self) -> String {
        self.profiles.iter().map(|(p, by)| format!("{p} on {by}")).collect::<Vec<_>>().join(", ")
    }
}

impl Estimate {
    /// This estimate for `of` games, from one of `played` games.
    pub(super) fn scaled(self, played: u64, of: u64) -> Estimate {
        let k = of as f64 / played.max(1) as f64;
        Estimate {
            calls: (self.calls as f64 * k).ceil() as u64,
            prompt_tokens: (self.prompt_tokens as f64 * k).ceil() as u64,
            usd: self.usd.map(|u| u * k),
        }
    }

    /// Prints the estimate, and refuses a run it puts over its budget unless `yes`.
    pub(super) fn check(&self, real: &Real, yes: bool) -> Result<()> {
        let cost = match self.usd {
            Some(usd) => format!("at most {usd:.4} by [prices]"),
            None => "its cost unknown (a model has no price in [prices])".into(),
        };
        eprintln!(
            "estimate for {}: {} calls, about {} prompt tokens, {cost} (the same games on the stand-ins)",
            real.describe(),
            self.calls,
            self.prompt_tokens
        );
        if let (Some(budget), Some(usd)) = (real.spend.limits().budget_usd, self.usd)
            && usd > budget
            && !yes
        {
            bail!(
                "the estimate ({usd:.4}) is over --budget-usd {budget}: pass --yes to start anyway (the run stops at the budget)"
            );
        }
        Ok(())
    }
}

/// A run's games played on the stand-ins, for a run on real models to estimate its calls from.
pub(super) struct DryRun {
    pub(super) engine: ruleweave::Engine,
    pub(super) pack: std::sync::Arc<ruleweave::Pack>,
    players: Vec<ruleweave_lab::simulate::Player>,
    plan: ruleweave_lab::simulate::Plan,
    options: serde_json::Map<String, serde_json::Value>,
}

impl DryRun {
    /// Plays the games, a core each.
    pub(super) fn play(&self, rt: &tokio::runtime::Runtime) {
        let never = std::sync::atomic::AtomicBool::new(false);
        let rules = ruleweave_lab::simulate::Rules { engine: &self.engine, options: &self.options };
        ruleweave_lab::simulate::play(
            rt.handle(),
            &self.plan,
            &self.players,
            &rules,
            &Default::default(),
            &|| {},
            &never,
        );
    }
}

/// `plan`'s games of `pack` (with `params`) on the stand-ins, ready to play.
#[allow(clippy::too_many_arguments)]
pub(super) fn dry_run(
    root: &Path,
    rt: &tokio::runtime::Runtime,
    config: &crate::config::Config,
    pack: &str,
    params: &[String],
    options: &serde_json::Map<String, serde_json::Value>,
    players: &[String],
    plan: &ruleweave_lab::simulate::Plan,
) -> Result<DryRun> {
    let engine = rt.block_on(super::spending::engine_with(root, config, "memory", ruleweave::LlmChoice::Standin))?;
    super::load_pack(&engine, pack)?;
    let engine = super::copy_of(&engine, pack, params)?;
    let loaded = super::load_pack(&engine, pack)?;
    let players = ruleweave_lab::simulate::players(&engine, &loaded, players)?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let plan = ruleweave_lab::simulate::Plan { record: false, jobs: cores, spend: None, ..plan.clone() };
    Ok(DryRun { engine, pack: loaded, players, plan, options: options.clone() })
}

/// An engine over `root` whose model calls `llm` answers.
pub(super) async fn engine_with(root: &Path, config: &Config, store: &str, llm: LlmChoice) -> Result<Engine> {
    let mut config = config.clone();
    config.llm = llm;
    super::engine(root, &config, store).await
}

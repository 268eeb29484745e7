//! Host configuration: `ruleweave.toml` in the root, then the environment, then flags.
//!
//! ```toml
//! [server]
//! addr = "127.0.0.1:8080"
//! token = "..."                  # or RULEWEAVE_TOKEN; required beyond loopback (16+ characters)
//! body_limit = 1048576           # bytes
//! header_timeout = "10s"         # a request's headers must arrive within this
//! body_timeout = "30s"           # and its body within this
//! max_connections = 1024         # open connections; past it, only /healthz is answered (503)
//! max_connections_per_client = 64 # connections one client address holds; as many more wait
//! allowed_hosts = ["game.local"] # Host names accepted besides loopback ones, when there is no token
//! turns_per_pack = 8             # turns of one pack running at once; more wait
//! streams_per_client = 16        # event streams one client address keeps open (behind a
//!                                # proxy every client shares its address: raise it there)
//! simulate_turns = 4000          # the most turns one POST /v1/packs/{pack}/simulate plays
//! tune_turns = 400000            # the most turns one tune job (POST /v1/packs/{pack}/tune) plays
//! sessions_per_key_per_hour = 1000  # sessions (forks included) one issued key, and the sessions
//! sessions_per_key = 100000         # it made, may make in an hour, and keep; more are 429
//! jobs_per_key_per_hour = 20        # tunes and sweeps one issued key may start in an hour
//! max_state_bytes = 262144          # a session's state as JSON; a turn, edit or fork past it is 413
//!
//! [store]
//! url = "sqlite://ruleweave.db"  # or RULEWEAVE_STORE; memory, sqlite://PATH, postgres://...
//! snapshot_every = 16
//! expire_finished_after = "24h"  # s, m, h, d; "never" keeps them
//! expire_idle_after = "30d"      # or RULEWEAVE_EXPIRE_IDLE_AFTER: unfinished sessions nobody
//!                                # played for this long (one-off chats); "never" (the default)
//!
//! [llm]                          # defaults for the RULEWEAVE_LLM_* / OPENAI_BASE_URL variables
//! provider = "openai"
//! base_url = "http://localhost:11434/v1"
//! model = "llama3.2"
//! timeout_ms = 60000
//! retries = 3
//! allowed_models = ["gpt-4o"]    # or RULEWEAVE_ALLOWED_MODELS; models serve's clients may choose
//!                                # besides the packs' own (a debate's pro_model): none by default
//! reasoning_models = ["o3-mini"] # or RULEWEAVE_REASONING_MODELS: asked with max_completion_tokens
//!                                # and no temperature, which these models refuse
//!
//! [providers.openai]             # per provider (also groq, anthropic, ...):
//! concurrency = 8                # a lab run's calls in flight to it at once (simulate --model)
//!
//! [prices]                       # what a model's tokens cost, per million (simulate's cost per game)
//! "gpt-4o-mini" = { input = 0.15, output = 0.60 }
//! ```
//!
//! API keys come only from the environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`): a file in the
//! repository is the wrong place for them. So is where a key is sent: a base URL in this file
//! (`[llm] base_url`, `[providers.<name>] base_url`) serves only a provider whose key the
//! environment does not hold (a keyless local server); with the key set, the endpoint comes from
//! the environment (`OPENAI_BASE_URL`, `<NAME>_BASE_URL`) or the provider's own, and the file's is
//! ignored with a warning. A pack folder cloned from someone else cannot redirect your keys.
//! Nothing secret is logged or reaches scripts.
//!
//! Everything is resolved in [`Config::load_with`], from the environment it is given: the process
//! environment is read once, by [`Config::load`], and nothing after it reads it again. (The log
//! and traces are set up before any command runs, from their own standard variables: `RUST_LOG`,
//! `NO_COLOR` and `OTEL_*`, in `telemetry.rs`; they are no part of a command's configuration.)

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ruleweave::LlmChoice;
use ruleweave::search::SearchChoice;
use ruleweave::store::Retention;
use serde::Deserialize;

/// How the server treats its clients: `ruleweave.toml`'s `[server]` section, the environment and
/// flags fill it.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Clients send `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// A request's headers must arrive within this (an idle keep-alive connection is closed after it).
    pub header_timeout: Duration,
    /// A request's body must arrive within this.
    pub body_timeout: Duration,
    /// Open connections; past it a connection is answered `/healthz` only (503 for the rest).
    pub max_connections: usize,
    /// Connections one client address holds (as many more wait for one; past those, `/healthz`
    /// only, 429 for the rest), so one client's stalled sockets cannot take every slot.
    pub max_connections_per_client: usize,
    /// Host names a request may name besides loopback ones, when there is no token.
    pub allowed_hosts: Vec<String>,
    /// Turns of one pack that run at once; more wait for a slot, so a slow pack cannot take every
    /// thread from the others.
    pub turns_per_pack: usize,
    /// Event streams (`/v1/events`, `/v1/sessions/{id}/events`) one client address keeps open at
    /// once; more are refused (429), so one client's idle streams cannot fill `max_connections`.
    pub streams_per_client: usize,
    /// The most turns one batch of simulated games plays (games × players × the pack's turn cap):
    /// how much CPU one click of the console's Simulate may take.
    pub simulate_turns: usize,
    /// The most turns one tune job plays (its games × the pack's turn cap): a job's budget.
    pub tune_turns: usize,
    /// The most sessions (forks included) an issued key, with the sessions it made, makes in an
    /// hour: one client cannot fill the disk.
    pub sessions_per_key_per_hour: u64,
    /// The most sessions going back to one issued key that are kept at once.
    pub sessions_per_key: u64,
    /// The most jobs (tunes, sweeps) one issued key starts in an hour.
    pub jobs_per_key_per_hour: u64,
    /// The real models a tune job may play on (`"models"`, `"budget_usd"`); none: every job
    /// plays on the stand-ins.
    pub real_models: Option<RealModels>,
}

/// The real models a job may play on: the named providers (keys from the environment), what
/// their models cost, and how many calls each takes at once.
#[derive(Clone)]
pub struct RealModels {
    /// The providers, by name (`openai`, `anthropic`, `groq`, ...), their calls waiting out rate limits.
    pub named: Arc<ruleweave::llm::NamedProviders>,
    /// What models cost (`[prices]`): a job's budget needs its models priced.
    pub prices: std::collections::BTreeMap<String, Price>,
    /// Calls in flight per provider (`[providers.<name>] concurrency`, else [`DEFAULT_CONCURRENCY`]).
    pub concurrency: std::collections::BTreeMap<String, usize>,
    /// Where a job's real models' answers are kept, to answer the same request again (a tune's,
    /// always; a batch's when it asks): [`cache_dir`].
    pub cache: std::path::PathBuf,
}

impl std::fmt::Debug for RealModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealModels")
            .field("prices", &self.prices)
            .field("concurrency", &self.concurrency)
            .field("cache", &self.cache)
            .finish()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            token: None,
            body_limit: 1 << 20,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_connections_per_client: 64,
            allowed_hosts: Vec::new(),
            turns_per_pack: 4 * std::thread::available_parallelism().map_or(2, |n| n.get()),
            streams_per_client: 16,
            simulate_turns: 4_000,
            tune_turns: 400_000,
            sessions_per_key_per_hour: 1_000,
            sessions_per_key: 100_000,
            jobs_per_key_per_hour: 20,
            real_models: None,
        }
    }
}

/// The most connections a cap may allow (a semaphore's permits are bounded; past this, "no cap"
/// is what it means anyway).
const MOST_CONNECTIONS: usize = 1 << 20;

/// The file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    server: ServerSection,
    #[serde(default)]
    store: StoreSection,
    #[serde(default)]
    llm: LlmSection,
    /// Named providers: `[providers.groq] base_url = "..."` (keys only from the environment).
    #[serde(default)]
    providers: std::collections::BTreeMap<String, ProviderSection>,
    /// What models cost: `[prices] "gpt-4o-mini" = { input = 0.15, output = 0.60 }`.
    #[serde(default)]
    prices: std::collections::BTreeMap<String, Price>,
}

/// What a model's tokens cost (`[prices]`): the engine's, which simulate counts with.
pub use ruleweave_lab::simulate::Price;

/// The most calls a lab run keeps in flight to one provider, unless `[providers.<name>]
/// concurrency` or `--concurrency` says otherwise.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// Where runs on real models keep their answers unless told otherwise: `ruleweave-cache/` beside
/// a SQLite store's file, or under `root` (the folder of `ruleweave.toml`) for any other store.
pub fn cache_dir(root: &Path, store: &str) -> std::path::PathBuf {
    let file = store.strip_prefix("sqlite://").filter(|p| !p.is_empty() && !p.starts_with(':')).map(Path::new);
    let beside = match file {
        Some(f) if f.is_absolute() => f.parent().map(Path::to_path_buf),
        Some(f) => Some(root.join(f).parent().map_or_else(|| root.to_path_buf(), Path::to_path_buf)),
        None => None,
    };
    beside.unwrap_or_else(|| root.to_path_buf()).join("ruleweave-cache")
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderSection {
    base_url: Option<String>,
    /// The most of a lab run's calls in flight at once to this provider.
    concurrency: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSection {
    addr: Option<String>,
    token: Option<String>,
    body_limit: Option<usize>,
    header_timeout: Option<String>,
    body_timeout: Option<String>,
    max_connections: Option<usize>,
    max_connections_per_client: Option<usize>,
    max_state_bytes: Option<usize>,
    allowed_hosts: Option<Vec<String>>,
    turns_per_pack: Option<usize>,
    streams_per_client: Option<usize>,
    simulate_turns: Option<usize>,
    tune_turns: Option<usize>,
    sessions_per_key_per_hour: Option<usize>,
    sessions_per_key: Option<usize>,
    jobs_per_key_per_hour: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    url: Option<String>,
    snapshot_every: Option<u64>,
    expire_finished_after: Option<String>,
    expire_idle_after: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmSection {
    provider: Option<String>,
    base_url: Option<String>,
    model: Option<String>,
    model_map: Option<String>,
    timeout_ms: Option<u64>,
    retries: Option<u64>,
    backoff_ms: Option<u64>,
    max_backoff_ms: Option<u64>,
    /// Models a client of `serve` may choose besides the packs' own (a debate's `pro_model`).
    allowed_models: Option<Vec<String>>,
    /// Models asked with `max_completion_tokens` and no temperature (reasoning models).
    reasoning_models: Option<Vec<String>>,
}

/// Where a variable's value comes from: the environment the configuration was loaded with, with
/// the file's values where it says nothing (and may say).
type Vars = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The host's settings after the file, the environment and flags have had their say.
#[derive(Clone)]
pub struct Config {
    pub addr: SocketAddr,
    /// How the server treats its clients.
    pub server: Settings,
    pub store: String,
    pub retention: Retention,
    /// Models a client of `serve` may choose besides the packs' own (`[llm] allowed_models`, or
    /// `RULEWEAVE_ALLOWED_MODELS`, comma-separated): none by default.
    pub allowed_models: Vec<String>,
    /// What models cost (`[prices]`), by model name.
    pub prices: std::collections::BTreeMap<String, Price>,
    /// The most calls a lab run keeps in flight to each provider (`[providers.<name>]
    /// concurrency`), by provider name; [`DEFAULT_CONCURRENCY`] for the others.
    pub concurrency: std::collections::BTreeMap<String, usize>,
    /// Whether trace spans hold prompts and replies (`RULEWEAVE_TRACE_CONTENT=1`): they hold
    /// players' words, so only when the operator says so.
    pub trace_content: bool,
    /// Who answers the packs' model calls.
    pub llm: LlmChoice,
    /// Who answers scripts' `search()`.
    pub search: SearchChoice,
    /// Each base URL of the file that is not used, and why.
    pub ignored: Vec<String>,
    /// Where each key in the environment is sent: `OPENAI_API_KEY → https://api.openai.com/v1`.
    pub key_endpoints: Vec<String>,
    /// The variables named providers are made from (`None`: all offline).
    named: Option<Vars>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("addr", &self.addr)
            .field("token", &self.server.token.as_ref().map(|_| "***"))
            .field("body_limit", &self.server.body_limit)
            .field("store", &redact(&self.store))
            .finish_non_exhaustive()
    }
}

/// The shortest token accepted for a server reachable beyond this machine.
pub const MIN_TOKEN: usize = 16;

/// Where `play` keeps its sessions when nothing says otherwise (resumable with `--session`).
pub const DEFAULT_STORE: &str = "sqlite://ruleweave.db";

impl Config {
    /// Reads `ruleweave.toml` under `root` (if there is one) and the process environment, once.
    pub fn load(root: &Path) -> Result<Self> {
        let env: HashMap<String, String> =
            std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
        Self::load_with(root, move |k| env.get(k).cloned())
    }

    /// Reads `ruleweave.toml` under `root` and the environment `env` gives: every value the host
    /// uses is resolved here (two configurations from two environments live side by side).
    pub fn load_with(root: &Path, env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Result<Self> {
        let env: Vars = Arc::new(move |k| env(k).filter(|v| !v.is_empty()));
        let path = root.join("ruleweave.toml");
        let file: File = match std::fs::read_to_string(&path) {
            Ok(text) => {
                toml::from_str(&text).with_context(|| format!("{} is not a valid configuration", path.display()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let addr = env("RULEWEAVE_ADDR").or(file.server.addr).unwrap_or_else(|| "127.0.0.1:8080".into());
        let addr = addr.parse().with_context(|| format!("`{addr}` is not an address like 127.0.0.1:8080"))?;
        let defaults = Settings::default();
        let number = |var: &str, file: Option<usize>, default: usize| -> Result<usize> {
            match env(var) {
                Some(v) => v.parse().with_context(|| format!("{var}={v} is not a whole number")),
                None => Ok(file.unwrap_or(default)),
            }
        };
        // A value's name as its reader wrote it: the variable's, or the file's key.
        let named = |var: &str, key: &str| if env(var).is_some() { var.to_owned() } else { key.to_owned() };
        let timeout = |var: &str, key: &str, file: Option<String>, default: Duration| -> Result<Duration> {
            let name = named(var, &format!("[server] {key}"));
            match env(var).or(file) {
                Some(v) => duration(&name, &v)?.with_context(|| format!("{name}: a timeout cannot be `never`")),
                None => Ok(default),
            }
        };
        let allowed_hosts = match env("RULEWEAVE_ALLOWED_HOSTS") {
            Some(v) => v.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect(),
            None => file.server.allowed_hosts.unwrap_or_default().iter().map(|h| h.to_ascii_lowercase()).collect(),
        };
        let server = Settings {
            token: env("RULEWEAVE_TOKEN").or(file.server.token),
            body_limit: number("RULEWEAVE_BODY_LIMIT", file.server.body_limit, defaults.body_limit)?,
            header_timeout: timeout(
                "RULEWEAVE_HEADER_TIMEOUT",
                "header_timeout",
                file.server.header_timeout,
                defaults.header_timeout,
            )?,
            body_timeout: timeout(
                "RULEWEAVE_BODY_TIMEOUT",
                "body_timeout",
                file.server.body_timeout,
                defaults.body_timeout,
            )?,
            max_connections: number(
                "RULEWEAVE_MAX_CONNECTIONS",
                file.server.max_connections,
                defaults.max_connections,
            )?
            .clamp(1, MOST_CONNECTIONS),
            max_connections_per_client: number(
                "RULEWEAVE_MAX_CONNECTIONS_PER_CLIENT",
                file.server.max_connections_per_client,
                defaults.max_connections_per_client,
            )?
            .clamp(1, MOST_CONNECTIONS),
            allowed_hosts,
            turns_per_pack: number("RULEWEAVE_TURNS_PER_PACK", file.server.turns_per_pack, defaults.turns_per_pack)?
                .max(1),
            streams_per_client: number(
                "RULEWEAVE_STREAMS_PER_CLIENT",
                file.server.streams_per_client,
                defaults.streams_per_client,
            )?
            .max(1),
            simulate_turns: number("RULEWEAVE_SIMULATE_TURNS", file.server.simulate_turns, defaults.simulate_turns)?
                .max(1),
            tune_turns: number("RULEWEAVE_TUNE_TURNS", file.server.tune_turns, defaults.tune_turns)?.max(1),
            sessions_per_key_per_hour: number(
                "RULEWEAVE_SESSIONS_PER_KEY_PER_HOUR",
                file.server.sessions_per_key_per_hour,
                defaults.sessions_per_key_per_hour as usize,
            )?
            .max(1) as u64,
            sessions_per_key: number(
                "RULEWEAVE_SESSIONS_PER_KEY",
                file.server.sessions_per_key,
                defaults.sessions_per_key as usize,
            )?
            .max(1) as u64,
            jobs_per_key_per_hour: number(
                "RULEWEAVE_JOBS_PER_KEY_PER_HOUR",
                file.server.jobs_per_key_per_hour,
                defaults.jobs_per_key_per_hour as usize,
            )?
            .max(1) as u64,
            real_models: None,
        };
        let expire =
            env("RULEWEAVE_EXPIRE_FINISHED_AFTER").or(file.store.expire_finished_after).unwrap_or_else(|| "24h".into());
        let idle =
            env("RULEWEAVE_EXPIRE_IDLE_AFTER").or(file.store.expire_idle_after).unwrap_or_else(|| "never".into());
        let retention = Retention {
            snapshot_every: file.store.snapshot_every.unwrap_or(16).max(1),
            expire_finished_after: duration(
                &named("RULEWEAVE_EXPIRE_FINISHED_AFTER", "[store] expire_finished_after"),
                &expire,
            )?,
            expire_idle_after: duration(&named("RULEWEAVE_EXPIRE_IDLE_AFTER", "[store] expire_idle_after"), &idle)?,
            max_state_bytes: number(
                "RULEWEAVE_MAX_STATE_BYTES",
                file.server.max_state_bytes,
                Retention::default().max_state_bytes,
            )?
            .max(1),
        };
        let mut llm = Vec::new();
        let mut concurrency = std::collections::BTreeMap::new();
        for (name, p) in file.providers {
            match p.concurrency {
                Some(0) => bail!("{}: [providers.{name}] concurrency is at least 1", path.display()),
                Some(n) => {
                    concurrency.insert(name.clone(), n);
                }
                None => {}
            }
            if let Some(url) = p.base_url {
                llm.push((format!("{}_BASE_URL", name.to_ascii_uppercase().replace('-', "_")), url));
            }
        }
        for (var, value) in [
            ("RULEWEAVE_LLM", file.llm.provider),
            ("OPENAI_BASE_URL", file.llm.base_url),
            ("RULEWEAVE_MODEL", file.llm.model),
            ("RULEWEAVE_MODEL_MAP", file.llm.model_map),
            ("RULEWEAVE_LLM_TIMEOUT_MS", file.llm.timeout_ms.map(|v| v.to_string())),
            ("RULEWEAVE_LLM_RETRIES", file.llm.retries.map(|v| v.to_string())),
            ("RULEWEAVE_LLM_BACKOFF_MS", file.llm.backoff_ms.map(|v| v.to_string())),
            ("RULEWEAVE_LLM_MAX_BACKOFF_MS", file.llm.max_backoff_ms.map(|v| v.to_string())),
            ("RULEWEAVE_REASONING_MODELS", file.llm.reasoning_models.map(|m| m.join(","))),
        ] {
            if let Some(v) = value {
                llm.push((var.to_owned(), v));
            }
        }
        let allowed_models = match env("RULEWEAVE_ALLOWED_MODELS") {
            Some(list) => list.split(',').map(|m| m.trim().to_owned()).filter(|m| !m.is_empty()).collect(),
            None => file.llm.allowed_models.clone().unwrap_or_default(),
        };
        if let Some((model, _)) = file.prices.iter().find(|(_, p)| !(p.input >= 0.0 && p.output >= 0.0)) {
            bail!("{}: [prices] {model:?}: a price is a number of at least 0", path.display());
        }
        let files = FileValues { values: llm, env: env.clone() };
        let ignored = files.ignored();
        let key_endpoints = files.key_endpoints();
        let vars: Vars = {
            let (env, files) = (env.clone(), files.clone());
            Arc::new(move |k| env(k).or_else(|| files.value(k)))
        };
        // `RULEWEAVE_LLM=standin` asks for everything offline: searches and named providers too.
        let offline = env("RULEWEAVE_LLM").as_deref() == Some("standin");
        let llm = LlmChoice::from_vars(|k| vars(k))?;
        let search = if offline { SearchChoice::Standin } else { SearchChoice::from_vars(|k| vars(k))? };
        let mut config = Config {
            prices: file.prices,
            concurrency,
            allowed_models,
            addr,
            server,
            store: env("RULEWEAVE_STORE").or(file.store.url).unwrap_or_else(|| DEFAULT_STORE.into()),
            retention,
            trace_content: env("RULEWEAVE_TRACE_CONTENT").is_some_and(|v| v.trim() == "1"),
            llm,
            search,
            ignored,
            key_endpoints,
            named: (!offline).then_some(vars),
        };
        config.server.real_models = Some(RealModels {
            named: Arc::new(config.named_providers().waiting_out_rate_limits()),
            prices: config.prices.clone(),
            concurrency: config.concurrency.clone(),
            cache: cache_dir(root, &config.store),
        });
        Ok(config)
    }

    /// The providers profiles may name (`provider: groq`): `<NAME>_API_KEY` and `<NAME>_BASE_URL`
    /// from the environment, base URLs from `[providers.<name>]`. None when `RULEWEAVE_LLM=standin`
    /// asks for everything offline.
    pub fn named_providers(&self) -> ruleweave::llm::NamedProviders {
        match &self.named {
            Some(vars) => {
                let vars = vars.clone();
                ruleweave::llm::NamedProviders::from_vars(move |k| vars(k))
            }
            None => ruleweave::llm::NamedProviders::none(),
        }
    }

    /// Refuses to serve beyond loopback without a token long enough to be a secret.
    pub fn check_exposure(&self) -> Result<()> {
        if self.addr.ip().is_loopback() {
            return Ok(());
        }
        match self.server.token.as_deref().map(str::trim) {
            None => bail!(
                "serving on {} (beyond this machine) needs a token: set RULEWEAVE_TOKEN or [server] token in ruleweave.toml",
                self.addr
            ),
            Some(t) if t.chars().count() < MIN_TOKEN => bail!(
                "serving on {} (beyond this machine) needs a token of at least {MIN_TOKEN} characters; \
                 a shorter one can be guessed",
                self.addr
            ),
            Some(_) => Ok(()),
        }
    }
}

/// The file's values for the variables it may set (`OPENAI_BASE_URL` from `[llm] base_url`, ...),
/// read against the environment: a provider's base URL only counts while no variable that
/// supplies that provider's key is set (its own or an alias: Google's for Gemini), since where a
/// key is sent is never a file in the root's to say.
#[derive(Clone)]
struct FileValues {
    values: Vec<(String, String)>,
    env: Vars,
}

impl FileValues {
    /// The file's value for the variable `k`, when it may be used.
    fn value(&self, k: &str) -> Option<String> {
        let value = self.values.iter().find(|(var, _)| var == k).map(|(_, v)| v.clone())?;
        match k.strip_suffix("_BASE_URL") {
            Some(provider) if self.key_var(provider).is_some() => None,
            _ => Some(value),
        }
    }

    /// The variable that holds `provider`'s key, when one is set: its own (`GEMINI_API_KEY`) or
    /// an alias (`GOOGLE_API_KEY`).
    fn key_var(&self, provider: &str) -> Option<String> {
        let own = format!("{provider}_API_KEY");
        if (self.env)(&own).is_some() {
            return Some(own);
        }
        ruleweave::llm::key_alias(provider).filter(|alias| (self.env)(alias).is_some()).map(str::to_owned)
    }

    /// What the file says that is not used, and why: base URLs for providers whose key is set.
    fn ignored(&self) -> Vec<String> {
        self.values
            .iter()
            .filter_map(|(var, url)| {
                let provider = var.strip_suffix("_BASE_URL")?;
                let key = self.key_var(provider)?;
                Some(format!(
                    "ruleweave.toml sends {provider} to {url}, but {key} is set: a file in the root does not \
                     choose where a key goes, so it is not used (set {var} in the environment to send it there)"
                ))
            })
            .collect()
    }

    /// Where each key in the environment is sent: `OPENAI_API_KEY → https://api.openai.com/v1`.
    fn key_endpoints(&self) -> Vec<String> {
        let mut names: Vec<String> =
            ["OPENAI", "ANTHROPIC", "TAVILY", "GROQ", "GEMINI", "OPENROUTER", "TOGETHER", "MISTRAL"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
        for (var, _) in &self.values {
            if let Some(p) = var.strip_suffix("_BASE_URL")
                && !names.iter().any(|n| n == p)
            {
                names.push(p.to_owned());
            }
        }
        names
            .into_iter()
            .filter_map(|p| {
                let key = self.key_var(&p)?;
                let url = (self.env)(&format!("{p}_BASE_URL"))
                    .or_else(|| self.value(&format!("{p}_BASE_URL")))
                    .unwrap_or_else(|| default_endpoint(&p).to_owned());
                Some(format!("{key} → {url}"))
            })
            .collect()
    }
}

/// A duration setting, in the grammar manifests use (`250ms`, `90s`, `1h30m`, `7d`), or `never`.
fn duration(name: &str, text: &str) -> Result<Option<Duration>> {
    ruleweave::duration::parse_or_never(text).map_err(|e| anyhow::anyhow!("{name}: {e}"))
}

/// A store URL without its password, for logs.
pub use ruleweave::store::redact;

/// Where a provider's key goes when nothing says otherwise.
fn default_endpoint(provider: &str) -> &'static str {
    match provider {
        "OPENAI" => "https://api.openai.com/v1",
        "ANTHROPIC" => "https://api.anthropic.com",
        "TAVILY" => "https://api.tavily.com",
        "GROQ" => "https://api.groq.com/openai/v1",
        "OPENROUTER" => "https://openrouter.ai/api/v1",
        "TOGETHER" => "https://api.together.xyz/v1",
        "MISTRAL" => "https://api.mistral.ai/v1",
        "GEMINI" => "https://generativelanguage.googleapis.com/v1beta/openai",
        _ => "(no endpoint: set its _BASE_URL)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(toml: &str, env: &[(&str, &str)]) -> Result<Config> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ruleweave.toml"), toml).unwrap();
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load_with(dir.path(), move |k| env.get(k).cloned())
    }

    #[test]
    fn the_environment_overrides_the_file() {
        let c = load(
            "[server]\naddr = \"0.0.0.0:9000\"\ntoken = \"file\"\n[store]\nurl = \"memory\"\n",
            &[("RULEWEAVE_TOKEN", "env")],
        )
        .unwrap();
        assert_eq!(c.addr.to_string(), "0.0.0.0:9000");
        assert_eq!(c.server.token.as_deref(), Some("env"));
        assert_eq!(c.store, "memory");
        let c = load("", &[]).unwrap();
        assert_eq!(
            (c.addr.to_string(), c.store.as_str(), c.server.body_limit),
            ("127.0.0.1:8080".into(), DEFAULT_STORE, 1 << 20)
        );
        assert_eq!(c.retention.expire_finished_after, Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn bad_settings_are_refused_with_their_names() {
        assert!(load("[server]\nport = 1\n", &[]).unwrap_err().to_string().contains("not a valid configuration"));
        assert!(load("", &[("RULEWEAVE_ADDR", "nowhere")]).unwrap_err().to_string().contains("nowhere"));
        assert!(load("[store]\nexpire_finished_after = \"soon\"\n", &[]).unwrap_err().to_string().contains("soon"));
        assert_eq!(
            load("[store]\nexpire_finished_after = \"never\"\n", &[]).unwrap().retention.expire_finished_after,
            None
        );
    }

    #[test]
    fn serving_beyond_loopback_needs_a_token_long_enough_to_be_a_secret() {
        let exposed = |token: Option<&str>| {
            let mut env = vec![("RULEWEAVE_ADDR", "0.0.0.0:8080")];
            env.extend(token.map(|t| ("RULEWEAVE_TOKEN", t)));
            load("", &env).unwrap().check_exposure()
        };
        assert!(exposed(None).unwrap_err().to_string().contains("needs a token"));
        for weak in [" ", "t", "                 ", "short-token-123"] {
            assert!(exposed(Some(weak)).unwrap_err().to_string().contains("at least 16 characters"), "{weak:?}");
        }
        assert!(exposed(Some("a-token-of-sixteen")).is_ok());
        assert!(load("", &[]).unwrap().check_exposure().is_ok(), "loopback needs none");
    }

    #[test]
    fn server_limits_come_from_the_file_and_the_environment() {
        let c = load(
            "[server]\nheader_timeout = \"2s\"\nmax_connections = 64\nallowed_hosts = [\"Game.Local\"]\n",
            &[("RULEWEAVE_BODY_TIMEOUT", "5s")],
        )
        .unwrap();
        assert_eq!(c.server.header_timeout, Duration::from_secs(2));
        assert_eq!(c.server.body_timeout, Duration::from_secs(5));
        assert_eq!((c.server.max_connections, c.server.allowed_hosts.clone()), (64, vec!["game.local".to_owned()]));
        assert!(load("[server]\nbody_timeout = \"never\"\n", &[]).is_err());
    }

    /// Every value comes from the environment the configuration was loaded with: two
    /// configurations from two environments, side by side in one process, each keep their own.
    #[test]
    fn two_environments_make_two_configurations() {
        let toml = "[llm]\nbase_url = \"http://local.example/v1\"\n";
        let keyed = load(
            toml,
            &[
                ("OPENAI_API_KEY", "sk-one"),
                ("RULEWEAVE_TRACE_CONTENT", "1"),
                ("TAVILY_API_KEY", "tvly-one"),
                ("RULEWEAVE_STORE", "memory"),
            ],
        )
        .unwrap();
        let offline = load(toml, &[("RULEWEAVE_LLM", "standin"), ("RULEWEAVE_STORE", "sqlite://other.db")]).unwrap();
        assert!(matches!(keyed.llm, LlmChoice::Provider(_)), "{:?}", keyed.llm);
        assert!(matches!(offline.llm, LlmChoice::Standin), "{:?}", offline.llm);
        assert!(matches!(keyed.search, SearchChoice::Engine(_)));
        assert!(matches!(offline.search, SearchChoice::Standin));
        assert!((keyed.trace_content, offline.trace_content) == (true, false));
        assert_eq!((keyed.store.as_str(), offline.store.as_str()), ("memory", "sqlite://other.db"));
        // The file's endpoint is not where the first one's key goes; the second has no key.
        assert_eq!(
            keyed.key_endpoints,
            ["OPENAI_API_KEY → https://api.openai.com/v1", "TAVILY_API_KEY → https://api.tavily.com"]
        );
        assert_eq!(keyed.ignored.len(), 1, "{:?}", keyed.ignored);
        assert!(offline.key_endpoints.is_empty() && offline.ignored.is_empty());
    }

    /// A key given in an alias's variable (Google's for Gemini) keeps the file from choosing
    /// where it goes, as its own variable does.
    #[test]
    fn an_aliased_key_is_not_sent_where_the_file_says() {
        let toml = "[providers.gemini]\nbase_url = \"http://evil.example/v1\"\n";
        for (var, key) in [("GEMINI_API_KEY", "own"), ("GOOGLE_API_KEY", "alias")] {
            let c = load(toml, &[(var, key)]).unwrap();
            assert_eq!(c.key_endpoints, [format!("{var} → https://generativelanguage.googleapis.com/v1beta/openai")]);
            assert!(c.ignored[0].contains(&format!("but {var} is set")), "{:?}", c.ignored);
            assert!(c.named_providers().get("gemini").is_ok());
        }
        let keyless = load(toml, &[]).unwrap();
        assert!(keyless.ignored.is_empty() && keyless.key_endpoints.is_empty());
    }

    /// Durations read as manifests read them: `1h30m` too, and `never` where a setting may be off.
    #[test]
    fn durations_have_the_manifests_grammar() {
        let c =
            load("[server]\nheader_timeout = \"1m30s\"\n[store]\nexpire_finished_after = \"1h30m\"\n", &[]).unwrap();
        assert_eq!(c.server.header_timeout, Duration::from_secs(90));
        assert_eq!(c.retention.expire_finished_after, Some(Duration::from_secs(5400)));
        let bare = load("[store]\nexpire_idle_after = \"30\"\n", &[]).unwrap_err().to_string();
        assert!(bare.contains("[store] expire_idle_after: `30` is not a duration like 250ms"), "{bare}");
        let bare = load("", &[("RULEWEAVE_HEADER_TIMEOUT", "10")]).unwrap_err().to_string();
        assert!(bare.contains("RULEWEAVE_HEADER_TIMEOUT: `10` is not a duration"), "{bare}");
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let c = load("[server]\ntoken = \"s3cret\"\n[store]\nurl = \"postgres://u:pw@db/x\"\n", &[]).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("pw@"), "{shown}");
    }
}

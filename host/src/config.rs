//! Host configuration: `ruleweave.toml` in the root, then the environment, then flags.
//!
//! ```toml
//! [server]
//! addr = "127.0.0.1:8080"
//! token = "..."                  # or RULEWEAVE_TOKEN; required beyond loopback (16+ characters)
//! body_limit = 1048576           # bytes
//! header_timeout = "10s"         # a request's headers must arrive within this
//! body_timeout = "30s"           # and its body within this
//! max_connections = 1024         # open connections; more wait to be accepted
//! allowed_hosts = ["game.local"] # Host names accepted besides loopback ones, when there is no token
//! turns_per_pack = 8             # turns of one pack running at once; more wait
//! streams_per_client = 16        # event streams one client address keeps open (behind a
//!                                # proxy every client shares its address: raise it there)
//! simulate_turns = 4000          # the most turns one POST /v1/packs/{pack}/simulate plays
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

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ruleweave::store::Retention;

pub use crate::server::Settings;
use serde::Deserialize;

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

/// What a model's tokens cost, per million, in whatever currency the operator counts in.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
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

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderSection {
    base_url: Option<String>,
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
    allowed_hosts: Option<Vec<String>>,
    turns_per_pack: Option<usize>,
    streams_per_client: Option<usize>,
    simulate_turns: Option<usize>,
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

/// The host's settings after the file, the environment and flags have had their say.
#[derive(Clone)]
pub struct Config {
    pub addr: SocketAddr,
    /// How the server treats its clients.
    pub server: Settings,
    pub store: String,
    pub retention: Retention,
    llm: Vec<(String, String)>,
    /// Models a client of `serve` may choose besides the packs' own (`[llm] allowed_models`, or
    /// `RULEWEAVE_ALLOWED_MODELS`, comma-separated): none by default.
    pub allowed_models: Vec<String>,
    /// What models cost (`[prices]`), by model name.
    pub prices: std::collections::BTreeMap<String, Price>,
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
    /// Reads `ruleweave.toml` under `root` (if there is one) and the environment.
    pub fn load(root: &Path) -> Result<Self> {
        Self::load_with(root, &|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    pub fn load_with(root: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
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
        let timeout = |var: &str, file: Option<String>, default: Duration| -> Result<Duration> {
            match env(var).or(file) {
                Some(v) => parse_duration(&v)?.with_context(|| format!("{var}: a timeout cannot be `never`")),
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
            header_timeout: timeout("RULEWEAVE_HEADER_TIMEOUT", file.server.header_timeout, defaults.header_timeout)?,
            body_timeout: timeout("RULEWEAVE_BODY_TIMEOUT", file.server.body_timeout, defaults.body_timeout)?,
            max_connections: number(
                "RULEWEAVE_MAX_CONNECTIONS",
                file.server.max_connections,
                defaults.max_connections,
            )?
            .max(1),
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
        };
        let expire =
            env("RULEWEAVE_EXPIRE_FINISHED_AFTER").or(file.store.expire_finished_after).unwrap_or_else(|| "24h".into());
        let idle =
            env("RULEWEAVE_EXPIRE_IDLE_AFTER").or(file.store.expire_idle_after).unwrap_or_else(|| "never".into());
        let retention = Retention {
            snapshot_every: file.store.snapshot_every.unwrap_or(16).max(1),
            expire_finished_after: parse_duration(&expire)?,
            expire_idle_after: parse_duration(&idle)?,
        };
        let mut llm = Vec::new();
        for (name, p) in file.providers {
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
        Ok(Config {
            prices: file.prices,
            allowed_models,
            addr,
            server,
            store: env("RULEWEAVE_STORE").or(file.store.url).unwrap_or_else(|| DEFAULT_STORE.into()),
            retention,
            llm,
        })
    }

    /// The model choice: the environment, with the file's `[llm]` values where it says nothing
    /// (see [`Config::file_value`]).
    pub fn llm(&self) -> Result<ruleweave::LlmChoice> {
        Ok(ruleweave::LlmChoice::from_vars(|k| env(k).or_else(|| self.file_value(k)))?)
    }

    /// The file's value for the variable `k`; a provider's base URL only when the environment
    /// holds no key for that provider: where a key is sent is never a file in the root's to say.
    fn file_value(&self, k: &str) -> Option<String> {
        let value = self.llm.iter().find(|(var, _)| var == k).map(|(_, v)| v.clone())?;
        match k.strip_suffix("_BASE_URL") {
            Some(provider) if env(&format!("{provider}_API_KEY")).is_some() => None,
            _ => Some(value),
        }
    }

    /// What the file says that is not used, and why: base URLs for providers whose key is set.
    pub fn ignored(&self) -> Vec<String> {
        self.llm
            .iter()
            .filter_map(|(var, url)| {
                let provider = var.strip_suffix("_BASE_URL")?;
                let key = format!("{provider}_API_KEY");
                env(&key).is_some().then(|| {
                    format!(
                        "ruleweave.toml sends {provider} to {url}, but {key} is set: a file in the root does not \
                         choose where a key goes, so it is not used (set {var} in the environment to send it there)"
                    )
                })
            })
            .collect()
    }

    /// Where each key in the environment is sent: `OPENAI_API_KEY → https://api.openai.com/v1`.
    pub fn key_endpoints(&self) -> Vec<String> {
        let mut names: Vec<String> =
            ["OPENAI", "ANTHROPIC", "TAVILY", "GROQ", "GEMINI", "OPENROUTER", "TOGETHER", "MISTRAL"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
        for (var, _) in &self.llm {
            if let Some(p) = var.strip_suffix("_BASE_URL")
                && !names.iter().any(|n| n == p)
            {
                names.push(p.to_owned());
            }
        }
        // A key may also be given in another variable (Gemini's in Google's own).
        let key_of = |p: &str| {
            let own = format!("{p}_API_KEY");
            match ruleweave::llm::key_alias(p) {
                Some(alias) if env(&own).is_none() && env(alias).is_some() => alias.to_owned(),
                _ => own,
            }
        };
        names
            .into_iter()
            .filter(|p| env(&key_of(p)).is_some())
            .map(|p| {
                let url = env(&format!("{p}_BASE_URL"))
                    .or_else(|| self.file_value(&format!("{p}_BASE_URL")))
                    .unwrap_or_else(|| default_endpoint(&p).to_owned());
                format!("{} → {url}", key_of(&p))
            })
            .collect()
    }

    /// The search engine scripts' `search()` asks: `RULEWEAVE_SEARCH`, `TAVILY_API_KEY`,
    /// `TAVILY_BASE_URL` from the environment, with the file's `[llm]` values where it says nothing.
    /// The stand-in when `RULEWEAVE_LLM=standin` asks for everything offline.
    pub fn search(&self) -> Result<ruleweave::search::SearchChoice> {
        if env("RULEWEAVE_LLM").as_deref() == Some("standin") {
            return Ok(ruleweave::search::SearchChoice::Standin);
        }
        Ok(ruleweave::search::SearchChoice::from_vars(|k| env(k).or_else(|| self.file_value(k)))?)
    }

    /// The providers profiles may name (`provider: groq`): `<NAME>_API_KEY` and `<NAME>_BASE_URL`
    /// from the environment, base URLs from `[providers.<name>]`. None when `RULEWEAVE_LLM=standin`
    /// asks for everything offline.
    pub fn named_providers(&self) -> ruleweave::llm::NamedProviders {
        if env("RULEWEAVE_LLM").as_deref() == Some("standin") {
            return ruleweave::llm::NamedProviders::none();
        }
        let file: Vec<(String, String)> =
            self.llm.iter().filter_map(|(k, _)| Some((k.clone(), self.file_value(k)?))).collect();
        ruleweave::llm::NamedProviders::from_vars(move |k| {
            env(k).or_else(|| file.iter().find(|(var, _)| var == k).map(|(_, v)| v.clone()))
        })
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

/// `250ms`, `90s`, `30m`, `24h`, `7d`, or `never`.
fn parse_duration(s: &str) -> Result<Option<Duration>> {
    let s = s.trim();
    if s == "never" {
        return Ok(None);
    }
    let bad = || anyhow::anyhow!("`{s}` is not a duration like 250ms, 90s, 30m, 24h, 7d or never");
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| bad())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" | "" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => return Err(bad()),
    };
    Ok(Some(Duration::from_millis(ms.ok_or_else(bad)?)))
}

/// A store URL without its password, for logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user = url[s + 3..at].split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// A variable of the process environment, when set and not empty.
fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

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
        Config::load_with(dir.path(), &|k| env.get(k).cloned())
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

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let c = load("[server]\ntoken = \"s3cret\"\n[store]\nurl = \"postgres://u:pw@db/x\"\n", &[]).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("pw@"), "{shown}");
    }
}

//! Named providers: a profile may say `provider: groq`, and its calls go to an OpenAI-compatible
//! endpoint of that name — `GROQ_API_KEY` and `GROQ_BASE_URL` (a few well-known names have a
//! base URL already; `gemini` also takes `GOOGLE_API_KEY`); `provider: anthropic` goes to
//! Anthropic's Messages API with `ANTHROPIC_API_KEY`. A name whose key is not set falls back to the default provider, and the
//! turn says so, so a pack written for several vendors plays on one key, or offline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Provider;
#[cfg(feature = "http-models")]
use super::{Anthropic, AnthropicConfig, ModelMap, OpenAi, OpenAiConfig, StructuredOutput};
use crate::error::{Error, ErrorKind, Result};

/// Base URLs of OpenAI-compatible vendors a profile may name without setting `<NAME>_BASE_URL`.
const KNOWN: &[(&str, &str)] = &[
    ("groq", "https://api.groq.com/openai/v1"),
    ("openai", "https://api.openai.com/v1"),
    ("openrouter", "https://openrouter.ai/api/v1"),
    ("together", "https://api.together.xyz/v1"),
    ("mistral", "https://api.mistral.ai/v1"),
    ("gemini", "https://generativelanguage.googleapis.com/v1beta/openai"),
];

/// Keys a name may also be given under: Google's own variable for Gemini.
const KEY_ALIASES: &[(&str, &str)] = &[("gemini", "GOOGLE_API_KEY")];

/// The other variable a named provider's key may be given in (`GOOGLE_API_KEY` for `gemini`).
pub fn key_alias(name: &str) -> Option<&'static str> {
    KEY_ALIASES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
}

/// How an endpoint takes a reply's JSON Schema, where it differs from OpenAI's (and
/// `<NAME>_STRUCTURED_OUTPUT` does not say): Gemini's OpenAI-compatible endpoint takes a subset
/// of JSON Schema, without the `$ref`, `$defs` and `oneOf` the packs' schemas use, so it gets
/// JSON mode and the prompt states the format.
const JSON_MODE_ONLY: &[&str] = &["gemini"];

/// Where a variable's value comes from (the environment, or a test's map).
type Vars = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A name's provider, or why there is none.
type Made = std::result::Result<Arc<dyn Provider>, String>;

/// The named providers of an engine, made on first use from the variables.
pub struct NamedProviders {
    vars: Vars,
    /// Every name asked for so far: its provider, or why there is none.
    made: Mutex<HashMap<String, Made>>,
}

impl std::fmt::Debug for NamedProviders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedProviders").finish_non_exhaustive()
    }
}

impl NamedProviders {
    /// Named providers from the process environment.
    pub fn from_env() -> Self {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Named providers from any source of variables: `<NAME>_API_KEY`, `<NAME>_BASE_URL`, and
    /// the `RULEWEAVE_LLM_*` retry and timeout settings and `RULEWEAVE_MODEL_MAP` renames.
    pub fn from_vars(var: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        NamedProviders { vars: Arc::new(var), made: Mutex::new(HashMap::new()) }
    }

    /// The same names, whose calls wait out a rate limit however often it comes
    /// (`RULEWEAVE_LLM_WAIT_OUT_RATE_LIMITS=1` unless the variables say otherwise): a lab run's,
    /// which its budget bounds, and which would rather wait than lose a game to a 429.
    pub fn waiting_out_rate_limits(self) -> Self {
        let vars = self.vars;
        NamedProviders::from_vars(move |k| match k {
            "RULEWEAVE_LLM_WAIT_OUT_RATE_LIMITS" => vars(k).or_else(|| Some("1".into())),
            _ => vars(k),
        })
    }

    /// None at all: every profile's calls go to the default provider (offline on the stand-in).
    pub fn none() -> Self {
        Self::from_vars(|_| None)
    }

    /// The provider called `name`, or why there is none (its key is not set, say).
    pub fn get(&self, name: &str) -> Made {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.entry(name.to_owned()).or_insert_with(|| self.make(name).map_err(|e| e.detail().to_owned())).clone()
    }

    #[cfg(not(feature = "http-models"))]
    fn make(&self, _name: &str) -> Result<Arc<dyn Provider>> {
        Err(super::no_http_models())
    }

    #[cfg(feature = "http-models")]
    fn make(&self, name: &str) -> Result<Arc<dyn Provider>> {
        let var = |k: &str| (self.vars)(k).filter(|v| !v.is_empty());
        if name == "anthropic" {
            // Anthropic speaks its own Messages API, with ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL.
            if var("ANTHROPIC_API_KEY").is_none() {
                return Err(Error::new(ErrorKind::Llm, "ANTHROPIC_API_KEY is not set"));
            }
            let provider: Arc<dyn Provider> = Arc::new(Anthropic::new(AnthropicConfig::from_vars(&var)?)?);
            return Ok(ModelMap::from_vars(&var)?.wrap(provider));
        }
        let prefix = name.to_ascii_uppercase().replace('-', "_");
        let key_var = format!("{prefix}_API_KEY");
        let alias = key_alias(name);
        let Some(key) = var(&key_var).or_else(|| alias.and_then(var)) else {
            let or = alias.map(|a| format!(" (nor {a})")).unwrap_or_default();
            return Err(Error::new(ErrorKind::Llm, format!("{key_var} is not set{or}")));
        };
        let base_var = format!("{prefix}_BASE_URL");
        let base_url = var(&base_var)
            .or_else(|| KNOWN.iter().find(|(n, _)| *n == name).map(|(_, url)| (*url).to_owned()))
            .ok_or_else(|| Error::new(ErrorKind::Llm, format!("{base_var} is not set")))?;
        let mut config = OpenAiConfig { api_key: Some(key), base_url, ..OpenAiConfig::from_vars(&var)? };
        config.structured_output = match StructuredOutput::from_var(&var, &format!("{prefix}_STRUCTURED_OUTPUT"))? {
            Some(how) => how,
            None if JSON_MODE_ONLY.contains(&name) => StructuredOutput::JsonObject,
            None => StructuredOutput::JsonSchema,
        };
        let provider: Arc<dyn Provider> = Arc::new(OpenAi::named(config, name)?);
        Ok(ModelMap::from_vars(&var)?.wrap(provider))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "http-models")]
    fn a_name_is_a_key_and_a_base_url() {
        let vars: HashMap<&str, &str> =
            [("GROQ_API_KEY", "gsk"), ("LOCAL_LLM_API_KEY", "x"), ("LOCAL_LLM_BASE_URL", "http://localhost:1/v1")]
                .into();
        let named = NamedProviders::from_vars(move |k| vars.get(k).map(|v| v.to_string()));
        assert_eq!(named.get("groq").unwrap().name(), "groq", "groq's base URL is known");
        assert_eq!(named.get("local-llm").unwrap().name(), "local-llm");
        assert_eq!(named.get("mistral").err().unwrap(), "MISTRAL_API_KEY is not set");
        assert_eq!(named.get("acme").err().unwrap(), "ACME_API_KEY is not set");
        assert!(NamedProviders::none().get("groq").is_err());
    }

    #[test]
    #[cfg(feature = "http-models")]
    fn gemini_takes_googles_key_and_anthropic_its_own_api() {
        let vars: HashMap<&str, &str> = [("GOOGLE_API_KEY", "g"), ("ANTHROPIC_API_KEY", "a")].into();
        let named = NamedProviders::from_vars(move |k| vars.get(k).map(|v| v.to_string()));
        assert_eq!(named.get("gemini").unwrap().name(), "gemini");
        assert_eq!(named.get("anthropic").unwrap().name(), "anthropic");
        let none = NamedProviders::none();
        assert_eq!(none.get("gemini").err().unwrap(), "GEMINI_API_KEY is not set (nor GOOGLE_API_KEY)");
        assert_eq!(none.get("anthropic").err().unwrap(), "ANTHROPIC_API_KEY is not set");
    }
}

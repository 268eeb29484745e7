//! Named providers: a profile may say `provider: groq`, and its calls go to an OpenAI-compatible
//! endpoint of that name — `GROQ_API_KEY` and `GROQ_BASE_URL` (a few well-known names have a
//! base URL already). A name whose key is not set falls back to the default provider, and the
//! turn says so, so a pack written for several vendors plays on one key, or offline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{ModelMap, OpenAi, OpenAiConfig, Provider};
use crate::error::{Error, ErrorKind, Result};

/// Base URLs of OpenAI-compatible vendors a profile may name without setting `<NAME>_BASE_URL`.
const KNOWN: &[(&str, &str)] = &[
    ("groq", "https://api.groq.com/openai/v1"),
    ("openai", "https://api.openai.com/v1"),
    ("openrouter", "https://openrouter.ai/api/v1"),
    ("together", "https://api.together.xyz/v1"),
    ("mistral", "https://api.mistral.ai/v1"),
];

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

    /// None at all: every profile's calls go to the default provider (offline on the stand-in).
    pub fn none() -> Self {
        Self::from_vars(|_| None)
    }

    /// The provider called `name`, or why there is none (its key is not set, say).
    pub fn get(&self, name: &str) -> Made {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.entry(name.to_owned()).or_insert_with(|| self.make(name).map_err(|e| e.detail().to_owned())).clone()
    }

    fn make(&self, name: &str) -> Result<Arc<dyn Provider>> {
        let var = |k: &str| (self.vars)(k).filter(|v| !v.is_empty());
        let prefix = name.to_ascii_uppercase().replace('-', "_");
        let key_var = format!("{prefix}_API_KEY");
        let Some(key) = var(&key_var) else {
            return Err(Error::new(ErrorKind::Llm, format!("{key_var} is not set")));
        };
        let base_var = format!("{prefix}_BASE_URL");
        let base_url = var(&base_var)
            .or_else(|| KNOWN.iter().find(|(n, _)| *n == name).map(|(_, url)| (*url).to_owned()))
            .ok_or_else(|| Error::new(ErrorKind::Llm, format!("{base_var} is not set")))?;
        let config = OpenAiConfig { api_key: Some(key), base_url, ..OpenAiConfig::from_vars(&var)? };
        let provider: Arc<dyn Provider> = Arc::new(OpenAi::named(config, name)?);
        Ok(ModelMap::from_vars(&var)?.wrap(provider))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
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
}

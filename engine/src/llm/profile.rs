//! A pack's model profiles: which model a call asks (fixed, or chosen by a session option) and
//! how (temperature, length, JSON mode).

use indexmap::IndexMap;
use rhai::Map;

use super::{LlmRequest, Message};
use crate::error::{Error, ErrorKind, Result};

/// An LLM profile: the model (fixed or chosen by an option) and how it is asked.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The profile's name.
    pub name: String,
    /// What the profile is for.
    pub description: String,
    pub(crate) model: ModelSpec,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Reply length limit.
    pub max_tokens: Option<u32>,
    /// Whether to ask for a JSON object.
    pub json: bool,
    /// The named provider that answers (`groq`), when not the default one.
    pub provider: Option<String>,
    /// The model the default provider is asked for when the named one is not set up.
    pub default_model: Option<String>,
    /// Other models the pack's scripts ask this profile for, allowed as its own model is.
    pub other_models: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum ModelSpec {
    Fixed(String),
    ByOption { option: String, models: IndexMap<String, String> },
}

impl Profile {
    /// Whether the profile names `model` (as its model, one of its by-option models, the model
    /// to ask when its named provider is not set up, or one of its `other_models`).
    pub(crate) fn names_model(&self, model: &str) -> bool {
        let own = match &self.model {
            ModelSpec::Fixed(m) => m == model,
            ModelSpec::ByOption { models, .. } => models.values().any(|m| m == model),
        };
        own || self.default_model.as_deref() == Some(model) || self.other_models.iter().any(|m| m == model)
    }

    /// Every model the profile names (see [`Profile::names_model`]).
    pub fn models(&self) -> Vec<String> {
        let own: Vec<String> = match &self.model {
            ModelSpec::Fixed(m) => vec![m.clone()],
            ModelSpec::ByOption { models, .. } => models.values().cloned().collect(),
        };
        own.into_iter().chain(self.default_model.clone()).chain(self.other_models.iter().cloned()).collect()
    }

    /// The model this profile uses for a session with `options`.
    pub(crate) fn model(&self, options: &Map) -> Result<&str> {
        match &self.model {
            ModelSpec::Fixed(m) => Ok(m),
            ModelSpec::ByOption { option, models } => {
                let chosen = options.get(option.as_str()).map(|v| v.to_string()).unwrap_or_default();
                models.get(&chosen).map(String::as_str).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Input,
                        format!("profile `{}` has no model for {option} = {chosen}", self.name),
                    )
                })
            }
        }
    }

    /// A request from this profile.
    pub(crate) fn request(&self, options: &Map, messages: Vec<Message>) -> Result<LlmRequest> {
        Ok(LlmRequest {
            provider: self.provider.clone(),
            default_model: self.default_model.clone(),
            profile: self.name.clone(),
            model: self.model(options)?.to_owned(),
            messages,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            json: self.json,
            schema: None,
        })
    }
}

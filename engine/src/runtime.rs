//! What sessions run with: the packs, where sessions are kept, which models answer, and who
//! watches model calls. A session holds this, not a whole engine.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use crate::error::{Error, ErrorKind, Result};
use crate::llm::{BoxFuture, LlmChoice, LlmRequest, LlmResponse, NamedProviders, Provider, TokenSink};
use crate::pace::Paced;
use crate::pack::Pack;
use crate::packs::Packs;
use crate::store::{Retention, Store};
use crate::turn::LlmObserver;

/// The narrow runtime of sessions.
pub(crate) struct Runtime {
    pub packs: Packs,
    pub store: Arc<dyn Store>,
    pub llm: LlmChoice,
    pub retention: Retention,
    /// Providers a profile may name (`provider: groq`).
    pub named: Arc<NamedProviders>,
    /// Who answers scripts' `search()`.
    pub search: crate::search::SearchChoice,
    /// The models a session may choose beyond its pack's (`None`: any).
    pub allowed_models: Option<Arc<[String]>>,
    /// The pace put on every model and search call (benches, playtests; `None`: as they come).
    pub pace: Option<Arc<crate::pace::Pace>>,
    /// Whether model calls' trace spans hold the prompts and replies.
    pub trace_content: bool,
    observers: RwLock<Arc<[LlmObserver]>>,
}

impl Runtime {
    pub(crate) fn new(
        packs: Packs,
        store: Arc<dyn Store>,
        llm: LlmChoice,
        named: NamedProviders,
        search: crate::search::SearchChoice,
        retention: Retention,
    ) -> Self {
        Runtime {
            packs,
            store,
            llm,
            retention,
            named: Arc::new(named),
            search,
            allowed_models: None,
            pace: None,
            trace_content: false,
            observers: RwLock::new(Arc::new([])),
        }
    }

    /// Refuses a state larger than a session may keep ([`Retention::max_state_bytes`]), naming the
    /// limit: checked before every checkpoint that changes the state is written (a turn, a held
    /// turn, an edit, a new session or fork).
    pub(crate) fn check_state_size(&self, state: &rhai::Dynamic) -> Result<()> {
        let most = self.retention.max_state_bytes;
        let size = crate::value::json_len(state, most);
        if size <= most {
            return Ok(());
        }
        Err(crate::Error::new(
            crate::ErrorKind::StateTooLarge,
            format!(
                "the state would take more than {most} bytes, the most a session keeps (`max_state_bytes`); nothing was kept"
            ),
        ))
    }

    /// Records `pack`'s state schema in the store, once per version and process, before a session
    /// writes a checkpoint on it (see [`PackVersions::save_schema`](crate::store::PackVersions::save_schema)).
    pub(crate) async fn record_schema(&self, pack: &Pack) -> Result<()> {
        if pack.schema_recorded.load(Ordering::Relaxed) {
            return Ok(());
        }
        // A store that keeps no schemas migrates a stored session only from the versions this
        // process has loaded.
        if let Some(versions) = self.store.versions() {
            versions.save_schema(&pack.name, &pack.version, &pack.schema.describe()).await?;
        }
        pack.schema_recorded.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The schemas recorded for `versions` of `pack` (a stored session's older versions), by
    /// version; a version with none recorded is left out.
    pub(crate) async fn recorded_schemas(
        &self,
        pack: &Pack,
        versions: Vec<String>,
    ) -> Result<HashMap<String, crate::state::Schema>> {
        let mut found = HashMap::new();
        let Some(recorded) = self.store.versions() else { return Ok(found) };
        for v in versions {
            if let Some(d) = recorded.schema(&pack.name, &v).await? {
                match crate::state::Schema::from_description(&d) {
                    Some(schema) => {
                        found.insert(v, schema);
                    }
                    None => tracing::warn!(pack = %pack.name, version = %v, "the recorded schema cannot be read"),
                }
            }
        }
        Ok(found)
    }

    /// The search engine that answers `pack`'s scripts: the engine's, or the pack's stand-in.
    pub(crate) fn search_for(&self, pack: &Pack) -> Option<Arc<dyn crate::search::Search>> {
        let search = match &self.search {
            crate::search::SearchChoice::Engine(s) => s.clone(),
            crate::search::SearchChoice::Standin => pack.search_standin.clone()?,
        };
        Some(match &self.pace {
            Some(pace) => Arc::new(Paced::new(search, pace.clone())),
            None => search,
        })
    }

    /// Adds an observer of every model call.
    pub(crate) fn on_llm_call(&self, observe: LlmObserver) {
        let mut observers = self.observers.write().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<LlmObserver> = observers.iter().cloned().collect();
        all.push(observe);
        *observers = all.into();
    }

    /// Who watches model calls.
    pub(crate) fn llm_observers(&self) -> Arc<[LlmObserver]> {
        self.observers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The provider that answers `pack`'s model calls.
    pub(crate) fn provider_for(&self, pack: &Pack) -> Arc<dyn Provider> {
        let provider = match (&self.llm, &pack.standin) {
            (LlmChoice::Provider(p), _) => p.clone(),
            (LlmChoice::Standin, Some(s)) => s.clone(),
            (LlmChoice::Standin, None) => return Arc::new(NoModel(pack.name.clone())),
            (LlmChoice::ByProfile(chosen), standin) => {
                let otherwise = standin.clone().unwrap_or_else(|| Arc::new(NoModel(pack.name.clone())));
                let paced = |p: Arc<dyn Provider>| -> Arc<dyn Provider> {
                    match &self.pace {
                        Some(pace) => Arc::new(Paced::new(p, pace.clone())),
                        None => p,
                    }
                };
                let chosen = chosen.iter().map(|(k, p)| (k.clone(), paced(p.clone()))).collect();
                return Arc::new(crate::llm::ByProfile { chosen: Arc::new(chosen), otherwise: paced(otherwise) });
            }
        };
        match &self.pace {
            Some(pace) => Arc::new(Paced::new(provider, pace.clone())),
            None => provider,
        }
    }
}

/// Answers for a pack with no stand-in when no provider is configured: every call fails, saying why.
pub(crate) struct NoModel(pub String);

impl Provider for NoModel {
    fn name(&self) -> &str {
        "none"
    }

    fn complete<'a>(&'a self, _: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(std::future::ready(Err(Error::new(
            ErrorKind::Llm,
            format!(
                "pack `{}` has no stand-in model (`standin:` in its manifest) and no provider is configured; \
                 set OPENAI_API_KEY (and OPENAI_BASE_URL for a local server) or RULEWEAVE_LLM",
                self.0
            ),
        ))))
    }
}

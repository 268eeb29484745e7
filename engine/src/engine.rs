//! The engine: where packs come from, which model answers, which native nodes exist.
//! An `Engine` is a cheap handle; clones share the same packs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::Value as Json;

use crate::error::{Error, ErrorKind, Result};
use crate::llm::{BoxFuture, LlmChoice, LlmRequest, LlmResponse, Provider, TokenSink};
use crate::native::{NativeNode, NativeNodes};
use crate::pack::{self, Pack};
use crate::session::Session;

/// Loads packs from a root directory and opens sessions on them.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    llm: LlmChoice,
    natives: NativeNodes,
    packs: RwLock<HashMap<String, Arc<Pack>>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("root", &self.inner.root).field("llm", &self.inner.llm).finish_non_exhaustive()
    }
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    root: PathBuf,
    llm: LlmChoice,
    natives: NativeNodes,
}

impl EngineBuilder {
    /// Which models answer (default: each pack's stand-in).
    pub fn llm(mut self, choice: LlmChoice) -> Self {
        self.llm = choice;
        self
    }

    /// One provider answers every pack's model calls.
    pub fn provider(self, provider: Arc<dyn Provider>) -> Self {
        self.llm(LlmChoice::Provider(provider))
    }

    /// Registers a Rust node that manifests can use as `native: <name>`.
    pub fn native_node(mut self, name: impl Into<String>, node: impl NativeNode + 'static) -> Self {
        self.natives.insert(name.into(), Arc::new(node));
        self
    }

    /// The engine.
    pub fn build(self) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                root: self.root,
                llm: self.llm,
                natives: self.natives,
                packs: RwLock::new(HashMap::new()),
            }),
        }
    }
}

impl Engine {
    /// A builder for an engine reading packs under `root` (which holds `config/`, `scripts/`,
    /// `prompts/`).
    pub fn builder(root: impl Into<PathBuf>) -> EngineBuilder {
        EngineBuilder { root: root.into(), llm: LlmChoice::Standin, natives: NativeNodes::default() }
    }

    /// The directory packs are read from.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Which models answer.
    pub fn llm(&self) -> &LlmChoice {
        &self.inner.llm
    }

    pub(crate) fn natives(&self) -> &NativeNodes {
        &self.inner.natives
    }

    /// The names of every pack under the root (`config/*.yaml`), sorted.
    pub fn pack_names(&self) -> Result<Vec<String>> {
        let dir = self.inner.root.join("config");
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot list {}: {e}", dir.display())))?;
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let p = e.path();
                let yaml = p.extension().is_some_and(|x| x == "yaml");
                yaml.then(|| p.file_stem().map(|s| s.to_string_lossy().into_owned())).flatten()
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// The pack `name`, loading it on first use.
    pub fn pack(&self, name: &str) -> Result<Arc<Pack>> {
        if let Some(p) = self.inner.packs.read().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(p.clone());
        }
        self.load(name)
    }

    /// Loads (or reloads) the pack `name` from disk and makes it the current version.
    pub fn load(&self, name: &str) -> Result<Arc<Pack>> {
        if !is_pack_name(name) {
            return Err(Error::new(ErrorKind::NotFound, format!("`{name}` is not a pack name")));
        }
        let natives = &self.inner.natives;
        let pack = Arc::new(pack::load(&self.inner.root, name, &|n| natives.contains(n))?);
        self.inner.packs.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_owned(), pack.clone());
        Ok(pack)
    }

    /// Loads every pack, returning each one's result (for `check`).
    pub fn load_all(&self) -> Result<Vec<(String, Result<Arc<Pack>>)>> {
        Ok(self.pack_names()?.into_iter().map(|n| (n.clone(), self.load(&n))).collect())
    }

    /// Opens a session of `pack` with `options` (a JSON map; missing options take defaults).
    pub async fn open(&self, pack: &str, options: &serde_json::Map<String, Json>) -> Result<Session> {
        self.open_with_id(pack, options, None).await
    }

    /// [`Engine::open`] with a chosen session id (the id also seeds the session's randomness).
    pub async fn open_with_id(
        &self,
        pack: &str,
        options: &serde_json::Map<String, Json>,
        id: Option<String>,
    ) -> Result<Session> {
        let pack = self.pack(pack)?;
        let options = pack.resolve_options(options)?;
        Session::open(self.clone(), pack, options, id).await
    }

    /// The provider that answers `pack`'s model calls.
    pub(crate) fn provider_for(&self, pack: &Pack) -> Arc<dyn Provider> {
        match (&self.inner.llm, &pack.standin) {
            (LlmChoice::Provider(p), _) => p.clone(),
            (LlmChoice::Standin, Some(s)) => s.clone(),
            (LlmChoice::Standin, None) => Arc::new(NoModel(pack.name.clone())),
        }
    }
}

/// Whether `name` can be a pack name (a file stem without path separators).
fn is_pack_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Answers for a pack with no stand-in when no provider is configured: every call fails, saying why.
struct NoModel(String);

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

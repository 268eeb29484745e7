//! The engine: where packs come from, which model answers, which native nodes exist.
//! An `Engine` is a cheap handle; clones share the same packs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value as Json;

use crate::error::{Error, ErrorKind, Result};
use crate::llm::{BoxFuture, LlmChoice, LlmRequest, LlmResponse, Provider, TokenSink};
use crate::native::{NativeNode, NativeNodes};
use crate::pack::{self, Pack};
use crate::reload::{PackEvent, PackStatus, ReloadStatus};
use crate::session::Session;
use crate::store::{CheckpointInfo, MemoryStore, Retention, SessionInfo, Store};

/// Sees every model call: the pack that made it and its `llm` event.
pub type LlmObserver = Arc<dyn Fn(&str, &crate::event::LlmEvent) + Send + Sync>;

/// A session kept live in the engine, shared by whoever runs its turns (one at a time).
pub type LiveSession = Arc<tokio::sync::Mutex<Session>>;

/// How many sessions the engine keeps loaded before it lets idle ones go.
const LIVE_SESSIONS: usize = 10_000;

/// Loads packs from a root directory and opens sessions on them.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    root: PathBuf,
    llm: LlmChoice,
    natives: NativeNodes,
    packs: RwLock<HashMap<String, Slot>>,
    /// Held while a pack rebuilds, so two saves in a row swap in in the order they were made.
    rebuilding: Mutex<()>,
    events: tokio::sync::broadcast::Sender<PackEvent>,
    store: Arc<dyn Store>,
    retention: Retention,
    live: Mutex<HashMap<String, LiveSession>>,
    observers: RwLock<Arc<[LlmObserver]>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("root", &self.inner.root).field("llm", &self.inner.llm).finish_non_exhaustive()
    }
}

/// One pack's place in the engine: the version serving and the newest refusal.
#[derive(Default)]
struct Slot {
    pack: Option<Arc<Pack>>,
    error: Option<Error>,
    reloads: u64,
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    root: PathBuf,
    llm: LlmChoice,
    natives: NativeNodes,
    store: Option<Arc<dyn Store>>,
    retention: Retention,
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

    /// Registers a Rust scorer that selectors can use as `native: <name>` (the twin of a
    /// scripted scorer, or one that only exists in Rust).
    pub fn native_scorer(mut self, name: impl Into<String>, scorer: impl crate::NativeScorer + 'static) -> Self {
        self.natives.insert_scorer(name.into(), Arc::new(scorer));
        self
    }

    /// Where sessions are kept (default: in memory; see [`crate::store::open`]).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// How much of each session's past is kept.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
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
                rebuilding: Mutex::new(()),
                events: tokio::sync::broadcast::channel(256).0,
                store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
                retention: self.retention,
                live: Mutex::new(HashMap::new()),
                observers: RwLock::new(Arc::new([])),
            }),
        }
    }
}

impl Engine {
    /// A builder for an engine reading packs under `root` (which holds `config/`, `scripts/`,
    /// `prompts/`).
    pub fn builder(root: impl Into<PathBuf>) -> EngineBuilder {
        EngineBuilder {
            root: root.into(),
            llm: LlmChoice::Standin,
            natives: NativeNodes::default(),
            store: None,
            retention: Retention::default(),
        }
    }

    /// Calls `observe` with the pack and the `llm` event of every model call from now on, whatever
    /// becomes of its turn (a turn that fails still made, and paid for, its calls): for metrics
    /// and cost accounting.
    pub fn on_llm_call(&self, observe: impl Fn(&str, &crate::event::LlmEvent) + Send + Sync + 'static) {
        let mut observers = self.inner.observers.write().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<LlmObserver> = observers.iter().cloned().collect();
        all.push(Arc::new(observe));
        *observers = all.into();
    }

    /// Who watches model calls.
    pub(crate) fn llm_observers(&self) -> Arc<[LlmObserver]> {
        self.inner.observers.read().unwrap_or_else(|p| p.into_inner()).clone()
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

    /// Where sessions are kept.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// How much of each session's past is kept.
    pub fn retention(&self) -> Retention {
        self.inner.retention
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

    /// The pack `name` at its current version, loading it on first use.
    pub fn pack(&self, name: &str) -> Result<Arc<Pack>> {
        if let Some(p) = self.current(name) {
            return Ok(p);
        }
        self.load(name)
    }

    /// Whether `name` is a pack of this engine: one it loaded (or tried to), or one whose manifest
    /// is under the root. What a client names is not a pack until this says so.
    pub fn has_pack(&self, name: &str) -> bool {
        is_pack_name(name)
            && (self.inner.packs.read().unwrap_or_else(|e| e.into_inner()).contains_key(name)
                || self.inner.root.join("config").join(format!("{name}.yaml")).is_file())
    }

    /// The version of `name` serving now, if it ever loaded.
    pub(crate) fn current(&self, name: &str) -> Option<Arc<Pack>> {
        self.inner.packs.read().unwrap_or_else(|e| e.into_inner()).get(name).and_then(|s| s.pack.clone())
    }

    /// Loads (or reloads) the pack `name` from disk and makes it the current version. When the
    /// files do not validate, the error is returned and kept for [`Engine::pack_status`], and the
    /// version that served before (if any) goes on serving.
    pub fn load(&self, name: &str) -> Result<Arc<Pack>> {
        self.rebuild(name, Vec::new()).0
    }

    /// Rebuilds `name` off to the side and swaps it in when it validates; reports what happened
    /// when a version was already serving or a watcher noticed the change (`files`).
    pub(crate) fn reload(&self, name: &str, files: Vec<String>) -> Option<PackEvent> {
        self.rebuild(name, files).1
    }

    fn rebuild(&self, name: &str, files: Vec<String>) -> (Result<Arc<Pack>>, Option<PackEvent>) {
        if !is_pack_name(name) {
            let shown: String = name.chars().take(PACK_NAME_MAX).collect();
            let more = if shown.len() < name.len() { "…" } else { "" };
            let why =
                format!("`{shown}{more}` is not a pack name (letters, digits, `_` and `-`, at most {PACK_NAME_MAX})");
            return (Err(Error::new(ErrorKind::NotFound, why)), None);
        }
        let _one_at_a_time = self.inner.rebuilding.lock().unwrap_or_else(|p| p.into_inner());
        let started = std::time::Instant::now();
        let previous = self.current(name);
        let natives = &self.inner.natives;
        let built = pack::load(&self.inner.root, name, natives).and_then(|new| match &previous {
            Some(old) => crate::reload::compatible(old, &new).map(|()| new),
            None => Ok(new),
        });
        let noticed = previous.is_some() || !files.is_empty();
        if let Err(e) = &built
            && e.kind() == ErrorKind::NotFound
            && previous.is_none()
            && files.is_empty()
        {
            // No such pack: nothing to keep (a client naming packs at random must not grow this).
            return (Err(e.clone()), None);
        }
        let mut packs = self.inner.packs.write().unwrap_or_else(|e| e.into_inner());
        let slot = packs.entry(name.to_owned()).or_default();
        let (result, status, diagnostics) = match built {
            Ok(new) => {
                let was_refused = slot.error.take().is_some();
                match previous.as_ref().filter(|old| old.version == new.version) {
                    // The same files (an editor touched them): nothing to swap, nothing to say,
                    // unless they put back the serving version after a refused edit.
                    Some(old) if !was_refused => return (Ok(old.clone()), None),
                    Some(old) => (Ok(old.clone()), ReloadStatus::Reloaded, Vec::new()),
                    None => {
                        let new = Arc::new(new);
                        slot.pack = Some(new.clone());
                        if previous.is_some() {
                            slot.reloads += 1;
                        }
                        (Ok(new), ReloadStatus::Reloaded, Vec::new())
                    }
                }
            }
            Err(e) => {
                if slot.error.as_ref() == Some(&e) {
                    // Refused again for the same reasons (one save seen twice): said already.
                    return (Err(e), None);
                }
                slot.error = Some(e.clone());
                let diagnostics = e.all().map(Error::alone).collect();
                (Err(e), ReloadStatus::Rejected, diagnostics)
            }
        };
        let version = slot.pack.as_ref().map(|p| p.version.clone());
        drop(packs);
        let event = noticed.then(|| PackEvent {
            pack: name.to_owned(),
            status,
            version,
            previous: previous.map(|p| p.version.clone()),
            diagnostics,
            files,
            at: crate::vocab::now_ms(),
            took_us: started.elapsed().as_micros() as u64,
        });
        if let Some(e) = &event {
            // Nobody listening is fine: the event is also in the pack's status.
            let _ = self.inner.events.send(e.clone());
        }
        (result, event)
    }

    /// Every pack's standing, sorted by name: the packs under the root and any the engine has
    /// loaded, each with the version serving and the newest refusal.
    pub fn pack_status(&self) -> Vec<PackStatus> {
        let mut names = self.pack_names().unwrap_or_default();
        let packs = self.inner.packs.read().unwrap_or_else(|e| e.into_inner());
        names.extend(packs.keys().cloned());
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|name| {
                let slot = packs.get(&name);
                PackStatus {
                    pack: slot.and_then(|s| s.pack.clone()),
                    error: slot.and_then(|s| s.error.clone()),
                    reloads: slot.map_or(0, |s| s.reloads),
                    name,
                }
            })
            .collect()
    }

    /// Hears of every reload from now on: versions swapped in and edits refused.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<PackEvent> {
        self.inner.events.subscribe()
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
        Session::open(self.clone(), pack, options, id, None).await
    }

    /// Loads a session from the store, on the pack's current version.
    pub async fn resume(&self, id: &str) -> Result<Session> {
        let stored = self.inner.store.load(id).await?.ok_or_else(|| no_session(id))?;
        let pack = self.pack(&stored.info.pack)?;
        Session::from_stored(self.clone(), pack, stored)
    }

    /// The session `id`, kept live in the engine so the next turn needs no load; turns on it are
    /// run one at a time by locking it.
    pub async fn session(&self, id: &str) -> Result<LiveSession> {
        if let Some(s) = self.live().get(id) {
            return Ok(s.clone());
        }
        let session = self.resume(id).await?;
        Ok(self.keep(session))
    }

    /// Keeps `session` live in the engine (see [`Engine::session`]) and returns it.
    pub fn keep(&self, session: Session) -> LiveSession {
        let mut live = self.live();
        if live.len() >= LIVE_SESSIONS {
            // Let idle sessions go: they reload from the store when next used.
            live.retain(|_, s| Arc::strong_count(s) > 1 || s.try_lock().is_err());
        }
        let id = session.id().to_owned();
        live.entry(id).or_insert_with(|| Arc::new(tokio::sync::Mutex::new(session))).clone()
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveSession>> {
        self.inner.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session from checkpoint `seq` of session `id` (time travel): the state as it was
    /// after that turn, the same options, a new id and its own randomness.
    pub async fn fork(&self, id: &str, seq: u64) -> Result<Session> {
        let history = self.inner.store.history(id, seq).await?.ok_or_else(|| no_session(id))?;
        let reached = history.after.last().map_or(0, |c| c.seq);
        if reached != seq {
            return Err(Error::new(ErrorKind::NotFound, format!("session {id} has no checkpoint {seq}")));
        }
        if history.after.last().is_some_and(|c| c.kind == crate::store::CheckpointKind::Step) {
            return Err(Error::input(format!(
                "checkpoint {seq} is in the middle of a turn; fork from a turn's checkpoint"
            )));
        }
        let options = history.info.options.as_object().cloned().unwrap_or_default();
        let pack = self.pack(&history.info.pack)?;
        let options = pack.resolve_options(&options)?;
        let at = Session::from_stored(self.clone(), pack.clone(), history)?;
        let fork = crate::session::Fork { from: id.to_owned(), seq, turns: at.turns, state: at.state.clone() };
        Session::open(self.clone(), pack, options, None, Some(fork)).await
    }

    /// The state after each turn of session `id`, as its checkpoints record it, oldest first,
    /// with the turn's number: states from real sessions, for benchmarks and replays.
    pub async fn turn_states(&self, id: &str) -> Result<Vec<(u64, Json)>> {
        let mut out = Vec::new();
        for c in self.checkpoints(id).await? {
            if c.kind != crate::store::CheckpointKind::Turn {
                continue;
            }
            let history = self.inner.store.history(id, c.seq).await?.ok_or_else(|| no_session(id))?;
            let pack = self.pack(&history.info.pack)?;
            out.push((c.turn, Session::from_stored(self.clone(), pack, history)?.state()));
        }
        Ok(out)
    }

    /// What the store knows of session `id`.
    pub async fn info(&self, id: &str) -> Result<SessionInfo> {
        self.inner.store.info(id).await?.ok_or_else(|| no_session(id))
    }

    /// The checkpoints of session `id`, oldest first.
    pub async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointInfo>> {
        self.info(id).await?;
        self.inner.store.checkpoints(id).await
    }

    /// Deletes session `id` and its checkpoints.
    pub async fn delete(&self, id: &str) -> Result<()> {
        self.live().remove(id);
        if self.inner.store.delete(id).await? { Ok(()) } else { Err(no_session(id)) }
    }

    /// Deletes the sessions that finished longer ago than the retention allows; returns how many.
    pub async fn expire_finished(&self) -> Result<u64> {
        let Some(after) = self.inner.retention.expire_finished_after else { return Ok(0) };
        let before = crate::vocab::now_ms() - after.as_millis() as i64;
        let n = self.inner.store.expire(before).await?;
        if n > 0 {
            // Let expired sessions go from memory too: the store no longer has them.
            let ids: Vec<String> = self.live().keys().cloned().collect();
            for id in ids {
                if self.inner.store.info(&id).await?.is_none() {
                    self.live().remove(&id);
                }
            }
        }
        Ok(n)
    }

    /// Finishes every long turn a crash interrupted (for a host starting up); returns how many.
    pub async fn finish_interrupted(&self) -> Result<usize> {
        let mut n = 0;
        for id in self.inner.store.pending().await? {
            let live = self.session(&id).await?;
            let mut session = live.lock().await;
            match session.finish_interrupted().await {
                Ok(Some(_)) => n += 1,
                Ok(None) => {}
                Err(e) => tracing::error!(session = %id, "cannot finish an interrupted turn: {e}"),
            }
        }
        Ok(n)
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

fn no_session(id: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("there is no session {id}"))
}

/// The longest pack name.
const PACK_NAME_MAX: usize = 64;

/// Whether `name` can be a pack name (a short file stem without path separators).
pub(crate) fn is_pack_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= PACK_NAME_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
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

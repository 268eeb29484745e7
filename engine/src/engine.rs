//! The engine: where packs come from, which model answers, which native nodes exist.
//! An `Engine` is a cheap handle; clones share the same packs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;

use crate::error::{Error, ErrorKind, Result};
use crate::llm::{LlmChoice, NamedProviders, Provider};
use crate::native::{NativeNode, NativeNodes};
use crate::pack::Pack;
use crate::packs::Packs;
use crate::runtime::Runtime;
use crate::session::{LiveSession, OpenAs, Session, VariantChoice, Who};
use crate::store::{CheckpointInfo, MemoryStore, Retention, SessionInfo, Store};

pub use crate::turn::LlmObserver;

/// How many sessions the engine keeps loaded before it lets idle ones go.
const LIVE_SESSIONS: usize = 10_000;

/// Loads packs from a root directory and opens sessions on them.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<Runtime>,
    live: Mutex<HashMap<String, LiveSession>>,
    /// When each lobby round is due for another try, and which this engine's sweeps are closing.
    rounds: crate::session::RoundCloser,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("root", &self.root()).field("llm", self.llm()).finish_non_exhaustive()
    }
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    root: PathBuf,
    llm: LlmChoice,
    named: NamedProviders,
    search: crate::search::SearchChoice,
    natives: NativeNodes,
    store: Option<Arc<dyn Store>>,
    retention: Retention,
    allowed_models: Option<Arc<[String]>>,
    pace: Option<Arc<crate::pace::Pace>>,
    trace_content: bool,
    params: HashMap<String, crate::pack::ParamValues>,
}

impl EngineBuilder {
    /// Sets numbers of `pack`'s `params:` in place of its manifest's, by dotted path
    /// (`thresholds.easy` → 55), without editing a file: each must be a number the manifest has,
    /// an integer where it has one, within its `param_bounds:`, or loading the pack is an input
    /// error naming it. The pack's version then covers the values, too.
    pub fn params(mut self, pack: &str, values: crate::pack::ParamValues) -> Self {
        self.params.entry(pack.to_owned()).or_default().extend(values);
        self
    }

    /// Limits the models a session may choose beyond the ones its pack names (a script's
    /// `llm_chat(..., #{model: m})`, fed by an option like the debate's `pro_model`) to `models`;
    /// every model a pack's profiles name is always allowed. Unset (the default), a session may
    /// choose any model: right for a person at their own terminal, not for a server whose clients
    /// choose options while the operator's key pays.
    pub fn allowed_models(mut self, models: Vec<String>) -> Self {
        self.allowed_models = Some(models.into());
        self
    }

    /// Which models answer (default: each pack's stand-in).
    pub fn llm(mut self, choice: LlmChoice) -> Self {
        self.llm = choice;
        self
    }

    /// The providers profiles may name (`provider: groq`); without, every call goes to the
    /// default provider ([`NamedProviders::from_env`] reads `<NAME>_API_KEY`, `<NAME>_BASE_URL`).
    pub fn named_providers(mut self, named: NamedProviders) -> Self {
        self.named = named;
        self
    }

    /// Who answers scripts' `search()` (default: each pack's `search_standin:`;
    /// [`crate::search::SearchChoice::from_env`] reads `RULEWEAVE_SEARCH` and `TAVILY_API_KEY`).
    pub fn search(mut self, search: crate::search::SearchChoice) -> Self {
        self.search = search;
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

    /// Registers a Rust focus generator that strategies can name as `focus_native: <name>` (the
    /// twin of their scripted `focus:` generator).
    pub fn native_focus(mut self, name: impl Into<String>, focus: impl crate::NativeFocus + 'static) -> Self {
        self.natives.insert_focus(name.into(), Arc::new(focus));
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

    /// Puts `pace` on every model and search call: each answers after a remote model's time to
    /// first token and tokens at a rate (see [`crate::pace`]). Calls to a provider a profile
    /// names (`provider: groq`) keep their own time.
    pub fn pace(mut self, pace: crate::pace::Pace) -> Self {
        self.pace = Some(Arc::new(pace));
        self
    }

    /// Puts each model call's prompt and reply on its trace span (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`). Off by default: prompts may hold players' words, and a trace
    /// store is not where an operator expects them (the host turns it on with
    /// `RULEWEAVE_TRACE_CONTENT=1`).
    pub fn trace_content(mut self, on: bool) -> Self {
        self.trace_content = on;
        self
    }

    /// The engine.
    pub fn build(mut self) -> Engine {
        let packs = Packs::new(self.root.clone(), std::mem::take(&mut self.natives), std::mem::take(&mut self.params));
        self.build_on(packs)
    }

    /// The engine, on `packs` already loaded (a replay's engine shares the serving engine's
    /// packs: the version serving, not a reload from disk).
    pub fn build_on(self, packs: Packs) -> Engine {
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        let mut runtime = Runtime::new(packs, store, self.llm, self.named, self.search, self.retention);
        runtime.allowed_models = self.allowed_models;
        runtime.pace = self.pace;
        runtime.trace_content = self.trace_content;
        let runtime = Arc::new(runtime);
        Engine { inner: Arc::new(Inner { runtime, live: Mutex::default(), rounds: Default::default() }) }
    }
}

impl Engine {
    /// A builder for an engine reading packs under `root` (which holds `config/`, `scripts/`,
    /// `prompts/`).
    pub fn builder(root: impl Into<PathBuf>) -> EngineBuilder {
        EngineBuilder {
            root: root.into(),
            llm: LlmChoice::Standin,
            named: NamedProviders::none(),
            search: crate::search::SearchChoice::Standin,
            natives: NativeNodes::default(),
            store: None,
            retention: Retention::default(),
            allowed_models: None,
            pace: None,
            trace_content: false,
            params: HashMap::new(),
        }
    }

    /// Another engine on the same packs, models, search and store (not the observers given to
    /// [`Engine::on_llm_call`]), with `values` set for `pack`
    /// in place of its manifest's numbers (see [`EngineBuilder::params`]): another copy of the
    /// rules, as `--param`, simulate's sweeps and `tune` play them. The values are checked as
    /// the pack loads: an input error names the first that does not fit.
    pub fn with_params(&self, pack: &str, values: crate::pack::ParamValues) -> Result<Engine> {
        let rt = self.rt();
        let mut runtime = Runtime::new(
            rt.packs.with_params(pack, values),
            rt.store.clone(),
            rt.llm.clone(),
            NamedProviders::none(),
            rt.search.clone(),
            rt.retention,
        );
        runtime.named = rt.named.clone();
        runtime.allowed_models = rt.allowed_models.clone();
        runtime.pace = rt.pace.clone();
        runtime.trace_content = rt.trace_content;
        let engine = Engine {
            inner: Arc::new(Inner { runtime: Arc::new(runtime), live: Mutex::default(), rounds: Default::default() }),
        };
        engine.packs().get(pack)?;
        Ok(engine)
    }

    /// Calls `observe` with the pack and the `llm` event of every model call from now on, whatever
    /// becomes of its turn (a turn that fails still made, and paid for, its calls): for metrics
    /// and cost accounting.
    pub fn on_llm_call(&self, observe: impl Fn(&str, &crate::event::LlmEvent) + Send + Sync + 'static) {
        self.rt().on_llm_call(Arc::new(observe));
    }

    pub(crate) fn rt(&self) -> &Arc<Runtime> {
        &self.inner.runtime
    }

    /// The provider that answers `pack`'s model calls.
    pub fn provider_for(&self, pack: &Pack) -> Arc<dyn Provider> {
        self.rt().provider_for(pack)
    }

    /// The search engine that answers `pack`'s scripts' `search()`: the engine's, or the
    /// pack's stand-in (none when the pack has none).
    pub fn search_for(&self, pack: &Pack) -> Option<Arc<dyn crate::search::Search>> {
        self.rt().search_for(pack)
    }

    /// The packs: loading, versions, reload, status.
    pub fn packs(&self) -> &Packs {
        &self.rt().packs
    }

    /// The directory packs are read from.
    pub fn root(&self) -> &Path {
        self.packs().root()
    }

    /// Which models answer.
    pub fn llm(&self) -> &LlmChoice {
        &self.rt().llm
    }

    pub(crate) fn natives(&self) -> &NativeNodes {
        self.packs().natives()
    }

    /// Where sessions are kept.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.rt().store
    }

    /// How much of each session's past is kept.
    pub fn retention(&self) -> Retention {
        self.rt().retention
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
        self.open_as(pack, options, OpenAs::with_id(id)).await
    }

    /// [`Engine::open`] for a player, or in a variant, as `how` says: a pack with an experiment
    /// gives the session the variant its player's key (else its id) falls in, and its rules.
    pub async fn open_as(&self, pack: &str, options: &serde_json::Map<String, Json>, how: OpenAs) -> Result<Session> {
        if self.packs().get(pack)?.init.is_none() {
            return self.open_here_as(pack, options, how).await;
        }
        // The pack's `init` script runs on the engine's threads, as a turn does.
        let (engine, pack, options) = (self.clone(), pack.to_owned(), options.clone());
        crate::blocking::run_cancellable(move || async move { engine.open_here_as(&pack, &options, how).await }).await?
    }

    /// [`Engine::open_with_id`] on the calling thread, which may block, on the pack's own rules
    /// (no variant of its experiment: a simulated game's).
    pub async fn open_here(
        &self,
        pack: &str,
        options: &serde_json::Map<String, Json>,
        id: Option<String>,
    ) -> Result<Session> {
        self.open_here_as(pack, options, OpenAs { id, variant: VariantChoice::Rules, ..OpenAs::default() }).await
    }

    /// [`Engine::open_as`] on the calling thread, which may block.
    pub async fn open_here_as(
        &self,
        pack: &str,
        options: &serde_json::Map<String, Json>,
        how: OpenAs,
    ) -> Result<Session> {
        let (id, who, pack) = how.resolve(self.packs(), pack)?;
        let options = pack.resolve_options(options)?;
        Session::open(self.rt().clone(), pack, options, Some(id), None, who).await
    }

    /// Opens a session of `pack` that starts from `state` with `turns` done, as a fork of session
    /// `from` does (a replay of a fork starts where the fork did). The state is restored as a
    /// stored one is: fields the pack has since dropped are left out, new ones take defaults.
    pub async fn open_from(
        &self,
        pack: &str,
        options: &serde_json::Map<String, Json>,
        how: OpenAs,
        from: &str,
        state: &Json,
        turns: u64,
    ) -> Result<Session> {
        let (id, who, pack) = how.resolve(self.packs(), pack)?;
        let options = pack.resolve_options(options)?;
        let state = pack.schema.restore(state);
        let fork = crate::session::Fork { from: from.to_owned(), seq: 0, turns, state, edited_turn: None };
        Session::open(self.rt().clone(), pack, options, Some(id), Some(fork), who).await
    }

    /// Loads a session from the store, on the pack's current version.
    pub async fn resume(&self, id: &str) -> Result<Session> {
        let stored = self.rt().store.load(id).await?.ok_or_else(|| no_session(id))?;
        let pack = self.packs().variant(&stored.info.pack, stored.info.variant.as_deref())?;
        let rt = self.rt().clone();
        if !stored.moves_from(&pack.version) {
            return Session::load(rt, pack, stored).await;
        }
        // A session moving onto a new version of its pack runs the pack's `migrate` script: on the
        // engine's threads, as a turn does.
        crate::blocking::run_cancellable(move || Session::load(rt, pack, stored)).await?
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
            live.retain(|_, s| !s.is_idle());
        }
        let id = session.id().to_owned();
        live.entry(id).or_insert_with(|| LiveSession::new(session)).clone()
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveSession>> {
        self.inner.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session from checkpoint `seq` of session `id` (time travel): the state as it was
    /// after that turn, the same options, a new id and its own randomness.
    /// Played on the engine's threads, as a turn is (a fork may run the pack's `init` and
    /// `migrate` scripts).
    pub async fn fork(&self, id: &str, seq: u64) -> Result<Session> {
        self.fork_with(id, seq, serde_json::Map::new()).await
    }

    /// [`Engine::fork`] with state fields changed (`set`, each value replacing the field's, checked
    /// as [`Session::edit`] checks them): the fork starts from that state; the session it leaves
    /// is untouched.
    pub async fn fork_with(
        &self,
        id: &str,
        seq: u64,
        set: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Session> {
        let (engine, id) = (self.clone(), id.to_owned());
        crate::blocking::run_cancellable(move || async move { engine.fork_here(&id, seq, set).await }).await?
    }

    async fn fork_here(&self, id: &str, seq: u64, set: serde_json::Map<String, serde_json::Value>) -> Result<Session> {
        let history = self.rt().store.history(id, seq).await?.ok_or_else(|| no_session(id))?;
        let reached = history.after.last().map_or(0, |c| c.seq);
        if reached != seq {
            return Err(Error::new(ErrorKind::NotFound, format!("session {id} has no checkpoint {seq}")));
        }
        let options = history.info.options.as_object().cloned().unwrap_or_default();
        // A fork plays its session's variant, for its session's player.
        let who = Who { variant: history.info.variant.clone(), player: history.info.player.clone(), counted: None };
        let pack = self.packs().variant(&history.info.pack, who.variant.as_deref())?;
        let options = pack.resolve_options(&options)?;
        let set = if set.is_empty() { rhai::Map::new() } else { pack.schema.checked_edit(&set)? };
        // Edited by then: an edit before the checkpoint, what the parent inherited when it was
        // made (its own start), or this fork's patch.
        let start_turn = history.after.first().map_or(0, |c| c.turn);
        let inherited = history.info.edited_turn.filter(|t| *t <= start_turn);
        let edited_before =
            history.after.iter().filter(|c| c.kind == crate::store::CheckpointKind::Edit).map(|c| c.turn).min();
        let mut at = Session::load(self.rt().clone(), pack.clone(), history).await?;
        if at.in_turn() {
            return Err(Error::input(format!(
                "checkpoint {seq} is in the middle of a turn; fork from a turn's checkpoint"
            )));
        }
        if !set.is_empty() {
            pack.schema.check_items(&at.state, &set)?;
            at.state = crate::state::copy(&at.state)?;
            pack.schema.overwrite(&mut at.state, &set)?;
        }
        let patched = (!set.is_empty()).then_some(at.turns);
        let edited_turn = [inherited, edited_before, patched].into_iter().flatten().min();
        let fork = crate::session::Fork { from: id.to_owned(), seq, turns: at.turns, state: at.state, edited_turn };
        Session::open(self.rt().clone(), pack, options, None, Some(fork), who).await
    }

    /// What the store knows of session `id`.
    pub async fn info(&self, id: &str) -> Result<SessionInfo> {
        self.rt().store.info(id).await?.ok_or_else(|| no_session(id))
    }

    /// The checkpoints of session `id`, oldest first.
    pub async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointInfo>> {
        self.info(id).await?;
        self.rt().store.checkpoints(id).await
    }

    /// Deletes session `id` and its checkpoints.
    pub async fn delete(&self, id: &str) -> Result<()> {
        self.live().remove(id);
        if self.rt().store.delete(id).await? { Ok(()) } else { Err(no_session(id)) }
    }

    /// Erases every session opened for `player` (forks of them too, which keep their player) and
    /// the outcome rows of their live games: how many of each.
    pub async fn erase_player(&self, player: &str) -> Result<(u64, u64)> {
        crate::session::check_player(player)?;
        let hash = crate::session::player_hash(player);
        let store = &*self.rt().store;
        let index = crate::store::needs(store, store.index(), "a session index")?;
        let mut sessions = 0;
        for id in index.of_player(&hash).await? {
            self.live().remove(&id);
            if store.delete(&id).await? {
                sessions += 1;
            }
        }
        let rows = match store.outcomes() {
            Some(outcomes) => outcomes.erase_player_outcomes(&hash).await?,
            None => 0,
        };
        Ok((sessions, rows))
    }

    /// Deletes the sessions that finished at least as long ago as they are kept: a pack's own
    /// `expire_finished_after` for its sessions, the engine's [`Retention`] for the others; and,
    /// when the retention says so (`expire_idle_after`), the unfinished ones nobody has played for
    /// that long. Returns how many.
    pub async fn expire_finished(&self) -> Result<u64> {
        let now = crate::vocab::now_ms();
        // Finished at least `after` ago: at or before now - after (the store's bound is exclusive).
        let before = |after: std::time::Duration| now - after.as_millis() as i64 + 1;
        let store = &*self.rt().store;
        let index = || crate::store::needs(store, store.index(), "a session index");
        let mut own = Vec::new();
        let mut n = 0;
        for name in self.packs().names()? {
            let Ok(pack) = self.packs().get(&name) else { continue };
            let Some(rule) = pack.expire_finished_after else { continue };
            if let Some(after) = rule {
                n += index()?.expire(before(after), crate::store::Expiry::Pack(&name)).await?;
            }
            own.push(name);
        }
        if let Some(after) = self.retention().expire_finished_after {
            n += index()?.expire(before(after), crate::store::Expiry::AllBut(&own)).await?;
        }
        if let Some(after) = self.retention().expire_idle_after {
            n += index()?.expire_idle(before(after)).await?;
        }
        if n > 0 {
            // Let expired sessions go from memory too: the store no longer has them.
            let ids: Vec<String> = self.live().keys().cloned().collect();
            for id in ids {
                if self.rt().store.info(&id).await?.is_none() {
                    self.live().remove(&id);
                }
            }
        }
        Ok(n)
    }

    /// Posts a player's answer (or joining or leaving) to session `id`'s lobby round, and runs
    /// the round's turn when it was the last one the round waited for (see [`Session::post`]).
    pub async fn post(&self, id: &str, post: crate::lobby::Post) -> Result<crate::Posted> {
        self.forget_close_failures(id);
        let live = self.session(id).await?;
        let mut session = live.lock().await;
        session.post(post).await
    }

    /// Closes every lobby round whose timeout has passed since its question was asked, running
    /// its turn with the answers it has (none, when nobody answered); returns the turns run.
    /// Rounds are closed several at once (at most eight), so one slow model does not hold up the
    /// other lobbies. Rounds another process closed first are skipped. A round whose turn fails is
    /// tried again after its timeout (at least 5 s), doubling each time up to 10 minutes, and
    /// after five failures in a row no more: [`Engine::close_problem`] says why, and the next
    /// answer posted tries again. A host calls this every so often (the server does, several times
    /// a second), for the packs loaded in this engine.
    pub async fn close_due_rounds(&self) -> Result<Vec<(String, Result<crate::TurnResult>)>> {
        self.close_due_rounds_at(crate::vocab::now_ms()).await
    }

    /// [`Engine::close_due_rounds`] as of `now` (unix ms): for a host keeping its own clock, and
    /// for tests that let time pass without waiting for it.
    pub async fn close_due_rounds_at(&self, now: i64) -> Result<Vec<(String, Result<crate::TurnResult>)>> {
        use futures_util::StreamExt as _;
        let rounds = &self.inner.rounds;
        let lobbies: Vec<(String, i64)> = self
            .packs()
            .loaded()
            .into_iter()
            .filter_map(|p| Some((p.name.clone(), now - p.lobby.as_ref()?.timeout.as_millis() as i64)))
            .collect();
        // A store that keeps no lobby inputs has no lobby round under way (answering fails).
        let Some(store) = self.rt().store.lobby().filter(|_| !lobbies.is_empty()) else {
            return Ok(Vec::new());
        };
        let due = rounds.due(store.open_rounds(&lobbies).await?, now);
        // Boxed as they are made: the sweep stays a future a multi-threaded runtime can run.
        // With each result, whether a breakpoint holds the session's turn (nothing to close).
        type Closing<'a> =
            futures_util::future::BoxFuture<'a, (crate::store::OpenRound, Result<Option<crate::TurnResult>>, bool)>;
        let closing: Vec<Closing<'_>> = due
            .into_iter()
            .map(|(open, claim)| -> Closing<'_> {
                Box::pin(async move {
                    let _claim = claim;
                    let result = async {
                        let live = self.session(&open.session).await?;
                        let mut session = live.lock().await;
                        let closed = session.close_due(now).await?;
                        Ok((closed, session.held_turn().is_some()))
                    }
                    .await;
                    match result {
                        Ok((closed, held)) => (open, Ok(closed), held),
                        Err(e) => (open, Err(e), false),
                    }
                })
            })
            .collect();
        let results: Vec<_> =
            futures_util::stream::iter(closing).buffer_unordered(crate::session::CLOSES_AT_ONCE).collect().await;
        let mut closed = Vec::new();
        for (open, result, held) in results {
            match result {
                // A held turn closes its round when resumed: asked again in a while, not at
                // every sweep (each takes the session's lock, which an edit of the held turn
                // would find taken).
                Ok(None) if held => rounds.later(&open.session, now + crate::session::HELD_RECHECK_MS),
                Ok(None) => {}
                Ok(Some(turn)) => {
                    rounds.closed(&open.session);
                    closed.push((open.session, Ok(turn)));
                }
                Err(e) => {
                    let timeout = self.packs().current(&open.pack).and_then(|p| p.lobby.as_ref().map(|l| l.timeout));
                    rounds.failed(&open.session, timeout, now, &e);
                    closed.push((open.session, Err(e)));
                }
            }
        }
        Ok(closed)
    }

    /// Why the sweep gave up closing session `id`'s lobby round, when it did (five failed tries in
    /// a row; in this process: another replica keeps its own count).
    pub fn close_problem(&self, id: &str) -> Option<String> {
        self.inner.rounds.problem(id)
    }

    /// A post to the lobby tries a round the sweep gave up on again (a host that posts through
    /// [`Session::post`] itself calls this first, as [`Engine::post`] does).
    pub fn forget_close_failures(&self, id: &str) {
        self.inner.rounds.forget(id);
    }

    /// Events of every session from now on: turns recorded and lobby inputs, from every process
    /// sharing the store.
    pub fn session_events(&self) -> tokio::sync::broadcast::Receiver<crate::store::SessionEvent> {
        self.rt().store.subscribe()
    }

    /// Waits until nothing this process's engines handed to their threads (turns, scripts, a
    /// lobby round a client left) is still running: for a host shutting down gracefully.
    pub async fn settled(&self) {
        crate::blocking::settled().await;
    }

    /// Finishes every long turn a crash interrupted (for a host starting up); returns how many.
    pub async fn finish_interrupted(&self) -> Result<usize> {
        let mut n = 0;
        for id in self.rt().store.pending().await? {
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
}

fn no_session(id: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("there is no session {id}"))
}

//! What every request shares: the engine, the settings, the metrics, the tasks a shutdown waits
//! for, and the server's own slots (a pack's turns, a client's streams, the batch and the job a
//! replica runs one at a time). Handlers import this; the server's `mod.rs` imports the handlers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ruleweave::Engine;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use super::error::{ApiError, Code};
use super::{Metrics, Settings, jobs, listen, sse};
use crate::tables::{Jobs, Keys, Tables};

/// What every request shares.
pub struct AppState {
    pub engine: Engine,
    pub metrics: Metrics,
    /// Turns in flight: they finish (and are recorded) even when their client has gone, and a
    /// graceful shutdown waits for them.
    pub tasks: TaskTracker,
    pub settings: Settings,
    /// When the server started, unix seconds (the models' `created`).
    pub started: u64,
    /// Each pack's turn slots ([`Settings::turns_per_pack`]).
    pub(super) slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// The event streams each client address has open ([`Settings::streams_per_client`]).
    streams: Arc<Mutex<HashMap<std::net::IpAddr, usize>>>,
    /// Held by the batch of simulated games running (one at a time).
    pub(super) simulating: Arc<Semaphore>,
    /// The job running on this replica (one at a time).
    pub(super) job: jobs::JobSlot,
    /// The job on real models running on this replica (one at a time, beside a stand-in job).
    pub(super) real_job: jobs::JobSlot,
    /// The server's keys and jobs, beside the engine's store (opened on first use).
    tables: tokio::sync::OnceCell<Option<Tables>>,
}

/// One open event stream of a client: dropped when the stream ends or its client goes.
pub struct StreamSlot {
    streams: Arc<Mutex<HashMap<std::net::IpAddr, usize>>>,
    peer: std::net::IpAddr,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let left = open.get_mut(&self.peer).map(|n| {
            *n -= 1;
            *n
        });
        if left == Some(0) {
            open.remove(&self.peer);
        }
        tracing::debug!(peer = %self.peer, open = left.unwrap_or(0), "an event stream closed");
    }
}

/// The state handlers see.
pub type Shared = Arc<AppState>;

impl AppState {
    pub fn new(engine: Engine, settings: Settings) -> Self {
        let metrics = Metrics::default();
        engine.on_llm_call(metrics.llm_counter());
        let started = sse::unix_now();
        let state = AppState {
            engine,
            metrics,
            tasks: TaskTracker::new(),
            settings,
            started,
            slots: Mutex::default(),
            streams: Arc::default(),
            simulating: Arc::new(Semaphore::new(1)),
            job: jobs::JobSlot::default(),
            real_job: jobs::JobSlot::default(),
            tables: tokio::sync::OnceCell::new(),
        };
        state.load_packs();
        state
    }

    /// Runs `work` as a task the shutdown waits for, in the current trace span: a turn played
    /// for a request stays that request's child whoever awaits it.
    pub fn spawn<F>(&self, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        use tracing::Instrument as _;
        self.tasks.spawn(work.in_current_span())
    }

    /// A slot to run a turn of `pack` in (waits while the pack's turns fill its slots).
    pub async fn turn_slot(&self, pack: &str) -> tokio::sync::OwnedSemaphorePermit {
        let slots = {
            let mut all = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            all.entry(pack.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.settings.turns_per_pack))).clone()
        };
        slots.acquire_owned().await.expect("the semaphore is never closed")
    }

    /// A slot for one more event stream of the client at `peer` (any client when the server was
    /// not reached through `listen::serve`); refused when it has `streams_per_client` open.
    pub fn stream_slot(&self, peer: Option<listen::Peer>) -> Result<Option<StreamSlot>, ApiError> {
        let Some(listen::Peer(peer)) = peer else { return Ok(None) };
        let mut open = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(peer).or_default();
        if *n >= self.settings.streams_per_client {
            return Err(ApiError::new(
                Code::TooManyStreams,
                format!(
                    "{peer} has {n} event streams open, the most one client may (streams_per_client): close one first"
                ),
            ));
        }
        *n += 1;
        Ok(Some(StreamSlot { streams: self.streams.clone(), peer }))
    }

    /// The server's tables beside the engine's store, opened (and their migrations run) on first
    /// use; `None` when the store is of a kind that keeps none.
    pub async fn tables(&self) -> ruleweave::Result<Option<&Tables>> {
        self.tables.get_or_try_init(|| Tables::open(self.engine.store())).await.map(Option::as_ref)
    }

    /// The keys, or an error that says the store keeps none.
    pub async fn keys(&self) -> ruleweave::Result<&dyn Keys> {
        let store = self.engine.store().as_ref();
        ruleweave::store::needs(store, self.tables().await?.map(|t| &*t.keys), "keys")
    }

    /// The jobs, or an error that says the store keeps none.
    pub async fn jobs(&self) -> ruleweave::Result<&dyn Jobs> {
        let store = self.engine.store().as_ref();
        ruleweave::store::needs(store, self.tables().await?.map(|t| &*t.jobs), "jobs")
    }

    /// Loads every pack (the engine keeps how each fared, for `GET /v1/packs`).
    pub fn load_packs(&self) {
        match self.engine.packs().load_all() {
            Ok(all) => {
                for (name, result) in all {
                    if let Err(e) = result {
                        tracing::error!(pack = %name, "the pack did not load: {e}");
                    }
                }
            }
            Err(e) => tracing::error!("cannot list the packs: {e}"),
        }
    }
}

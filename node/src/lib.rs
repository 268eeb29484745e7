//! The `ruleweave` npm package's native part: the engine, its sessions and turns, simulate,
//! and a model provider written in JavaScript. The package around it (`node/index.js`) gives
//! the API its JavaScript shape: option objects, `Error` subclasses with `kind` and `place`.
//!
//! Every call that plays, loads or simulates returns a promise: it runs on the addon's own
//! runtime, off Node's event loop, and resolves when it is done (`turnSync` is the exception, for
//! callers that want the turn on Node's thread).

#![allow(missing_docs)] // what JavaScript sees is documented in index.d.ts

/// Scripts and templates allocate a value at a time, and on the heap Node and V8 share the
/// system allocator spent 28% of a turn (perf on bench/bindings.js: a `turnSync` cost 584 µs, 419
/// on mimalloc). Only Rust's own allocations use it; Node's stay with Node.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use ruleweave::embed::{self, Model};
use ruleweave::llm::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// What prefixes an engine error's message on its way to `index.js`, which makes it the typed
/// `Error` subclass its `class` names: the rest is JSON ([`embed::error_body`]).
const MARK: &str = "ruleweave-error:";

fn js_err(e: ruleweave::Error) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("{MARK}{}", embed::error_body(&e)))
}

fn input_err(detail: String) -> napi::Error {
    js_err(ruleweave::Error::input(detail))
}

/// A model function of the app's: `index.js` hands it over as one that takes the request as JSON
/// text and always returns a promise of the reply's text.
type ModelFn = ThreadsafeFunction<String, Promise<String>, String, Status, false, true>;

struct JsModel {
    func: ModelFn,
}

impl embed::Callable for JsModel {
    fn language(&self) -> &str {
        "node"
    }

    fn answer(&self, request: Value) -> BoxFuture<'_, ruleweave::Result<String>> {
        Box::pin(async move {
            let failed = |e: napi::Error| ruleweave::Error::new(ruleweave::ErrorKind::Llm, e.reason);
            let promise = self.func.call_async(request.to_string()).await.map_err(failed)?;
            promise.await.map_err(failed)
        })
    }
}

#[napi]
pub struct NativeEngine {
    inner: ruleweave::Engine,
    /// The addon's runtime, whose blocking threads play the turns.
    runtime: tokio::runtime::Handle,
    /// Whether the model is a JavaScript function (which only Node's own thread can call).
    js_model: bool,
}

#[napi]
impl NativeEngine {
    /// Opens `store` and builds an engine on the packs under `root`. `model`: `"env"` (the
    /// environment's provider, or the stand-ins), `"standin"`, or `"function"` with `func`.
    #[napi(factory)]
    pub async fn create(root: String, store: String, model: String, func: Option<ModelFn>) -> Result<NativeEngine> {
        let js_model = model == "function";
        let model = match (model.as_str(), func) {
            ("function", Some(func)) => Model::Function(Arc::new(JsModel { func })),
            (named, _) => Model::named(Some(named)).map_err(js_err)?,
        };
        let options = embed::Options { root: root.into(), store, model };
        Ok(NativeEngine {
            inner: embed::open_engine(options, ruleweave_natives::register).await.map_err(js_err)?,
            runtime: tokio::runtime::Handle::current(),
            js_model,
        })
    }

    #[napi]
    pub fn packs(&self) -> Result<Vec<String>> {
        self.inner.packs().names().map_err(js_err)
    }

    #[napi]
    pub fn describe(&self, pack: String) -> Result<Value> {
        Ok(self.inner.packs().get(&pack).map_err(js_err)?.describe())
    }

    #[napi]
    pub async fn open(
        &self,
        pack: String,
        options: Value,
        id: Option<String>,
        player: Option<String>,
    ) -> Result<NativeSession> {
        let options = options_of(options)?;
        let how = ruleweave::OpenAs { id, player, ..ruleweave::OpenAs::default() };
        let session = self.inner.open_as(&pack, &options, how).await.map_err(js_err)?;
        Ok(self.session(session))
    }

    #[napi]
    pub async fn reopen(&self, id: String) -> Result<NativeSession> {
        self.inner.resume(&id).await.map(|s| self.session(s)).map_err(js_err)
    }

    #[napi]
    pub async fn simulate(
        &self,
        pack: String,
        games: u32,
        players: Vec<String>,
        seed: String,
        options: Value,
        jobs: Option<u32>,
    ) -> Result<Value> {
        let batch = ruleweave_lab::simulate::Batch {
            pack,
            games,
            players,
            seed,
            options: options_of(options)?,
            jobs: jobs.map(|j| j as usize),
            prices: BTreeMap::new(),
        };
        let engine = self.inner.clone();
        let handle = tokio::runtime::Handle::current();
        // Games run on threads of their own: the runtime's threads wait for none of them.
        let report = tokio::task::spawn_blocking(move || ruleweave_lab::simulate::run(&handle, &engine, &batch))
            .await
            .map_err(|e| napi::Error::from_reason(e.to_string()))?
            .map_err(js_err)?;
        serde_json::to_value(report).map_err(|e| napi::Error::from_reason(e.to_string()))
    }
}

impl NativeEngine {
    fn session(&self, session: ruleweave::Session) -> NativeSession {
        NativeSession {
            id: session.id().to_owned(),
            variant: session.variant().map(str::to_owned),
            live: Arc::new(Mutex::new(session)),
            runtime: self.runtime.clone(),
            js_model: self.js_model,
        }
    }
}

fn options_of(options: Value) -> Result<serde_json::Map<String, Value>> {
    embed::options_of(options, "an object").map_err(js_err)
}

#[napi]
pub struct NativeSession {
    id: String,
    variant: Option<String>,
    live: Arc<Mutex<ruleweave::Session>>,
    runtime: tokio::runtime::Handle,
    js_model: bool,
}

/// Plays one turn of `live` on the calling thread (which may block), with `runtime` entered.
fn play(
    runtime: &tokio::runtime::Handle,
    live: &Mutex<ruleweave::Session>,
    input: Value,
) -> ruleweave::Result<NativeTurn> {
    let _runtime = runtime.enter();
    let played = embed::play_here(&mut live.blocking_lock(), input)?;
    Ok(NativeTurn { result: played.result, state: played.state })
}

#[napi]
impl NativeSession {
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.id.clone()
    }

    /// The variant of its pack's experiment it plays (none when the pack has none).
    #[napi(getter)]
    pub fn variant(&self) -> Option<String> {
        self.variant.clone()
    }

    /// Plays a turn: a promise of a [`NativeTurn`], whose parts become JavaScript values when
    /// read. The turn plays on one of the runtime's blocking threads, straight from Node's
    /// thread and back: one thread woken each way, where an `async fn` here would wake a worker
    /// of the runtime that then hands the turn to the engine's threads.
    #[napi(ts_return_type = "Promise<NativeTurn>")]
    pub fn turn<'env>(&self, env: &'env Env, input: Value) -> Result<Object<'env>> {
        let (deferred, promise) = env.create_deferred::<NativeTurn, _>()?;
        let (runtime, live) = (self.runtime.clone(), self.live.clone());
        self.runtime.spawn_blocking(move || match play(&runtime, &live, input) {
            Ok(turn) => deferred.resolve(move |_| Ok(turn)),
            Err(e) => deferred.reject(js_err(e)),
        });
        Ok(promise)
    }

    /// Plays a turn on Node's own thread, blocking it until the turn ends: no thread is woken,
    /// for scripts and tools that play turn after turn. Not with a model function (it is called
    /// on this thread, which the turn holds).
    #[napi]
    pub fn turn_sync(&self, input: Value) -> Result<NativeTurn> {
        if self.js_model {
            return Err(input_err(
                "turnSync cannot wait for a model function, which runs on this thread: use await session.turn(...)"
                    .into(),
            ));
        }
        play(&self.runtime, &self.live, input).map_err(js_err)
    }

    #[napi]
    pub async fn view(&self) -> Result<Value> {
        serde_json::to_value(self.live.lock().await.view()).map_err(|e| napi::Error::from_reason(e.to_string()))
    }

    #[napi]
    pub async fn state(&self) -> Value {
        self.live.lock().await.state()
    }

    #[napi]
    pub async fn turns(&self) -> u32 {
        self.live.lock().await.turns() as u32
    }

    #[napi]
    pub async fn finished(&self) -> bool {
        self.live.lock().await.is_finished()
    }
}

/// What a turn did. Each part is made a JavaScript value when it is read (a turn's events are
/// many, and a caller often reads only what a person sees), and again at each read.
#[napi]
pub struct NativeTurn {
    result: ruleweave::TurnResult,
    state: Value,
}

fn to_json(v: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| napi::Error::from_reason(e.to_string()))
}

#[napi]
impl NativeTurn {
    /// The turn's number (1 for the first).
    #[napi(getter)]
    pub fn turn(&self) -> u32 {
        self.result.turn as u32
    }

    /// What a person sees.
    #[napi(getter)]
    pub fn display(&self) -> Result<Value> {
        to_json(&self.result.display)
    }

    /// The pack's output fields after the turn.
    #[napi(getter)]
    pub fn output(&self) -> Result<Value> {
        to_json(&self.result.output)
    }

    /// The state after the turn.
    #[napi(getter)]
    pub fn state(&self) -> Value {
        self.state.clone()
    }

    /// Everything the turn did, in order.
    #[napi(getter)]
    pub fn events(&self) -> Result<Value> {
        to_json(&self.result.events)
    }

    /// Whether the session is over now.
    #[napi(getter)]
    pub fn finished(&self) -> bool {
        self.result.finished
    }

    /// The whole turn as one plain object (what `JSON.stringify` writes).
    #[napi(js_name = "toJSON")]
    pub fn to_json_object(&self) -> Result<Value> {
        Ok(json!({
            "turn": self.result.turn,
            "display": to_json(&self.result.display)?,
            "output": to_json(&self.result.output)?,
            "state": self.state,
            "events": to_json(&self.result.events)?,
            "finished": self.result.finished,
        }))
    }
}

#[napi]
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

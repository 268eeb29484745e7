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
use ruleweave::llm::{BoxFuture, LlmRequest, LlmResponse, TokenSink, Usage};
use ruleweave::{ErrorKind, LlmChoice, Provider};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// What prefixes an engine error's message on its way to `index.js`, which makes it the typed
/// `Error` subclass: the rest is JSON (`kind`, `message`, `place`, `refusal`, `text`).
const MARK: &str = "ruleweave-error:";

fn js_err(e: ruleweave::Error) -> napi::Error {
    let place = e.origin().map(|o| json!({"file": o.file, "line": o.line, "column": o.column}));
    let body = json!({
        "kind": e.kind().code(),
        "message": e.detail(),
        "place": place,
        "refusal": e.is_refusal(),
        "text": e.to_string(),
    });
    napi::Error::new(Status::GenericFailure, format!("{MARK}{body}"))
}

fn input_err(detail: String) -> napi::Error {
    js_err(ruleweave::Error::input(detail))
}

/// A model function of the app's: `index.js` hands it over as one that takes the request as JSON
/// text and always returns a promise of the reply's text.
type ModelFn = ThreadsafeFunction<String, Promise<String>, String, Status, false, true>;

struct JsProvider {
    func: ModelFn,
}

impl Provider for JsProvider {
    fn name(&self) -> &str {
        "node"
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        _tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, ruleweave::Result<LlmResponse>> {
        Box::pin(async move {
            let fail = |why: String| ruleweave::Error::new(ErrorKind::Llm, format!("node model: {why}"));
            let promise = self.func.call_async(request.for_callable().to_string()).await.map_err(|e| fail(e.reason))?;
            let content = promise.await.map_err(|e| fail(e.reason))?;
            Ok(LlmResponse { content, model: request.model.clone(), usage: Usage::default(), attempts: 1 })
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
        let choice = match (model.as_str(), func) {
            ("env", _) => LlmChoice::from_env().map_err(js_err)?,
            ("standin", _) => LlmChoice::Standin,
            ("function", Some(func)) => LlmChoice::Provider(Arc::new(JsProvider { func })),
            (other, _) => return Err(input_err(format!("model is a function or \"standin\", not {other}"))),
        };
        let root = std::path::PathBuf::from(root);
        if !root.join("config").is_dir() {
            return Err(js_err(ruleweave::Error::new(
                ErrorKind::NotFound,
                format!("{} holds no config/ folder of packs", root.display()),
            )));
        }
        let store = ruleweave::store::open(&store).await.map_err(js_err)?;
        let builder = ruleweave::Engine::builder(root).store(store).llm(choice);
        Ok(NativeEngine {
            inner: ruleweave_natives::register(builder).build(),
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
    pub async fn open(&self, pack: String, options: Value, id: Option<String>) -> Result<NativeSession> {
        let options = options_of(options)?;
        let session = self.inner.open_with_id(&pack, &options, id).await.map_err(js_err)?;
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
        let batch = ruleweave::simulate::Batch {
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
        let report = tokio::task::spawn_blocking(move || ruleweave::simulate::run(&handle, &engine, &batch))
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
            live: Arc::new(Mutex::new(session)),
            runtime: self.runtime.clone(),
            js_model: self.js_model,
        }
    }
}

fn options_of(options: Value) -> Result<serde_json::Map<String, Value>> {
    match options {
        Value::Null => Ok(serde_json::Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(input_err(format!("options are an object, not {other}"))),
    }
}

#[napi]
pub struct NativeSession {
    id: String,
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
    let mut session = live.blocking_lock();
    let input = session.input_from(input)?;
    let result = session.blocking_turn(input)?;
    Ok(NativeTurn { state: session.state(), result })
}

#[napi]
impl NativeSession {
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.id.clone()
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

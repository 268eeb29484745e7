//! The `ruleweave` Python module's native part: the engine, its sessions and turns, simulate,
//! a model provider written in Python, and the engine's errors as exception classes. The
//! package around it (`python/ruleweave/`) re-exports these and carries the type stubs.
//!
//! Every call that plays, loads or simulates runs with the interpreter detached, so other
//! Python threads run meanwhile; the `*_async` twins return awaitables that run on the engine's
//! own runtime, so the caller's event loop keeps serving other coroutines during a turn.

use std::collections::BTreeMap;
use std::sync::Arc;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::{create_exception, wrap_pyfunction};
use ruleweave::embed::{self, ErrorClass, Model};
use ruleweave::llm::BoxFuture;
use serde_json::Value;
use tokio::sync::Mutex;

create_exception!(ruleweave, Error, PyException, "An error of the ruleweave engine: `.kind`, `.place`, `.message`.");
create_exception!(
    ruleweave,
    PackError,
    Error,
    "A pack does not load: its manifest, a script, a template or its graph."
);
create_exception!(ruleweave, InputError, Error, "An input or options that do not fit what the pack declares.");
create_exception!(ruleweave, NotFoundError, Error, "A pack, session or checkpoint that does not exist.");
create_exception!(ruleweave, FinishedError, Error, "A turn of a session that is over.");
create_exception!(ruleweave, ScriptError, Error, "A script or template failed, or reached a limit.");
create_exception!(ruleweave, ModelError, Error, "A model call failed and its node had no fallback.");
create_exception!(ruleweave, StoreError, Error, "The session store (or a file) failed, or another writer came first.");
create_exception!(ruleweave, InternalError, Error, "A bug in ruleweave itself.");

/// The engine's error as the Python exception of its class, with `.kind` (the engine's error
/// code, `invalid_input`), `.place` (`{"file", "line", "column"}` or `None`) and `.message`.
fn py_err(e: ruleweave::Error) -> PyErr {
    Python::attach(|py| {
        let err = PyErr::from_type(class_type(py, ErrorClass::of(e.kind())), e.to_string());
        let value = err.value(py);
        // The same parts every package's errors carry (`embed::error_body`).
        let body = embed::error_body(&e);
        for part in ["kind", "place", "message", "refusal"] {
            if let Ok(v) = pythonize::pythonize(py, &body[part]) {
                let _ = value.setattr(part, v);
            }
        }
        err
    })
}

/// The exception class of the engine's error class.
fn class_type(py: Python<'_>, class: ErrorClass) -> Bound<'_, PyType> {
    match class {
        ErrorClass::Pack => py.get_type::<PackError>(),
        ErrorClass::Input => py.get_type::<InputError>(),
        ErrorClass::NotFound => py.get_type::<NotFoundError>(),
        ErrorClass::Finished => py.get_type::<FinishedError>(),
        ErrorClass::Script => py.get_type::<ScriptError>(),
        ErrorClass::Model => py.get_type::<ModelError>(),
        ErrorClass::Store => py.get_type::<StoreError>(),
        ErrorClass::Internal => py.get_type::<InternalError>(),
    }
}

/// A value from Python as JSON (a dict, list, str, number, bool or None), or an `InputError`
/// saying what it was.
fn json_of(what: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    pythonize::depythonize(v).map_err(|e| py_err(ruleweave::Error::input(format!("{what}: {e}"))))
}

fn py_of<'py>(py: Python<'py>, v: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, v).map_err(|e| InternalError::new_err(e.to_string()))
}

/// The engine's runtime: the one `pyo3-async-runtimes` drives awaitables on.
fn runtime() -> &'static tokio::runtime::Runtime {
    pyo3_async_runtimes::tokio::get_runtime()
}

/// Runs `fut` to its end on the engine's runtime, with the interpreter detached.
fn block_on<T: Send>(py: Python<'_>, fut: impl std::future::Future<Output = T> + Send) -> T {
    py.detach(|| runtime().block_on(fut))
}

/// A pack's games and sessions: `Engine(root, store="memory", model=None)`.
#[pyclass(module = "ruleweave", frozen)]
struct Engine {
    inner: ruleweave::Engine,
}

#[pymethods]
impl Engine {
    /// An engine on the packs under `root` (the folder holding `config/`, `scripts/`,
    /// `prompts/`). `store`: `"memory"`, `"sqlite:///path/games.db"` or `"postgres://..."`.
    /// `model`: `None` for the environment's provider (`OPENAI_API_KEY`, `RULEWEAVE_LLM`) or
    /// the packs' stand-ins, `"standin"` for the stand-ins, or a callable (a function or a
    /// coroutine function) that answers each model call: it gets the request as a dict
    /// (`profile`, `model`, `messages`, `temperature`, `max_tokens`, `response_format`) and
    /// returns the reply's text.
    #[new]
    #[pyo3(signature = (root, store = "memory", model = None))]
    fn new(py: Python<'_>, root: std::path::PathBuf, store: &str, model: Option<Bound<'_, PyAny>>) -> PyResult<Self> {
        let model = match &model {
            None => Model::Env,
            Some(m) if m.is_callable() => Model::Function(Arc::new(PyModel::new(py, m)?)),
            Some(m) if let Ok(name) = m.extract::<String>() => Model::named(Some(&name)).map_err(py_err)?,
            Some(m) => {
                return Err(py_err(ruleweave::Error::input(format!(
                    "model is None, \"standin\" or a callable, not {}",
                    m.repr().map_or_else(|_| "that".to_owned(), |r| r.to_string())
                ))));
            }
        };
        let options = embed::Options { root, store: store.to_owned(), model };
        let inner = block_on(py, embed::open_engine(options, ruleweave_natives::register)).map_err(py_err)?;
        Ok(Engine { inner })
    }

    /// The names of the packs under the root.
    fn packs(&self) -> PyResult<Vec<String>> {
        self.inner.packs().names().map_err(py_err)
    }

    /// What a pack declares (options, input, output, state fields, what to type), as a dict.
    fn describe<'py>(&self, py: Python<'py>, pack: &str) -> PyResult<Bound<'py, PyAny>> {
        let pack = py.detach(|| self.inner.packs().get(pack)).map_err(py_err)?;
        py_of(py, &pack.describe())
    }

    /// Opens a session of `pack` with `options` (a dict; the pack's defaults fill the rest);
    /// `id` chooses the session's id, which also seeds its randomness; `player` is who plays,
    /// the key a pack's experiment chooses the session's variant by.
    #[pyo3(signature = (pack, options = None, id = None, player = None))]
    fn open(
        &self,
        py: Python<'_>,
        pack: &str,
        options: Option<Bound<'_, PyAny>>,
        id: Option<String>,
        player: Option<String>,
    ) -> PyResult<Session> {
        let options = options_of(options)?;
        let (engine, pack) = (self.inner.clone(), pack.to_owned());
        let how = ruleweave::OpenAs { id, player, ..ruleweave::OpenAs::default() };
        let session = block_on(py, async move { engine.open_as(&pack, &options, how).await }).map_err(py_err)?;
        Ok(Session::of(session))
    }

    /// [`Engine::open`] as an awaitable.
    #[pyo3(signature = (pack, options = None, id = None, player = None))]
    fn open_async<'py>(
        &self,
        py: Python<'py>,
        pack: &str,
        options: Option<Bound<'py, PyAny>>,
        id: Option<String>,
        player: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = options_of(options)?;
        let (engine, pack) = (self.inner.clone(), pack.to_owned());
        let how = ruleweave::OpenAs { id, player, ..ruleweave::OpenAs::default() };
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            engine.open_as(&pack, &options, how).await.map(Session::of).map_err(py_err)
        })
    }

    /// A stored session, by its id (in this process or another that shares the store).
    fn reopen(&self, py: Python<'_>, id: &str) -> PyResult<Session> {
        let (engine, id) = (self.inner.clone(), id.to_owned());
        block_on(py, async move { engine.resume(&id).await }).map(Session::of).map_err(py_err)
    }

    /// Plays `games` games per player (the pack's scripted players, or those named: `liar`,
    /// `model:smuggler`) and returns the report `ruleweave simulate --json` prints, as a dict.
    #[pyo3(signature = (pack, games = 100, players = None, seed = "ruleweave", options = None, jobs = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, each with its default
    fn simulate<'py>(
        &self,
        py: Python<'py>,
        pack: &str,
        games: u32,
        players: Option<Vec<String>>,
        seed: &str,
        options: Option<Bound<'py, PyAny>>,
        jobs: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let batch = ruleweave_lab::simulate::Batch {
            pack: pack.to_owned(),
            games,
            players: players.unwrap_or_default(),
            seed: seed.to_owned(),
            options: options_of(options)?,
            jobs,
            prices: BTreeMap::new(),
        };
        let engine = &self.inner;
        let report = py.detach(|| ruleweave_lab::simulate::run(runtime().handle(), engine, &batch)).map_err(py_err)?;
        py_of(py, &report)
    }

    fn __repr__(&self) -> String {
        format!("Engine({:?})", self.inner.root().display().to_string())
    }
}

fn options_of(options: Option<Bound<'_, PyAny>>) -> PyResult<serde_json::Map<String, Value>> {
    let options = options.map(|o| json_of("options", &o)).transpose()?.unwrap_or_default();
    embed::options_of(options, "a dict").map_err(py_err)
}

/// One session of a pack: `session.turn(input)` plays a turn.
#[pyclass(module = "ruleweave", frozen)]
struct Session {
    id: String,
    variant: Option<String>,
    live: Arc<Mutex<ruleweave::Session>>,
}

impl Session {
    fn of(session: ruleweave::Session) -> Self {
        let (id, variant) = (session.id().to_owned(), session.variant().map(str::to_owned));
        Session { id, variant, live: Arc::new(Mutex::new(session)) }
    }
}

#[pymethods]
impl Session {
    /// The session's id (what `Engine.reopen` takes).
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The variant of its pack's experiment it plays (`None` when the pack has none).
    #[getter]
    fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// Plays a turn: `input` is a dict of the pack's input fields, or a line a person typed.
    fn turn(&self, py: Python<'_>, input: Bound<'_, PyAny>) -> PyResult<Turn> {
        let input = json_of("input", &input)?;
        // Played on this thread, with the interpreter detached: no hand-off to another thread.
        py.detach(|| {
            let _runtime = runtime().enter();
            embed::play_here(&mut self.live.blocking_lock(), input)
        })
        .map(Turn::of)
        .map_err(py_err)
    }

    /// [`Session::turn`] as an awaitable: the caller's event loop runs other coroutines while the
    /// turn plays.
    fn turn_async<'py>(&self, py: Python<'py>, input: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let input = json_of("input", &input)?;
        let live = self.live.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            embed::play(&mut *live.lock().await, input).await.map(Turn::of).map_err(py_err)
        })
    }

    /// What a person sees now (`reply`, `status`, `details`, `finished`, `opening`, `notes`).
    fn view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let view = block_on(py, async { self.live.lock().await.view() });
        py_of(py, &view)
    }

    /// The session's state, as a dict.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = block_on(py, async { self.live.lock().await.state() });
        py_of(py, &state)
    }

    /// Turns played.
    #[getter]
    fn turns(&self, py: Python<'_>) -> u64 {
        block_on(py, async { self.live.lock().await.turns() })
    }

    /// Whether the session is over.
    #[getter]
    fn finished(&self, py: Python<'_>) -> bool {
        block_on(py, async { self.live.lock().await.is_finished() })
    }

    fn __repr__(&self) -> String {
        format!("Session({:?})", self.id)
    }
}

/// What a turn did: `display` (what a person sees), `output`, `state`, `events`, `finished`.
/// The state is kept as JSON: Python objects are made only when `turn.state` is read.
#[pyclass(module = "ruleweave", frozen)]
struct Turn {
    result: ruleweave::TurnResult,
    state: Value,
}

impl Turn {
    fn of(played: embed::Played) -> Self {
        Turn { result: played.result, state: played.state }
    }
}

#[pymethods]
impl Turn {
    /// The turn's number (1 for the first).
    #[getter]
    fn turn(&self) -> u64 {
        self.result.turn
    }

    /// What a person sees after it: `reply`, `status`, `details`, `finished`, `notes`.
    #[getter]
    fn display<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py_of(py, &self.result.display)
    }

    /// The pack's output fields after it.
    #[getter]
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py_of(py, &self.result.output)
    }

    /// The state after it (converted when asked for).
    #[getter]
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py_of(py, &self.state)
    }

    /// Everything the turn did, in order: nodes, routes, model calls, decisions.
    #[getter]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py_of(py, &self.result.events)
    }

    /// Whether the session is over now.
    #[getter]
    fn finished(&self) -> bool {
        self.result.finished
    }

    fn __repr__(&self) -> String {
        format!("Turn({}, reply={:?})", self.result.turn, self.result.display.reply.as_deref().unwrap_or(""))
    }
}

/// A model function written in Python: a callable (or coroutine function) that gets each
/// request as a dict and returns the reply's text. An exception it raises is the call's
/// failure.
struct PyModel {
    func: Py<PyAny>,
    is_coroutine: bool,
}

impl PyModel {
    fn new(py: Python<'_>, func: &Bound<'_, PyAny>) -> PyResult<Self> {
        let is_coroutine = py.import("inspect")?.call_method1("iscoroutinefunction", (func,))?.extract::<bool>()?;
        Ok(PyModel { func: func.clone().unbind(), is_coroutine })
    }

    /// Calls the function with the request (running a coroutine to its end in an event loop of
    /// this thread's own): its reply text.
    fn call(&self, request: &Value) -> Result<String, String> {
        Python::attach(|py| {
            let arg = pythonize::pythonize(py, request).map_err(|e| e.to_string())?;
            let mut got = self.func.call1(py, (arg,)).map_err(|e| e.to_string())?.into_bound(py);
            if self.is_coroutine {
                let asyncio = py.import("asyncio").map_err(|e| e.to_string())?;
                got = asyncio.call_method1("run", (got,)).map_err(|e| e.to_string())?;
            }
            got.extract::<String>().map_err(|_| {
                let shown = got.repr().map_or_else(|_| "a value".to_owned(), |r| r.to_string());
                format!("the model function returned {shown}, not the reply's text (a str)")
            })
        })
    }
}

impl embed::Callable for PyModel {
    fn language(&self) -> &str {
        "python"
    }

    /// Called on a blocking thread, which takes the interpreter for the call.
    fn answer(&self, request: Value) -> BoxFuture<'_, ruleweave::Result<String>> {
        Box::pin(async move {
            let func = Python::attach(|py| self.func.clone_ref(py));
            let model = PyModel { func, is_coroutine: self.is_coroutine };
            let answered = tokio::task::spawn_blocking(move || model.call(&request)).await;
            answered
                .map_err(|e| ruleweave::Error::internal(e.to_string()))?
                .map_err(|why| ruleweave::Error::new(ruleweave::ErrorKind::Llm, why))
        })
    }
}

/// The native module: `ruleweave._ruleweave`.
#[pymodule]
fn _ruleweave(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Engine>()?;
    m.add_class::<Session>()?;
    m.add_class::<Turn>()?;
    m.add("Error", py.get_type::<Error>())?;
    for class in ErrorClass::ALL {
        m.add(class.name(), class_type(py, class))?;
    }
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}

/// The engine's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

//! The embedding facade: the engine as another language's package holds it. An engine made from
//! `{root, store, model}` ([`open_engine`]), a turn played from and to JSON-shaped values
//! ([`play`], [`play_here`]), options read from JSON ([`options_of`]), a model function of the
//! host language as a provider ([`Callable`]), and the engine's errors grouped into the classes
//! every binding raises ([`ErrorClass`], [`error_body`]). The Python and Node packages wrap
//! these thinly, and the `ruleweave` host makes its stand-in engines with them; a method a
//! binding gains is written here once (docs/embedding.md says where the rest goes).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::llm::{BoxFuture, LlmRequest, LlmResponse, TokenSink, Usage};
use crate::{Engine, EngineBuilder, Error, ErrorKind, LlmChoice, Provider, Result, Session, TurnResult};

/// A model function of the embedding language: it is handed each model call's request as JSON
/// (OpenAI's shape: `profile`, `model`, `provider`, `messages`, `temperature`, `max_tokens`,
/// `response_format`) and answers the reply's text, or why it failed. A failure of the function
/// (an [`ErrorKind::Llm`] error) is the call's, which the node's fallback answers as it would a
/// real provider's; any other error (the binding's own, such as a thread that panicked) is
/// passed on as it is.
pub trait Callable: Send + Sync + 'static {
    /// The language, as a failure names it (`python`, `node`).
    fn language(&self) -> &str;

    /// The reply to `request`, or why there is none.
    fn answer(&self, request: Value) -> BoxFuture<'_, Result<String>>;
}

/// A [`Callable`] as the engine's model provider.
struct CallableProvider(Arc<dyn Callable>);

impl Provider for CallableProvider {
    fn name(&self) -> &str {
        self.0.language()
    }

    fn complete<'a>(&'a self, request: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(async move {
            let content = self.0.answer(request.for_callable()).await.map_err(|e| match e.kind() {
                ErrorKind::Llm => Error::new(ErrorKind::Llm, format!("{} model: {}", self.0.language(), e.detail())),
                _ => e,
            })?;
            Ok(LlmResponse { content, model: request.model.clone(), usage: Usage::default(), attempts: 1 })
        })
    }
}

/// Who answers an embedded engine's model calls.
#[derive(Clone)]
pub enum Model {
    /// The environment's provider (`OPENAI_API_KEY`, `RULEWEAVE_LLM`, ...), or the packs'
    /// stand-ins when it names none.
    Env,
    /// The packs' stand-in models.
    Standin,
    /// A function of the embedding language.
    Function(Arc<dyn Callable>),
}

impl Model {
    /// The model a binding's option names: none (or `env`) for the environment's, `standin`; a
    /// function is given as [`Model::Function`].
    pub fn named(name: Option<&str>) -> Result<Model> {
        match name {
            None | Some("env") => Ok(Model::Env),
            Some("standin") => Ok(Model::Standin),
            Some(other) => Err(Error::input(format!("model is \"standin\" or a function, not {other:?}"))),
        }
    }
}

/// What an embedded engine is made from.
#[derive(Clone)]
pub struct Options {
    /// The folder holding the packs (`config/`, `scripts/`, `prompts/`).
    pub root: PathBuf,
    /// The store's URL: `memory`, `sqlite:///path/games.db`, `postgres://...`.
    pub store: String,
    /// Who answers model calls.
    pub model: Model,
}

/// An engine on `options.root`'s packs, in the store it names, answered by its model; `extend`
/// adds what the host registers (native nodes and scorers) before it is built. A root without a
/// `config/` folder is refused as not found, before any store is opened.
pub async fn open_engine(options: Options, extend: impl FnOnce(EngineBuilder) -> EngineBuilder) -> Result<Engine> {
    if !options.root.join("config").is_dir() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{} holds no config/ folder of packs", options.root.display()),
        ));
    }
    let llm = match options.model {
        Model::Env => LlmChoice::from_env()?,
        Model::Standin => LlmChoice::Standin,
        Model::Function(f) => LlmChoice::Provider(Arc::new(CallableProvider(f))),
    };
    let store = crate::store::open(&options.store).await?;
    Ok(extend(Engine::builder(options.root).store(store).llm(llm)).build())
}

/// Session options from JSON: none (null) or an object; anything else is refused, named as the
/// language calls an object (`a dict`, `an object`).
pub fn options_of(options: Value, an_object: &str) -> Result<Map<String, Value>> {
    match options {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(Error::input(format!("options are {an_object}, not {other}"))),
    }
}

/// A turn as a binding hands it back: what it did, and the state after it as JSON.
pub struct Played {
    /// What the turn did.
    pub result: TurnResult,
    /// The state after it.
    pub state: Value,
}

/// Plays a turn of `session` with `input` (an object of the pack's input fields, or a line a
/// person typed), on the engine's threads.
pub async fn play(session: &mut Session, input: Value) -> Result<Played> {
    let input = session.input_from(input)?;
    let result = session.turn(input).await?;
    Ok(Played { result, state: session.state() })
}

/// [`play`] on the calling thread, which the turn blocks (a binding's own thread, with the
/// runtime entered): no thread is woken to play it.
pub fn play_here(session: &mut Session, input: Value) -> Result<Played> {
    let input = session.input_from(input)?;
    let result = session.blocking_turn(input)?;
    Ok(Played { result, state: session.state() })
}

/// The classes a binding raises the engine's errors as: each [`ErrorKind`] belongs to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// A pack does not load: its manifest, a script, a template or its graph.
    Pack,
    /// An input or options that do not fit what the pack declares.
    Input,
    /// A pack, session or checkpoint that does not exist.
    NotFound,
    /// A turn of a session that is over.
    Finished,
    /// A script or template failed, or reached a limit.
    Script,
    /// A model call failed and its node had no fallback.
    Model,
    /// The session store (or a file) failed, or another writer came first.
    Store,
    /// A bug in ruleweave itself.
    Internal,
}

impl ErrorClass {
    /// Every class, in the order the packages list them.
    pub const ALL: [ErrorClass; 8] = [
        ErrorClass::Pack,
        ErrorClass::Input,
        ErrorClass::NotFound,
        ErrorClass::Finished,
        ErrorClass::Script,
        ErrorClass::Model,
        ErrorClass::Store,
        ErrorClass::Internal,
    ];

    /// The class of errors of `kind`.
    pub fn of(kind: ErrorKind) -> ErrorClass {
        match kind {
            ErrorKind::Pack => ErrorClass::Pack,
            ErrorKind::Input => ErrorClass::Input,
            ErrorKind::NotFound => ErrorClass::NotFound,
            ErrorKind::Finished => ErrorClass::Finished,
            ErrorKind::Script | ErrorKind::Template | ErrorKind::Limit | ErrorKind::StateTooLarge => ErrorClass::Script,
            ErrorKind::Llm => ErrorClass::Model,
            ErrorKind::Store | ErrorKind::Io | ErrorKind::Conflict => ErrorClass::Store,
            ErrorKind::Internal => ErrorClass::Internal,
        }
    }

    /// Its name in every package: `PackError`, `InputError`, ...
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Pack => "PackError",
            ErrorClass::Input => "InputError",
            ErrorClass::NotFound => "NotFoundError",
            ErrorClass::Finished => "FinishedError",
            ErrorClass::Script => "ScriptError",
            ErrorClass::Model => "ModelError",
            ErrorClass::Store => "StoreError",
            ErrorClass::Internal => "InternalError",
        }
    }
}

/// An error as a binding hands it to its language: `class` (its [`ErrorClass`]'s name), `kind`
/// (the engine's code, `invalid_input`), `message` (without the place), `place`
/// (`{file, line, column}` or null), `refusal` (the pack refused the input in its own words)
/// and `text` (the whole message, with the place).
pub fn error_body(e: &Error) -> Value {
    json!({
        "class": ErrorClass::of(e.kind()).name(),
        "kind": e.kind().code(),
        "message": e.detail(),
        "place": e.origin().map(|o| json!({"file": o.file, "line": o.line, "column": o.column})),
        "refusal": e.is_refusal(),
        "text": e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind has its class, and every class has a kind.
    #[test]
    fn every_kind_has_a_class_and_every_class_a_kind() {
        let kinds = [
            ErrorKind::Pack,
            ErrorKind::Input,
            ErrorKind::NotFound,
            ErrorKind::Finished,
            ErrorKind::Script,
            ErrorKind::Template,
            ErrorKind::Limit,
            ErrorKind::StateTooLarge,
            ErrorKind::Llm,
            ErrorKind::Store,
            ErrorKind::Io,
            ErrorKind::Conflict,
            ErrorKind::Internal,
        ];
        for class in ErrorClass::ALL {
            assert!(kinds.iter().any(|k| ErrorClass::of(*k) == class), "{class:?} has no kind");
        }
        let body = error_body(&Error::new(ErrorKind::Limit, "too deep"));
        assert_eq!((body["class"].as_str(), body["kind"].as_str()), (Some("ScriptError"), Some("limit_exceeded")));
    }
}

//! The engine's one error type: what went wrong (kind), in words (detail), and where (origin).
//!
//! Every failure a user can cause — a bad manifest, a script that throws, a template that reads an
//! undefined variable, a model that keeps answering 500 — ends up here, so the CLI, the HTTP API
//! and an embedding server all show the same text. Display reads
//! `detail (in scripts/pirate/merit.rhai:12:5, node merit_check)`.

use std::fmt;

use serde::Serialize;

/// What kind of failure an [`Error`] is; decides the HTTP status and the CLI's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// A pack cannot load: its manifest, a script, a template or its graph is invalid.
    Pack,
    /// A turn's input or a session's options do not fit what the pack declares.
    Input,
    /// A script failed while it ran.
    Script,
    /// A template failed while it rendered.
    Template,
    /// A sandbox or graph limit was reached (operations, wall time, recursion limit, sizes).
    Limit,
    /// A session's state would be larger than the store keeps for one (`max_state_bytes`): the
    /// turn, edit or fork that made it so is undone.
    StateTooLarge,
    /// A model call failed (after its retries) and the node had no fallback.
    Llm,
    /// A pack, session or checkpoint does not exist.
    NotFound,
    /// The session is finished (a won game); it takes no more turns.
    Finished,
    /// The request conflicts with the current state (for example a concurrent change).
    Conflict,
    /// The session store failed.
    Store,
    /// Reading files failed.
    Io,
    /// A bug in ruleweave itself.
    Internal,
}

impl ErrorKind {
    /// Every kind, in the order declared: for tables that must give each one an answer (an HTTP
    /// status, a binding's exception class).
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::Pack,
        ErrorKind::Input,
        ErrorKind::Script,
        ErrorKind::Template,
        ErrorKind::Limit,
        ErrorKind::StateTooLarge,
        ErrorKind::Llm,
        ErrorKind::NotFound,
        ErrorKind::Finished,
        ErrorKind::Conflict,
        ErrorKind::Store,
        ErrorKind::Io,
        ErrorKind::Internal,
    ];

    /// The stable machine-readable code of this kind, as used in HTTP error bodies.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Pack => "invalid_pack",
            ErrorKind::Input => "invalid_input",
            ErrorKind::Script => "script_error",
            ErrorKind::Template => "template_error",
            ErrorKind::Limit => "limit_exceeded",
            ErrorKind::StateTooLarge => "state_too_large",
            ErrorKind::Llm => "llm_error",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Finished => "session_finished",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Store => "store_error",
            ErrorKind::Io => "io_error",
            ErrorKind::Internal => "internal_error",
        }
    }
}

/// A position in a pack's source files: `file:line:col`, 1-based, file relative to the pack root.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Origin {
    /// The file, relative to the root the packs were loaded from (`scripts/pirate/merit.rhai`).
    pub file: String,
    /// 1-based line; 0 when unknown.
    pub line: u32,
    /// 1-based column; 0 when unknown.
    pub column: u32,
}

impl Origin {
    /// An origin at `file:line:col`.
    pub fn new(file: impl Into<String>, line: u32, column: u32) -> Self {
        Origin { file: file.into(), line, column }
    }

    /// An origin naming only a file.
    pub fn file(file: impl Into<String>) -> Self {
        Origin::new(file, 0, 0)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (0, _) => write!(f, "{}", self.file),
            (l, 0) => write!(f, "{}:{l}", self.file),
            (l, c) => write!(f, "{}:{l}:{c}", self.file),
        }
    }
}

/// An error from the engine: its kind, a sentence saying what happened, and where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Error {
    kind: ErrorKind,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<Origin>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<String>,
    /// Whether the pack refused the input in its own words (a script's `refuse(...)`): the detail
    /// is meant for the player, the origin for the designer.
    #[serde(skip)]
    refused: bool,
    /// Further problems found in the same pass (a pack with several mistakes reports all of them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    more: Vec<Error>,
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` saying `detail`.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Error { kind, detail: detail.into(), origin: None, node: None, refused: false, more: Vec::new() }
    }

    /// The pack refusing an input in its own words (a script's `refuse(...)`): an input error
    /// whose detail is what a player reads, untouched by the engine's context.
    pub(crate) fn refusal(words: impl Into<String>) -> Self {
        Error { refused: true, ..Error::new(ErrorKind::Input, words) }
    }

    /// Whether the pack refused the input in its own words (a script's `refuse(...)`): then
    /// [`Error::detail`] is what a player should read (what was wrong, what to type), and the
    /// origin, the script's place, is for the designer and the log.
    pub fn is_refusal(&self) -> bool {
        self.refused
    }

    /// Shorthand for a pack (load/validation) error at `origin`.
    pub(crate) fn pack(detail: impl Into<String>, origin: Origin) -> Self {
        Error::new(ErrorKind::Pack, detail).at(origin)
    }

    /// Shorthand for an input error.
    pub fn input(detail: impl Into<String>) -> Self {
        Error::new(ErrorKind::Input, detail)
    }

    /// Shorthand for a bug in ruleweave.
    pub fn internal(detail: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, detail)
    }

    /// Sets where the error happened.
    pub fn at(mut self, origin: Origin) -> Self {
        self.origin = Some(origin);
        self
    }

    /// Sets the graph node that was running, unless one is already named.
    pub fn in_node(mut self, node: &str) -> Self {
        if self.node.is_none() {
            self.node = Some(node.to_owned());
        }
        self
    }

    /// Collects several errors into one: the first leads, the rest follow in [`Error::all`].
    /// Returns `None` for an empty list.
    pub fn collect(errors: Vec<Error>) -> Option<Error> {
        let mut it = errors.into_iter();
        let mut first = it.next()?;
        first.more.extend(it);
        Some(first)
    }

    /// This error alone, without the ones [`Error::collect`] put behind it.
    pub(crate) fn alone(&self) -> Error {
        Error { more: Vec::new(), ..self.clone() }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What happened, without the origin.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// Where it happened in a pack's files, when known.
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }

    /// The graph node that was running, when known.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// This error and every further one collected with it, in order.
    pub fn all(&self) -> impl Iterator<Item = &Error> {
        std::iter::once(self).chain(self.more.iter())
    }

    /// How many problems this error reports (1 + the collected ones).
    pub fn count(&self) -> usize {
        1 + self.more.len()
    }

    /// Prefixes the detail with context (`while rendering judge.j2: ...`); a refusal keeps the
    /// pack's words as they are.
    pub(crate) fn context(mut self, prefix: impl fmt::Display) -> Self {
        if !self.refused {
            self.detail = format!("{prefix}: {}", self.detail);
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)?;
        match (&self.origin, &self.node) {
            (Some(o), Some(n)) => write!(f, " (in {o}, node {n})")?,
            (Some(o), None) => write!(f, " (in {o})")?,
            (None, Some(n)) => write!(f, " (in node {n})")?,
            (None, None) => {}
        }
        if !self.more.is_empty() {
            write!(f, " (and {} more)", self.more.len())?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The message a panic carried (`panic!` with a string literal or a formatted one), if any.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_place() {
        let e = Error::new(ErrorKind::Script, "x is not defined")
            .at(Origin::new("scripts/pirate/merit.rhai", 12, 5))
            .in_node("merit_check");
        assert_eq!(e.to_string(), "x is not defined (in scripts/pirate/merit.rhai:12:5, node merit_check)");
        let e = Error::new(ErrorKind::Pack, "bad").at(Origin::file("config/x.yaml"));
        assert_eq!(e.to_string(), "bad (in config/x.yaml)");
    }

    #[test]
    fn collect_keeps_every_problem() {
        let e = Error::collect(vec![Error::input("a"), Error::input("b"), Error::input("c")]).unwrap();
        assert_eq!(e.count(), 3);
        assert_eq!(e.all().map(|e| e.detail()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(e.to_string(), "a (and 2 more)");
        assert!(Error::collect(vec![]).is_none());
    }
}

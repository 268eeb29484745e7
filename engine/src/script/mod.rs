//! The script sandbox: a Rhai engine per pack, started closed and opened deliberately.
//!
//! It starts from `Engine::new_raw()` with only pure packages (no `sleep`, no `exit`, no clock),
//! strict variables, `eval` disabled, and limits on operations, call depth, string/array/map sizes
//! and wall time. The only way out is the host functions of [`host`]. Scripts are compiled once at
//! load; a call binds the session state as a read-only `this`, so no state is copied to run a node.
//!
//! A runaway script fails its call with an error naming the script and the position it was at.

pub(crate) mod host;
pub(crate) mod lint;
pub(crate) mod standin;

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::thread::LocalKey;
use std::time::{Duration, Instant};

use rhai::packages::{
    ArithmeticPackage, BasicArrayPackage, BasicBlobPackage, BasicFnPackage, BasicIteratorPackage, BasicMapPackage,
    BasicMathPackage, BasicStringPackage, BitFieldPackage, LogicPackage, MoreStringPackage, Package,
};
use rhai::{
    AST, ASTNode, CallFnOptions, Dynamic, Engine, EvalAltResult, Expr, FuncArgs, ImmutableString, Position, Scope, Stmt,
};

use crate::error::{Error, ErrorKind, Origin, Result};
pub(crate) use crate::limits::Limits;
use crate::limits::MAX_EXPR_DEPTH;
pub(crate) use host::{CallTag, HostShared};

/// Host functions that wait for a model; a script calling them runs on a thread that may block.
pub(crate) const MODEL_FUNCTIONS: &[&str] = &["llm", "llm_json", "llm_chat", "search"];

/// One compiled script file of a pack.
#[derive(Debug)]
pub(crate) struct ScriptFile {
    /// Path relative to the root (`scripts/pirate/merit.rhai`).
    pub path: String,
    pub ast: AST,
    source: String,
    /// For an expression written in a manifest: where it stands there (its line 2 is this line).
    anchor: Option<Origin>,
    /// Whether any function in it (or a library it uses) may call a model.
    pub calls_models: bool,
    /// Whether any function in it uses `this` (the state, for the functions the engine calls).
    /// A library's functions cannot reach the state without it: a call by module name binds no
    /// `this`, and a method on the state is a `this.` in the calling file.
    pub reads_state: bool,
}

impl ScriptFile {
    /// Whether the file defines `name` with `arity` parameters.
    pub(crate) fn has_fn(&self, name: &str, arity: usize) -> bool {
        self.ast.iter_functions().any(|f| f.name == name && f.params.len() == arity)
    }

    /// Where `fn name(` is defined, for errors that Rhai reports without a position.
    pub(crate) fn fn_origin(&self, name: &str) -> Origin {
        if let Some(a) = &self.anchor {
            return a.clone();
        }
        let pattern = format!(r"\bfn\s+{}\s*\(", regex::escape(name));
        let found = regex::Regex::new(&pattern).ok().and_then(|re| re.find(&self.source)).map(|m| {
            let before = &self.source[..m.start()];
            let line = before.matches('\n').count() as u32 + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
            (line, col)
        });
        let (line, col) = found.unwrap_or((0, 0));
        Origin::new(&self.path, line, col)
    }

    /// An origin in this file as the user sees it (for manifest expressions, in the manifest).
    pub(crate) fn map_origin(&self, o: Origin) -> Origin {
        match &self.anchor {
            None => o,
            Some(a) if o.line <= 2 => Origin::new(&a.file, a.line, a.column + o.column.saturating_sub(1)),
            Some(a) => Origin::new(&a.file, a.line + o.line - 2, o.column),
        }
    }

    /// The arities `name` is defined with, for error messages.
    pub(crate) fn arities(&self, name: &str) -> Vec<usize> {
        self.ast.iter_functions().filter(|f| f.name == name).map(|f| f.params.len()).collect()
    }
}

/// A pack's compiled scripts (`scripts/<pack>/`), by path under that folder, and the ones that
/// failed to compile (references to those are not reported again).
#[derive(Debug, Default)]
pub(crate) struct Scripts {
    pack: String,
    files: HashMap<String, Arc<ScriptFile>>,
    broken: HashSet<String>,
}

impl Scripts {
    /// Compiles the pack's scripts, given as (path relative to the root, source); returns the set
    /// and the errors of the files that did not compile.
    pub(crate) fn compile(sandbox: &Sandbox, pack: &str, sources: Vec<(String, String)>) -> (Self, Vec<Error>) {
        let prefix = format!("scripts/{pack}/");
        let mut scripts = Scripts { pack: pack.to_owned(), ..Default::default() };
        let mut errors = Vec::new();
        for (path, source) in sources {
            let name = path.strip_prefix(&prefix).unwrap_or(&path).to_owned();
            match sandbox.compile(&path, &source) {
                Ok(f) => {
                    scripts.files.insert(name, Arc::new(f));
                }
                Err(e) => {
                    scripts.broken.insert(name);
                    errors.push(e);
                }
            }
        }
        (scripts, errors)
    }

    /// The compiled files.
    pub(crate) fn files(&self) -> impl Iterator<Item = &Arc<ScriptFile>> {
        self.files.values()
    }

    /// The pack the scripts belong to.
    pub(crate) fn pack(&self) -> &str {
        &self.pack
    }

    /// Resolves `file.rhai::fn` (or `file.rhai` with `default_fn`) to a function of `arity`
    /// parameters. `Ok(None)` for a file that did not compile (its error is reported already);
    /// `Err` says what is wrong with the reference.
    pub(crate) fn resolve(
        &self,
        reference: &str,
        default_fn: Option<&str>,
        arity: usize,
    ) -> Result<Option<FnRef>, String> {
        let (file, func) = match (reference.split_once("::"), default_fn) {
            (Some((f, n)), _) => (f.trim(), n.trim()),
            (None, Some(n)) => (reference.trim(), n),
            (None, None) => return Err(format!("`{reference}` is not a script reference; write file.rhai::function")),
        };
        if self.broken.contains(file) {
            return Ok(None);
        }
        let Some(script) = self.files.get(file) else {
            let mut known: Vec<&str> = self.files.keys().map(String::as_str).collect();
            known.sort();
            let near = lint::did_you_mean(lint::nearest(file, known.iter().copied()));
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            return Err(format!("there is no script `{file}` in scripts/{}/ (scripts: {known}){}", self.pack, near));
        };
        if !script.has_fn(func, arity) {
            let found = script.arities(func);
            let why = if found.is_empty() {
                let defined: Vec<String> = script.ast.iter_functions().map(|f| f.name.to_string()).collect();
                match lint::nearest(func, defined.iter().map(String::as_str)) {
                    Some(k) => format!("does not define it (did you mean `{file}::{k}`?)"),
                    None => "does not define it".to_owned(),
                }
            } else {
                let n: Vec<String> = found.iter().map(|n| n.to_string()).collect();
                format!("defines it with {} parameter(s)", n.join(" or "))
            };
            return Err(format!("`{file}::{func}` must be a function of {arity} parameter(s); {file} {why}"));
        }
        Ok(Some(FnRef { file: script.clone(), name: func.into() }))
    }
}

/// A condition written in a manifest (a route case's `when`, a selector's `similarity.when`).
#[derive(Debug)]
pub(crate) enum Condition {
    /// A Rhai expression over `this`.
    Script(FnRef),
    /// `this.flag` or `!this.flag` on a bool field: read directly, no script call.
    Flag { field: String, negate: bool },
}

/// A function in a script file: what `merit.rhai::from_judge` in a manifest resolves to.
#[derive(Debug, Clone)]
pub(crate) struct FnRef {
    pub file: Arc<ScriptFile>,
    pub name: ImmutableString,
}

impl FnRef {
    /// `merit.rhai::from_judge`, as a manifest writes it.
    pub(crate) fn display(&self) -> String {
        let file = self.file.path.rsplit('/').next().unwrap_or(&self.file.path);
        match &self.file.anchor {
            // An expression from the manifest (a condition): its generated name means nothing.
            Some(at) => format!("the expression at {file}:{}:{}", at.line, at.column),
            None => format!("{file}::{}", self.name),
        }
    }

    /// Whether calling it may wait for a model.
    pub(crate) fn calls_models(&self) -> bool {
        self.file.calls_models
    }

    /// Whether calling it may read the state (its file uses `this` somewhere).
    pub(crate) fn reads_state(&self) -> bool {
        self.file.reads_state
    }
}

/// A pack's Rhai engine with its limits and host functions.
pub(crate) struct Sandbox {
    engine: Engine,
    limits: Limits,
    /// Libraries (`scripts/lib/*.rhai`) whose functions may call a model.
    model_libs: HashSet<String>,
    /// Every function a script may call besides its own: the host's, the libraries' and Rhai's.
    functions: HashSet<String>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").field("limits", &self.limits).finish_non_exhaustive()
    }
}

thread_local! {
    /// When the script running on this thread must stop (set per call, paused during model calls).
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Whether this thread may block on a model call (true only on the engine's blocking threads).
    static MAY_BLOCK: Cell<bool> = const { Cell::new(false) };
}

/// Puts a thread-local back as it was when dropped, however the code it guards ends: calls nest
/// (a stand-in model called from a script has a deadline of its own), and a thread goes on to
/// other work after a panic.
struct Restore<T: Copy + 'static>(&'static LocalKey<Cell<T>>, T);

impl<T: Copy + 'static> Restore<T> {
    fn set(key: &'static LocalKey<Cell<T>>, value: T) -> Self {
        Restore(key, key.replace(value))
    }
}

impl<T: Copy + 'static> Drop for Restore<T> {
    fn drop(&mut self) {
        self.0.set(self.1);
    }
}

/// Sets this thread's deadline `limit` from now, until the guard is dropped.
fn deadline_in(limit: Duration) -> Restore<Option<Instant>> {
    Restore::set(&DEADLINE, Some(Instant::now() + limit))
}

/// Runs `wait` (a model call) with the running script's wall-time limit paused.
pub(crate) fn pause_deadline<R>(wait: impl FnOnce() -> R) -> R {
    let deadline = DEADLINE.replace(None);
    let start = Instant::now();
    let r = wait();
    DEADLINE.set(deadline.map(|d| d + start.elapsed()));
    r
}

/// Runs `f` on this thread with blocking model calls allowed (called on [`crate::blocking`]'s threads).
pub(crate) fn allow_blocking<R>(f: impl FnOnce() -> R) -> R {
    let _restore = Restore::set(&MAY_BLOCK, true);
    f()
}

/// Whether a model call may block this thread.
pub(crate) fn may_block() -> bool {
    MAY_BLOCK.get()
}

impl Sandbox {
    /// Builds the engine: limits, pure packages, host functions, and the shared libraries of
    /// `scripts/lib/` (each available as `<file stem>::function`). `libs` holds (path, source).
    pub(crate) fn new(
        limits: Limits,
        shared: Arc<HostShared>,
        libs: &[(String, String)],
    ) -> std::result::Result<Self, Vec<Error>> {
        let limits = limits.bounded();
        let mut engine = Engine::new_raw();
        // The packages as one module: a call is resolved by looking the function up in each
        // global module in turn, once per script call, so one module is one lookup instead of
        // eleven.
        let mut packages = rhai::Module::new();
        for pkg in [
            ArithmeticPackage::new().as_shared_module(),
            BasicStringPackage::new().as_shared_module(),
            BasicIteratorPackage::new().as_shared_module(),
            BasicFnPackage::new().as_shared_module(),
            LogicPackage::new().as_shared_module(),
            BitFieldPackage::new().as_shared_module(),
            BasicMathPackage::new().as_shared_module(),
            BasicArrayPackage::new().as_shared_module(),
            BasicBlobPackage::new().as_shared_module(),
            BasicMapPackage::new().as_shared_module(),
            MoreStringPackage::new().as_shared_module(),
        ] {
            packages.combine_flatten((*pkg).clone());
        }
        engine.register_global_module(packages.into());
        engine.set_strict_variables(true);
        engine.disable_symbol("eval");
        engine.set_max_operations(limits.max_operations);
        engine.set_max_call_levels(limits.max_call_levels);
        engine.set_max_string_size(limits.max_string_size);
        engine.set_max_array_size(limits.max_array_size);
        engine.set_max_map_size(limits.max_map_size);
        engine.set_max_expr_depths(MAX_EXPR_DEPTH, MAX_EXPR_DEPTH);
        engine.set_max_modules(0);
        engine.on_progress(|ops| {
            if ops % 512 == 0
                && let Some(deadline) = DEADLINE.get()
                && Instant::now() > deadline
            {
                return Some(Dynamic::from("wall time"));
            }
            None
        });
        let pack = shared.pack.clone();
        engine.on_print(move |s| tracing::info!(target: "ruleweave::script", pack = %pack, "{s}"));
        let pack = shared.pack.clone();
        engine.on_debug(move |s, src, pos| {
            tracing::debug!(target: "ruleweave::script", pack = %pack, source = src.unwrap_or(""), %pos, "{s}")
        });
        host::register_all(&mut engine, &shared);
        // A call whose arguments are constants is worked out once, while compiling, unless the
        // function is volatile (see `host`'s documentation for which are).
        engine.set_optimization_level(rhai::OptimizationLevel::Full);
        // A host function's error a script catches (`catch (e)`) reads as its message.
        engine.register_type_with_name::<Error>("Error");
        engine.register_fn("to_string", |e: &mut Error| e.to_string());
        engine.register_fn("to_debug", |e: &mut Error| format!("{e:?}"));

        let mut errors = Vec::new();
        let mut model_libs = HashSet::new();
        let mut modules = Vec::new();
        for (path, source) in libs {
            let name = lib_name(path);
            let ast = match compile(&engine, path, source) {
                Ok(ast) => ast,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            if calls_models(&ast, &HashSet::new()) {
                model_libs.insert(name.clone());
            }
            let _deadline = deadline_in(limits.max_wall);
            let loaded =
                with_stack(limits.stack_needed(), || rhai::Module::eval_ast_as_new(Scope::new(), &ast, &engine));
            match loaded {
                Ok(mut module) => {
                    module.set_id(path.as_str());
                    modules.push((name, module));
                }
                Err(e) => errors.push(script_error(*e, path, &limits).context("while loading the library")),
            }
        }
        for (name, module) in modules {
            engine.register_static_module(name, module.into());
        }
        let functions = engine
            .gen_fn_signatures(true)
            .iter()
            .filter_map(|sig| sig.split('(').next())
            .map(|name| name.trim().trim_start_matches("get$").trim_start_matches("set$").to_owned())
            .collect();
        if errors.is_empty() { Ok(Sandbox { engine, limits, model_libs, functions }) } else { Err(errors) }
    }

    /// Compiles one pack script; `path` is relative to the root.
    pub(crate) fn compile(&self, path: &str, source: &str) -> Result<ScriptFile> {
        let ast = compile(&self.engine, path, source)?;
        let calls_models = calls_models(&ast, &self.model_libs);
        let reads_state = reads_state(&ast);
        Ok(ScriptFile {
            path: path.to_owned(),
            ast,
            source: source.to_owned(),
            anchor: None,
            calls_models,
            reads_state,
        })
    }

    /// Compiles a Rhai expression written in a manifest (a route case's `when`) as a function
    /// named `name`, reporting errors at their place in the manifest.
    pub(crate) fn compile_expr(&self, name: &str, expr: &str, at: &Origin) -> Result<ScriptFile> {
        let source = format!("fn {name}() {{\n{expr}\n}}");
        let mut ast = with_stack(PARSE_STACK, || self.engine.compile(&source)).map_err(|e| {
            let pos = e.position();
            let lines: Vec<&str> = expr.lines().collect();
            let line = pos.line().unwrap_or(2).saturating_sub(2);
            let column = |line: usize, position: usize| {
                let from = if line == 0 { at.column } else { 1 };
                from + position.saturating_sub(1) as u32
            };
            // Past the expression (the wrapper's closing brace): it ends too early; point at its end.
            if line >= lines.len() {
                let last = lines.len().saturating_sub(1);
                let end = lines.get(last).map_or(0, |l| l.chars().count());
                return Error::pack(
                    "this expression does not compile: it ends too early",
                    Origin::new(&at.file, at.line + last as u32, column(last, end + 1)),
                );
            }
            Error::pack(
                format!("this expression does not compile: {}", e.err_type()),
                Origin::new(&at.file, at.line + line as u32, column(line, pos.position().unwrap_or(1))),
            )
        })?;
        ast.set_source(at.file.clone());
        let calls_models = calls_models(&ast, &self.model_libs);
        let reads_state = reads_state(&ast);
        Ok(ScriptFile { path: at.file.clone(), ast, source, anchor: Some(at.clone()), calls_models, reads_state })
    }

    /// What `check` finds in `file` before it runs: calls to functions that exist nowhere, and
    /// `this.<field>` reads of fields `fields` does not hold.
    pub(crate) fn lint(&self, file: &ScriptFile, declared: &lint::Declared<'_>) -> Vec<Error> {
        lint::lint(file, &self.functions, declared)
    }

    /// Calls `f` with `this` bound to `this` (the read-only state) and `args`, under the limits.
    pub(crate) fn call(
        &self,
        f: &FnRef,
        this: &mut Dynamic,
        args: impl FuncArgs,
        tag: Option<CallTag>,
    ) -> Result<Dynamic> {
        // A shared state is locked once for the whole call, and the script gets the map inside:
        // bound to the shared value, Rhai would lock it again at every `this.` the script reads.
        if this.is_shared() {
            let mut inner = this
                .write_lock::<Dynamic>()
                .ok_or_else(|| Error::internal(format!("{}: the state is in use by another script", f.display())))?;
            // A panic (a bug in a host function, or in Rhai) must not leave the state's lock
            // poisoned, or undoing the turn would panic again: let go of the lock, then go on.
            let called = std::panic::catch_unwind(AssertUnwindSafe(|| self.call(f, &mut inner, args, tag)));
            drop(inner);
            return called.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
        let _deadline = deadline_in(self.limits.max_wall);
        let mut options = CallFnOptions::new().eval_ast(false).rewind_scope(true).bind_this_ptr(this);
        if let Some(tag) = tag {
            options = options.with_tag(tag);
        }
        with_stack(self.limits.stack_needed(), || {
            self.engine.call_fn_with_options::<Dynamic>(options, &mut Scope::new(), &f.file.ast, f.name.as_str(), args)
        })
        .map_err(|e| {
            let e = script_error(*e, &f.file.path, &self.limits);
            // Rhai reports limit errors at the outermost call site, which is ours: no position.
            let origin = match e.origin() {
                Some(o) if o.line > 0 && o.file == f.file.path => f.file.map_origin(o.clone()),
                Some(o) if o.line > 0 => o.clone(),
                _ => f.file.fn_origin(&f.name),
            };
            e.at(origin).context(format_args!("{} failed", f.display()))
        })
    }
}

/// The module name of a library: its file stem (`scripts/lib/text.rhai` → `text`).
fn lib_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.strip_suffix(".rhai").unwrap_or(file).to_owned()
}

fn compile(engine: &Engine, path: &str, source: &str) -> Result<AST> {
    let mut ast = with_stack(PARSE_STACK, || engine.compile(source)).map_err(|e| {
        let pos = e.position();
        let (line, column) = (pos.line().unwrap_or(0), pos.position().unwrap_or(0));
        let here = source.lines().nth(line.saturating_sub(1)).unwrap_or("").trim_start();
        let missing_semicolon = matches!(e.err_type(), rhai::ParseErrorType::MissingToken(t, _) if t == ";");
        if missing_semicolon && (here.starts_with("fn ") || here.starts_with("private fn ")) {
            return Error::pack(
                "syntax error: a `}` is missing above: this function starts while the one before it is still open",
                Origin::new(path, line as u32, column as u32),
            );
        }
        if missing_semicolon && let Some((line, column)) = end_of_statement_before(source, line) {
            return Error::pack(
                "syntax error: this statement needs a `;` at its end",
                Origin::new(path, line as u32, column as u32),
            );
        }
        Error::pack(format!("syntax error: {}", e.err_type()), Origin::new(path, line as u32, column as u32))
    })?;
    if let Some(pos) = first_import(&ast) {
        return Err(Error::pack(
            "`import` is not available: code shared by scripts goes in scripts/lib/<name>.rhai and is \
             called as <name>::function",
            Origin::new(path, pos.line().unwrap_or(0) as u32, pos.position().unwrap_or(0) as u32),
        ));
    }
    ast.set_source(path);
    Ok(ast)
}

/// Where a missing `;` belongs when Rhai notices it at the start of line `line` (the next
/// statement): just after the last code of the nearest line above that has any (blank lines and
/// `//` comments skipped), 1-based. `None` when there is no such line.
fn end_of_statement_before(source: &str, line: usize) -> Option<(usize, usize)> {
    let lines: Vec<&str> = source.lines().collect();
    (1..line.min(lines.len() + 1)).rev().find_map(|n| {
        let text = lines[n - 1];
        let code = text.split("//").next().unwrap_or(text).trim_end();
        (!code.trim().is_empty()).then(|| (n, code.chars().count() + 1))
    })
}

/// Where the first `import` statement of `ast` is (at the top level or in a function).
fn first_import(ast: &AST) -> Option<Position> {
    let mut found = None;
    ast.walk(&mut |path: &[ASTNode<'_>]| {
        if let Some(ASTNode::Stmt(stmt @ Stmt::Import(..))) = path.last() {
            found = Some(stmt.position());
        }
        found.is_none()
    });
    found
}

/// Whether `ast` calls a model host function, or a function of a library that does.
fn calls_models(ast: &AST, model_libs: &HashSet<String>) -> bool {
    let mut found = false;
    ast.walk(&mut |path: &[ASTNode<'_>]| {
        let call = match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(call, _))) | Some(ASTNode::Stmt(Stmt::FnCall(call, _))) => Some(call),
            _ => None,
        };
        if let Some(call) = call {
            let hit = if call.namespace.is_empty() {
                MODEL_FUNCTIONS.contains(&call.name.as_str())
            } else {
                model_libs.contains(call.namespace.root())
            };
            found |= hit;
        }
        !found
    });
    found
}

/// Whether any function of `ast` uses `this`.
fn reads_state(ast: &AST) -> bool {
    let mut found = false;
    ast.walk(&mut |path: &[ASTNode<'_>]| {
        found |= matches!(path.last(), Some(ASTNode::Expr(Expr::ThisPtr(_))));
        !found
    });
    found
}

/// Bytes of stack the parser needs at worst (expressions nested [`MAX_EXPR_DEPTH`] deep).
const PARSE_STACK: usize = if cfg!(debug_assertions) { 2 << 20 } else { 512 << 10 };

/// Runs `f` with at least `needed` bytes of stack: on this thread's stack when it has them, else
/// on a stack grown for the call (Rhai recurses on the native stack; running out would abort the
/// process, whatever thread a host runs turns on).
pub(crate) fn with_stack<R>(needed: usize, f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(needed, needed + (1 << 20), f)
}

/// Turns a Rhai runtime error into an engine error at the innermost position that failed; a
/// limit error says which of `limits` it hit, in the pack's terms.
pub(crate) fn script_error(err: EvalAltResult, file: &str, limits: &Limits) -> Error {
    let mut err = err;
    let mut source = file.to_owned();
    loop {
        match err {
            EvalAltResult::ErrorInFunctionCall(_, src, inner, _) => {
                if !src.is_empty() {
                    source = src;
                }
                err = *inner;
            }
            EvalAltResult::ErrorInModule(_, inner, _) => err = *inner,
            _ => break,
        }
    }
    let pos: Position = err.take_position();
    let limit = match &err {
        EvalAltResult::ErrorTooManyOperations(..) => {
            Some(format!("the script used more than {} operations (limits.max_operations)", limits.max_operations))
        }
        EvalAltResult::ErrorTerminated(..) => {
            Some(format!("the script ran longer than {} ms (limits.max_wall_ms)", limits.max_wall.as_millis()))
        }
        EvalAltResult::ErrorStackOverflow(..) => {
            Some(format!("the script nested calls deeper than {} (limits.max_call_levels)", limits.max_call_levels))
        }
        EvalAltResult::ErrorDataTooLarge(what, _) => Some(format!(
            "the script made a value too large: {what} (limits.max_string_size {}, max_array_size {}, \
             max_map_size {})",
            limits.max_string_size, limits.max_array_size, limits.max_map_size
        )),
        EvalAltResult::ErrorTooManyVariables(..) => Some("the script declared too many variables".to_owned()),
        _ => None,
    };
    let origin = Origin::new(source, pos.line().unwrap_or(0) as u32, pos.position().unwrap_or(0) as u32);
    // An engine error a host function threw (a refusal, a model that failed) stays what it is.
    if limit.is_none()
        && let EvalAltResult::ErrorRuntime(d, _) = &err
        && d.is::<Error>()
    {
        return d.clone().cast::<Error>().at(origin);
    }
    let (kind, detail) = match (limit, &err) {
        (Some(why), _) => (ErrorKind::Limit, why),
        (None, EvalAltResult::ErrorRuntime(d, _)) if d.is_string() => (ErrorKind::Script, d.to_string()),
        (None, EvalAltResult::ErrorUnboundThis(_)) => (
            ErrorKind::Script,
            "`this` (the state) is not bound here: a helper sees it only when called as a method, `this.helper(...)`"
                .to_owned(),
        ),
        (None, _) => (ErrorKind::Script, err.to_string()),
    };
    Error::new(kind, detail).at(origin)
}

#[cfg(test)]
mod tests;

//! Loading a pack: read the manifest, check every declaration, compile every script, parse every
//! template, resolve every reference, build the graph. Problems are collected, not thrown, so one
//! `check` shows all of them with `file:line:col`.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;
use rhai::Map;
use serde_saphyr::Spanned;

use super::manifest::{self, Manifest, ModelDecl, NodeDecl, ParseMode, Reducer, RouteDecl, SpannedStr, TypeName};
use super::{Display, Finish, InputSpec, ModelSpec, OptionSpec, Pack, Profile};
use crate::error::{Error, Origin, Result};
use crate::graph::{Case, Graph, History, Join, LlmNode, Node, NodeKind, Route, Target, Test, Then};
use crate::llm::standin::Standin;
use crate::prompt::{CONTEXT_NAMES, Prompts};
use crate::script::{FnRef, HostShared, Limits, Sandbox, ScriptFile};
use crate::select::Selector;
use crate::state::{Field, Schema};
use crate::value;

mod files;
mod selectors;

use files::Files;

/// Which native node names the embedding program registered.
pub(crate) type NativeNames<'a> = &'a crate::native::NativeNodes;

/// Names a state field may not have: they are the template context's own.
const RESERVED: &[&str] = &["params", "options", "input", "vars", "this", "START", "END"];

/// Loads and validates the pack `name` under `root`.
pub(crate) fn load(root: &Path, name: &str, natives: NativeNames<'_>) -> Result<Pack> {
    let manifest_path = format!("config/{name}.yaml");
    let mut files = Files::new(root);
    let bytes = files.read(&manifest_path, &format!("the manifest of pack `{name}`"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::pack("the manifest is not UTF-8 text", Origin::file(&manifest_path)))?;
    let manifest: Manifest = serde_saphyr::from_str(&text).map_err(|e| yaml_error(&e, &manifest_path))?;
    let mut l =
        Loader { root, pack: name.to_owned(), manifest_path, errors: Vec::new(), files, broken: HashSet::new() };
    let pack = l.build(manifest, natives);
    match Error::collect(std::mem::take(&mut l.errors)) {
        Some(e) => Err(e),
        None => pack.ok_or_else(|| Error::internal("the pack failed to build without saying why")),
    }
}

/// A YAML error at its place, without serde-saphyr's own snippet and position suffix.
fn yaml_error(e: &serde_saphyr::Error, file: &str) -> Error {
    let msg = e.without_snippet().to_string();
    let origin = match e.location() {
        Some(loc) => {
            let suffix = format!(" at line {}, column {}", loc.line(), loc.column());
            let msg = msg.strip_suffix(&suffix).unwrap_or(&msg).to_owned();
            return Error::pack(msg, Origin::new(file, loc.line() as u32, loc.column() as u32));
        }
        None => Origin::file(file),
    };
    Error::pack(msg, origin)
}

struct Loader<'a> {
    root: &'a Path,
    pack: String,
    manifest_path: String,
    errors: Vec<Error>,
    /// Every file read, which the version covers.
    files: Files,
    /// Scripts that failed to compile: references to them are not reported again.
    broken: HashSet<String>,
}

/// What the graph builder needs to resolve references.
struct Refs<'a> {
    scripts: &'a HashMap<String, Arc<ScriptFile>>,
    sandbox: &'a Sandbox,
    prompts: &'a Prompts,
    schema: &'a Schema,
    profiles: &'a IndexMap<String, Profile>,
    params: &'a Map,
    natives: NativeNames<'a>,
    selectors: &'a IndexMap<String, Arc<Selector>>,
}

impl Loader<'_> {
    fn at<T>(&self, s: &Spanned<T>) -> Origin {
        Origin::new(&self.manifest_path, s.referenced.line() as u32, s.referenced.column() as u32)
    }

    fn error(&mut self, detail: impl Into<String>, origin: Origin) {
        self.errors.push(Error::pack(detail, origin));
    }

    fn build(&mut self, m: Manifest, natives: NativeNames<'_>) -> Option<Pack> {
        if let Some(n) = &m.name
            && n.value != self.pack
        {
            self.error(format!("the manifest says `name: {}` but the file is {}.yaml", n.value, self.pack), self.at(n));
        }
        let params: Map = m.params.iter().map(|(k, v)| (k.as_str().into(), value::from_json(&v.value))).collect();
        let options = self.options(&m.options);
        let profiles = Arc::new(self.profiles(&m.llm, &options));
        let schema = self.schema(&m.state);
        let inputs = self.inputs(&m.input);

        let mut inline = Vec::new();
        let mut display = Display::default();
        for (part, decl, flag) in [
            ("reply", &m.display.reply, &mut display.reply),
            ("status", &m.display.status, &mut display.status),
            ("details", &m.display.details, &mut display.details),
            ("finished", &m.display.finished, &mut display.finished),
        ] {
            if let Some(t) = decl {
                inline.push((format!("display.{part}"), t.value.clone(), self.at(t)));
                *flag = true;
            }
        }
        let fields: HashSet<&str> = schema.fields.keys().map(String::as_str).collect();
        let limits = self.limits(&m.limits);
        let templates = self.read_text("prompts", &self.pack.clone(), "j2", "template");
        let prompts = match Prompts::load(&self.pack, &params, &fields, templates, inline) {
            Ok(p) => p.limit_output(limits.max_render_size),
            Err(errs) => {
                self.errors.extend(errs);
                Prompts::empty(&params)
            }
        };
        let prompts = Arc::new(prompts);

        let shared = Arc::new(HostShared::new(self.pack.clone(), params.clone(), prompts.clone(), profiles.clone()));
        let libs = self.read_scripts("lib");
        let sandbox = match Sandbox::new(limits, shared.clone(), &libs) {
            Ok(s) => s,
            Err(errs) => {
                self.errors.extend(errs);
                Sandbox::new(limits, shared, &[]).ok()?
            }
        };
        let sandbox = Arc::new(sandbox);
        let mut scripts = HashMap::new();
        let prefix = format!("scripts/{}/", self.pack);
        for (path, source) in self.read_scripts(&self.pack.clone()) {
            match sandbox.compile(&path, &source) {
                Ok(f) => {
                    scripts.insert(path.strip_prefix(&prefix).unwrap_or(&path).to_owned(), Arc::new(f));
                }
                Err(e) => {
                    self.broken.insert(path.strip_prefix(&prefix).unwrap_or(&path).to_owned());
                    self.errors.push(e);
                }
            }
        }

        let none = IndexMap::new();
        let refs = Refs {
            scripts: &scripts,
            sandbox: &sandbox,
            prompts: &prompts,
            schema: &schema,
            profiles: &profiles,
            params: &params,
            natives,
            selectors: &none,
        };
        let selectors = self.selectors(&m.selectors, &refs);
        let refs = Refs { selectors: &selectors, ..refs };
        let init = m.init.as_ref().and_then(|r| self.resolve(&refs, r, None, 0));
        let migrate = m.migrate.as_ref().and_then(|r| self.resolve(&refs, r, None, 2));
        if let (Some(f), Some(r)) = (&migrate, &m.migrate)
            && f.calls_models()
        {
            self.error(
                "the migrate script cannot call models: it runs as a session moves to a new version",
                self.at(r),
            );
        }
        let standin = m.standin.as_ref().and_then(|r| self.resolve(&refs, r, Some("respond"), 1));
        let graph = self.graph(&m.graph, &refs);

        for out in &m.output {
            if !schema.fields.contains_key(&out.value) {
                self.error(format!("output `{}` is not a state field", out.value), self.at(out));
            }
        }
        let finish = m.finish.as_ref().and_then(|f| {
            let when = &f.value.when;
            match schema.fields.get(&when.value) {
                Some(field) if field.ty == TypeName::Bool => {
                    Some(Finish { field: when.value.clone(), message: f.value.message.clone() })
                }
                Some(field) => {
                    self.error(
                        format!("finish.when must name a bool field; `{}` is {}", when.value, field.ty.a()),
                        self.at(when),
                    );
                    None
                }
                None => {
                    self.error(
                        format!("finish.when names `{}`, which is not a state field", when.value),
                        self.at(when),
                    );
                    None
                }
            }
        });
        let known: HashSet<&str> = schema.fields.keys().map(String::as_str).collect();
        for part in ["reply", "status", "details", "finished"] {
            let name = format!("display.{part}");
            if prompts.contains(&name) {
                for (var, origin) in prompts.unknown_variables(&name, &known, &params) {
                    self.error(format!("display.{part} reads `{var}`, which is not a state field"), origin);
                }
            }
        }

        let graph = graph?;
        if !self.errors.is_empty() {
            return None;
        }
        let standin = standin.map(|f| Arc::new(Standin::new(sandbox.clone(), f)) as Arc<dyn crate::llm::Provider>);
        Some(Pack {
            name: self.pack.clone(),
            description: m.description.trim().to_owned(),
            version: self.files.version(),
            root: self.root.to_path_buf(),
            options,
            params,
            profiles,
            schema,
            inputs,
            outputs: m.output.iter().map(|o| o.value.clone()).collect(),
            finish,
            display,
            graph,
            sandbox,
            limits,
            prompts,
            init,
            migrate,
            selectors,
            standin,
            files: self.files.paths(),
        })
    }

    fn options(&mut self, decls: &IndexMap<String, Spanned<manifest::OptionDecl>>) -> IndexMap<String, OptionSpec> {
        let mut out = IndexMap::new();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            let inferred = d.default.as_ref().or(d.values.as_ref().and_then(|v| v.first())).map(infer_type);
            let ty = d.ty.or(inferred).unwrap_or(TypeName::String);
            if let Some(values) = &d.values {
                if values.is_empty() {
                    self.error(format!("option `{name}` lists no values"), at.clone());
                }
                for v in values.iter().filter(|v| !value::json_has_type(ty, v)) {
                    self.error(format!("option `{name}` is {}, but value {v} is not", ty.a()), at.clone());
                }
            }
            if let Some(def) = &d.default {
                if !value::json_has_type(ty, def) {
                    self.error(format!("option `{name}` is {}, but its default {def} is not", ty.a()), at.clone());
                } else if let Some(values) = &d.values
                    && !values.contains(def)
                {
                    self.error(format!("the default of option `{name}` ({def}) is not one of its values"), at.clone());
                }
            }
            let spec = OptionSpec {
                ty,
                values: d.values.clone(),
                default: d.default.clone(),
                description: d.description.clone(),
            };
            out.insert(name.clone(), spec);
        }
        out
    }

    fn profiles(
        &mut self,
        decls: &IndexMap<String, Spanned<manifest::ProfileDecl>>,
        options: &IndexMap<String, OptionSpec>,
    ) -> IndexMap<String, Profile> {
        let mut out = IndexMap::new();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            let model = match &d.model.value {
                ModelDecl::Fixed(m) => ModelSpec::Fixed(m.clone()),
                ModelDecl::ByOption(by) => {
                    let model_at = self.at(&d.model);
                    let Some((option, models)) = by.iter().next().filter(|_| by.len() == 1) else {
                        self.error(
                            format!(
                                "profile `{name}`: model is a name or {{option: {{value: model}}}} with one option"
                            ),
                            model_at,
                        );
                        continue;
                    };
                    match options.get(option).and_then(|o| o.values.as_ref()) {
                        None => self.error(
                            format!("profile `{name}` picks its model by `{option}`, which is not an option with listed values"),
                            model_at,
                        ),
                        Some(values) => {
                            // Option values as the keys a model map uses: strings as they are.
                            let keys: Vec<String> =
                                values.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect();
                            for v in &keys {
                                if !models.contains_key(v) {
                                    self.error(format!("profile `{name}` has no model for {option} = {v}"), model_at.clone());
                                }
                            }
                            for k in models.keys() {
                                if !keys.contains(k) {
                                    self.error(format!("profile `{name}` names a model for {option} = {k}, which is not one of its values"), model_at.clone());
                                }
                            }
                        }
                    }
                    ModelSpec::ByOption { option: option.clone(), models: models.clone() }
                }
            };
            if let Some(t) = d.temperature
                && !(0.0..=2.0).contains(&t)
            {
                self.error(format!("profile `{name}`: temperature {t} is outside 0..2"), at.clone());
            }
            if d.max_tokens == Some(0) {
                self.error(format!("profile `{name}`: max_tokens must be at least 1"), at.clone());
            }
            let profile = Profile {
                name: name.clone(),
                description: d.description.clone(),
                model,
                temperature: d.temperature,
                max_tokens: d.max_tokens,
                json: d.json,
            };
            out.insert(name.clone(), profile);
        }
        out
    }

    fn schema(&mut self, decls: &IndexMap<String, Spanned<manifest::FieldDecl>>) -> Schema {
        let mut fields = IndexMap::new();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            if !is_identifier(name) || RESERVED.contains(&name.as_str()) {
                self.error(
                    format!(
                        "`{name}` cannot name a state field (it must be an identifier other than {})",
                        RESERVED.join(", ")
                    ),
                    at.clone(),
                );
            }
            let fits = match d.reducer {
                Reducer::Replace => true,
                Reducer::Append | Reducer::Union => d.ty == TypeName::List,
                Reducer::Merge => d.ty == TypeName::Map,
                Reducer::Add => matches!(d.ty, TypeName::Int | TypeName::Float | TypeName::Number),
            };
            if !fits {
                self.error(
                    format!("field `{name}`: reducer {} does not fit a {} field", d.reducer.as_str(), d.ty),
                    at.clone(),
                );
            }
            let default = match &d.default {
                Some(v) if value::json_has_type(d.ty, v) || (d.ty == TypeName::Float && v.is_i64()) => {
                    let v = if d.ty == TypeName::Float { serde_json::json!(v.as_f64()) } else { v.clone() };
                    value::from_json(&v)
                }
                Some(v) => {
                    self.error(format!("field `{name}` is {}, but its default {v} is not", d.ty.a()), at.clone());
                    value::zero(d.ty)
                }
                None => value::zero(d.ty),
            };
            fields
                .insert(name.clone(), Field { ty: d.ty, reducer: d.reducer, default, doc: d.doc.clone(), origin: at });
        }
        Schema { fields }
    }

    fn inputs(&mut self, decls: &IndexMap<String, Spanned<manifest::InputDecl>>) -> IndexMap<String, InputSpec> {
        let mut out = IndexMap::new();
        for (name, d) in decls {
            let at = self.at(d);
            let d = &d.value;
            if let Some(def) = &d.default
                && !value::json_has_type(d.ty, def)
            {
                self.error(format!("input `{name}` is {}, but its default {def} is not", d.ty.a()), at);
            }
            let spec = InputSpec {
                ty: d.ty,
                required: d.required,
                default: d.default.clone(),
                max_length: d.max_length,
                doc: d.doc.clone(),
            };
            out.insert(name.clone(), spec);
        }
        out
    }

    /// A condition (`this.flag`, `!this.flag`, or any Rhai expression over `this`).
    fn test(&mut self, w: &SpannedStr, name: &str, refs: &Refs<'_>) -> Option<Test> {
        if let Some(test) = flag_test(&w.value, refs.schema) {
            return Some(test);
        }
        match refs.sandbox.compile_expr(name, &w.value, &self.at(w)) {
            Ok(f) => Some(Test::Script(FnRef { file: Arc::new(f), name: name.into() })),
            Err(e) => {
                self.errors.push(e);
                None
            }
        }
    }

    /// The manifest's `limits:`, each checked against the limit table (0 and values over a
    /// ceiling are refused).
    fn limits(&mut self, decls: &IndexMap<String, Spanned<u64>>) -> Limits {
        let mut limits = Limits::default();
        for (key, value) in decls {
            if let Err(why) = limits.set(key, value.value) {
                self.error(why, self.at(value));
            }
        }
        limits
    }

    /// Reads `scripts/<dir>/**/*.rhai` as (path relative to the root, source), sorted.
    fn read_scripts(&mut self, dir: &str) -> Vec<(String, String)> {
        self.read_text("scripts", dir, "rhai", "script")
    }

    /// Reads the `*.ext` text files under `top/dir/` as (path relative to the root, text), sorted;
    /// `what` names them in errors.
    fn read_text(&mut self, top: &str, dir: &str, ext: &str, what: &str) -> Vec<(String, String)> {
        let (files, errors) = self.files.dir(top, dir, ext);
        self.errors.extend(errors);
        let mut out = Vec::new();
        for (path, bytes) in files {
            match String::from_utf8(bytes) {
                Ok(s) => out.push((path, s)),
                Err(_) => self.error(format!("the {what} is not UTF-8 text"), Origin::file(&path)),
            }
        }
        out
    }

    /// Resolves `file.rhai::fn` (or `file.rhai` with a default function) to a function taking
    /// `arity` parameters.
    fn resolve(&mut self, refs: &Refs<'_>, r: &SpannedStr, default_fn: Option<&str>, arity: usize) -> Option<FnRef> {
        let at = self.at(r);
        let (file, func) = match (r.value.split_once("::"), default_fn) {
            (Some((f, n)), _) => (f.trim(), n.trim()),
            (None, Some(n)) => (r.value.trim(), n),
            (None, None) => {
                self.error(format!("`{}` is not a script reference; write file.rhai::function", r.value), at);
                return None;
            }
        };
        if self.broken.contains(file) {
            return None;
        }
        let Some(script) = refs.scripts.get(file) else {
            let mut known: Vec<&str> = refs.scripts.keys().map(String::as_str).collect();
            known.sort();
            let known = if known.is_empty() { "none".to_owned() } else { known.join(", ") };
            self.error(format!("there is no script `{file}` in scripts/{}/ (scripts: {known})", self.pack), at);
            return None;
        };
        if !script.has_fn(func, arity) {
            let found = script.arities(func);
            let why = if found.is_empty() {
                "does not define it".to_owned()
            } else {
                format!(
                    "defines it with {} parameter(s)",
                    found.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" or ")
                )
            };
            self.error(format!("`{}::{func}` must be a function of {arity} parameter(s); {file} {why}", file), at);
            return None;
        }
        Some(FnRef { file: script.clone(), name: func.into() })
    }

    fn graph(&mut self, g: &manifest::GraphDecl, refs: &Refs<'_>) -> Option<Graph> {
        let mut nodes = Vec::new();
        let mut index = HashMap::new();
        for (i, (name, decl)) in g.nodes.iter().enumerate() {
            let at = self.at(decl);
            if !is_identifier(name) || name == "START" || name == "END" {
                self.error(
                    format!("`{name}` cannot name a node (it must be an identifier other than START and END)"),
                    at.clone(),
                );
            }
            index.insert(name.clone(), i);
            let kind = self.node(name, &decl.value, at.clone(), refs);
            nodes.push(Node {
                name: name.as_str().into(),
                kind: kind.unwrap_or(NodeKind::Native(String::new())),
                doc: decl.value.doc.clone(),
                origin: at,
            });
        }
        let n = nodes.len();
        let mut graph = Graph {
            nodes,
            index,
            entry: Vec::new(),
            edges: vec![Vec::new(); n],
            routes: (0..n).map(|_| None).collect(),
            joins: Vec::new(),
            recursion_limit: g.recursion_limit.unwrap_or(25),
            checkpoint_steps: g.checkpoint == manifest::CheckpointEvery::Step,
        };
        for edge in &g.edges {
            self.edge(&mut graph, edge);
        }
        for (from, decl) in &g.routes {
            let at = self.at(decl);
            let Some(&i) = graph.index.get(from) else {
                self.error(format!("a route leaves `{from}`, which is not a node ({})", node_list(&graph)), at);
                continue;
            };
            let route = match &decl.value {
                RouteDecl::Cases(cases) => {
                    let mut out = Vec::new();
                    for (k, c) in cases.iter().enumerate() {
                        let last = k + 1 == cases.len();
                        let to = self.targets(&graph, &c.to, &format!("the route out of `{from}`"));
                        let when = match (&c.when, last) {
                            (Some(w), _) => {
                                self.test(w, &format!("when_{from}_{k}"), refs).map(|t| (t, w.value.clone()))
                            }
                            (None, false) => {
                                self.error(
                                    format!("route out of `{from}`: only the last case may leave out `when`"),
                                    self.at(&c.to),
                                );
                                None
                            }
                            (None, true) => None,
                        };
                        out.push(Case { when, to });
                    }
                    if cases.last().is_some_and(|c| c.when.is_some()) {
                        self.error(
                            format!("route out of `{from}`: the last case must have no `when` (it is the default)"),
                            at,
                        );
                    }
                    Route::Cases(out)
                }
                RouteDecl::Script(s) => {
                    let func = self.resolve(refs, &s.func, None, 0);
                    let mut targets = Vec::new();
                    for t in &s.to {
                        targets.extend(self.targets(&graph, t, &format!("the route out of `{from}`")));
                    }
                    match func {
                        Some(func) => Route::Script { func, targets },
                        None => continue,
                    }
                }
            };
            graph.routes[i] = Some(route);
        }
        self.check_graph(&graph, g);
        Some(graph)
    }

    fn node(&mut self, name: &str, d: &NodeDecl, at: Origin, refs: &Refs<'_>) -> Option<NodeKind> {
        let kinds = [d.script.is_some(), d.llm.is_some(), d.native.is_some(), d.select.is_some()]
            .iter()
            .filter(|k| **k)
            .count();
        if kinds != 1 {
            self.error(format!("node `{name}` needs exactly one of `script`, `llm`, `native`, `select`"), at);
            return None;
        }
        if let Some(sel) = &d.select {
            return self.select_node(name, d, sel, at, refs);
        }
        if d.llm.is_none()
            && let Some(key) = llm_key(d, true)
        {
            self.error(format!("node `{name}`: `{key}` belongs to llm nodes"), at);
            return None;
        }
        if let Some(s) = &d.script {
            return self.resolve(refs, s, None, 0).map(NodeKind::Script);
        }
        if let Some(n) = &d.native {
            if !refs.natives.contains(&n.value) {
                self.error(
                    format!(
                        "native node `{}` is not registered by this host (the `ruleweave` binary registers none)",
                        n.value
                    ),
                    self.at(n),
                );
                return None;
            }
            return Some(NodeKind::Native(n.value.clone()));
        }
        let profile_ref = d.llm.as_ref()?;
        let Some(profile) = refs.profiles.get(&profile_ref.value) else {
            let known: Vec<&str> = refs.profiles.keys().map(String::as_str).collect();
            self.error(
                format!(
                    "node `{name}` uses llm profile `{}`, which the pack does not define (profiles: {})",
                    profile_ref.value,
                    known.join(", ")
                ),
                self.at(profile_ref),
            );
            return None;
        };
        let known: HashSet<&str> = refs.schema.fields.keys().map(String::as_str).collect();
        let template = |l: &mut Self, t: &Option<SpannedStr>| -> Option<String> {
            let t = t.as_ref()?;
            if !refs.prompts.contains(&t.value) {
                let files = refs.prompts.file_templates();
                let files = if files.is_empty() { "none".to_owned() } else { files.join(", ") };
                l.error(
                    format!("there is no template `{}` in prompts/{}/ (templates: {files})", t.value, l.pack),
                    l.at(t),
                );
                return None;
            }
            for (var, origin) in refs.prompts.unknown_variables(&t.value, &known, refs.params) {
                let what = if var.starts_with("params.") { "a parameter" } else { "a state field" };
                l.error(
                    format!(
                        "template `{}` reads `{var}`, which is not {what} or one of {}",
                        t.value,
                        CONTEXT_NAMES.join(", ")
                    ),
                    origin,
                );
            }
            Some(t.value.clone())
        };
        let system = template(self, &d.system);
        let prompt = template(self, &d.prompt);
        let history = d.history.as_ref().and_then(|h| {
            let from = &h.value.from;
            match refs.schema.fields.get(&from.value) {
                Some(f) if f.ty == TypeName::List => {}
                _ => {
                    self.error(
                        format!("history.from must name a list field; `{}` is not one", from.value),
                        self.at(from),
                    );
                    return None;
                }
            }
            for role in h.value.roles.values() {
                if !["system", "user", "assistant"].contains(&role.as_str()) {
                    self.error(
                        format!("history.roles maps to `{role}`; chat roles are system, user, assistant"),
                        self.at(h),
                    );
                }
            }
            Some(History {
                field: from.value.clone(),
                last: h.value.last,
                roles: h.value.roles.clone().into_iter().collect(),
            })
        });
        if d.system.is_none() && d.prompt.is_none() && d.history.is_none() {
            self.error(format!("llm node `{name}` needs a `prompt`, a `system` template or a `history`"), at.clone());
        }
        let vars = d.vars.as_ref().and_then(|v| self.resolve(refs, v, None, 0));
        let then = match (&d.then, &d.into) {
            (Some(t), None) => self.resolve(refs, t, None, 1).map(Then::Script),
            (None, Some(f)) => match refs.schema.fields.get(&f.value) {
                Some(field) if matches!(field.ty, TypeName::String | TypeName::Any) => {
                    Some(Then::Field(f.value.clone()))
                }
                _ => {
                    self.error(format!("`into` must name a string field; `{}` is not one", f.value), self.at(f));
                    None
                }
            },
            _ => {
                self.error(format!("llm node `{name}` needs exactly one of `then` (file.rhai::fn(reply)) or `into` (a string field)"), at.clone());
                None
            }
        };
        let fallback = d.fallback.as_ref().and_then(|f| self.resolve(refs, f, None, 1));
        let parse = d.parse.unwrap_or(if profile.json { ParseMode::Json } else { ParseMode::Text });
        if parse == ParseMode::Json && matches!(then, Some(Then::Field(_))) {
            self.error(format!("llm node `{name}` parses JSON, which needs a `then` script, not `into`"), at);
        }
        Some(NodeKind::Llm(Box::new(LlmNode {
            profile: profile.name.clone(),
            system,
            prompt,
            history,
            vars,
            parse,
            then: then?,
            fallback,
        })))
    }

    /// Parses `a -> b`, `a -> b, c` (fan-out) and `a, b -> c` (join).
    fn edge(&mut self, graph: &mut Graph, edge: &SpannedStr) {
        let at = self.at(edge);
        let Some((lhs, rhs)) = edge.value.split_once("->") else {
            self.error(format!("`{}` is not an edge; write `from -> to`", edge.value), at);
            return;
        };
        let from: Vec<&str> = lhs.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let what = format!("edge `{}`", edge.value.trim());
        let to = self.targets(graph, &Spanned::new(rhs.to_owned(), edge.referenced, edge.defined), &what);
        match from.as_slice() {
            [] => self.error(format!("`{}` has nothing before `->`", edge.value), at),
            ["START"] => graph.entry.extend(to),
            [one] => match graph.index.get(*one) {
                Some(&i) => graph.edges[i].extend(to),
                None if *one == "END" => self.error("no edge can leave END", at),
                None => self.error(
                    format!("edge `{}` leaves `{one}`, which is not a node ({})", edge.value.trim(), node_list(graph)),
                    at,
                ),
            },
            many => {
                let mut ids = Vec::new();
                for name in many {
                    match graph.index.get(*name) {
                        Some(&i) => ids.push(i),
                        None => self.error(
                            format!(
                                "join `{}` waits for `{name}`, which is not a node ({})",
                                edge.value.trim(),
                                node_list(graph)
                            ),
                            at.clone(),
                        ),
                    }
                }
                graph.joins.push(Join { from: ids, to });
            }
        }
    }

    /// Comma-separated node names (or END) as targets, reporting unknown ones with `what` (the
    /// edge or route they belong to). A bad target still counts as a way out, so one mistake is
    /// reported once.
    fn targets(&mut self, graph: &Graph, s: &SpannedStr, what: &str) -> Vec<Target> {
        let mut out = Vec::new();
        for name in s.value.split(',').map(str::trim) {
            match (name, graph.index.get(name)) {
                ("END", _) => out.push(Target::End),
                (_, Some(&i)) => out.push(Target::Node(i)),
                ("", _) => {
                    self.error(format!("{what} has an empty target"), self.at(s));
                    out.push(Target::End);
                }
                (_, None) => {
                    self.error(
                        format!("{what} goes to `{name}`, which is not a node ({})", node_list(graph)),
                        self.at(s),
                    );
                    out.push(Target::End);
                }
            }
        }
        out
    }

    fn check_graph(&mut self, graph: &Graph, g: &manifest::GraphDecl) {
        let graph_at = g.edges.first().map_or_else(|| Origin::file(&self.manifest_path), |e| self.at(e));
        if graph.entry.is_empty() {
            self.error("the graph has no entry: add an edge `START -> first_node`", graph_at);
            return;
        }
        let joined: HashSet<usize> = graph.joins.iter().flat_map(|j| j.from.iter().copied()).collect();
        for (i, node) in graph.nodes.iter().enumerate() {
            if graph.edges[i].is_empty() && graph.routes[i].is_none() && !joined.contains(&i) {
                self.error(
                    format!(
                        "node `{}` has no edge or route out; add `{} -> END` if it ends the turn",
                        node.name, node.name
                    ),
                    node.origin.clone(),
                );
            }
        }
        // Reachability from START.
        let mut seen = vec![false; graph.nodes.len()];
        let mut stack: Vec<usize> = graph.entry.iter().filter_map(node_of).collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            let mut next: Vec<Target> = graph.edges[i].clone();
            match &graph.routes[i] {
                Some(Route::Cases(cases)) => cases.iter().for_each(|c| next.extend(c.to.iter().copied())),
                Some(Route::Script { targets, .. }) => next.extend(targets.iter().copied()),
                None => {}
            }
            for j in graph.joins.iter().filter(|j| j.from.contains(&i)) {
                next.extend(j.to.iter().copied());
            }
            stack.extend(next.iter().filter_map(node_of));
        }
        for (i, node) in graph.nodes.iter().enumerate() {
            if !seen[i] {
                self.error(format!("node `{}` is never reached from START", node.name), node.origin.clone());
            }
        }
    }
}

/// `this.flag` or `!this.flag` on a bool field, as a test that needs no script.
/// The first key of `d` that only llm nodes take (`into` too, unless a select node uses it).
fn llm_key(d: &NodeDecl, with_into: bool) -> Option<&'static str> {
    [
        ("system", d.system.is_some()),
        ("prompt", d.prompt.is_some()),
        ("history", d.history.is_some()),
        ("vars", d.vars.is_some()),
        ("parse", d.parse.is_some()),
        ("then", d.then.is_some()),
        ("into", with_into && d.into.is_some()),
        ("fallback", d.fallback.is_some()),
    ]
    .into_iter()
    .find_map(|(key, set)| set.then_some(key))
}

fn flag_test(expr: &str, schema: &Schema) -> Option<Test> {
    let expr = expr.trim();
    let (negate, rest) = match expr.strip_prefix('!') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, expr),
    };
    let field = rest.strip_prefix("this.")?;
    let is_bool = schema.fields.get(field).is_some_and(|f| f.ty == TypeName::Bool);
    (is_identifier(field) && is_bool).then(|| Test::Flag { field: field.to_owned(), negate })
}

fn node_of(t: &Target) -> Option<usize> {
    match t {
        Target::Node(i) => Some(*i),
        Target::End => None,
    }
}

fn node_list(graph: &Graph) -> String {
    let names: Vec<&str> = graph.nodes.iter().map(|n| &*n.name).collect();
    format!("nodes: {}", names.join(", "))
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn infer_type(v: &serde_json::Value) -> TypeName {
    match v {
        serde_json::Value::Bool(_) => TypeName::Bool,
        serde_json::Value::Number(n) if n.is_f64() => TypeName::Float,
        serde_json::Value::Number(_) => TypeName::Int,
        serde_json::Value::Array(_) => TypeName::List,
        serde_json::Value::Object(_) => TypeName::Map,
        _ => TypeName::String,
    }
}

//! Loading a pack: read the manifest, check every declaration, compile every script, parse every
//! template, resolve every reference, build the graph. Problems are collected, not thrown, so one
//! `check` shows all of them with `file:line:col`.
//!
//! By concern: `files` reads (inside the root only) and hashes the version, `decls` the
//! declarations, `graph` the graph (each node through its kind, `graph::kinds`), `selectors` the
//! selectors.

mod decls;
mod files;
mod graph;
mod schemas;
mod selectors;
mod tables;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;
use rhai::Map;
use serde_saphyr::Spanned;

use super::manifest::{self, Manifest};
use super::{Display, Pack};
use crate::error::{Error, Origin, Result};
use crate::graph::load::{Load, Refs};
use crate::limits::Limits;
use crate::llm::Profile;
use crate::native::NativeNodes;
use crate::prompt::Prompts;
use crate::script::standin::{Answers, Standin};
use crate::script::{HostShared, Sandbox, Scripts};
use crate::state::Schema;
use crate::value;
use files::Files;

/// Loads and validates the pack `name` under `root`, with `params` set in place of the
/// manifest's own (an input error when one is not a number the manifest has, within its bounds).
/// Its stand-in model keeps its answers in `answers`, when it has one and they can be kept.
pub(crate) fn load(
    root: &Path,
    name: &str,
    natives: &NativeNodes,
    params: &super::ParamValues,
    answers: Option<&Arc<Answers>>,
) -> Result<Pack> {
    load_with(root, name, natives, params, super::Overlay::default(), answers)
}

/// [`load`], reading the texts of `overlay` in place of the files at their paths.
pub(crate) fn load_with(
    root: &Path,
    name: &str,
    natives: &NativeNodes,
    params: &super::ParamValues,
    overlay: super::Overlay,
    answers: Option<&Arc<Answers>>,
) -> Result<Pack> {
    let manifest_path = format!("config/{name}.yaml");
    let mut files = Files::with_overlay(root, overlay);
    let bytes = files.read(&manifest_path, &format!("the manifest of pack `{name}`"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::pack("the manifest is not UTF-8 text", Origin::file(&manifest_path)))?;
    let mut manifest: Manifest = serde_saphyr::from_str(&text).map_err(|e| yaml_error(&e, &manifest_path, &text))?;
    let params = super::params::apply(&mut manifest, params)?;
    let mut l = Loader {
        root,
        pack: name.to_owned(),
        manifest_path,
        source: text.clone(),
        errors: Vec::new(),
        warnings: Vec::new(),
        files,
        answers: answers.cloned(),
    };
    let pack = l.build(manifest, natives, &params);
    match Error::collect(std::mem::take(&mut l.errors)) {
        Some(e) => Err(e),
        None => pack.ok_or_else(|| Error::internal("the pack failed to build without saying why")),
    }
}

/// A YAML error at its place, in plain words (with the parser's own after them), without
/// serde-saphyr's snippet and position suffix.
fn yaml_error(e: &serde_saphyr::Error, file: &str, text: &str) -> Error {
    // A list or map left open is a syntax error the reader meets before any value's type: said
    // first, with where it opened (`description: [unclosed` read as "expected string scalar").
    if let Some(unclosed) = unclosed_flow(text, file) {
        return unclosed;
    }
    let msg = e.without_snippet().to_string();
    let origin = match e.location() {
        Some(loc) => {
            let suffix = format!(" at line {}, column {}", loc.line(), loc.column());
            let msg = msg.strip_suffix(&suffix).unwrap_or(&msg);
            let mut words = in_plain_words(msg);
            if msg.starts_with("unknown field") {
                words.push_str(&indentation_hint(text, loc.line() as usize));
            }
            return Error::pack(words, Origin::new(file, loc.line() as u32, loc.column() as u32));
        }
        None => Origin::file(file),
    };
    Error::pack(in_plain_words(&msg), origin)
}

/// When `text` is not YAML because a `[` or `{` it opens is never closed: that, placed where
/// the innermost one opened, with where the parser gave up. `None` for any other text.
fn unclosed_flow(text: &str, file: &str) -> Option<Error> {
    use granit_parser::{Event, Parser, StructureStyle};
    // Each open collection: whether it is a flow one (`[` or `{`), a list, and where it opened.
    let mut open: Vec<(bool, bool, usize, usize)> = Vec::new();
    for next in Parser::new_from_str(text) {
        match next {
            Ok((Event::SequenceStart(style, ..), span)) => {
                open.push((style == StructureStyle::Flow, true, span.start.line(), span.start.col()))
            }
            Ok((Event::MappingStart(style, ..), span)) => {
                open.push((style == StructureStyle::Flow, false, span.start.line(), span.start.col()))
            }
            Ok((Event::SequenceEnd | Event::MappingEnd, _)) => {
                open.pop();
            }
            Ok(_) => {}
            Err(e) => {
                // What a `[` or `{` left open runs into on a later line: the end of the file, a
                // `key:` of the next line, a `-` item. The same error on the collection's own
                // line, or another kind (a bad escape, the nesting limit), is something else.
                use granit_parser::ErrorKind as K;
                let runs_on = matches!(
                    e.kind(),
                    K::UnexpectedEofFlowSequence
                        | K::UnexpectedEofFlowMapping
                        | K::UnexpectedEofImplicitFlowMapping
                        | K::ExpectedFlowSequenceSeparator
                        | K::ExpectedFlowMappingSeparator
                        | K::UnclosedFlowCollection { .. }
                        | K::InvalidColonPlacement
                        | K::BlockEntryInFlowCollection
                        | K::SimpleKeyExpected
                        | K::InvalidSimpleKey
                );
                let &(_, list, line, col) = open.iter().rev().find(|(flow, ..)| *flow)?;
                if !runs_on || e.marker().line() <= line {
                    return None;
                }
                let (what, close) =
                    if list { ("a list opened with `[`", "`]`") } else { ("a map opened with `{`", "`}`") };
                let (at_line, at_col) = (e.marker().line(), e.marker().col() + 1);
                let words = format!(
                    "{what} here is not closed: a {close} or a `,` is missing (the YAML reader gave up at line \
                     {at_line}, column {at_col})"
                );
                return Some(Error::pack(words, Origin::new(file, line as u32, col as u32 + 1)));
            }
        }
    }
    None
}

/// What the YAML parser's messages mean for someone editing a manifest: the parser's words (as
/// they start) and what to do about them.
const YAML_IN_WORDS: &[(&str, &str)] = &[
    (
        "mapping values are not allowed",
        "a `key: value` cannot start here: this line is indented deeper than the key above it, \
         which already has its value, or a value holds `: ` and needs quotes (`\"15: 3\"`)",
    ),
    ("while parsing a flow sequence", "a list opened with `[` is not closed before here: a `]` or a `,` is missing"),
    ("while parsing a flow mapping", "a map opened with `{` is not closed before here: a `}` or a `,` is missing"),
    ("invalid indentation in multiline quoted scalar", "a quoted text is not closed: its closing quote is missing"),
    ("while scanning a quoted scalar", "a quoted text is not closed: its closing quote is missing"),
    ("tabs disallowed", "YAML indents with spaces, not tabs: replace the tab here with spaces"),
    (
        "found character that cannot start any token",
        "a value cannot start with this character (`@`, `` ` ``, `%`): put the value in quotes",
    ),
    (
        "did not find expected key",
        "this line does not fit the map it is in: the keys of one map start in the same column",
    ),
    (
        "did not find expected '-' indicator",
        "this line does not fit the list it is in: the items of one list start with `-` in the same column",
    ),
    (
        "block sequence entries are not allowed",
        "a `- item` cannot start here: a list goes on the lines under its key (`key:`, then `  - item`)",
    ),
    ("could not find expected ':'", "a key here has no `:` after it"),
    ("unexpected character", "a value cannot start with this character (`@`, `` ` ``, `%`): put the value in quotes"),
    ("unknown anchor", "`*name` refers to an anchor `&name` that is defined nowhere above"),
];

/// For a key the map it sits in does not have: when its line is indented less than the line
/// above it, it may belong with those lines (a node one level too shallow lands among the graph's
/// own keys); say so.
fn indentation_hint(text: &str, line: usize) -> String {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = text.lines().collect();
    let Some(here) = lines.get(line.saturating_sub(1)) else { return String::new() };
    let above =
        lines[..line.saturating_sub(1)].iter().rev().find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    match above {
        Some(a) if indent(a) > indent(here) => format!(
            "; this line is indented less than the one above it (column {} against {}): if it belongs with \
             the lines above (a node under `nodes:`, a field of the node above), indent it to their column",
            indent(here) + 1,
            indent(a) + 1
        ),
        _ => String::new(),
    }
}

/// A YAML parser message in plain words, when it is one this knows; else as it is.
fn in_plain_words(parser: &str) -> String {
    if let Some(rest) = parser.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest);
        return format!("`{key}` is given twice in one map: the second would replace the first");
    }
    match YAML_IN_WORDS.iter().find(|(starts, _)| parser.to_lowercase().contains(starts)) {
        Some((_, plain)) => format!("{plain} (the YAML parser says: {parser})"),
        None => parser.to_owned(),
    }
}

struct Loader<'a> {
    root: &'a Path,
    pack: String,
    manifest_path: String,
    /// The manifest's text, to place a problem on the token it is about.
    source: String,
    errors: Vec<Error>,
    /// What loads but is likely a mistake (a profile naming a disabled strategy).
    warnings: Vec<Error>,
    /// Every file read, which the version covers.
    files: Files,
    /// Where the stand-in model keeps its answers.
    answers: Option<Arc<Answers>>,
}

/// What the manifest's declarations make: what the rest is checked against.
struct Declared {
    params: Map,
    options: IndexMap<String, super::OptionSpec>,
    profiles: Arc<IndexMap<String, Profile>>,
    schema: Schema,
    inputs: IndexMap<String, super::InputSpec>,
    limits: Limits,
    tables: crate::data::Tables,
    schemas: crate::schemas::Schemas,
}

/// The pack's compiled code: templates, the sandbox (with `scripts/lib/`), its scripts.
struct Compiled {
    prompts: Arc<Prompts>,
    sandbox: Arc<Sandbox>,
    scripts: Scripts,
    display: Display,
}

impl Loader<'_> {
    fn at<T>(&self, s: &Spanned<T>) -> Origin {
        Origin::new(&self.manifest_path, s.referenced.line() as u32, s.referenced.column() as u32)
    }

    /// Where `token` stands in the value `s` (a misspelled name inside an edge), or the value's
    /// place when it cannot be found there.
    fn at_token<T>(&self, s: &Spanned<T>, token: &str) -> Origin {
        crate::graph::load::on_token(&self.source, self.at(s), token)
    }

    fn error(&mut self, detail: impl Into<String>, origin: Origin) {
        self.errors.push(Error::pack(detail, origin));
    }

    fn warn(&mut self, detail: impl Into<String>, origin: Origin) {
        self.warnings.push(Error::pack(detail, origin));
    }

    fn build(&mut self, m: Manifest, natives: &NativeNodes, set: &super::ParamValues) -> Option<Pack> {
        if let Some(n) = &m.name
            && n.value != self.pack
        {
            self.error(format!("the manifest says `name: {}` but the file is {}.yaml", n.value, self.pack), self.at(n));
        }
        let d = self.declare(&m);
        let numeric_params = self.param_bounds(&m);
        let c = self.compile(&m, &d)?;
        let none = IndexMap::new();
        let option_names: Vec<String> = d.options.keys().cloned().collect();
        let source = self.source.clone();
        let refs = Refs {
            manifest: &self.manifest_path.clone(),
            source: &source,
            scripts: &c.scripts,
            sandbox: &c.sandbox,
            prompts: &c.prompts,
            schema: &d.schema,
            profiles: &d.profiles,
            params: &d.params,
            options: &option_names,
            natives,
            selectors: &none,
            schemas: &d.schemas,
        };
        let selectors = self.selectors(&m.selectors, &refs);
        let refs = Refs { selectors: &selectors, ..refs };
        let mut load = Load { refs: &refs, errors: &mut self.errors };
        let init = m.init.as_ref().and_then(|r| load.resolve(r, None, 0));
        if m.init.is_none()
            && let Some((name, decl)) = m.state.iter().find(|(_, f)| f.value.fork == manifest::ForkPolicy::Init)
        {
            let at = load.at(decl);
            load.error(format!("field `{name}` takes its value from `init` on a fork, but the pack has no init"), at);
        }
        let migrate = m.migrate.as_ref().and_then(|r| load.resolve(r, None, 2));
        let standin = m.standin.as_ref().and_then(|r| load.resolve(r, Some("respond"), 1));
        let search_standin = m.search_standin.as_ref().and_then(|r| load.resolve(r, Some("search"), 1));
        let standin_embed = m.standin_embed.as_ref().and_then(|r| load.resolve(r, Some("embed"), 1));
        if let (Some(r), None) = (&m.standin_embed, &m.standin) {
            let at = load.at(r);
            load.error("standin_embed needs a `standin` model to belong to", at);
        }
        let typed = m.typed.as_ref().and_then(|r| load.resolve(r, None, 1));
        if let (Some(f), Some(r)) = (&typed, &m.typed)
            && f.calls_models()
        {
            let at = load.at(r);
            load.error("the typed script cannot call models: it reads a line before the turn", at);
        }
        if let (Some(f), Some(r)) = (&migrate, &m.migrate)
            && f.calls_models()
        {
            let at = load.at(r);
            load.error("the migrate script cannot call models: it runs as a session moves to a new version", at);
        }
        let graph = self.graph(&m.graph, &refs);
        let outputs = self.outputs(&m.output, &d.schema);
        let finish = self.finish(m.finish.as_ref(), &d.schema);
        let lobby = m.lobby.as_ref().and_then(|l| self.lobby(l, &d.schema, &d.inputs));
        let expire_finished_after = m.expire_finished_after.as_ref().and_then(|e| self.retention(e));
        let simulate = self.simulate(m.simulate.as_ref(), &d.schema);
        let experiment = m.experiment.as_ref().and_then(|e| self.experiment(e, &numeric_params));
        // The weights say who plays which variant, not what the rules are: the version leaves
        // them out, so editing them keeps it (and the sessions' rules with it).
        for v in m.experiment.iter().flat_map(|e| e.value.variants.values()) {
            let span = v.value.weight.referenced.span();
            if let (Some(at), Some(len)) = (span.byte_offset(), span.byte_len()) {
                self.files.unversioned(&self.manifest_path.clone(), at as usize..(at + len) as usize);
            }
        }
        self.check_display(&c.prompts, &d);
        let graph = graph?;
        for s in &m.display.stream {
            if !graph.index.contains_key(&s.value) {
                self.error(format!("display.stream names `{}`, which is not a node", s.value), self.at(s));
            }
        }
        if let Some(field) = &m.display.speaker
            && !d.schema.fields.contains_key(&field.value)
        {
            self.error(format!("display.speaker names `{}`, which is not a state field", field.value), self.at(field));
        }
        if let Some(play) = &m.display.play_on_open {
            self.check_play_on_open(play, &d.inputs);
        }
        if !self.errors.is_empty() {
            return None;
        }
        let standin = standin.map(|f| {
            let standin = Standin::new(c.sandbox.clone(), f, standin_embed);
            let standin = match &self.answers {
                // The files' whole hash, without the parameters set: copies that differ only in
                // those share answers where the stand-in reads none of them.
                Some(a) => standin.keeping(a, &self.pack, &self.files.digest(&super::ParamValues::new()), &d.params),
                None => standin,
            };
            Arc::new(standin) as Arc<dyn crate::llm::Provider>
        });
        let search_standin = search_standin.map(|f| {
            Arc::new(crate::script::standin::StandinSearch::new(c.sandbox.clone(), f)) as Arc<dyn crate::search::Search>
        });
        Some(Pack {
            name: self.pack.clone(),
            description: m.description.trim().to_owned(),
            version: self.files.version(set),
            root: self.root.to_path_buf(),
            options: d.options,
            params: d.params,
            numeric_params,
            profiles: d.profiles,
            schema: d.schema,
            inputs: d.inputs,
            outputs,
            finish,
            display: c.display,
            graph,
            sandbox: c.sandbox,
            limits: d.limits,
            tables: d.tables,
            scripts: c.scripts,
            prompts: c.prompts,
            init,
            migrate,
            schema_recorded: Default::default(),
            selectors,
            standin,
            search_standin,
            files: self.files.paths(),
            file_hashes: self.files.hashes(),
            lobby,
            simulate,
            expire_finished_after,
            typed,
            experiment,
            warnings: std::mem::take(&mut self.warnings),
        })
    }

    /// The declarations: parameters, options, profiles, state fields, input, limits.
    fn declare(&mut self, m: &Manifest) -> Declared {
        let params: Map = m.params.iter().map(|(k, v)| (k.as_str().into(), value::from_json(&v.value))).collect();
        let options = self.options(&m.options);
        let profiles = Arc::new(self.profiles(&m.llm, &options));
        let schema = self.schema(&m.state);
        let inputs = self.inputs(&m.input);
        let limits = self.limits(&m.limits);
        let tables = self.tables(&m.data);
        let schemas = self.schemas(&m.schemas);
        Declared { params, options, profiles, schema, inputs, limits, tables, schemas }
    }

    /// Reads and compiles the templates (the pack's files and the manifest's `display:` ones),
    /// the libraries and the pack's scripts. `None` when not even an empty sandbox builds.
    fn compile(&mut self, m: &Manifest, d: &Declared) -> Option<Compiled> {
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
        for (field, t) in m.simulate.iter().flat_map(|s| &s.value.thresholds) {
            inline.push((format!("simulate.threshold.{field}"), t.value.clone(), self.at(t)));
        }
        let from = m.display.stream_from.as_ref().and_then(|r| match regex::Regex::new(&r.value) {
            Ok(re) => Some(re),
            Err(e) => {
                let at = self.at(r);
                self.error(format!("display.stream_from is no regular expression: {e}"), at);
                None
            }
        });
        display.stream = Arc::new(crate::speech::Streamed {
            nodes: m.display.stream.iter().map(|s| s.value.clone()).collect(),
            from,
            speaker: m.display.speaker.as_ref().map(|s| s.value.clone()),
        });
        display.opening = m.display.opening;
        display.play_on_open = m.display.play_on_open.as_ref().map(|p| p.value.clone());
        if let Some(help) = &m.display.input_help {
            let text = help.value.trim();
            if text.is_empty() || text.contains('\n') || text.chars().count() > 300 {
                let at = self.at(help);
                self.error("display.input_help is one line of 1 to 300 characters: what a player types", at);
            }
            display.input_help = Some(text.to_owned());
        }
        let fields: HashSet<&str> = d.schema.fields.keys().map(String::as_str).collect();
        let templates = self.read_text("prompts", &self.pack.clone(), "j2", "template");
        let (prompts, errors) = Prompts::load(&self.pack, &d.params, &fields, templates, inline);
        self.errors.extend(errors);
        for name in prompts.names() {
            for (filter, origin) in prompts.unknown_filters(name) {
                let near = crate::script::lint::nearest(&filter, crate::prompt::KNOWN_FILTERS.iter().copied());
                let hint = crate::script::lint::did_you_mean(near);
                self.error(format!("template `{name}` uses the filter `{filter}`, which does not exist{hint}"), origin);
            }
        }
        let prompts = prompts.limit_output(d.limits.max_render_size);
        let prompts = Arc::new(prompts);
        let shared = Arc::new(HostShared::new(
            self.pack.clone(),
            d.params.clone(),
            prompts.clone(),
            d.profiles.clone(),
            d.tables.clone(),
            d.schemas.clone(),
        ));
        let libs = self.read_text("scripts", "lib", "rhai", "script");
        let sandbox = match Sandbox::new(d.limits, shared.clone(), &libs) {
            Ok(s) => s,
            Err(errs) => {
                self.errors.extend(errs);
                Sandbox::new(d.limits, shared, &[]).ok()?
            }
        };
        let sources = self.read_text("scripts", &self.pack.clone(), "rhai", "script");
        let (scripts, errors) = Scripts::compile(&sandbox, &self.pack, sources);
        self.errors.extend(errors);
        let mut files: Vec<_> = scripts.files().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let declared = crate::script::lint::Declared {
            fields,
            params: d.params.keys().map(|k| k.as_str()).collect(),
            options: d.options.keys().map(String::as_str).collect(),
        };
        for f in files {
            self.errors.extend(sandbox.lint(f, &declared));
        }
        Some(Compiled { prompts, sandbox: Arc::new(sandbox), scripts, display })
    }

    /// The numbers of `params:` with their bounds; each `param_bounds:` entry names one, and
    /// holds its value.
    fn param_bounds(&mut self, m: &Manifest) -> Vec<super::NumericParam> {
        let numbers = super::params::numbers(&m.params, &super::params::bounds_of(&m.param_bounds));
        for (path, b) in &m.param_bounds {
            let at = self.at(b);
            let Some(p) = numbers.iter().find(|p| &p.path == path) else {
                let near = crate::script::lint::nearest(path, numbers.iter().map(|p| p.path.as_str()))
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                self.error(format!("param_bounds names `{path}`, which is no number in params{near}"), at);
                continue;
            };
            if let (Some(lo), Some(hi)) = (b.value.min, b.value.max)
                && lo > hi
            {
                self.error(format!("param_bounds of `{path}`: min {lo} is above max {hi}"), at);
            } else if p.check(p.value).is_err() {
                let value = crate::text::decimals(p.value, 6);
                self.error(
                    format!("`{path}` is {value} in params, outside its param_bounds ({})", p.bounds_text()),
                    at,
                );
            }
        }
        numbers
    }

    /// The `experiment:` section, checked: names of letters, digits, `_` and `-`; weights of 0 or
    /// more that sum above 0; each variant's params numbers of `params:` within their bounds;
    /// exactly one control (the variant that sets none).
    fn experiment(
        &mut self,
        decl: &Spanned<super::manifest::ExperimentDecl>,
        numbers: &[super::NumericParam],
    ) -> Option<super::Experiment> {
        use super::experiment::{NAME_MAX, Variant, is_name};
        let e = &decl.value;
        let errors = self.errors.len();
        let named = |what: &str, name: &str| {
            format!("{what} `{name}` is no name: letters, digits, `_` and `-`, at most {NAME_MAX}")
        };
        if !is_name(&e.name.value) {
            self.error(named("experiment", &e.name.value), self.at(&e.name));
        }
        let mut variants = Vec::new();
        for (name, v) in &e.variants {
            let at = self.at(v);
            if !is_name(name) {
                self.error(named("variant", name), at.clone());
            }
            let weight = v.value.weight.value;
            if !(weight.is_finite() && weight >= 0.0) {
                self.error(format!("variant `{name}`: a weight is a number of 0 or more, not {weight}"), at.clone());
            }
            let mut params = super::ParamValues::new();
            for (path, value) in &v.value.params {
                let at = self.at(value);
                let Some(param) = numbers.iter().find(|p| &p.path == path) else {
                    let near = crate::script::lint::nearest(path, numbers.iter().map(|p| p.path.as_str()))
                        .map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default();
                    self.error(format!("variant `{name}` sets `{path}`, which is no number in params{near}"), at);
                    continue;
                };
                match value.value.as_f64().map(|x| param.check(x)) {
                    Some(Ok(checked)) => {
                        params.insert(path.clone(), checked);
                    }
                    Some(Err(why)) => self.error(format!("variant `{name}`: {}", why.detail()), at),
                    None => self.error(format!("variant `{name}`: `{path}` is a number, not {}", value.value), at),
                }
            }
            variants.push(Variant { name: name.clone(), weight, params });
        }
        let at = self.at(decl);
        let controls: Vec<&str> =
            e.variants.iter().filter(|(_, v)| v.value.params.is_empty()).map(|(n, _)| n.as_str()).collect();
        if e.variants.len() < 2 {
            self.error("an experiment has two variants or more: a control, and what it is compared with", at.clone());
        } else if controls.len() != 1 {
            let which =
                if controls.is_empty() { "none does".to_owned() } else { format!("{} do", controls.join(", ")) };
            self.error(format!("an experiment has one control, the variant that sets no params: {which}"), at.clone());
        }
        if variants.iter().all(|v| v.weight.is_finite()) && variants.iter().map(|v| v.weight).sum::<f64>() <= 0.0 {
            self.error("the experiment's weights sum to 0: no new session would have a variant", at);
        }
        (self.errors.len() == errors).then(|| super::Experiment { name: e.name.value.clone(), variants })
    }

    /// The `simulate:` section, its fields checked against the state.
    fn simulate(
        &mut self,
        decl: Option<&Spanned<super::manifest::SimulateDecl>>,
        schema: &crate::state::Schema,
    ) -> super::Simulate {
        let Some(decl) = decl else { return super::Simulate { max_turns: 20, ..Default::default() } };
        let at = self.at(decl);
        let d = &decl.value;
        for field in d.outcome.iter().chain(&d.track) {
            if !schema.fields.contains_key(field) {
                self.error(format!("simulate names `{field}`, which is not a state field"), at.clone());
            }
        }
        for field in &d.track {
            if let Some(f) = schema.fields.get(field)
                && !matches!(
                    f.ty,
                    crate::vocab::TypeName::Int | crate::vocab::TypeName::Float | crate::vocab::TypeName::Number
                )
            {
                self.error(format!("simulate tracks `{field}`, which is {}, not a number", f.ty.a()), at.clone());
            }
        }
        if d.max_turns == Some(0) {
            self.error("simulate.max_turns is at least 1", at.clone());
        }
        if !d.outcomes.is_empty() && d.outcome.is_none() {
            self.error(
                "simulate.outcomes lists the values of the `outcome` field, which simulate does not name",
                at.clone(),
            );
        }
        for (field, t) in &d.thresholds {
            if !d.track.contains(field) {
                let at = self.at(t);
                self.error(format!("simulate.thresholds names `{field}`, which simulate does not track"), at);
            }
        }
        super::Simulate {
            outcome: d.outcome.clone(),
            outcomes: d.outcomes.clone(),
            track: d.track.clone(),
            max_turns: d.max_turns.unwrap_or(20),
            thresholds: d.thresholds.keys().cloned().collect(),
        }
    }

    /// `display.play_on_open` is a map of the pack's input fields.
    fn check_play_on_open(&mut self, play: &Spanned<serde_json::Value>, inputs: &IndexMap<String, super::InputSpec>) {
        let Some(map) = play.value.as_object() else {
            let at = self.at(play);
            return self.error("display.play_on_open is a map of input fields ({} for none)", at);
        };
        if let Some(name) = map.keys().find(|k| !inputs.contains_key(*k)) {
            let known: Vec<&str> = inputs.keys().map(String::as_str).collect();
            let what = format!(
                "display.play_on_open sets `{name}`, which is not an input field (fields: {})",
                known.join(", ")
            );
            let at = self.at(play);
            self.error(what, at);
        }
    }

    /// The `display:` templates read only state fields.
    fn check_display(&mut self, prompts: &Prompts, d: &Declared) {
        let known: HashSet<&str> = d.schema.fields.keys().map(String::as_str).collect();
        for part in ["reply", "status", "details", "finished"] {
            let name = format!("display.{part}");
            if prompts.contains(&name) {
                for (var, origin) in prompts.unknown_variables(&name, &known, &d.params) {
                    let what = crate::graph::load::unknown_read(&name, &var, &known, &d.params, false);
                    self.error(what, origin);
                }
            }
        }
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
}

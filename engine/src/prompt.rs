//! Prompt templates: minijinja over `prompts/<pack>/*.j2`, strict about undefined variables.
//!
//! A template sees the state's fields at the top level (`{{ merit_score }}`), plus `params`,
//! `options`, `input` and `vars` (what a node's `vars` script returned). The names each template
//! reads are found once at load, so a render converts only the fields it uses, and `check` can
//! report a variable that is neither a field nor one of those names before the game runs.

use std::collections::{BTreeMap, HashMap, HashSet};

use minijinja::{AutoEscape, Environment, UndefinedBehavior, Value};
use rhai::{Dynamic, Map};

use crate::error::{Error, ErrorKind, Origin, Result};
use crate::value::{field_to_template, to_template};

/// Names every template may read besides state fields.
pub(crate) const CONTEXT_NAMES: &[&str] = &["params", "options", "input", "vars"];
/// minijinja's global functions, which show up as undeclared variables.
const GLOBALS: &[&str] =
    &["range", "dict", "namespace", "debug", "loop", "self", "super", "caller", "varargs", "kwargs"];

/// Where a template's source lives, to turn template lines into file lines.
#[derive(Debug, Clone)]
struct Source {
    file: String,
    /// The file line of the template's first line, minus one.
    line_offset: u32,
    /// Column of the template's first character in its file line, minus one (inline templates).
    col_offset: u32,
    text: String,
}

/// A pack's templates.
pub(crate) struct Prompts {
    env: Environment<'static>,
    sources: HashMap<String, Source>,
    /// Top-level names each template reads; `None` when it includes others (then it gets all).
    reads: HashMap<String, Option<Vec<String>>>,
    params: Value,
    /// The most bytes one render may produce (`limits.max_render_size`).
    max_output: usize,
}

impl std::fmt::Debug for Prompts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompts").field("templates", &self.sources.keys().collect::<Vec<_>>()).finish()
    }
}

impl Prompts {
    /// Builds the pack's templates: `files` are its `prompts/<pack>/` files as (path relative to
    /// the root, text), named by their path under that folder; `inline` are the manifest's own
    /// templates (`display:`) as (name, source, origin). Returns the templates with the errors of
    /// those that did not compile: the others stay, so one broken template is one error, and the
    /// references to the rest still resolve.
    pub(crate) fn load(
        pack: &str,
        params: &Map,
        fields: &HashSet<&str>,
        files: Vec<(String, String)>,
        inline: Vec<(String, String, Origin)>,
    ) -> (Self, Vec<Error>) {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        let syntax = minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
        env.set_syntax(syntax.expect("the default delimiters are valid"));
        env.set_fuel(Some(1_000_000));
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.add_filter("transcript", crate::value::transcript);
        let mut sources = HashMap::new();
        let mut errors = Vec::new();
        let prefix = format!("prompts/{pack}/");
        for (file, text) in files {
            let name = file.strip_prefix(&prefix).unwrap_or(&file).to_owned();
            sources.insert(name, Source { file, line_offset: 0, col_offset: 0, text });
        }
        for (name, text, origin) in inline {
            let source = Source {
                file: origin.file.clone(),
                line_offset: origin.line.saturating_sub(1),
                col_offset: origin.column.saturating_sub(1),
                text,
            };
            sources.insert(name, source);
        }
        let mut names: Vec<&String> = sources.keys().collect();
        names.sort();
        for name in names {
            let src = &sources[name];
            if let Err(e) = env.add_template_owned(name.clone(), src.text.clone()) {
                errors.push(template_error(&e, &sources));
            }
        }
        // What each template reads: every identifier in its source that names a field or a
        // context variable. Textual on purpose: minijinja's own analysis misses some (the sequence
        // of a sliced `for`), and reading a field too many only costs a conversion.
        let mut reads = HashMap::new();
        for (name, src) in &sources {
            let uses_others = ["include", "import", "extends", "from "].iter().any(|k| src.text.contains(k));
            let vars: Option<Vec<String>> = if uses_others {
                None
            } else {
                let mut v: Vec<String> = identifiers(&src.text)
                    .filter(|w| fields.contains(w) || CONTEXT_NAMES.contains(w))
                    .map(str::to_owned)
                    .collect();
                v.sort();
                v.dedup();
                Some(v)
            };
            reads.insert(name.clone(), vars);
        }
        let params =
            Value::from_object(params.iter().map(|(k, v)| (k.to_string(), to_template(v))).collect::<BTreeMap<_, _>>());
        let max_output = crate::limits::Limits::default().max_render_size;
        (Prompts { env, sources, reads, params, max_output }, errors)
    }

    /// The filters template `name` uses that do not exist (`{{ x | uper }}`), each with where it
    /// is first used: minijinja looks filters up only as it renders, so without this a typo
    /// passes `check` and fails the first turn that renders it.
    pub(crate) fn unknown_filters(&self, name: &str) -> Vec<(String, Origin)> {
        let Some(src) = self.sources.get(name) else { return Vec::new() };
        let mut unknown: Vec<(String, usize)> = Vec::new();
        for (filter, at) in filters_used(&src.text) {
            if unknown.iter().any(|(f, _)| *f == filter) {
                continue;
            }
            let probe = format!("{{{{ 1 | {filter} }}}}");
            if let Err(e) = self.env.render_str(&probe, ())
                && e.kind() == minijinja::ErrorKind::UnknownFilter
            {
                unknown.push((filter, at));
            }
        }
        unknown
            .into_iter()
            .map(|(f, at)| {
                let (line, col) = line_col(&src.text, at);
                let col = if line == 1 { col + src.col_offset } else { col };
                (f, Origin::new(&src.file, src.line_offset + line, col))
            })
            .collect()
    }

    /// A set with no templates (for a sandbox's tests).
    #[cfg(test)]
    pub(crate) fn empty(params: &Map) -> Self {
        let params =
            Value::from_object(params.iter().map(|(k, v)| (k.to_string(), to_template(v))).collect::<BTreeMap<_, _>>());
        Prompts {
            env: Environment::new(),
            sources: HashMap::new(),
            reads: HashMap::new(),
            params,
            max_output: crate::limits::Limits::default().max_render_size,
        }
    }

    /// Bounds what one render may produce to `bytes` (fuel bounds the work; this, the memory).
    pub(crate) fn limit_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// Whether a template of that name exists.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.sources.contains_key(name)
    }

    /// Every template's name (the inline ones' too), sorted.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.sources.keys().map(String::as_str).collect();
        v.sort();
        v
    }

    /// The names of the file templates (not the inline ones), sorted.
    pub(crate) fn file_templates(&self) -> Vec<&str> {
        let mut v: Vec<&str> =
            self.sources.iter().filter(|(_, s)| s.line_offset == 0).map(|(k, _)| k.as_str()).collect();
        v.sort();
        v
    }

    /// The variables `name` reads that are neither in `known` nor context names or globals,
    /// with the position of their first use. `params.x` is checked against `params` too.
    pub(crate) fn unknown_variables(&self, name: &str, known: &HashSet<&str>, params: &Map) -> Vec<(String, Origin)> {
        let Ok(t) = self.env.get_template(name) else {
            return Vec::new();
        };
        let mut unknown: Vec<String> = Vec::new();
        for var in t.undeclared_variables(true) {
            let mut parts = var.split('.');
            let root = parts.next().unwrap_or_default();
            if known.contains(root) || GLOBALS.contains(&root) || (CONTEXT_NAMES.contains(&root) && root != "params") {
                continue;
            }
            if root == "params" {
                match parts.next() {
                    Some(p) if !params.contains_key(p) => unknown.push(var.clone()),
                    _ => {}
                }
                continue;
            }
            unknown.push(root.to_owned());
        }
        unknown.sort();
        unknown.dedup();
        let src = &self.sources[name];
        unknown
            .into_iter()
            .map(|var| {
                let last = var.rsplit('.').next().unwrap_or(&var);
                let (line, col) = find_word(&src.text, &var).or_else(|| find_word(&src.text, last)).unwrap_or((1, 1));
                let col = if line == 1 { col + src.col_offset } else { col };
                (var, Origin::new(&src.file, src.line_offset + line, col))
            })
            .collect()
    }

    /// Renders `name` for a node: state fields at the top level, plus params, options, input
    /// and the node's vars. The template reads the state's lists and maps where they are.
    pub(crate) fn render(
        &self,
        name: &str,
        state: &Dynamic,
        options: &Map,
        input: &Map,
        vars: Option<&Map>,
    ) -> Result<String> {
        let map = state.read_lock::<Map>().ok_or_else(|| Error::internal("state is not a map"))?;
        let mut ctx: BTreeMap<String, Value> = BTreeMap::new();
        let put = |key: &str| match key {
            "params" => Some(self.params.clone()),
            "options" => Some(map_value(options)),
            "input" => Some(map_value(input)),
            "vars" => vars.map(map_value),
            field => field_to_template(state, &map, field),
        };
        match self.reads.get(name) {
            Some(Some(reads)) => {
                for key in reads {
                    if let Some(v) = put(key) {
                        ctx.insert(key.clone(), v);
                    }
                }
            }
            _ => {
                for key in map.keys().map(|k| k.as_str()).chain(CONTEXT_NAMES.iter().copied()) {
                    if let Some(v) = put(key) {
                        ctx.insert(key.to_owned(), v);
                    }
                }
            }
        }
        // The views lock the state as they read it.
        drop(map);
        self.render_ctx(name, Value::from_object(ctx))
    }

    /// Renders `name` for the `render()` host function: `vars` at the top level, plus params,
    /// options and input.
    pub(crate) fn render_vars(&self, name: &str, vars: &Map, options: &Map, input: &Map) -> Result<String> {
        let mut ctx: BTreeMap<String, Value> = vars.iter().map(|(k, v)| (k.to_string(), to_template(v))).collect();
        ctx.insert("params".into(), self.params.clone());
        ctx.insert("options".into(), map_value(options));
        ctx.insert("input".into(), map_value(input));
        self.render_ctx(name, Value::from_object(ctx))
    }

    fn render_ctx(&self, name: &str, ctx: Value) -> Result<String> {
        let t = self.env.get_template(name).map_err(|_| {
            Error::new(
                ErrorKind::Template,
                format!("there is no template `{name}` (templates: {})", self.file_templates().join(", ")),
            )
        })?;
        let mut out = Bounded { buf: Vec::new(), max: self.max_output, over: false };
        match t.render_captured_to(ctx, &mut out) {
            Ok(_) => String::from_utf8(out.buf)
                .map_err(|_| Error::new(ErrorKind::Internal, format!("template `{name}` rendered invalid UTF-8"))),
            Err(_) if out.over => {
                let src = &self.sources[name];
                Err(Error::new(
                    ErrorKind::Limit,
                    format!("template `{name}` rendered more than {} bytes (limits.max_render_size)", self.max_output),
                )
                .at(Origin::file(&src.file)))
            }
            Err(e) => Err(template_error(&e, &self.sources)),
        }
    }
}

/// A render's output, refusing to grow past `max` bytes.
struct Bounded {
    buf: Vec<u8>,
    max: usize,
    over: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, piece: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + piece.len() > self.max {
            self.over = true;
            return Err(std::io::Error::other("over the render size limit"));
        }
        self.buf.extend_from_slice(piece);
        Ok(piece.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The identifiers (`[A-Za-z_][A-Za-z0-9_]*`) in `text`.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_'))
}

fn map_value(m: &Map) -> Value {
    Value::from_object(m.iter().map(|(k, v)| (k.to_string(), to_template(v))).collect::<BTreeMap<_, _>>())
}

/// minijinja's own filters and the engine's (`transcript`), for a "did you mean" and an editor's
/// completion (whether a filter exists is asked of the environment itself).
pub const KNOWN_FILTERS: &[&str] = &[
    "abs",
    "attr",
    "batch",
    "bool",
    "capitalize",
    "count",
    "default",
    "dictsort",
    "escape",
    "first",
    "float",
    "groupby",
    "indent",
    "int",
    "items",
    "join",
    "last",
    "length",
    "lines",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "split",
    "string",
    "sum",
    "title",
    "tojson",
    "trim",
    "unique",
    "upper",
    "urlencode",
    "transcript",
];

/// The filter names a template's tags use, each with its byte offset: `| name` inside `{{ }}`
/// and `{% %}` (string literals skipped), and `{% filter name %}`.
fn filters_used(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(open) = text[at..].find('{') {
        let start = at + open + 1;
        let close = match text[start..].chars().next() {
            Some('{') => "}}",
            Some('%') => "%}",
            _ => {
                at = start;
                continue;
            }
        };
        // The tag's text starts after its second brace; its end is looked for from there (`{%}`
        // is no tag).
        let body = start + 1;
        let Some(len) = text[body..].find(close) else { break };
        let tag = without_strings(&text[body..body + len]);
        let name_at = |from: usize| {
            let rest = &tag[from..];
            let skip = rest.len() - rest.trim_start().len();
            let name: String = rest[skip..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then(|| (name, body + from + skip))
        };
        let lead = tag.len() - tag.trim_start().len();
        if tag[lead..].starts_with("filter ")
            && let Some(found) = name_at(lead + "filter ".len())
        {
            out.push(found);
        }
        let mut bar = 0;
        while let Some(i) = tag[bar..].find('|') {
            bar += i + 1;
            out.extend(name_at(bar));
        }
        at = body + len + close.len();
    }
    out
}

/// A tag's text with its string literals blanked out.
fn without_strings(tag: &str) -> String {
    let mut out = String::with_capacity(tag.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in tag.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
                // As many bytes as the character had, so offsets in the text still hold.
                out.extend(std::iter::repeat_n(' ', c.len_utf8()));
            }
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                out.push(' ');
            }
            None => out.push(c),
        }
    }
    out
}

/// 1-based line and column of the first whole-word occurrence of `word` in `text`.
fn find_word(text: &str, word: &str) -> Option<(u32, u32)> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !ident(before) && !ident(after) {
            return Some(line_col(text, at));
        }
        from = at + word.len();
    }
    None
}

fn line_col(text: &str, byte: usize) -> (u32, u32) {
    let before = &text[..byte.min(text.len())];
    let line = before.matches('\n').count() as u32 + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
    (line, col)
}

/// A minijinja error as an engine error at `file:line:col`.
fn template_error(e: &minijinja::Error, sources: &HashMap<String, Source>) -> Error {
    let mut detail = e.kind().to_string();
    if let Some(d) = e.detail() {
        detail = format!("{detail}: {d}");
    }
    let origin = e.name().and_then(|n| sources.get(n)).map(|src| {
        let (line, col) = match e.range() {
            Some(r) => line_col(&src.text, r.start),
            None => (e.line().unwrap_or(0) as u32, 0),
        };
        let col = if line == 1 && col > 0 { col + src.col_offset } else { col };
        Origin::new(&src.file, src.line_offset + line, col)
    });
    let err = Error::new(ErrorKind::Template, detail);
    match origin {
        Some(o) => err.at(o),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::from_json;
    use serde_json::json;

    fn prompts(files: &[(&str, &str)]) -> std::result::Result<Prompts, Vec<Error>> {
        let files = files.iter().map(|(name, text)| (format!("prompts/p/{name}"), text.to_string())).collect();
        let params = from_json(&json!({"n": 3})).cast::<Map>();
        let fields: HashSet<&str> = ["score", "other", "history"].into();
        match Prompts::load("p", &params, &fields, files, vec![]) {
            (p, errors) if errors.is_empty() => Ok(p),
            (_, errors) => Err(errors),
        }
    }

    #[test]
    fn renders_state_params_options_and_vars() {
        let p = prompts(&[("t.j2", "{{ score }}/{{ params.n }}/{{ options.level }}/{{ vars.x }}/{{ input.m }}")]);
        let p = p.unwrap();
        let state = from_json(&json!({"score": 7, "other": [1]}));
        let options = from_json(&json!({"level": "easy"})).cast::<Map>();
        let input = from_json(&json!({"m": "hi"})).cast::<Map>();
        let vars = from_json(&json!({"x": true})).cast::<Map>();
        assert_eq!(p.render("t.j2", &state, &options, &input, Some(&vars)).unwrap(), "7/3/easy/True/hi");
    }

    #[test]
    fn a_sliced_loop_sees_its_sequence() {
        let p = prompts(&[("t.j2", "{% for m in history[-params.n:] %}{{ m }},{% endfor %}")]);
        let state = crate::state::root(from_json(&json!({"history": [1, 2, 3, 4, 5]})).cast::<Map>());
        assert_eq!(p.unwrap().render("t.j2", &state, &Map::new(), &Map::new(), None).unwrap(), "3,4,5,");
    }

    #[test]
    fn undefined_variables_fail_with_the_template_line() {
        let p = prompts(&[("t.j2", "line one\n{{ nope.deeper }}")]);
        let e = p.unwrap().render("t.j2", &Dynamic::from_map(Map::new()), &Map::new(), &Map::new(), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Template);
        assert_eq!(e.origin().unwrap().to_string(), "prompts/p/t.j2:2:4");
    }

    #[test]
    fn a_render_stops_at_the_output_limit() {
        let bomb = r#"{% for i in range(100000) %}{{ "x" * 100000 }}{% endfor %}"#;
        let p = prompts(&[("bomb.j2", bomb), ("ok.j2", "{{ 'y' * 10 }}")]);
        let p = p.unwrap().limit_output(4096);
        let e = p.render("bomb.j2", &Dynamic::from_map(Map::new()), &Map::new(), &Map::new(), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit);
        assert_eq!(
            e.to_string(),
            "template `bomb.j2` rendered more than 4096 bytes (limits.max_render_size) (in prompts/p/bomb.j2)"
        );
        assert_eq!(
            p.render("ok.j2", &Dynamic::from_map(Map::new()), &Map::new(), &Map::new(), None).unwrap(),
            "yyyyyyyyyy"
        );
    }

    #[test]
    fn syntax_errors_name_the_spot() {
        let p = prompts(&[("bad.j2", "ok\n{% if x %}never closed")]);
        let errs = p.unwrap_err();
        assert_eq!(errs[0].origin().unwrap().file, "prompts/p/bad.j2");
        assert!(errs[0].origin().unwrap().line >= 2, "{:?}", errs[0]);
    }

    #[test]
    fn unknown_variables_are_found_statically() {
        let p = prompts(&[(
            "t.j2",
            "{{ score }}\n{% for m in history %}{{ m.x }}{% endfor %}\n{{ params.n }}{{ params.zz }}{{ missing }}",
        )]);
        let p = p.unwrap();
        let known: HashSet<&str> = ["score", "history"].into();
        let params = from_json(&json!({"n": 3})).cast::<Map>();
        let unknown = p.unknown_variables("t.j2", &known, &params);
        let names: Vec<String> = unknown.iter().map(|(v, o)| format!("{v}@{o}")).collect();
        assert_eq!(names, ["missing@prompts/p/t.j2:3:33", "params.zz@prompts/p/t.j2:3:18"]);
    }

    #[test]
    fn unknown_filters_are_found_before_a_render() {
        let p = prompts(&[(
            "t.j2",
            "{{ score | round(2) }} {{ \"a|uper\" }}\n{{ other | uper }}{% for h in history | revers %}{% endfor %}",
        )])
        .unwrap();
        let found: Vec<String> = p.unknown_filters("t.j2").iter().map(|(f, o)| format!("{f}@{o}")).collect();
        assert_eq!(found, ["uper@prompts/p/t.j2:2:12", "revers@prompts/p/t.j2:2:41"]);
    }

    #[test]
    fn filters_are_read_from_any_text() {
        for text in ["{%}", "{{}", "{{", "{%", "{{ | }}", "{% filter %}", "{{ 'a' | x('}}') }}", "é{{ x |ü }}"] {
            let _ = filters_used(text);
        }
        let names: Vec<String> =
            filters_used("{% filter upper %}x{% endfilter %}{{ a|b|c(1) }}").into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["upper", "b", "c"]);
    }

    #[test]
    fn one_broken_template_leaves_the_others() {
        let files = vec![
            ("prompts/p/ok.j2".to_owned(), "{{ score }}".to_owned()),
            ("prompts/p/bad.j2".to_owned(), "{% if %}".to_owned()),
        ];
        let (p, errors) = Prompts::load("p", &Map::new(), &["score"].into(), files, vec![]);
        assert_eq!(errors.len(), 1);
        assert!(p.contains("ok.j2") && p.contains("bad.j2"), "both are known; only one is broken");
    }
}

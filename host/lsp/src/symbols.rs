//! What a name in a pack is, and every place that names it: a node (its key, edges, route
//! targets, `display.stream`, the strings of the route functions `graph.routes` names), a state
//! field (its declaration, `this.`/`state.` reads, the keys of update maps, template expressions,
//! the manifest's conditions, lists and thresholds), a param (its declaration, `param("…")`,
//! `params.…`, its bounds), and a script function (its definition, its calls in the file,
//! `file.rhai::function` in the manifest). Only those places: a profile, schema or phase that
//! happens to share a node's name is another thing, and prose (docs, descriptions, comments) is
//! left as written. References and rename are built on it.

use std::collections::HashMap;

use lsp_types::{Location, Position, Range, TextEdit, Uri, WorkspaceEdit};

use super::features::{Lang, lang, manifest_keys, node_names, script_files, script_functions};
use super::text::{self, is_word, word_at};
use super::workspace::Workspace;

/// A name the pack declares.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Symbol {
    Node(String),
    Field(String),
    Param(String),
    /// A function of a script file (relative to the root).
    Function {
        file: String,
        name: String,
    },
}

impl Symbol {
    fn name(&self) -> &str {
        match self {
            Symbol::Node(n) | Symbol::Field(n) | Symbol::Param(n) => n,
            Symbol::Function { name, .. } => name,
        }
    }
}

/// The token a word's range sits in, with `.`, `/` and `::` joined to it (so the `intake` of
/// `intake.rhai::intake` is not a node's name) and a key's trailing `:` left off.
fn whole_token(text: &str, range: Range) -> Option<String> {
    let (t, _) = word_at(text, range.start, &['.', '/', ':'])?;
    let t = t.strip_suffix(':').filter(|t| !t.ends_with(':')).unwrap_or(&t);
    Some(t.to_owned())
}

/// The characters of `line` before and after the byte range `at..at + len`.
fn around(line: &str, at: usize, len: usize) -> (&str, &str) {
    (&line[..at], &line[at + len..])
}

/// The symbol at `pos` in `rel`, with the pack it belongs to.
pub(super) fn symbol_at(ws: &Workspace, rel: &str, pos: Position) -> Option<(String, Symbol)> {
    let text = ws.text(rel)?;
    let (pack, good) = ws.pack_for(rel)?;
    let good = good.as_deref();
    let (word, range) = word_at(&text, pos, &[])?;
    let l = text::line(&text, range.start.line);
    let at = text::byte_at(l, range.start.character);
    let (before, after) = around(l, at, word.len());
    let fields = manifest_keys(ws, &pack, &["state"]);
    let params = manifest_keys(ws, &pack, &["params"]);
    let field = |w: &str| fields.iter().any(|f| f == w).then(|| Symbol::Field(w.to_owned()));
    let symbol = match lang(rel)? {
        Lang::Yaml => {
            let token = whole_token(&text, range)?;
            let path = text::yaml_path_at(&text, range.start.line, 0);
            if let Some((file, function)) = token.split_once("::") {
                (function == word)
                    .then(|| Symbol::Function { file: format!("scripts/{pack}/{file}"), name: word.clone() })
            } else if token == word
                && node_names(ws, &pack, good).contains(&word)
                && !path.starts_with(&["state".into()])
            {
                Some(Symbol::Node(word.clone()))
            } else if path == ["state".to_owned(), word.clone()]
                || before.ends_with("this.")
                || before.ends_with("state.")
            {
                field(&word)
            } else if path == ["params".to_owned(), word.clone()] || before.ends_with("params.") {
                params.contains(&word).then(|| Symbol::Param(word.clone()))
            } else {
                None
            }
        }
        Lang::Rhai => {
            if before.ends_with("this.") || before.ends_with("state.") {
                field(&word)
            } else if before.ends_with("param(\"") {
                params.contains(&word).then(|| Symbol::Param(word.clone()))
            } else if script_functions(&text).iter().any(|(f, _, _)| *f == word) && !before.ends_with('.') {
                Some(Symbol::Function { file: rel.to_owned(), name: word.clone() })
            } else if before.ends_with('"') && after.starts_with('"') && node_names(ws, &pack, good).contains(&word) {
                Some(Symbol::Node(word.clone()))
            } else if after.starts_with(':') && !after.starts_with("::") {
                field(&word)
            } else {
                None
            }
        }
        Lang::Jinja => {
            if before.ends_with("params.") {
                params.contains(&word).then(|| Symbol::Param(word.clone()))
            } else if !before.ends_with('.') {
                field(&word)
            } else {
                None
            }
        }
    }?;
    // Only a place that names it: `llm: judge` names a profile, whatever the nodes are called.
    let named =
        references(ws, &pack, &symbol).iter().any(|l| l.range == range && ws.rel(&l.uri).as_deref() == Some(rel));
    named.then_some((pack, symbol))
}

/// Each whole-word occurrence of `name` in `text`: its line, the line, its byte offset in the
/// text and in the line, and its range.
fn occurrences<'t>(text: &'t str, name: &'t str) -> impl Iterator<Item = (u32, &'t str, usize, usize, Range)> + 't {
    text.lines().enumerate().flat_map(move |(n, l)| {
        // The line's place in the text, whatever its line breaks.
        let line_at = l.as_ptr() as usize - text.as_ptr() as usize;
        l.match_indices(name).filter_map(move |(i, _)| {
            let before = l[..i].chars().next_back();
            let after = l[i + name.len()..].chars().next();
            if before.is_some_and(is_word) || after.is_some_and(is_word) {
                return None;
            }
            let from = l[..i].chars().count();
            let range = text::range_chars(text, n as u32, from, from + name.chars().count());
            Some((n as u32, l, line_at + i, i, range))
        })
    })
}

/// Keys whose text is prose: what they say is left as written.
const PROSE: &[&str] = &["doc", "description", "input_help", "message", "finished_message"];

/// Keys whose value names state fields (a condition, a list of fields, one field).
const NAMING_FIELDS: &[&str] = &["when", "output", "track", "outcome", "from", "speaker"];

/// Whether what follows `before` on a manifest's line is prose (after a `doc:`, a description, a
/// comment).
fn prose(before: &str) -> bool {
    PROSE.iter().any(|k| before.contains(&format!("{k}:"))) || before.contains(" #") || before.starts_with('#')
}

/// Whether what follows `before` on a script's line is in a comment.
fn commented(line: &str, before: &str) -> bool {
    before.contains("//") || line.trim_start().starts_with('*') || line.trim_start().starts_with("/*")
}

/// The lines of each function of `text` that `names` names: from its `fn` line to the line
/// before the next function.
fn function_lines(text: &str, names: &[String]) -> Vec<std::ops::Range<u32>> {
    let all = script_functions(text);
    let total = text.lines().count() as u32;
    all.iter()
        .enumerate()
        .filter(|(_, (n, _, _))| names.contains(n))
        .map(|(i, (_, line, _))| *line..all.get(i + 1).map_or(total, |next| next.1))
        .collect()
}

/// The functions `graph.routes` names (`fn: file.rhai::function`), by script file.
fn route_functions(manifest: &str, pack: &str) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for k in text::yaml_keys(manifest) {
        if k.path.len() == 4 && k.path[..2] == ["graph", "routes"] && k.path[3] == "fn" {
            let value = text::line(manifest, k.line).split_once("fn:").map(|(_, v)| v.trim()).unwrap_or("");
            if let Some((file, function)) = value.split_once("::") {
                out.entry(format!("scripts/{pack}/{file}")).or_default().push(function.to_owned());
            }
        }
    }
    out
}

/// Every place `symbol` of `pack` is named.
pub(super) fn references(ws: &Workspace, pack: &str, symbol: &Symbol) -> Vec<Location> {
    let manifest = format!("config/{pack}.yaml");
    let (_, good) = ws.pack_for(&manifest).unwrap_or_default();
    let mut files = vec![manifest.clone()];
    files.extend(script_files(ws, pack, good.as_deref()).into_iter().map(|f| format!("scripts/{pack}/{f}")));
    let prefix = format!("prompts/{pack}/");
    if let Some(p) = &good {
        files.extend(p.files().iter().filter(|f| f.starts_with(&prefix)).cloned());
    }
    files.extend(ws.docs.keys().filter(|k| k.starts_with(&prefix) && !files.contains(k)).cloned().collect::<Vec<_>>());
    let routes = route_functions(&ws.text(&manifest).unwrap_or_default(), pack);
    let name = symbol.name();
    let mut out = Vec::new();
    for file in files {
        let (Some(body), Some(uri)) = (ws.text(&file), ws.uri(&file)) else { continue };
        let Some(language) = lang(&file) else { continue };
        let keys = if language == Lang::Yaml { text::yaml_keys(&body) } else { Vec::new() };
        let prose_lines: Vec<std::ops::RangeInclusive<u32>> = keys
            .iter()
            .filter(|k| k.last > k.line && k.path.last().is_some_and(|n| PROSE.contains(&n.as_str())))
            .map(|k| k.line + 1..=k.last)
            .collect();
        let route_lines = routes.get(&file).map(|f| function_lines(&body, f)).unwrap_or_default();
        for (n, l, offset, at, range) in occurrences(&body, name) {
            let (before, after) = around(l, at, name.len());
            let col = range.start.character as usize;
            let key_here = keys.iter().find(|k| k.line == n && k.from == col);
            let line_key = keys.iter().find(|k| k.line == n);
            let line_path = || text::yaml_path_at(&body, n, 0);
            let token = || whole_token(&body, range).unwrap_or_default();
            let valued = |allowed: &[&str]| {
                line_key.is_some_and(|k| k.path.last().is_some_and(|n| allowed.contains(&n.as_str())) && col > k.to)
            };
            let counts = match (symbol, language) {
                (_, Lang::Yaml) if prose(before) || prose_lines.iter().any(|r| r.contains(&n)) => false,
                (_, Lang::Rhai) if commented(l, before) => false,
                (Symbol::Node(_), Lang::Yaml) => match key_here {
                    Some(k) => {
                        k.path.len() == 3 && k.path[0] == "graph" && (k.path[1] == "nodes" || k.path[1] == "routes")
                    }
                    None => {
                        let path = line_path();
                        let in_graph = path.starts_with(&["graph".to_owned(), "edges".to_owned()])
                            || (path.starts_with(&["graph".to_owned(), "routes".to_owned()]) && valued(&["to"]))
                            || (path.starts_with(&["display".to_owned()]) && valued(&["stream"]));
                        in_graph && token() == name
                    }
                },
                (Symbol::Node(_), Lang::Rhai) => {
                    before.ends_with('"') && after.starts_with('"') && route_lines.iter().any(|r| r.contains(&n))
                }
                (Symbol::Field(_), Lang::Yaml) => match key_here {
                    Some(k) => {
                        k.path == ["state", name] || (k.path.len() == 3 && k.path[..2] == ["simulate", "thresholds"])
                    }
                    None => {
                        let t = token();
                        t == format!("this.{name}")
                            || t == format!("state.{name}")
                            || (!before.ends_with('.') && (text::in_expression(&body, offset) || valued(NAMING_FIELDS)))
                    }
                },
                (Symbol::Field(_), Lang::Rhai) => {
                    before.ends_with("this.")
                        || before.ends_with("state.")
                        || (after.starts_with(':') && !after.starts_with("::") && !before.ends_with('.'))
                }
                (Symbol::Field(_), Lang::Jinja) => !before.ends_with('.') && text::in_expression(&body, offset),
                (Symbol::Param(_), Lang::Yaml) => match key_here {
                    Some(k) => k.path == ["params", name] || (k.path.len() == 2 && k.path[0] == "param_bounds"),
                    // A bound names the param by its dotted path: `thresholds.easy:`.
                    None => {
                        let bound =
                            line_key.is_some_and(|k| k.path.len() == 2 && k.path[0] == "param_bounds" && k.from == col);
                        before.ends_with("params.")
                            || (before.ends_with("param(\"") && (after.starts_with('"') || after.starts_with('.')))
                            || (bound && after.starts_with('.'))
                    }
                },
                (Symbol::Param(_), Lang::Rhai) => {
                    before.ends_with("param(\"") && (after.starts_with('"') || after.starts_with('.'))
                }
                (Symbol::Param(_), Lang::Jinja) => before.ends_with("params.") && text::in_expression(&body, offset),
                (Symbol::Function { file: of, .. }, Lang::Rhai) => {
                    file == *of && !before.ends_with('.') && after.trim_start().starts_with('(')
                }
                (Symbol::Function { file: of, .. }, Lang::Yaml) => {
                    token().split_once("::").is_some_and(|(f, _)| format!("scripts/{pack}/{f}") == *of)
                }
                _ => false,
            };
            if counts {
                out.push(Location::new(uri.clone(), range));
            }
        }
    }
    out
}

/// The edits that rename the symbol at `pos` to `new_name` everywhere it is named; an error when
/// the name cannot be one, or another of its kind has it.
// lsp-types keys a workspace edit's changes by `Uri`, whose parsed form clippy cannot prove
// immutable; nothing here mutates one.
#[allow(clippy::mutable_key_type)]
pub(super) fn rename(
    ws: &Workspace,
    rel: &str,
    pos: Position,
    new_name: &str,
) -> Result<Option<WorkspaceEdit>, String> {
    let Some((pack, symbol)) = symbol_at(ws, rel, pos) else { return Ok(None) };
    const KEYWORDS: &[&str] = &[
        "START", "END", "this", "state", "params", "let", "const", "fn", "private", "if", "else", "switch", "while",
        "loop", "do", "until", "for", "in", "break", "continue", "return", "throw", "try", "catch", "import", "export",
        "as", "global", "true", "false", "is", "not", "and", "or", "none", "set", "endif", "endfor",
    ];
    let valid = new_name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && new_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&new_name);
    if !valid {
        return Err(format!(
            "`{new_name}` cannot be a name here: ASCII letters, digits and `_`, not starting with a digit, and not a keyword"
        ));
    }
    let (_, good) = ws.pack_for(rel).unwrap_or_default();
    let taken = match &symbol {
        Symbol::Node(_) => node_names(ws, &pack, good.as_deref()).contains(&new_name.to_owned()).then_some("a node"),
        Symbol::Field(_) => {
            manifest_keys(ws, &pack, &["state"]).iter().any(|f| f == new_name).then_some("a state field")
        }
        Symbol::Param(_) => manifest_keys(ws, &pack, &["params"]).iter().any(|f| f == new_name).then_some("a param"),
        Symbol::Function { file, .. } => {
            let body = ws.text(file).unwrap_or_default();
            script_functions(&body).iter().any(|(f, _, _)| f == new_name).then_some("a function of that file")
        }
    };
    if let Some(what) = taken.filter(|_| new_name != symbol.name()) {
        return Err(format!("pack `{pack}` already has {what} `{new_name}`"));
    }
    let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
    for l in references(ws, &pack, &symbol) {
        changes.entry(l.uri).or_default().push(TextEdit::new(l.range, new_name.to_owned()));
    }
    Ok(Some(WorkspaceEdit { changes: Some(changes), ..Default::default() }))
}

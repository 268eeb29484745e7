//! What a name in a pack is, and every place that names it: a node (its key, edges, routes, the
//! strings route scripts return), a state field (its declaration, `this.`/`state.` reads, the
//! keys of update maps, template expressions, the manifest's lists and conditions), a param
//! (its declaration, `param("…")`, `params.…` in templates and conditions, its bounds), and a
//! script function (its definition, its calls in the file, `file.rhai::function` in the
//! manifest). References and rename are built on it.

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
    Some((pack, symbol))
}

/// Each whole-word occurrence of `name` in `text`: its line, byte offset in the line, and range.
fn occurrences<'t>(text: &'t str, name: &'t str) -> impl Iterator<Item = (u32, &'t str, usize, Range)> + 't {
    text.lines().enumerate().flat_map(move |(n, l)| {
        l.match_indices(name).filter_map(move |(i, _)| {
            let before = l[..i].chars().next_back();
            let after = l[i + name.len()..].chars().next();
            if before.is_some_and(is_word) || after.is_some_and(is_word) {
                return None;
            }
            let from = l[..i].chars().count();
            let range = text::range_chars(text, n as u32, from, from + name.chars().count());
            Some((n as u32, l, i, range))
        })
    })
}

/// Whether the byte `at` of a template's text lies inside an expression or a statement
/// (`{{ … }}`, `{% … %}`) rather than in its prose.
fn in_expression(text: &str, line: u32, at: usize) -> bool {
    let offset: usize = text.lines().take(line as usize).map(|l| l.len() + 1).sum::<usize>() + at;
    let head = &text[..offset.min(text.len())];
    let open = head.rfind("{{").max(head.rfind("{%"));
    let close = head.rfind("}}").max(head.rfind("%}"));
    match (open, close) {
        (Some(o), Some(c)) => o > c,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Whether what follows `before` on a manifest's line is prose (a `doc:`, a description, a
/// comment), not a reference.
fn prose(before: &str) -> bool {
    ["doc:", "description:", "input_help:", "message:", "#"].iter().any(|k| before.contains(k))
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
    let name = symbol.name();
    let mut out = Vec::new();
    for file in files {
        let (Some(body), Some(uri)) = (ws.text(&file), ws.uri(&file)) else { continue };
        let Some(language) = lang(&file) else { continue };
        let keys = if language == Lang::Yaml { text::yaml_keys(&body) } else { Vec::new() };
        for (n, l, at, range) in occurrences(&body, name) {
            let (before, after) = around(l, at, name.len());
            let is_key = keys.iter().find(|k| {
                k.line == n && k.path.last().is_some_and(|k| k == name) && range.start.character as usize == k.from
            });
            let counts = match (symbol, language) {
                (_, Lang::Yaml) if prose(before) => false,
                (Symbol::Node(_), Lang::Yaml) => match is_key {
                    Some(k) => {
                        k.path.len() == 3 && k.path[..2] == ["graph".to_owned(), "nodes".to_owned()]
                            || k.path.len() == 3 && k.path[..2] == ["graph".to_owned(), "routes".to_owned()]
                    }
                    None => whole_token(&body, range).as_deref() == Some(name),
                },
                (Symbol::Node(_), Lang::Rhai) => before.ends_with('"') && after.starts_with('"'),
                (Symbol::Field(_), Lang::Yaml) => match is_key {
                    Some(k) => {
                        k.path == ["state", name]
                            || k.path.len() == 3 && k.path[..2] == ["simulate".to_owned(), "thresholds".to_owned()]
                    }
                    None => {
                        let token = whole_token(&body, range).unwrap_or_default();
                        (token == name || token == format!("this.{name}") || token == format!("state.{name}"))
                            && !before.ends_with("params.")
                    }
                },
                (Symbol::Field(_), Lang::Rhai) => {
                    before.ends_with("this.")
                        || before.ends_with("state.")
                        || (after.starts_with(':') && !after.starts_with("::") && !before.ends_with('.'))
                }
                (Symbol::Field(_), Lang::Jinja) => !before.ends_with('.') && in_expression(&body, n, at),
                (Symbol::Param(_), Lang::Yaml) => match is_key {
                    Some(k) => k.path == ["params", name],
                    // A bound names the param by its dotted path: `thresholds.easy:`.
                    None => {
                        let bound = keys.iter().any(|k| {
                            k.line == n
                                && k.path.len() == 2
                                && k.path[0] == "param_bounds"
                                && k.from == range.start.character as usize
                        });
                        before.ends_with("params.") || (bound && after.starts_with('.'))
                    }
                },
                (Symbol::Param(_), Lang::Rhai) => {
                    before.ends_with("param(\"") && (after.starts_with('"') || after.starts_with('.'))
                }
                (Symbol::Param(_), Lang::Jinja) => before.ends_with("params.") && in_expression(&body, n, at),
                (Symbol::Function { file: of, .. }, Lang::Rhai) => {
                    file == *of && !before.ends_with('.') && (after.trim_start().starts_with('('))
                }
                (Symbol::Function { file: of, .. }, Lang::Yaml) => {
                    let stem = of.rsplit('/').next().unwrap_or(of);
                    before.ends_with(&format!("{stem}::"))
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
    let valid = !new_name.is_empty()
        && new_name.chars().all(is_word)
        && !new_name.starts_with(|c: char| c.is_ascii_digit())
        && !["START", "END", "this", "state"].contains(&new_name);
    if !valid {
        return Err(format!("`{new_name}` cannot be a name here: letters, digits and `_`, not starting with a digit"));
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

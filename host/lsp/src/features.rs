//! What the server answers about a place in a pack's files: completion, hover and
//! go-to-definition, from the pack's last version that loaded (its state fields, params,
//! options, profiles and graph), the host function table, the manifest's JSON Schema, and the
//! text of the files themselves.

use lsp_types::{
    CompletionItem, CompletionItemKind, Documentation, Hover, HoverContents, Location, MarkupContent, MarkupKind,
    Position, Range,
};
use ruleweave::{Pack, host_functions};
use serde_json::Value as Json;

use super::text::{self, before, word_at};
use super::workspace::Workspace;

/// minijinja's tests (after `is`).
const TESTS: &[&str] = &[
    "boolean",
    "defined",
    "divisibleby",
    "endingwith",
    "eq",
    "even",
    "false",
    "filter",
    "float",
    "ge",
    "gt",
    "in",
    "integer",
    "iterable",
    "le",
    "lower",
    "lt",
    "mapping",
    "ne",
    "none",
    "number",
    "odd",
    "safe",
    "sameas",
    "sequence",
    "startingwith",
    "string",
    "test",
    "true",
    "undefined",
    "upper",
];

/// Which language a file is in, by its extension.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Lang {
    Rhai,
    Yaml,
    Jinja,
}

pub(super) fn lang(rel: &str) -> Option<Lang> {
    match rel.rsplit('.').next()? {
        "rhai" => Some(Lang::Rhai),
        "yaml" | "yml" => Some(Lang::Yaml),
        "j2" | "jinja" => Some(Lang::Jinja),
        _ => None,
    }
}

fn item(label: &str, kind: CompletionItemKind, detail: Option<String>, doc: Option<String>) -> CompletionItem {
    CompletionItem {
        label: label.to_owned(),
        kind: Some(kind),
        detail,
        documentation: doc
            .map(|d| Documentation::MarkupContent(MarkupContent { kind: MarkupKind::Markdown, value: d })),
        ..Default::default()
    }
}

/// The names after `START`/node: the pack's node names.
pub(super) fn node_names(ws: &Workspace, pack: &str, good: Option<&Pack>) -> Vec<String> {
    match good {
        Some(p) => p.nodes().map(str::to_owned).collect(),
        None => manifest_keys(ws, pack, &["graph", "nodes"]),
    }
}

/// The keys directly under `path` in the pack's manifest.
pub(super) fn manifest_keys(ws: &Workspace, pack: &str, path: &[&str]) -> Vec<String> {
    let text = ws.text(&format!("config/{pack}.yaml")).unwrap_or_default();
    text::yaml_keys(&text)
        .into_iter()
        .filter(|k| k.path.len() == path.len() + 1 && k.path.iter().zip(path).all(|(a, b)| a == b))
        .map(|k| k.path[path.len()].clone())
        .collect()
}

/// Every `fn name(` in `text`, with the line it is on.
pub(super) fn script_functions(text: &str) -> Vec<(String, u32, usize)> {
    let mut out = Vec::new();
    for (n, l) in text.lines().enumerate() {
        let t = l.trim_start();
        let t = t.strip_prefix("private ").unwrap_or(t);
        if let Some(rest) = t.strip_prefix("fn ") {
            let rest = rest.trim_start();
            let name: String = rest.chars().take_while(|c| text::is_word(*c)).collect();
            if !name.is_empty() {
                // Where the name starts: after `fn ` (and `private `), not the first match.
                let at = l.len() - rest.len();
                out.push((name, n as u32, l[..at].chars().count()));
            }
        }
    }
    out
}

/// The pack's script files (`scripts/PACK/…`, relative to `scripts/PACK/`).
pub(super) fn script_files(ws: &Workspace, pack: &str, good: Option<&Pack>) -> Vec<String> {
    let prefix = format!("scripts/{pack}/");
    let mut files: Vec<String> = good
        .map(|p| {
            p.files()
                .iter()
                .filter_map(|f| f.strip_prefix(&prefix))
                .filter(|f| f.ends_with(".rhai"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    files.extend(
        ws.docs.keys().filter_map(|k| k.strip_prefix(&prefix)).filter(|f| f.ends_with(".rhai")).map(str::to_owned),
    );
    files.sort();
    files.dedup();
    files
}

fn field_doc(p: &Pack, name: &str) -> Option<String> {
    let info = p.info();
    let f = info.state.get(name)?;
    Some(format!("**state field** `{name}`: {}, reducer `{}`\n\n{}", f.ty, f.reducer, f.doc))
}

fn host_doc(name: &str) -> Option<String> {
    let f = host_functions().iter().find(|f| f.name == name)?;
    let pure = if f.volatile { "not pure: it may answer differently, or does something" } else { "pure" };
    Some(format!("```rhai\n{}\n```\n{}\n\n*{pure}*", f.signature, f.doc))
}

fn param_doc(p: &Pack, name: &str) -> Option<String> {
    let mut v = &p.params();
    for part in name.split('.') {
        v = v.get(part)?;
    }
    let shown = serde_json::to_string(v).unwrap_or_default();
    let shown: String = shown.chars().take(300).collect();
    Some(format!("**param** `{name}` = `{shown}`\n\ndeclared under `params:` in config/{}.yaml", p.name()))
}

fn node_doc(p: &Pack, name: &str) -> Option<String> {
    let d = p.drawing();
    let n = d.nodes.iter().find(|n| n.name == name)?;
    let into: Vec<String> = d.edges.iter().filter(|e| e.to == name).map(|e| e.from.join(" + ")).collect();
    let out: Vec<String> = d
        .edges
        .iter()
        .filter(|e| e.from.iter().any(|f| f == name))
        .map(|e| match &e.label {
            Some(l) => format!("{} (when {l})", e.to),
            None => e.to.clone(),
        })
        .collect();
    let mut s = format!("**node** `{name}`: {} · {}", n.kind, n.what);
    if !n.doc.is_empty() {
        s.push_str(&format!("\n\n{}", n.doc));
    }
    s.push_str(&format!("\n\nfrom: {}\n\nto: {}", into.join(", "), out.join(", ")));
    Some(s)
}

/// The completions at `pos` in `rel`.
pub(super) fn complete(ws: &Workspace, rel: &str, pos: Position) -> Vec<CompletionItem> {
    let Some(lang) = lang(rel) else { return Vec::new() };
    let Some(text) = ws.text(rel) else { return Vec::new() };
    let Some((pack, good)) = ws.pack_for(rel) else { return Vec::new() };
    let good = good.as_deref();
    let prefix = before(&text, pos);
    match lang {
        Lang::Rhai => complete_rhai(ws, &pack, good, &text, prefix),
        Lang::Yaml => complete_yaml(ws, &pack, good, &text, pos, prefix),
        Lang::Jinja => complete_jinja(ws, &pack, good, &text, pos, prefix),
    }
}

/// The state fields: with their types and docs from the pack's last good version, else their
/// names from the manifest as it stands (a pack that has never loaded still completes).
fn fields(ws: &Workspace, pack: &str, good: Option<&Pack>) -> Vec<CompletionItem> {
    let Some(p) = good else {
        let names = manifest_keys(ws, pack, &["state"]);
        return names.iter().map(|n| item(n, CompletionItemKind::FIELD, None, None)).collect();
    };
    p.info()
        .state
        .iter()
        .map(|(name, f)| {
            item(name, CompletionItemKind::FIELD, Some(format!("{} ({})", f.ty, f.reducer)), Some(f.doc.clone()))
        })
        .collect()
}

fn complete_rhai(ws: &Workspace, pack: &str, good: Option<&Pack>, text: &str, prefix: &str) -> Vec<CompletionItem> {
    let word_start = prefix.trim_end_matches(text::is_word);
    if word_start.ends_with("this.") || word_start.ends_with("state.") {
        return fields(ws, pack, good);
    }
    if word_start.ends_with("param(\"") {
        let Some(p) = good else { return Vec::new() };
        let params = p.params();
        let keys = params.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        return keys.iter().map(|k| item(k, CompletionItemKind::CONSTANT, None, param_doc(p, k))).collect();
    }
    if word_start.ends_with("option(\"") {
        let Some(p) = good else { return Vec::new() };
        return p
            .info()
            .options
            .iter()
            .map(|(k, o)| item(k, CompletionItemKind::ENUM_MEMBER, Some(o.ty.to_owned()), Some(o.description.clone())))
            .collect();
    }
    let mut items: Vec<CompletionItem> = host_functions()
        .iter()
        .map(|f| item(f.name, CompletionItemKind::FUNCTION, Some(f.signature.to_owned()), host_doc(f.name)))
        .collect();
    for (name, _, _) in script_functions(text) {
        items.push(item(&name, CompletionItemKind::FUNCTION, Some("this file".into()), None));
    }
    items
}

fn complete_yaml(
    ws: &Workspace,
    pack: &str,
    good: Option<&Pack>,
    text: &str,
    pos: Position,
    prefix: &str,
) -> Vec<CompletionItem> {
    let trimmed = prefix.trim_start();
    let indent = prefix.len() - trimmed.len();
    let path = text::yaml_path_at(text, pos.line, indent);
    let under = |p: &[&str]| path.len() >= p.len() && path.iter().zip(p).all(|(a, b)| a == b);
    let nodes = || node_names(ws, pack, good);
    let names = |list: Vec<String>, kind| list.into_iter().map(|n| item(&n, kind, None, None)).collect::<Vec<_>>();
    // A value: after `key: `.
    if let Some((key, _value)) = trimmed.split_once(": ") {
        let key = key.trim_start_matches("- ").trim();
        return match key {
            "to" => {
                let mut list = nodes();
                list.push("END".into());
                names(list, CompletionItemKind::REFERENCE)
            }
            "script" | "then" | "fallback" | "init" | "standin" | "prepare" | "done" | "route" => {
                let mut out = Vec::new();
                for file in script_files(ws, pack, good) {
                    let body = ws.text(&format!("scripts/{pack}/{file}")).unwrap_or_default();
                    for (f, _, _) in script_functions(&body) {
                        out.push(item(&format!("{file}::{f}"), CompletionItemKind::FUNCTION, None, None));
                    }
                }
                out
            }
            "llm" => names(
                good.map(|p| p.profiles().map(|p| p.name.clone()).collect()).unwrap_or_default(),
                CompletionItemKind::MODULE,
            ),
            "prompt" | "system" => {
                let prefix = format!("prompts/{pack}/");
                let list = good
                    .map(|p| p.files().iter().filter_map(|f| f.strip_prefix(&prefix)).map(str::to_owned).collect())
                    .unwrap_or_default();
                names(list, CompletionItemKind::FILE)
            }
            _ => {
                schema_values(key).into_iter().map(|v| item(&v, CompletionItemKind::ENUM_MEMBER, None, None)).collect()
            }
        };
    }
    if under(&["graph", "edges"]) {
        let mut list = nodes();
        list.extend(["START".to_owned(), "END".to_owned()]);
        return names(list, CompletionItemKind::REFERENCE);
    }
    // A key: the ones the manifest's schema allows here.
    let parents: Vec<&str> = path.iter().map(String::as_str).filter(|k| Some(*k) != key_typed(trimmed)).collect();
    schema_keys(&parents).into_iter().map(|(k, doc)| item(&k, CompletionItemKind::PROPERTY, None, doc)).collect()
}

/// The key being typed on a line that holds only a key so far.
fn key_typed(trimmed: &str) -> Option<&str> {
    let k = trimmed.trim_end_matches(':');
    (!k.is_empty() && k.chars().all(|c| text::is_word(c) || c == '.')).then_some(k)
}

fn complete_jinja(
    ws: &Workspace,
    pack: &str,
    good: Option<&Pack>,
    text: &str,
    pos: Position,
    prefix: &str,
) -> Vec<CompletionItem> {
    // The prose of a prompt completes nothing: only what is inside `{{ }}` and `{% %}`.
    let line_start =
        text.lines().nth(pos.line as usize).map_or(text.len(), |l| l.as_ptr() as usize - text.as_ptr() as usize);
    if !text::in_expression(text, line_start + prefix.len()) {
        return Vec::new();
    }
    let word_start = prefix.trim_end_matches(text::is_word).trim_end();
    if word_start.ends_with('|') {
        return ruleweave::TEMPLATE_FILTERS
            .iter()
            .map(|f| item(f, CompletionItemKind::FUNCTION, Some("filter".into()), None))
            .collect();
    }
    if word_start.ends_with(" is") || word_start.ends_with(" is not") {
        return TESTS.iter().map(|t| item(t, CompletionItemKind::FUNCTION, Some("test".into()), None)).collect();
    }
    let mut items = fields(ws, pack, good);
    items.push(item("params", CompletionItemKind::VARIABLE, Some("the pack's params".into()), None));
    items
}

/// The manifest's JSON Schema, with `$ref`s to follow.
fn schema() -> &'static Json {
    static SCHEMA: std::sync::OnceLock<Json> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(ruleweave::manifest_schema)
}

/// `node` with its `$ref` followed and its alternatives (`anyOf`, `oneOf`, `allOf`) spread.
fn resolved(node: &Json) -> Vec<&Json> {
    if let Some(r) = node.get("$ref").and_then(Json::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        let defs = schema().get("$defs").or_else(|| schema().get("definitions"));
        return defs.and_then(|d| d.get(name)).map(resolved).unwrap_or_default();
    }
    let mut out = vec![node];
    for alt in ["anyOf", "oneOf", "allOf"] {
        for a in node.get(alt).and_then(Json::as_array).into_iter().flatten() {
            out.extend(resolved(a));
        }
    }
    out
}

/// The keys the manifest allows under `path`, with their descriptions. A map's own keys (node
/// names, field names) are the designer's: they are stepped over.
fn schema_keys(path: &[&str]) -> Vec<(String, Option<String>)> {
    let mut here: Vec<&Json> = resolved(schema());
    for part in path {
        let mut next = Vec::new();
        for n in &here {
            match n.get("properties").and_then(|p| p.get(*part)) {
                Some(p) => next.extend(resolved(p)),
                None => {
                    if let Some(a) = n.get("additionalProperties").filter(|a| a.is_object()) {
                        next.extend(resolved(a));
                    }
                }
            }
        }
        here = next;
    }
    let mut keys: Vec<(String, Option<String>)> = Vec::new();
    for n in here {
        for (k, v) in n.get("properties").and_then(Json::as_object).into_iter().flatten() {
            if !keys.iter().any(|(x, _)| x == k) {
                let doc = v.get("description").and_then(Json::as_str).map(str::to_owned);
                keys.push((k.clone(), doc));
            }
        }
    }
    keys
}

/// The values the schema names for a key anywhere (`reducer`, `type`).
fn schema_values(key: &str) -> Vec<String> {
    fn walk(n: &Json, key: &str, out: &mut Vec<String>) {
        match n {
            Json::Object(o) => {
                if let Some(p) = o.get("properties").and_then(|p| p.get(key)) {
                    for r in resolved(p) {
                        for v in r.get("enum").and_then(Json::as_array).into_iter().flatten() {
                            if let Some(s) = v.as_str().filter(|s| !out.iter().any(|x| x == s)) {
                                out.push(s.to_owned());
                            }
                        }
                        if let Some(s) = r.get("const").and_then(Json::as_str).filter(|s| !out.iter().any(|x| x == s)) {
                            out.push(s.to_owned());
                        }
                    }
                }
                o.values().for_each(|v| walk(v, key, out));
            }
            Json::Array(a) => a.iter().for_each(|v| walk(v, key, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(schema(), key, &mut out);
    out
}

/// What to show on hover at `pos` in `rel`.
pub(super) fn hover(ws: &Workspace, rel: &str, pos: Position) -> Option<Hover> {
    let lang = lang(rel)?;
    let text = ws.text(rel)?;
    let (word, range) = word_at(&text, pos, &[])?;
    let (_, good) = ws.pack_for(rel).unwrap_or_default();
    let good = good.as_deref();
    let line_before = before(&text, range.start);
    let doc = match lang {
        Lang::Rhai => {
            if line_before.ends_with("this.") || line_before.ends_with("state.") {
                good.and_then(|p| field_doc(p, &word))
            } else if line_before.ends_with("param(\"") {
                good.and_then(|p| param_doc(p, &word))
            } else {
                host_doc(&word)
            }
        }
        Lang::Yaml => good.and_then(|p| node_doc(p, &word).or_else(|| field_doc(p, &word))),
        Lang::Jinja => good.and_then(|p| field_doc(p, &word)).or_else(|| good.and_then(|p| param_doc(p, &word))),
    }?;
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: doc }),
        range: Some(range),
    })
}

/// Where what is at `pos` in `rel` is declared.
pub(super) fn definition(ws: &Workspace, rel: &str, pos: Position) -> Option<Location> {
    let lang = lang(rel)?;
    let text = ws.text(rel)?;
    let (pack, good) = ws.pack_for(rel)?;
    let manifest = format!("config/{pack}.yaml");
    let at_key = |path: &[&str]| -> Option<Location> {
        let body = ws.text(&manifest)?;
        let k =
            text::yaml_keys(&body).into_iter().find(|k| k.path.iter().map(String::as_str).eq(path.iter().copied()))?;
        Some(Location::new(ws.uri(&manifest)?, text::range_chars(&body, k.line, k.from, k.to)))
    };
    let in_file = |file: &str, name: &str| -> Option<Location> {
        let body = ws.text(file)?;
        let (_, line, col) = script_functions(&body).into_iter().find(|(n, _, _)| n == name)?;
        Some(Location::new(ws.uri(file)?, text::range_chars(&body, line, col, col + name.chars().count())))
    };
    match lang {
        Lang::Yaml => {
            // `file.rhai::function`, a template's file, or a node's name.
            let (reference, _) = word_at(&text, pos, &['.', ':', '/', '-'])?;
            if let Some((file, function)) = reference.split_once("::") {
                return in_file(&format!("scripts/{pack}/{file}"), function);
            }
            if reference.ends_with(".j2") {
                let file = format!("prompts/{pack}/{reference}");
                let uri = ws.uri(&file).filter(|_| ws.text(&file).is_some())?;
                return Some(Location::new(uri, Range::default()));
            }
            let (word, _) = word_at(&text, pos, &[])?;
            let nodes = node_names(ws, &pack, good.as_deref());
            if nodes.contains(&word) {
                return at_key(&["graph", "nodes", &word]);
            }
            at_key(&["state", &word])
        }
        Lang::Rhai => {
            let (word, range) = word_at(&text, pos, &[])?;
            let before = before(&text, range.start);
            // `this.name(...)` calls a function with the state as `this` (method-call syntax):
            // its definition, as a plain call's; `this.name` alone reads a field.
            let called = text::after(&text, range.end).trim_start().starts_with('(');
            if (before.ends_with("this.") || before.ends_with("state.")) && !called {
                return at_key(&["state", &word]);
            }
            if before.ends_with("param(\"") {
                return at_key(&["params", &word]);
            }
            in_file(rel, &word)
        }
        Lang::Jinja => {
            let (word, _) = word_at(&text, pos, &[])?;
            at_key(&["state", &word]).or_else(|| at_key(&["params", &word]))
        }
    }
}

/// Over each node of a manifest: how many of the pack's test cases run it.
pub(super) fn code_lenses(ws: &mut Workspace, rel: &str) -> Vec<lsp_types::CodeLens> {
    let Some(pack) = rel.strip_prefix("config/").and_then(|r| r.strip_suffix(".yaml")) else { return Vec::new() };
    let Some(text) = ws.text(rel) else { return Vec::new() };
    let counts = ws.cases_per_node(pack);
    text::yaml_keys(&text)
        .into_iter()
        .filter(|k| k.path.len() == 3 && k.path[0] == "graph" && k.path[1] == "nodes")
        .filter_map(|k| {
            let n = *counts.get(&k.path[2])?;
            let title = match n {
                0 => "no test case runs this node".to_owned(),
                1 => "1 test case runs this node".to_owned(),
                n => format!("{n} test cases run this node"),
            };
            let command = lsp_types::Command { title, command: String::new(), arguments: None };
            let range = text::range_chars(&text, k.line, k.from, k.to);
            Some(lsp_types::CodeLens { range, command: Some(command), data: None })
        })
        .collect()
}

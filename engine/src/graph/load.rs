//! What checking a graph's parts needs: the pack's compiled pieces to resolve references against
//! (scripts, templates, state fields, profiles, selectors, the host's natives), and where problems
//! go. The pack loader builds it; node kinds and selectors load through it, so each reports its
//! problems at their place in the manifest.

use std::collections::HashSet;
use std::sync::Arc;

use indexmap::IndexMap;
use rhai::Map;
use serde_saphyr::Spanned;

use crate::error::{Error, Origin};
use crate::llm::Profile;
use crate::native::NativeNodes;
use crate::prompt::{CONTEXT_NAMES, Prompts};
use crate::script::lint::nearest;
use crate::script::{Condition, FnRef, Sandbox, Scripts};
use crate::select::Selector;
use crate::state::Schema;
use crate::vocab::TypeName;
use crate::vocab::is_identifier;

/// The pack's pieces a reference may name.
pub(crate) struct Refs<'a> {
    /// The manifest's path, relative to the root (where positions point).
    pub manifest: &'a str,
    /// The manifest's text, to place a problem on the token it is about.
    pub source: &'a str,
    pub scripts: &'a Scripts,
    pub sandbox: &'a Sandbox,
    pub prompts: &'a Prompts,
    pub schema: &'a Schema,
    pub profiles: &'a IndexMap<String, Profile>,
    pub params: &'a Map,
    /// The names of the pack's session options.
    pub options: &'a [String],
    pub natives: &'a NativeNodes,
    pub selectors: &'a IndexMap<String, Arc<Selector>>,
    /// The pack's JSON Schemas.
    pub schemas: &'a crate::schemas::Schemas,
}

/// `at` moved onto `token` when the token stands on `at`'s line, at or after its column, as a
/// whole word (a misspelled node inside `START -> intak`, a function's name after `file.rhai::`):
/// an editor underlines the mistake, not the word before it. `at` itself otherwise.
pub(crate) fn on_token(source: &str, at: Origin, token: &str) -> Origin {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let Some(line) = source.lines().nth((at.line as usize).wrapping_sub(1)) else { return at };
    if token.is_empty() || at.column == 0 {
        return at;
    }
    let from: usize = line.chars().take(at.column as usize - 1).map(char::len_utf8).sum();
    let found = line[from.min(line.len())..].match_indices(token).map(|(i, _)| from + i).find(|&i| {
        let before = line[..i].chars().next_back();
        let after = line[i + token.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    });
    match found {
        Some(i) => Origin { column: line[..i].chars().count() as u32 + 1, ..at },
        None => at,
    }
}

/// Loading one part: the references, and the list problems go to.
pub(crate) struct Load<'a> {
    pub refs: &'a Refs<'a>,
    pub errors: &'a mut Vec<Error>,
}

impl Load<'_> {
    /// Where a manifest value stands.
    pub(crate) fn at<T>(&self, s: &Spanned<T>) -> Origin {
        Origin::new(self.refs.manifest, s.referenced.line() as u32, s.referenced.column() as u32)
    }

    /// Reports a problem at `origin`.
    pub(crate) fn error(&mut self, detail: impl Into<String>, origin: Origin) {
        self.errors.push(Error::pack(detail, origin));
    }

    /// Resolves `file.rhai::fn` (or `file.rhai` with `default_fn`) to a function of `arity`
    /// parameters, reporting a bad reference at its place: on the function's name when the file
    /// is there, on the file's when it is not.
    pub(crate) fn resolve(&mut self, r: &Spanned<String>, default_fn: Option<&str>, arity: usize) -> Option<FnRef> {
        match self.refs.scripts.resolve(&r.value, default_fn, arity) {
            Ok(f) => f,
            Err(why) => {
                let (file, func) = r.value.split_once("::").unwrap_or((&r.value, ""));
                let wrong = if why.starts_with("there is no script") || func.trim().is_empty() { file } else { func };
                let at = on_token(self.refs.source, self.at(r), wrong.trim());
                self.error(why, at);
                None
            }
        }
    }

    /// A condition: `this.flag` or `!this.flag` on a bool field (read without a script), or any
    /// Rhai expression over `this`, compiled as a function called `name`.
    pub(crate) fn condition(&mut self, w: &Spanned<String>, name: &str) -> Option<Condition> {
        if let Some(flag) = flag(&w.value, self.refs.schema) {
            return Some(flag);
        }
        match self.refs.sandbox.compile_expr(name, &w.value, &self.at(w)) {
            Ok(f) => {
                let declared = crate::script::lint::Declared {
                    fields: self.refs.schema.fields.keys().map(String::as_str).collect(),
                    params: self.refs.params.keys().map(|k| k.as_str()).collect(),
                    options: self.refs.options.iter().map(String::as_str).collect(),
                };
                let problems = self.refs.sandbox.lint(&f, &declared);
                if !problems.is_empty() {
                    self.errors.extend(problems);
                    return None;
                }
                Some(Condition::Script(FnRef { file: Arc::new(f), name: name.into() }))
            }
            Err(e) => {
                self.errors.push(e);
                None
            }
        }
    }

    /// A template the pack has, every variable it reads being a state field, a parameter or a
    /// context name; its name when it is.
    pub(crate) fn template(&mut self, t: &Spanned<String>) -> Option<String> {
        let prompts = self.refs.prompts;
        if !prompts.contains(&t.value) {
            let files = prompts.file_templates();
            let files = if files.is_empty() { "none".to_owned() } else { files.join(", ") };
            let pack = self.refs.scripts.pack();
            let at = self.at(t);
            self.error(format!("there is no template `{}` in prompts/{pack}/ (templates: {files})", t.value), at);
            return None;
        }
        let known: HashSet<&str> = self.refs.schema.fields.keys().map(String::as_str).collect();
        for (var, origin) in prompts.unknown_variables(&t.value, &known, self.refs.params) {
            let what = unknown_read(&format!("template `{}`", t.value), &var, &known, self.refs.params, true);
            self.error(what, origin);
        }
        Some(t.value.clone())
    }

    /// The state field `f` names, when it is one of `types` (`what` says what it is for).
    pub(crate) fn field_of(&mut self, f: &Spanned<String>, types: &[TypeName], what: &str) -> Option<String> {
        match self.refs.schema.fields.get(&f.value) {
            Some(field) if types.contains(&field.ty) => Some(f.value.clone()),
            Some(field) => {
                let at = self.at(f);
                self.error(format!("{what}; `{}` is {}", f.value, field.ty.a()), at);
                None
            }
            None => {
                let at = self.at(f);
                self.error(format!("{what}; `{}` is not a state field", f.value), at);
                None
            }
        }
    }
}

/// `this.flag` or `!this.flag` on a bool field, as a condition that needs no script.
fn flag(expr: &str, schema: &Schema) -> Option<Condition> {
    let expr = expr.trim();
    let (negate, rest) = match expr.strip_prefix('!') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, expr),
    };
    let field = rest.strip_prefix("this.")?;
    let is_bool = schema.fields.get(field).is_some_and(|f| f.ty == TypeName::Bool);
    (is_identifier(field) && is_bool).then(|| Condition::Flag { field: field.to_owned(), negate })
}

/// What `check` says of a template (`what`) that reads `var`, which is neither a state field nor
/// a parameter: `params.x` names the parameters it might have meant, anything else the fields.
/// `context` says whether the template also sees the node's context (`options`, `input`, `vars`).
pub(crate) fn unknown_read(what: &str, var: &str, known: &HashSet<&str>, params: &rhai::Map, context: bool) -> String {
    let (is_not, hint) = match var.strip_prefix("params.") {
        Some(p) => (
            format!("the pack has no parameter `{}`", p.split('.').next().unwrap_or(p)),
            nearest(p, params.keys().map(|k| k.as_str())).map(|k| format!("params.{k}")),
        ),
        None if context => (
            format!("which is not a state field or one of {}", CONTEXT_NAMES.join(", ")),
            nearest(var, known.iter().copied()).map(str::to_owned),
        ),
        None => ("which is not a state field".to_owned(), nearest(var, known.iter().copied()).map(str::to_owned)),
    };
    let hint = crate::script::lint::did_you_mean(hint.as_deref());
    let sep = if is_not.starts_with("which") { ", " } else { ": " };
    format!("{what} reads `{var}`{sep}{is_not}{hint}")
}

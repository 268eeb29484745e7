//! What `check` finds in compiled scripts before they run: a call to a function that exists
//! nowhere (neither in the file, nor among the host's and Rhai's functions), a read of a state
//! field the manifest does not declare (`this.is_blokced`), and a parameter or option named by a
//! literal that the manifest does not declare (`param("win_att")`), each at its `file:line:col`,
//! with the nearest known name. Each would otherwise fail (or read `()`) on the first turn, or,
//! in a node with a fallback, be silently absorbed by it.

use std::collections::HashSet;

use rhai::{ASTNode, Expr, Stmt};

use super::ScriptFile;
use crate::error::{Error, Origin};

/// Names a script may call that are part of the language rather than registered functions.
const LANGUAGE: &[&str] =
    &["type_of", "print", "debug", "Fn", "call", "curry", "is_def_var", "is_def_fn", "is_shared", "eval", "throw"];

/// The nearest of `known` to `name`, when it is near enough to be a typo, or else the one name
/// it is the start of (`win_att` for `win_attempts`).
pub(crate) fn nearest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let known: Vec<&'a str> = known.into_iter().collect();
    let typo = known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(name.len().min(k.len()) / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k);
    let mut started = known.iter().filter(|k| name.len() >= 3 && k.starts_with(name));
    typo.or_else(|| match (started.next(), started.next()) {
        (Some(one), None) => Some(*one),
        _ => None,
    })
}

/// ` (did you mean `name`?)` for a near name, or nothing.
pub(crate) fn did_you_mean(n: Option<&str>) -> String {
    n.map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default()
}

/// What the manifest declares that a script may name.
#[derive(Debug, Default)]
pub(crate) struct Declared<'a> {
    /// The state's fields.
    pub fields: HashSet<&'a str>,
    /// The parameters' top-level names.
    pub params: HashSet<&'a str>,
    /// The options' names.
    pub options: HashSet<&'a str>,
}

/// The problems of `file`: unknown functions (given every function name the sandbox knows),
/// reads of undeclared state fields, and `param("…")` / `option("…")` of undeclared names.
pub(crate) fn lint(file: &ScriptFile, functions: &HashSet<String>, declared: &Declared<'_>) -> Vec<Error> {
    let fields = &declared.fields;
    let own: HashSet<String> = file.ast.iter_functions().map(|f| f.name.to_string()).collect();
    let known = |name: &str| own.contains(name) || functions.contains(name) || LANGUAGE.contains(&name);
    let mut errors = Vec::new();
    let at = |pos: rhai::Position| {
        file.map_origin(Origin::new(&file.path, pos.line().unwrap_or(0) as u32, pos.position().unwrap_or(0) as u32))
    };
    file.ast.walk(&mut |path: &[ASTNode<'_>]| {
        let call = match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(f, pos) | Expr::MethodCall(f, pos))) => Some((f, *pos)),
            // A call standing as a whole statement (a condition that is one call, `f(x);`) is a
            // statement of its own in Rhai's tree, not an expression.
            Some(ASTNode::Stmt(Stmt::FnCall(f, pos))) => Some((f, *pos)),
            _ => None,
        };
        if let Some((f, pos)) = call {
            let name = f.name.as_str();
            let names = match name {
                "param" => Some(("parameter", &declared.params)),
                "option" => Some(("option", &declared.options)),
                _ => None,
            };
            if let (Some((what, known)), Some(Expr::StringConstant(given, at_arg))) = (names, f.args.first()) {
                let top = given.split('.').next().unwrap_or(given);
                if f.namespace.is_empty() && !known.contains(top) {
                    let near = nearest(top, known.iter().copied());
                    errors.push(Error::pack(
                        format!("{name}(\"{given}\"): the pack has no {what} `{top}`{}", did_you_mean(near)),
                        at(*at_arg),
                    ));
                }
            }
            let plain = f.op_token.is_none() && f.namespace.is_empty();
            if plain && crate::vocab::is_identifier(name) && !known(name) {
                let near = nearest(name, own.iter().chain(functions.iter()).map(String::as_str));
                // A manifest expression has no functions of its own: only host functions.
                let nowhere = if file.anchor.is_some() {
                    "not a host function"
                } else {
                    "not defined in this script, nor a host function"
                };
                errors
                    .push(Error::pack(format!("unknown function `{name}`: {nowhere}{}", did_you_mean(near)), at(pos)));
            }
            return true;
        }
        match path.last() {
            Some(ASTNode::Expr(Expr::Dot(dot, _, _))) if matches!(dot.lhs, Expr::ThisPtr(_)) => {
                let prop = match &dot.rhs {
                    Expr::Property(p, pos) => Some((p.2.as_str(), *pos)),
                    Expr::Dot(inner, _, _) | Expr::Index(inner, _, _) => match &inner.lhs {
                        Expr::Property(p, pos) => Some((p.2.as_str(), *pos)),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some((field, pos)) = prop
                    && !fields.contains(field)
                {
                    let near = nearest(field, fields.iter().copied());
                    errors.push(Error::pack(
                        format!("`this.{field}`: the state has no field `{field}`{}", did_you_mean(near)),
                        at(pos),
                    ));
                }
            }
            _ => {}
        }
        true
    });
    errors
}

#[cfg(test)]
mod tests {
    use super::nearest;

    #[test]
    fn nearest_names_a_typo_not_a_stranger() {
        assert_eq!(nearest("is_blokced", ["is_blocked", "is_won"]), Some("is_blocked"));
        assert_eq!(nearest("matches_anyy", ["matches_any", "matches"]), Some("matches_any"));
        assert_eq!(nearest("frobnicate", ["is_blocked", "is_won"]), None);
        assert_eq!(nearest("win_att", ["win_attempts", "score_limits"]), Some("win_attempts"));
        assert_eq!(nearest("win", ["win_attempts", "win_bonus"]), None, "the start of two names is no hint");
    }
}

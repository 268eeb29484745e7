//! The numbers of a pack's `params:` as a run may vary them: by dotted path (`thresholds.easy`),
//! within the bounds the manifest declares for them (`param_bounds:`), set for one run without
//! editing a file (`--param thresholds.easy=55`, simulate's sweeps, `tune`).

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde_json::Value as Json;

use super::manifest::{BoundsDecl, Manifest, Spanned};
use crate::error::{Error, Result};

/// Values for a pack's numeric parameters, by dotted path: what a run sets in place of the
/// manifest's (`thresholds.easy` → 55).
pub type ParamValues = BTreeMap<String, Json>;

/// The largest integer a float holds exactly (2^53): past it an integer parameter's value would
/// not be the one given.
const MOST_EXACT: f64 = 9_007_199_254_740_992.0;

/// One number of a pack's `params:`, as a run may vary it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NumericParam {
    /// Its dotted path (`thresholds.easy`).
    pub path: String,
    /// Its value in the manifest (or the run's, when the run sets it).
    pub value: f64,
    /// Whether it is an integer (a run's value must be one too).
    pub integer: bool,
    /// The least value a run may give it, when the manifest declares one.
    pub min: Option<f64>,
    /// The most, when the manifest declares one.
    pub max: Option<f64>,
}

impl NumericParam {
    /// `value` as this parameter takes it: a number within its bounds, an integer for an integer
    /// parameter; otherwise an input error naming the parameter and why.
    pub fn check(&self, value: f64) -> Result<Json> {
        let path = &self.path;
        if !value.is_finite() {
            return Err(Error::input(format!("parameter `{path}` is a number, not {value}")));
        }
        if self.integer && (value.fract() != 0.0 || value.abs() > MOST_EXACT) {
            return Err(Error::input(format!("parameter `{path}` is an integer, not {value}")));
        }
        if self.min.is_some_and(|min| value < min) || self.max.is_some_and(|max| value > max) {
            return Err(Error::input(format!(
                "parameter `{path}` is {} (param_bounds), not {value}",
                self.bounds_text()
            )));
        }
        Ok(if self.integer { Json::from(value as i64) } else { Json::from(value) })
    }

    /// The bounds in words: `0 to 100`, `at least 0`, `at most 100`, `any number`.
    pub fn bounds_text(&self) -> String {
        let n = |x: f64| crate::text::decimals(x, 6);
        match (self.min, self.max) {
            (Some(lo), Some(hi)) => format!("{} to {}", n(lo), n(hi)),
            (Some(lo), None) => format!("at least {}", n(lo)),
            (None, Some(hi)) => format!("at most {}", n(hi)),
            (None, None) => "any number".to_owned(),
        }
    }
}

/// Every number in `params`, by dotted path, in the manifest's order (maps are walked; lists and
/// texts are not parameters a run varies).
pub(crate) fn numbers(params: &IndexMap<String, Spanned<Json>>, bounds: &BoundsOf) -> Vec<NumericParam> {
    fn walk(prefix: String, v: &Json, bounds: &BoundsOf, out: &mut Vec<NumericParam>) {
        match v {
            Json::Number(n) => {
                let (min, max) = bounds.get(&prefix).copied().unwrap_or((None, None));
                let value = n.as_f64().unwrap_or(0.0);
                out.push(NumericParam { integer: n.is_i64() || n.is_u64(), path: prefix, value, min, max });
            }
            Json::Object(map) => {
                // A key holding a dot cannot be told from a path through it: it is not a
                // parameter a run may set.
                for (k, v) in map.iter().filter(|(k, _)| !k.contains('.')) {
                    walk(format!("{prefix}.{k}"), v, bounds, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (k, v) in params.iter().filter(|(k, _)| !k.contains('.')) {
        walk(k.clone(), &v.value, bounds, &mut out);
    }
    out
}

/// Declared bounds by dotted path: (min, max).
pub(crate) type BoundsOf = BTreeMap<String, (Option<f64>, Option<f64>)>;

/// The manifest's `param_bounds:`, as bounds by path (whether each names a number is checked
/// with the rest of the pack).
pub(crate) fn bounds_of(decl: &IndexMap<String, Spanned<BoundsDecl>>) -> BoundsOf {
    decl.iter().map(|(path, b)| (path.clone(), (b.value.min, b.value.max))).collect()
}

/// Sets `values` in the manifest's `params:` in place of its own: each must name a number there
/// (an unknown name is answered with the nearest one), be a number, an integer where the
/// manifest's is, and within its declared bounds. The values as set (an integer parameter's
/// as an integer), or an input error naming the first that does not fit.
pub(crate) fn apply(m: &mut Manifest, values: &ParamValues) -> Result<ParamValues> {
    let mut set_to = ParamValues::new();
    if values.is_empty() {
        return Ok(set_to);
    }
    let known = numbers(&m.params, &bounds_of(&m.param_bounds));
    for (path, value) in values {
        let Some(param) = known.iter().find(|p| &p.path == path) else {
            let near = crate::script::lint::nearest(path, known.iter().map(|p| p.path.as_str()))
                .map(|n| format!(": did you mean `{n}`?"))
                .unwrap_or_default();
            let names: Vec<&str> = known.iter().map(|p| p.path.as_str()).collect();
            let list = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
            return Err(Error::input(format!(
                "the pack has no numeric parameter `{path}`{near} (its numbers: {list})"
            )));
        };
        let Some(x) = value.as_f64() else {
            return Err(Error::input(format!("parameter `{path}` is a number, not {value}")));
        };
        let value = param.check(x)?;
        set(&mut m.params, path, value.clone());
        set_to.insert(path.clone(), value);
    }
    Ok(set_to)
}

/// Puts `value` at `path` (which names a number in `params`).
fn set(params: &mut IndexMap<String, Spanned<Json>>, path: &str, value: Json) {
    let mut keys = path.split('.');
    let Some(first) = keys.next() else { return };
    let Some(top) = params.get_mut(first) else { return };
    let mut at = &mut top.value;
    for k in keys {
        let Some(next) = at.as_object_mut().and_then(|m| m.get_mut(k)) else { return };
        at = next;
    }
    *at = value;
}

/// `NAME=VALUE` as a parameter's path and value (the command line's `--param`).
pub fn parse_param(text: &str) -> Result<(String, Json)> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(Error::input(format!("--param takes NAME=VALUE (thresholds.easy=55), not `{text}`")));
    };
    let number: f64 = value.trim().parse().ok().filter(|x: &f64| x.is_finite()).ok_or_else(|| {
        Error::input(format!("--param {name}: `{value}` is not a number (parameters a run sets are numbers)"))
    })?;
    let value = if number.fract() == 0.0 && !value.contains(['.', 'e', 'E']) && number.abs() < 9e15 {
        Json::from(number as i64)
    } else {
        Json::from(number)
    };
    Ok((name.trim().to_owned(), value))
}

/// `yaml` (a manifest's text) with the number at `path` of its `params:` (`thresholds.medium`)
/// written as `value`, and nothing else changed: comments, layout, quoting and the other values
/// stay as they were (the scalar's own characters are replaced, found by its place in the
/// source). An error when the manifest does not write that number as a plain scalar (an alias,
/// a number set by an anchor elsewhere).
pub fn write_param(yaml: &str, path: &str, value: &Json) -> Result<String> {
    let wanted: Vec<&str> = std::iter::once("params").chain(path.split('.')).collect();
    write_scalar(yaml, &wanted, value)
        .ok_or_else(|| Error::input(format!("`params.{path}` is not written as a plain number in the manifest")))?
}

/// `yaml` (a manifest's text) with the weight of variant `variant` of its `experiment:` written
/// as `weight`, and nothing else changed (as [`write_param`] writes a number).
pub fn write_weight(yaml: &str, variant: &str, weight: f64) -> Result<String> {
    let value = match weight.fract() == 0.0 && weight.abs() < 1e15 {
        true => Json::from(weight as i64),
        false => Json::from(weight),
    };
    write_scalar(yaml, &["experiment", "variants", variant, "weight"], &value).ok_or_else(|| {
        Error::input(format!("`experiment.variants.{variant}.weight` is not written as a plain number in the manifest"))
    })?
}

/// `yaml` with the scalar at the keys `wanted` replaced by `value`; `None` when no plain scalar
/// is there, an error when `yaml` is not YAML.
fn write_scalar(yaml: &str, wanted: &[&str], value: &Json) -> Option<Result<String>> {
    use granit_parser::{Event, Parser};
    /// A collection open around the parser's place: a mapping with its current key, or a list.
    enum Open {
        Map { key: Option<String>, want_key: bool },
        List,
    }
    let mut open: Vec<Open> = Vec::new();
    // A value has been read: the mapping around it wants its next key.
    let done = |open: &mut Vec<Open>| {
        if let Some(Open::Map { want_key, .. }) = open.last_mut() {
            *want_key = true;
        }
    };
    let at = |open: &[Open]| -> bool {
        open.len() == wanted.len()
            && open.iter().zip(wanted).all(|(o, w)| matches!(o, Open::Map { key: Some(k), .. } if k == w))
    };
    for next in Parser::new_from_str(yaml) {
        let (event, span) = match next {
            Ok(next) => next,
            Err(e) => return Some(Err(Error::input(format!("the manifest is not YAML: {e}")))),
        };
        let key_place = matches!(open.last(), Some(Open::Map { want_key: true, .. }));
        match event {
            Event::Scalar(text, ..) if key_place => {
                if let Some(Open::Map { key, want_key }) = open.last_mut() {
                    (*key, *want_key) = (Some(text.into_owned()), false);
                }
            }
            Event::Scalar(..) if at(&open) => {
                let range = span.byte_range()?;
                let mut out = String::with_capacity(yaml.len() + 8);
                out.push_str(&yaml[..range.start]);
                out.push_str(&value.to_string());
                out.push_str(&yaml[range.end..]);
                return Some(Ok(out));
            }
            Event::Scalar(..) | Event::Alias(_) => done(&mut open),
            Event::MappingStart(..) | Event::SequenceStart(..) if key_place => return None,
            Event::MappingStart(..) => open.push(Open::Map { key: None, want_key: true }),
            Event::SequenceStart(..) => open.push(Open::List),
            Event::MappingEnd | Event::SequenceEnd => {
                open.pop();
                done(&mut open);
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_param_is_written_in_place_and_nothing_else_moves() {
        let yaml = "# the game\nparams:\n  # easy 40, medium 60\n  thresholds: {easy: 40, medium: 60, hard: 80}\n  \
                    margin: 5   # close enough\n  nested:\n    deep:\n      x: 1.5\nother: {medium: 60}\n";
        let out = write_param(yaml, "thresholds.medium", &Json::from(59)).unwrap();
        assert_eq!(out, yaml.replace("medium: 60, hard", "medium: 59, hard"));
        let out = write_param(yaml, "margin", &Json::from(7)).unwrap();
        assert_eq!(out, yaml.replace("margin: 5   #", "margin: 7   #"));
        let out = write_param(yaml, "nested.deep.x", &Json::from(0.25)).unwrap();
        assert_eq!(out, yaml.replace("x: 1.5", "x: 0.25"));
        let missing = write_param(yaml, "thresholds.insane", &Json::from(1)).unwrap_err();
        assert_eq!(missing.detail(), "`params.thresholds.insane` is not written as a plain number in the manifest");
        assert!(write_param("params: {a: [1, 2]}\n", "a", &Json::from(1)).is_err(), "a list is no number");
    }

    #[test]
    fn a_value_is_checked_against_its_type_and_bounds() {
        let p = NumericParam {
            path: "thresholds.medium".into(),
            value: 60.0,
            integer: true,
            min: Some(0.0),
            max: Some(100.0),
        };
        assert_eq!(p.check(55.0).unwrap(), Json::from(55));
        assert_eq!(p.check(55.5).unwrap_err().detail(), "parameter `thresholds.medium` is an integer, not 55.5");
        assert_eq!(
            p.check(101.0).unwrap_err().detail(),
            "parameter `thresholds.medium` is 0 to 100 (param_bounds), not 101"
        );
    }

    #[test]
    fn an_assignment_reads_integers_as_integers() {
        assert_eq!(parse_param("thresholds.easy=55").unwrap(), ("thresholds.easy".into(), Json::from(55)));
        assert_eq!(parse_param("rate=0.5").unwrap(), ("rate".into(), Json::from(0.5)));
        assert!(parse_param("rate").unwrap_err().detail().contains("NAME=VALUE"));
        assert!(parse_param("rate=high").unwrap_err().detail().contains("is not a number"));
        assert!(parse_param("rate=NaN").unwrap_err().detail().contains("is not a number"));
        assert!(parse_param("rate=inf").unwrap_err().detail().contains("is not a number"));
    }
}

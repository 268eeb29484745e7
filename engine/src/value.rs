//! Values crossing the engine's three worlds: JSON at the edges (input, output, checkpoints),
//! Rhai `Dynamic` for state (what scripts see without conversion), minijinja values for templates.
//!
//! State lives as `Dynamic` because scripts read it on every node and converting on each call
//! would cost more than the node itself; JSON and template values are made only when needed.

use std::collections::BTreeMap;

use rhai::{Array, Dynamic, ImmutableString, Map};
use serde_json::Value as Json;

use crate::pack::manifest::TypeName;

/// JSON → `Dynamic`. Integers that fit `i64` stay integers; other numbers become floats.
pub(crate) fn from_json(v: &Json) -> Dynamic {
    match v {
        Json::Null => Dynamic::UNIT,
        Json::Bool(b) => Dynamic::from_bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Dynamic::from_int(i),
            None => Dynamic::from_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Dynamic::from(ImmutableString::from(s.as_str())),
        Json::Array(items) => Dynamic::from_array(items.iter().map(from_json).collect()),
        Json::Object(map) => Dynamic::from_map(map.iter().map(|(k, v)| (k.as_str().into(), from_json(v))).collect()),
    }
}

/// `Dynamic` → JSON. Non-finite floats become null; values of host types show their type name.
pub(crate) fn to_json(d: &Dynamic) -> Json {
    if d.is_unit() {
        Json::Null
    } else if let Ok(b) = d.as_bool() {
        Json::Bool(b)
    } else if let Ok(i) = d.as_int() {
        Json::from(i)
    } else if let Ok(f) = d.as_float() {
        serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)
    } else if d.is_string() {
        Json::String(d.clone().into_immutable_string().map(|s| s.to_string()).unwrap_or_default())
    } else if let Ok(c) = d.as_char() {
        Json::String(c.to_string())
    } else if d.is_array() {
        let arr = d.read_lock::<Array>().expect("checked is_array");
        Json::Array(arr.iter().map(to_json).collect())
    } else if d.is_map() {
        let map = d.read_lock::<Map>().expect("checked is_map");
        Json::Object(map.iter().map(|(k, v)| (k.to_string(), to_json(v))).collect())
    } else if d.is_blob() {
        let blob = d.read_lock::<rhai::Blob>().expect("checked is_blob");
        Json::Array(blob.iter().map(|b| Json::from(*b)).collect())
    } else {
        Json::String(format!("<{}>", d.type_name()))
    }
}

/// A `rhai::Map` → a JSON object.
pub(crate) fn map_to_json(map: &Map) -> Json {
    Json::Object(map.iter().map(|(k, v)| (k.to_string(), to_json(v))).collect())
}

/// `Dynamic` → a template value.
pub(crate) fn to_template(d: &Dynamic) -> minijinja::Value {
    use minijinja::Value;
    if d.is_unit() {
        Value::from(())
    } else if let Ok(b) = d.as_bool() {
        Value::from(b)
    } else if let Ok(i) = d.as_int() {
        Value::from(i)
    } else if let Ok(f) = d.as_float() {
        Value::from(f)
    } else if let Some(s) = d.read_lock::<ImmutableString>() {
        Value::from(s.as_str())
    } else if let Ok(c) = d.as_char() {
        Value::from(c)
    } else if let Some(arr) = d.read_lock::<Array>() {
        arr.iter().map(to_template).collect()
    } else if let Some(map) = d.read_lock::<Map>() {
        Value::from_object(map.iter().map(|(k, v)| (k.to_string(), to_template(v))).collect::<BTreeMap<_, _>>())
    } else {
        Value::from(format!("<{}>", d.type_name()))
    }
}

/// Whether `d` is a value of type `ty`.
pub(crate) fn has_type(ty: TypeName, d: &Dynamic) -> bool {
    match ty {
        TypeName::Any => true,
        TypeName::String => d.is_string(),
        TypeName::Int => d.is_int(),
        TypeName::Float => d.is_float(),
        TypeName::Number => d.is_int() || d.is_float(),
        TypeName::Bool => d.is_bool(),
        TypeName::List => d.is_array(),
        TypeName::Map => d.is_map(),
    }
}

/// Whether a JSON value is of type `ty`.
pub(crate) fn json_has_type(ty: TypeName, v: &Json) -> bool {
    match ty {
        TypeName::Any => true,
        TypeName::String => v.is_string(),
        TypeName::Int => v.is_i64() || v.is_u64(),
        TypeName::Float => v.is_f64(),
        TypeName::Number => v.is_number(),
        TypeName::Bool => v.is_boolean(),
        TypeName::List => v.is_array(),
        TypeName::Map => v.is_object(),
    }
}

/// The zero value of a type: "", 0, 0.0, false, [], #{}, ().
pub(crate) fn zero(ty: TypeName) -> Dynamic {
    match ty {
        TypeName::String => Dynamic::from(ImmutableString::new()),
        TypeName::Int | TypeName::Number => Dynamic::from_int(0),
        TypeName::Float => Dynamic::from_float(0.0),
        TypeName::Bool => Dynamic::FALSE,
        TypeName::List => Dynamic::from_array(Array::new()),
        TypeName::Map => Dynamic::from_map(Map::new()),
        TypeName::Any => Dynamic::UNIT,
    }
}

/// A user-facing name for the type of a value, with its article ("a string", "an int", "nothing").
pub(crate) fn type_of(d: &Dynamic) -> &'static str {
    if d.is_unit() {
        "nothing"
    } else if d.is_string() {
        "a string"
    } else if d.is_int() {
        "an int"
    } else if d.is_float() {
        "a float"
    } else if d.is_bool() {
        "a bool"
    } else if d.is_array() {
        "a list"
    } else if d.is_map() {
        "a map"
    } else if d.is_char() {
        "a char"
    } else {
        "a host value"
    }
}

/// A user-facing name for the type of a JSON value, with its article.
pub(crate) fn json_type_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a bool",
        Json::Number(n) if n.is_f64() => "a float",
        Json::Number(_) => "an int",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "a map",
    }
}

/// Extracts the first JSON value from a model's reply: the whole text, or the part inside a
/// ```` ```json ```` fence, or from the first `{`/`[` to the last matching `}`/`]`.
pub(crate) fn parse_json_reply(text: &str) -> Result<Json, String> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str::<Json>(trimmed) {
        return Ok(v);
    }
    let body = match trimmed.find("```") {
        Some(start) => {
            let after = &trimmed[start + 3..];
            let after = after.strip_prefix("json").unwrap_or(after);
            match after.find("```") {
                Some(end) => &after[..end],
                None => after,
            }
        }
        None => trimmed,
    };
    if let Ok(v) = serde_json::from_str::<Json>(body.trim()) {
        return Ok(v);
    }
    let open = body.find(['{', '[']);
    let close = body.rfind(['}', ']']);
    match (open, close) {
        (Some(o), Some(c)) if c > o => {
            serde_json::from_str::<Json>(&body[o..=c]).map_err(|e| format!("the reply is not valid JSON: {e}"))
        }
        _ => Err("the reply contains no JSON object".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_through_dynamic() {
        let v = json!({"a": 1, "b": [true, null, 2.5, "x"], "c": {"d": -7}});
        assert_eq!(to_json(&from_json(&v)), v);
    }

    #[test]
    fn non_finite_floats_become_null() {
        assert_eq!(to_json(&Dynamic::from_float(f64::NAN)), Json::Null);
    }

    #[test]
    fn types_are_checked() {
        assert!(has_type(TypeName::Number, &Dynamic::from_int(3)));
        assert!(has_type(TypeName::Number, &Dynamic::from_float(3.5)));
        assert!(!has_type(TypeName::Int, &Dynamic::from_float(3.5)));
        assert!(has_type(TypeName::List, &Dynamic::from_array(vec![])));
        assert!(!has_type(TypeName::Map, &Dynamic::from("x")));
        assert!(json_has_type(TypeName::Int, &json!(3)));
        assert!(!json_has_type(TypeName::Int, &json!(3.5)));
    }

    #[test]
    fn json_replies_are_found_in_fences_and_prose() {
        assert_eq!(parse_json_reply(r#"{"a": 1}"#).unwrap(), json!({"a": 1}));
        assert_eq!(parse_json_reply("```json\n{\"a\": 2}\n```").unwrap(), json!({"a": 2}));
        assert_eq!(parse_json_reply("Sure! {\"a\": 3} Hope it helps").unwrap(), json!({"a": 3}));
        assert!(parse_json_reply("Niestety nie potrafie ocenic tej rozmowy.").is_err());
        assert!(parse_json_reply("{\"a\": ").is_err());
    }

    #[test]
    fn templates_see_nested_values() {
        let d = from_json(&json!({"m": [{"role": "user", "content": "hi"}]}));
        let v = to_template(&d);
        let mut env = minijinja::Environment::new();
        env.add_template("t", "{% for x in m %}{{ x.role }}:{{ x.content }}{% endfor %}").unwrap();
        assert_eq!(env.get_template("t").unwrap().render(v).unwrap(), "user:hi");
    }
}

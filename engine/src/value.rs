//! Values crossing the engine's three worlds: JSON at the edges (input, output, checkpoints),
//! Rhai `Dynamic` for state (what scripts see without conversion), minijinja values for templates.
//!
//! State lives as `Dynamic` because scripts read it on every node and converting on each call
//! would cost more than the node itself; JSON and template values are made only when needed.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr};
use rhai::{Array, Dynamic, ImmutableString, Map};
use serde_json::Value as Json;

use crate::vocab::TypeName;

/// JSON → `Dynamic`. Integers that fit `i64` stay integers; other numbers become floats.
pub fn from_json(v: &Json) -> Dynamic {
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
pub fn to_json(d: &Dynamic) -> Json {
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

/// How many bytes `d` takes as compact JSON, counted as it would be written (nothing is kept),
/// up to just past `most`: a state far over a limit costs no more to measure than one at it.
pub(crate) fn json_len(d: &Dynamic, most: usize) -> usize {
    struct Count {
        n: usize,
        most: usize,
    }
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            match self.n > self.most {
                true => Err(std::io::Error::other("past the limit")),
                false => Ok(buf.len()),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count { n: 0, most };
    match serde_json::to_writer(&mut count, d) {
        Err(_) if count.n <= most => serde_json::to_vec(&to_json(d)).map_or(0, |v| v.len()),
        _ => count.n,
    }
}

/// A JSON object → a `rhai::Map`.
pub(crate) fn map_of_json(map: &serde_json::Map<String, Json>) -> Map {
    map.iter().map(|(k, v)| (k.as_str().into(), from_json(v))).collect()
}

/// A `rhai::Map` → a JSON object.
pub(crate) fn map_to_json(map: &Map) -> Json {
    Json::Object(map.iter().map(|(k, v)| (k.to_string(), to_json(v))).collect())
}

/// `Dynamic` → a template value. Lists and maps become lazy views: a template converts only the
/// items it reads (the judge reads 15 messages of a history that may hold hundreds).
pub(crate) fn to_template(d: &Dynamic) -> minijinja::Value {
    match scalar(d) {
        Some(v) => v,
        None => View::root(if d.is_shared() { d.clone() } else { d.clone().into_shared() }),
    }
}

/// Field `name` of the state `map` (read from `state`) as a template value: a scalar converted,
/// a list or map viewed where it is in a shared state rather than copied.
pub(crate) fn field_to_template(state: &Dynamic, map: &Map, name: &str) -> Option<minijinja::Value> {
    let v = map.get(name)?;
    Some(match scalar(v) {
        Some(s) => s,
        None if state.is_shared() => minijinja::Value::from_object(View {
            root: state.clone(),
            path: vec![Step::Key(name.into())],
            list: v.is_array(),
        }),
        None => to_template(v),
    })
}

/// A scalar as a template value; `None` for lists and maps.
fn scalar(d: &Dynamic) -> Option<minijinja::Value> {
    use minijinja::Value;
    Some(match d.type_name() {
        "string" => Value::from(d.read_lock::<ImmutableString>()?.as_str()),
        "i64" => Value::from(d.as_int().ok()?),
        "bool" => Value::from(d.as_bool().ok()?),
        "f64" => Value::from(d.as_float().ok()?),
        "()" => Value::from(()),
        "char" => Value::from(d.as_char().ok()?),
        "array" | "map" => return None,
        other => Value::from(format!("<{other}>")),
    })
}

/// A step from a list or map to one of its items.
#[derive(Debug, Clone)]
enum Step {
    Index(usize),
    Key(rhai::Identifier),
}

/// A template's view of a list or map inside a shared value: the root and the path to it.
/// Nothing is copied; reading an item resolves the path under the root's read lock.
#[derive(Debug)]
struct View {
    root: Dynamic,
    path: Vec<Step>,
    list: bool,
}

impl View {
    fn root(root: Dynamic) -> minijinja::Value {
        let list = root.is_array();
        minijinja::Value::from_object(View { root, path: Vec::new(), list })
    }

    /// Runs `f` on the value at the end of the path.
    fn with<R>(&self, f: impl FnOnce(&Dynamic) -> Option<R>) -> Option<R> {
        fn walk<R>(d: &Dynamic, path: &[Step], f: impl FnOnce(&Dynamic) -> Option<R>) -> Option<R> {
            match path.split_first() {
                None => f(d),
                Some((Step::Index(i), rest)) => walk(d.read_lock::<Array>()?.get(*i)?, rest, f),
                Some((Step::Key(k), rest)) => walk(d.read_lock::<Map>()?.get(k.as_str())?, rest, f),
            }
        }
        // A shared root is read through its lock; `walk` sees the value inside.
        let guard = self.root.read_lock::<Dynamic>();
        match guard {
            Some(inner) => walk(&inner, &self.path, f),
            None => walk(&self.root, &self.path, f),
        }
    }

    fn child(&self, step: Step, item: &Dynamic) -> minijinja::Value {
        match scalar(item) {
            Some(v) => v,
            None => {
                let mut path = self.path.clone();
                path.push(step);
                minijinja::Value::from_object(View { root: self.root.clone(), path, list: item.is_array() })
            }
        }
    }

    fn get(&self, key: &str) -> Option<minijinja::Value> {
        self.with(|d| {
            let map = d.read_lock::<Map>()?;
            let item = map.get(key)?;
            Some(self.child(Step::Key(key.into()), item))
        })
    }
}

impl Object for View {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        if self.list { ObjectRepr::Seq } else { ObjectRepr::Map }
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        if !self.list {
            return self.get(key.as_str()?);
        }
        let i = key.as_i64()?;
        self.with(|d| {
            let list = d.read_lock::<Array>()?;
            let i = if i < 0 { list.len() as i64 + i } else { i };
            let i = usize::try_from(i).ok()?;
            Some(self.child(Step::Index(i), list.get(i)?))
        })
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<minijinja::Value> {
        if self.list { None } else { self.get(key) }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        if self.list {
            Enumerator::Seq(self.with(|d| Some(d.read_lock::<Array>()?.len())).unwrap_or(0))
        } else {
            let keys =
                self.with(|d| Some(d.read_lock::<Map>()?.keys().map(|k| minijinja::Value::from(k.as_str())).collect()));
            Enumerator::Values(keys.unwrap_or_default())
        }
    }
}

/// The `transcript` template filter: a list of `{role, content}` messages as lines of
/// `Label: content`, `last` messages only, labels from `roles` (a role without a label keeps its
/// name). Written in Rust because every chat pack needs it and a template loop costs ten times more.
///
/// `{{ conversation_history | transcript(last=15, roles={"user": "Gracz", "pirate": "Pirat"}) }}`
pub(crate) fn transcript(list: minijinja::Value, kwargs: minijinja::value::Kwargs) -> Result<String, minijinja::Error> {
    let last: Option<usize> = kwargs.get("last")?;
    let roles: Option<minijinja::Value> = kwargs.get("roles")?;
    let sep: Option<String> = kwargs.get("sep")?;
    kwargs.assert_all_used()?;
    let sep = sep.as_deref().unwrap_or(": ");
    // Labels looked up once per role, not once per line.
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut out = String::new();
    let mut line = |role: &str, content: &str| {
        if !out.is_empty() {
            out.push('\n');
        }
        match labels.iter().find(|(r, _)| r == role) {
            Some((_, l)) => out.push_str(l),
            None => {
                let l = roles
                    .as_ref()
                    .and_then(|r| r.get_attr(role).ok())
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| role.to_owned());
                out.push_str(&l);
                labels.push((role.to_owned(), l));
            }
        }
        out.push_str(sep);
        out.push_str(content);
    };
    let bad = || {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            "transcript() needs a list of {role, content} maps",
        )
    };
    if let Some(view) = list.downcast_object_ref::<View>() {
        // Straight from the state: no message is converted to a template value.
        let done = view.with(|d| {
            let items = d.read_lock::<Array>()?;
            let from = last.map_or(0, |n| items.len().saturating_sub(n));
            for item in &items[from..] {
                let map = item.read_lock::<Map>()?;
                let (role, content) = (map.get("role")?, map.get("content")?);
                match (role.read_lock::<ImmutableString>(), content.read_lock::<ImmutableString>()) {
                    (Some(r), Some(c)) => line(&r, &c),
                    _ => line(&role.to_string(), &content.to_string()),
                }
            }
            Some(())
        });
        done.ok_or_else(bad)?;
        return Ok(out);
    }
    let items: Vec<minijinja::Value> = list.try_iter().map_err(|_| bad())?.collect();
    let from = last.map_or(0, |n| items.len().saturating_sub(n));
    for item in &items[from..] {
        let role = item.get_attr("role").map_err(|_| bad())?;
        let content = item.get_attr("content").map_err(|_| bad())?;
        if role.is_undefined() || content.is_undefined() {
            return Err(bad());
        }
        line(&role.to_string(), &content.to_string());
    }
    Ok(out)
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

/// Extracts the first JSON value from a model's reply, in the shapes models write it: the whole
/// text, the inside of a ```` ```json ```` fence, or the first object or list in prose (a
/// sentence before it, another after); with trailing commas (`{"a": 1,}`) forgiven.
pub fn parse_json_reply(text: &str) -> Result<Json, String> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str::<Json>(trimmed) {
        return Ok(v);
    }
    let body = match trimmed.find("```") {
        Some(start) => {
            let after = &trimmed[start + 3..];
            let after = after.strip_prefix("json").or_else(|| after.strip_prefix("JSON")).unwrap_or(after);
            match after.find("```") {
                Some(end) => &after[..end],
                None => after,
            }
        }
        None => trimmed,
    };
    let mut last_error = None;
    let mut skip_to = 0;
    // From each `{` or `[` (the first few: a reply of braces must not cost a parse each), the
    // first whole value there, as written or without trailing commas; what follows is prose.
    for (at, _) in body.match_indices(['{', '[']).take(32) {
        if at < skip_to {
            continue; // inside a value that did not parse: a fragment of it, not the answer
        }
        let rest = &body[at..];
        let e = match first_value(rest) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if let Ok(v) = first_value(&without_trailing_commas(rest)) {
            return Ok(v);
        }
        if e.is_eof() {
            // Cut off before it closed (a reply stopped at its token limit): whatever starts
            // later is inside it.
            last_error = Some(e);
            break;
        }
        skip_to = at + offset_of(rest, e.line(), e.column());
        last_error.get_or_insert(e);
    }
    match last_error {
        Some(e) => Err(format!("the reply is not valid JSON: {e}")),
        None => Err("the reply contains no JSON object".into()),
    }
}

/// The first JSON value `text` starts with (what follows it is not read).
fn first_value(text: &str) -> serde_json::Result<Json> {
    serde_json::Deserializer::from_str(text).into_iter::<Json>().next().unwrap_or_else(|| serde_json::from_str(""))
}

/// The byte offset of a (1-based) line and column in `text`.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    (start + column).min(text.len())
}

/// `text` without the commas that come right before a closing `}` or `]` (outside strings),
/// which models write and JSON does not allow. A few lines rather than a JSON5 parser, which
/// would accept far more than a reply should be forgiven (comments, single quotes, `NaN`).
fn without_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut pending_comma: Option<usize> = None;
    for c in text.chars() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '}' | ']' => {
                if let Some(at) = pending_comma.take() {
                    out.remove(at);
                }
            }
            c if c.is_whitespace() => {}
            _ => pending_comma = None,
        }
        if c == ',' {
            pending_comma = Some(out.len());
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
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

    /// The state's messages and a template's own list give the same lines: labels where `roles`
    /// has one, the role's name where it has none, the last `last` messages only.
    #[test]
    fn transcript_labels_roles_and_keeps_the_last_messages() {
        let mut env = minijinja::Environment::new();
        env.add_filter("transcript", transcript);
        let messages = json!([
            {"role": "user", "content": "one"},
            {"role": "pirate", "content": "two"},
            {"role": "narrator", "content": "three"},
            {"role": "user", "content": "four"},
        ]);
        let m = to_template(&from_json(&messages).into_shared());
        let filter = r#"transcript(last=3, roles={"user": "Gracz", "pirate": "Pirat"})"#;
        let (plain, literal) =
            (format!("{{{{ m | {filter} }}}}"), format!("{{% set m = {messages} %}}{{{{ m | {filter} }}}}"));
        let from_state = env.template_from_str(&plain).unwrap();
        let from_template = env.template_from_str(&literal).unwrap();
        for t in [from_state, from_template] {
            assert_eq!(
                t.render(minijinja::context! { m => m.clone() }).unwrap(),
                "Pirat: two\nnarrator: three\nGracz: four"
            );
        }
    }

    #[test]
    fn non_finite_floats_become_null() {
        assert_eq!(to_json(&Dynamic::from_float(f64::NAN)), Json::Null);
    }

    #[test]
    fn json_replies_are_found_in_fences_and_prose() {
        assert_eq!(parse_json_reply(r#"{"a": 1}"#).unwrap(), json!({"a": 1}));
        assert_eq!(parse_json_reply("```json\n{\"a\": 2}\n```").unwrap(), json!({"a": 2}));
        assert_eq!(parse_json_reply("Sure! {\"a\": 3} Hope it helps").unwrap(), json!({"a": 3}));
        assert!(parse_json_reply("Niestety nie potrafie ocenic tej rozmowy.").is_err());
        assert!(parse_json_reply("{\"a\": ").is_err());
    }

    /// The shapes models write JSON in: after a sentence and followed by another (which may
    /// hold a brace), with trailing commas, in a fence named `JSON`; a string's commas and
    /// braces are its own.
    #[test]
    fn json_replies_are_found_as_models_write_them() {
        let cases = [
            ("Here you go: {\"a\": 1} Let me know if {you} need more.", json!({"a": 1})),
            ("{\"claims\": [\"x\", \"y\",],}", json!({"claims": ["x", "y"]})),
            ("```JSON\n{\"a\": [1, 2,\n]}\n```", json!({"a": [1, 2]})),
            ("Result: {\"s\": \"a, } b,]\", \"n\": 2,}", json!({"s": "a, } b,]", "n": 2})),
            ("I think [the list] is: [\"p\", \"q\"]", json!(["p", "q"])),
        ];
        for (reply, want) in cases {
            assert_eq!(parse_json_reply(reply).unwrap(), want, "{reply}");
        }
        assert!(parse_json_reply("{\"verdict\": \"tr").is_err(), "a reply cut off is no JSON");
        let cut = r#"{"uncertainty": {"kind": "none", "level": 0}, "reasoning": {"causal": tr"#;
        assert!(parse_json_reply(cut).is_err(), "nor is an object inside one: {:?}", parse_json_reply(cut));
    }

    #[test]
    fn templates_see_nested_values() {
        let d = from_json(&json!({"m": [{"role": "user", "content": "hi"}]}));
        let v = to_template(&d);
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.add_template("t", "{% for x in m %}{{ x.role }}:{{ x.content }}{% endfor %}").unwrap();
        assert_eq!(env.get_template("t").unwrap().render(&v).unwrap(), "user:hi");
        let seq = from_json(&json!({"l": [1, 2, 3, 4], "m": {"b": 2, "a": 1}})).into_shared();
        let v = to_template(&seq);
        let cases = [
            ("{{ l[-2:] | join(',') }}", "3,4"),
            ("{{ l[1] }}/{{ l[-1] }}/{{ l | length }}", "2/4/4"),
            ("{% for k, x in m | items %}{{ k }}={{ x }};{% endfor %}", "a=1;b=2;"),
            ("{% if m.zzz is defined %}yes{% else %}no{% endif %}", "no"),
            ("{{ m | tojson }}", r#"{"a": 1, "b": 2}"#),
        ];
        for (src, want) in cases {
            assert_eq!(env.render_str(src, &v).unwrap(), want, "{src}");
        }
        env.add_filter("transcript", transcript);
        let h = from_json(
            &json!({"h": [{"role": "user", "content": "a"}, {"role": "pirate", "content": "b"}, {"role": "x", "content": "c"}]}),
        );
        let v = to_template(&h);
        assert_eq!(
            env.render_str("{{ h | transcript(last=2, roles={'pirate': 'Pirat'}) }}", &v).unwrap(),
            "Pirat: b\nx: c"
        );
        assert_eq!(env.render_str("{{ h | transcript(sep=' > ') }}", &v).unwrap(), "user > a\npirate > b\nx > c");
        let plain = minijinja::Value::from(minijinja::value::Serde(json!([{"role": "user", "content": "q"}])));
        assert_eq!(env.render_str("{{ m | transcript }}", minijinja::context! { m => plain }).unwrap(), "user: q");
        assert!(env.render_str("{{ [1, 2] | transcript }}", ()).is_err());
    }
}

//! JSON Schemas a pack ships in `schemas/<pack>/` (YAML or JSON), declared under `schemas:` in
//! its manifest. Each is compiled once at load (a schema that is not valid JSON Schema is a load
//! error at its file); an `llm` node that names one has its model's reply validated against it
//! (and asks again with the errors as feedback), and scripts check values with `schema_errors`
//! and fill in defaults with `with_defaults`.
//!
//! Validation is the `jsonschema` crate's (drafts 4 to 2020-12; 2020-12 when the schema does not
//! say). Filling in defaults is this module's: JSON Schema says what `default` means but no
//! validator applies it, and a reply that leaves out `points_per_item` should read as the
//! schema's 10, as a Pydantic model's would.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value as Json;

/// The most errors one validation reports (a reply that is wrong everywhere says so in a page).
const MAX_ERRORS: usize = 20;
/// How deep defaults are filled in (a recursive schema, such as a mechanic's `children`).
const MAX_DEFAULT_DEPTH: usize = 32;
/// The longest an error message gets (the crate quotes the offending value whole).
const MAX_MESSAGE: usize = 240;

/// A pack's schemas by name.
pub(crate) type Schemas = Arc<HashMap<String, Arc<JsonSchema>>>;

/// One compiled schema.
pub(crate) struct JsonSchema {
    /// The name the manifest gives it.
    pub name: String,
    /// Its file, relative to the root.
    pub file: String,
    /// The schema document, as sent to providers that take a structured-output format.
    pub document: Arc<Json>,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for JsonSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSchema").field("name", &self.name).field("file", &self.file).finish_non_exhaustive()
    }
}

impl JsonSchema {
    /// Compiles `document`; the error says why it is not a usable schema.
    pub(crate) fn compile(name: &str, file: &str, document: Json) -> Result<Self, String> {
        let validator = jsonschema::validator_for(&document).map_err(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                format!("not a valid JSON Schema: {e}")
            } else {
                format!("not a valid JSON Schema: at {at}: {e}")
            }
        })?;
        Ok(JsonSchema { name: name.to_owned(), file: file.to_owned(), document: Arc::new(document), validator })
    }

    /// What is wrong with `value`, one line per problem (`/scenes/0/mechanics: [] has less than
    /// 1 item`); empty when it is valid.
    pub(crate) fn errors(&self, value: &Json) -> Vec<String> {
        self.validator
            .iter_errors(value)
            .take(MAX_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                shorten(format!("{at}: {e}"))
            })
            .collect()
    }

    /// Fills in, everywhere in `value`, the `default` of every property the schema gives one
    /// and the value leaves out (following `properties`, `items` and local `$ref`s).
    pub(crate) fn with_defaults(&self, value: &mut Json) {
        fill(&self.document, &self.document, value, 0);
    }
}

fn shorten(s: String) -> String {
    if s.chars().count() <= MAX_MESSAGE {
        return s;
    }
    let mut out: String = s.chars().take(MAX_MESSAGE - 1).collect();
    out.push('…');
    out
}

/// The schema `node` stands for: itself, or what its local `$ref` points at.
fn resolve<'a>(root: &'a Json, node: &'a Json) -> &'a Json {
    let mut node = node;
    for _ in 0..8 {
        match node.get("$ref").and_then(Json::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => match root.pointer(pointer) {
                Some(target) => node = target,
                None => return node,
            },
            None => return node,
        }
    }
    node
}

fn fill(root: &Json, node: &Json, value: &mut Json, depth: usize) {
    if depth > MAX_DEFAULT_DEPTH {
        return;
    }
    let node = resolve(root, node);
    match value {
        Json::Object(map) => {
            let Some(props) = node.get("properties").and_then(Json::as_object) else { return };
            for (key, sub) in props {
                let sub = resolve(root, sub);
                match map.get_mut(key) {
                    Some(v) => fill(root, sub, v, depth + 1),
                    None => {
                        if let Some(d) = sub.get("default") {
                            map.insert(key.clone(), d.clone());
                        }
                    }
                }
            }
        }
        Json::Array(items) => {
            if let Some(sub) = node.get("items").filter(|s| s.is_object()) {
                for v in items {
                    fill(root, sub, v, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> JsonSchema {
        let doc = json!({
            "type": "object",
            "required": ["title", "items"],
            "properties": {
                "title": {"type": "string", "minLength": 1},
                "items": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/item"}}
            },
            "$defs": {"item": {
                "type": "object",
                "properties": {
                    "points": {"type": "integer", "default": 10},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/item"}}
                }
            }}
        });
        JsonSchema::compile("t", "schemas/t/t.yaml", doc).unwrap()
    }

    #[test]
    fn errors_name_the_place() {
        let s = schema();
        assert!(s.errors(&json!({"title": "x", "items": [{}]})).is_empty());
        let errs = s.errors(&json!({"title": "", "items": []}));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs.iter().any(|e| e.starts_with("/title:")), "{errs:?}");
        assert!(errs.iter().any(|e| e.starts_with("/items:")), "{errs:?}");
        assert_eq!(s.errors(&json!([])), vec!["/: [] is not of type \"object\"".to_owned()]);
    }

    #[test]
    fn defaults_fill_nested_and_recursive_items() {
        let s = schema();
        let mut v = json!({"title": "x", "items": [{"points": 5, "children": [{}]}, {}]});
        s.with_defaults(&mut v);
        assert_eq!(v, json!({"title": "x", "items": [{"points": 5, "children": [{"points": 10}]}, {"points": 10}]}));
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused() {
        let err = JsonSchema::compile("t", "f", json!({"type": "nonsense"})).unwrap_err();
        assert!(err.starts_with("not a valid JSON Schema"), "{err}");
    }
}

//! The words every module shares: value types, reducers, how a reply is parsed, which scorer
//! implementation runs, boxed futures, the clock. A leaf: it depends on no other module of the
//! crate, so anything may use it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use rhai::Dynamic;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// A boxed future, as the object-safe traits (providers, stores) return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The value types a state field, input field or option may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TypeName {
    /// Text.
    String,
    /// A whole number.
    Int,
    /// A floating-point number.
    Float,
    /// An int or a float.
    Number,
    /// true or false.
    Bool,
    /// A list of values.
    List,
    /// A map from names to values.
    Map,
    /// Anything.
    Any,
}

impl TypeName {
    /// The name as written in a manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            TypeName::String => "string",
            TypeName::Int => "int",
            TypeName::Float => "float",
            TypeName::Number => "number",
            TypeName::Bool => "bool",
            TypeName::List => "list",
            TypeName::Map => "map",
            TypeName::Any => "any",
        }
    }

    /// The name with its article: "an int", "a string".
    pub fn a(self) -> String {
        match self {
            TypeName::Int | TypeName::Any => format!("an {}", self.as_str()),
            _ => format!("a {}", self.as_str()),
        }
    }

    /// Whether `v` is a value of this type, exactly (inputs and options).
    pub fn holds(self, v: &Dynamic) -> bool {
        match self {
            TypeName::Any => true,
            TypeName::String => v.is_string(),
            TypeName::Int => v.is_int(),
            TypeName::Float => v.is_float(),
            TypeName::Number => v.is_int() || v.is_float(),
            TypeName::Bool => v.is_bool(),
            TypeName::List => v.is_array(),
            TypeName::Map => v.is_map(),
        }
    }

    /// Whether a JSON value is of this type, exactly.
    pub fn holds_json(self, v: &Json) -> bool {
        match self {
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

    /// Whether a state field of this type takes `v`: a value of the type, or an int for a float
    /// field (scripts write `1` for `1.0`).
    pub fn admits(self, v: &Dynamic) -> bool {
        self.holds(v) || (self == TypeName::Float && v.is_int())
    }

    /// [`TypeName::admits`] for a JSON value (a manifest's default, a snapshot's field).
    pub fn admits_json(self, v: &Json) -> bool {
        self.holds_json(v) || (self == TypeName::Float && (v.is_i64() || v.is_u64()))
    }

    /// Whether every value of this type is also a `to` (a field whose type changed keeps its
    /// sessions' values when it is).
    pub fn fits_in(self, to: TypeName) -> bool {
        use TypeName::*;
        self == to || to == Any || matches!((self, to), (Int, Float | Number) | (Float, Number) | (Number, Float))
    }
}

impl fmt::Display for TypeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a node's update to a field is folded into the state (what each does: `state::reducer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Reducer {
    /// The update replaces the value (the default).
    #[default]
    Replace,
    /// Lists: the update's items (or the update itself) are added at the end.
    Append,
    /// Lists: like append, but only items not already present.
    Union,
    /// Maps: the update's keys replace those of the value; other keys stay.
    Merge,
    /// Numbers: the update is added to the value.
    Add,
}

impl Reducer {
    /// The name as written in a manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Reducer::Replace => "replace",
            Reducer::Append => "append",
            Reducer::Union => "union",
            Reducer::Merge => "merge",
            Reducer::Add => "add",
        }
    }
}

/// How an `llm` node reads the model's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ParseMode {
    Text,
    Json,
}

/// Which implementation of a selector's scorer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScorerImpl {
    /// The Rhai function.
    Script,
    /// The registered native function.
    Native,
}

/// Whether `s` is an identifier: a letter or `_`, then letters, digits or `_`.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_hold_and_admit() {
        assert!(TypeName::Number.holds(&Dynamic::from_int(3)));
        assert!(TypeName::Number.holds(&Dynamic::from_float(3.5)));
        assert!(!TypeName::Int.holds(&Dynamic::from_float(3.5)));
        assert!(TypeName::List.holds(&Dynamic::from_array(vec![])));
        assert!(!TypeName::Map.holds(&Dynamic::from("x")));
        assert!(!TypeName::Float.holds(&Dynamic::from_int(1)) && TypeName::Float.admits(&Dynamic::from_int(1)));
        assert!(TypeName::Int.holds_json(&json!(3)) && !TypeName::Int.holds_json(&json!(3.5)));
        assert!(TypeName::Float.admits_json(&json!(3)) && !TypeName::Float.holds_json(&json!(3)));
        assert!(TypeName::Int.fits_in(TypeName::Float) && !TypeName::String.fits_in(TypeName::Int));
    }
}

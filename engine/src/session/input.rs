//! A turn's input as a caller gives it: a map of the pack's input fields as it is, or a line a
//! person typed, read by the pack's `typed` script or into its one text field.

use rhai::Dynamic;
use serde_json::Value as Json;

use super::Session;
use crate::error::{Error, ErrorKind, Result};
use crate::value;

impl Session {
    /// The turn input for a line a person typed: what the pack's `typed` script makes of it (it
    /// sees the state as `this`: `"4/6"` is four of the six players at the table), or, for a pack
    /// with one text field, that field. A turn given a bare string does this itself.
    pub fn input_from_text(&self, text: &str) -> Result<Json> {
        if let Some(typed) = &self.pack.typed {
            let mut this = self.state.clone();
            let made = self.pack.sandbox.call(typed, &mut this, (Dynamic::from(text.to_owned()),), None)?;
            return match value::to_json(&made) {
                m @ Json::Object(_) => Ok(m),
                other => Err(Error::new(
                    ErrorKind::Script,
                    format!("{} must return a map of input fields, not {other}", typed.display()),
                )),
            };
        }
        self.pack.input_from_text(text).ok_or_else(|| {
            let fields: Vec<&str> = self.pack.inputs.keys().map(String::as_str).collect();
            Error::input(format!(
                "pack `{}` takes a map of input fields ({}), not a bare string",
                self.pack.name,
                fields.join(", ")
            ))
        })
    }

    /// A turn's input from a value as a caller gives it: a map of input fields as it is, a line
    /// a person typed through [`Session::input_from_text`]; anything else is an input error.
    pub fn input_from(&self, v: Json) -> Result<Json> {
        match v {
            Json::Object(_) => Ok(v),
            Json::String(s) => self.input_from_text(&s),
            other => Err(Error::input(format!("an input is a map of fields (or a string), not {other}"))),
        }
    }
}

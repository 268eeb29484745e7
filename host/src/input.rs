//! A turn's input as the command line and simulated players give it: a map, or a line of text.

use ruleweave::{Error, ErrorKind, Result};
use serde_json::Value;

/// A turn input from a value: a map as it is, a typed line through the session's pack (see
/// [`ruleweave::Session::input_from_text`]).
pub(crate) fn turn_input(session: &ruleweave::Session, v: Value) -> Result<Value> {
    match v {
        Value::Object(_) => Ok(v),
        Value::String(s) => session.input_from_text(&s),
        other => Err(Error::new(ErrorKind::Input, format!("an input is a map of fields (or a string), not {other}"))),
    }
}

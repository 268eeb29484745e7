//! A round of the party's six-player table as the benches play it: the first `n` players "have".

use serde_json::{Value, json};

/// The table.
pub const PLAYERS: [&str; 6] = ["ana", "bo", "cy", "dee", "eli", "fox"];

/// A round's input: the first `n` of [`PLAYERS`] have, the others have not.
pub fn round(n: usize) -> Value {
    let answers: serde_json::Map<String, Value> = PLAYERS
        .iter()
        .enumerate()
        .map(|(i, p)| (p.to_string(), json!(if i < n { "have" } else { "have_not" })))
        .collect();
    json!({ "answers": answers })
}

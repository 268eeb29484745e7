//! Lobby rounds: a pack may declare that a turn gathers one input per player. Each player posts
//! their own answer; the round's turn runs when every player in the lobby has answered, or the
//! pack's timeout after the round's question was asked (with the answers it has, none if nobody
//! answered). Answers wait in the store (so any replica can
//! take the next one, or close the round), and the turn that closes the round clears them in the
//! transaction that records it.
//!
//! Players join and leave between rounds: a join takes effect when the round closes (the joiner
//! answers from the next round), a leave at once (the round stops waiting for them; an answer
//! they already gave still counts). Both reach the pack as lists in the round's input.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value as Json;

pub use crate::store::InputKind;
use crate::store::LobbyInput;

/// A pack's `lobby:` section, checked.
#[derive(Debug, Clone)]
pub struct Lobby {
    /// The list state field with the players' names.
    pub players: String,
    /// The int state field with the round being answered.
    pub round: String,
    /// The map input field the answers go in (player → answer).
    pub answers: String,
    /// The answers allowed (any when `None`).
    pub values: Option<Vec<Json>>,
    /// The list input field the joiners go in.
    pub join: Option<String>,
    /// The list input field the leavers go in.
    pub leave: Option<String>,
    /// How long a round waits after its question was asked.
    pub timeout: Duration,
    /// The most players a lobby holds.
    pub max_players: Option<usize>,
    /// The longest name a player may have, in characters.
    pub max_name: usize,
}

impl Lobby {
    /// Whether `name` may be a player's: 1 to `max_name` characters, no spaces at its ends, no
    /// control characters or invisible ones.
    pub(crate) fn check_name(&self, name: &str) -> crate::error::Result<()> {
        if name.trim().is_empty()
            || name.chars().count() > self.max_name
            || name.trim() != name
            || name.chars().any(|c| c.is_control() || invisible(c))
        {
            return Err(crate::error::Error::input(format!(
                "{name:?} cannot be a player's name: a name is 1 to {} characters, without spaces at its ends, \
                 control characters or invisible ones (zero-width spaces, direction overrides, variation \
                 selectors, fillers)",
                self.max_name
            )));
        }
        // A letter Unicode does not recommend for names (UTS #39's General Security Profile: small
        // capitals, phonetic and historic letters) is one that passes for a common one.
        // (Read after compatibility normalization: a full-width `ａ` is an `a`, a twin the
        // skeleton below finds.)
        use unicode_normalization::UnicodeNormalization as _;
        if let Some(c) = name.nfkc().find(|c| {
            use unicode_security::GeneralSecurityProfile as _;
            (c.is_alphanumeric() || unicode_normalization::char::is_combining_mark(*c)) && !c.identifier_allowed()
        }) {
            return Err(crate::error::Error::input(format!(
                "{name:?} cannot be a player's name: `{c}` (U+{:04X}) is a letter Unicode does not recommend \
                 for names, one that passes for another",
                c as u32
            )));
        }
        Ok(())
    }

    /// Whether the players a session starts with may play: each name one a player could join
    /// with, and no two alike.
    pub(crate) fn check_players(&self, players: &[String]) -> crate::error::Result<()> {
        for (i, name) in players.iter().enumerate() {
            self.check_name(name)?;
            if let Some(other) = players[..i].iter().find(|p| looks_like(p) == looks_like(name)) {
                return Err(crate::error::Error::input(format!(
                    "players {other:?} and {name:?} look the same: each player needs a name the others can tell apart"
                )));
            }
        }
        Ok(())
    }
}

/// Whether `c` shows nothing where it stands, or changes how the text around it shows: Unicode's
/// Default_Ignorable_Code_Point property (zero-width spaces and joiners, direction marks,
/// embeddings, overrides and isolates, the combining grapheme joiner, variation selectors, tag
/// characters, the Hangul fillers, the soft hyphen...), as the Unicode data this build carries
/// says. A name holding one looks like a name that does not.
fn invisible(c: char) -> bool {
    use icu_properties::CodePointSetData;
    use icu_properties::props::DefaultIgnorableCodePoint;
    CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// What a name looks like, for telling two apart: compatibility-normalized (NFKC: a full-width
/// `Ａ` is an `A`) and case-folded, then reduced to Unicode's confusable skeleton (UTS #39: a
/// Cyrillic `а`, a Latin alpha `ɑ` and a small capital `ᴀ` are all an `a`; what shows nothing is
/// dropped), without the marks over or under a letter (`aná` reads as `ana` at a glance), and
/// folded again.
pub(crate) fn looks_like(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    let folded: String = name.nfkc().flat_map(char::to_lowercase).collect();
    unicode_security::skeleton(&folded)
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// One post to a lobby: a player's answer, or their joining or leaving.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    /// Who posts.
    pub player: String,
    /// What it is.
    pub kind: InputKind,
    /// The answer (`null` for joining and leaving).
    pub input: Json,
    /// The round the player means (`None`: the one under way). A different round is refused, so
    /// an answer meant for a round that closed never lands in the next one.
    pub round: Option<u64>,
}

/// Where a lobby round stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LobbyStatus {
    /// The round under way.
    pub round: u64,
    /// Who is in the lobby.
    pub players: Vec<String>,
    /// Who has answered this round.
    pub answered: Vec<String>,
    /// Who the round still waits for.
    pub waiting: Vec<String>,
    /// Who joins when the round closes.
    pub joining: Vec<String>,
    /// Who has left this round.
    pub leaving: Vec<String>,
    /// When the round closes if not everyone answers, unix milliseconds: the pack's timeout after
    /// the question was asked (`None` before the first question, and while a turn is held).
    pub closes_at: Option<i64>,
    /// A breakpoint holds the turn that closes the round (a designer stepping through it): the
    /// lobby takes no input and the round's timer waits until the turn is resumed; the next
    /// round's timer starts when it ends.
    pub held: bool,
}

impl LobbyStatus {
    /// Where the round stands, from the players in the state, the inputs waiting, and when the
    /// round's question was asked.
    pub(crate) fn of(lobby: &Lobby, round: u64, players: Vec<String>, inputs: &[LobbyInput], asked_at: i64) -> Self {
        let who = |kind: InputKind| -> Vec<String> {
            inputs.iter().filter(|i| i.round == round && i.kind == kind).map(|i| i.player.clone()).collect()
        };
        let answered = who(InputKind::Answer);
        let joining = who(InputKind::Join);
        let leaving = who(InputKind::Leave);
        let waiting =
            players.iter().filter(|p| !answered.contains(p) && !leaving.contains(p)).cloned().collect::<Vec<_>>();
        LobbyStatus {
            round,
            players,
            answered,
            waiting,
            joining,
            leaving,
            closes_at: (round > 0).then(|| asked_at + lobby.timeout.as_millis() as i64),
            held: false,
        }
    }

    /// The status while a breakpoint holds the turn closing its round: waiting for nobody, with
    /// no timer running.
    pub(crate) fn held(mut self) -> Self {
        self.waiting.clear();
        self.closes_at = None;
        self.held = true;
        self
    }

    /// Whether the round can close now: nobody left to wait for, and something to close on.
    pub(crate) fn complete(&self) -> bool {
        self.waiting.is_empty() && !(self.answered.is_empty() && self.leaving.is_empty())
    }

    /// The turn input that closes the round: the answers, and who joins and leaves.
    pub(crate) fn turn_input(&self, lobby: &Lobby, inputs: &[LobbyInput]) -> Json {
        let answers: serde_json::Map<String, Json> = inputs
            .iter()
            .filter(|i| i.round == self.round && i.kind == InputKind::Answer)
            .map(|i| (i.player.clone(), i.input.clone()))
            .collect();
        let mut input = serde_json::Map::new();
        input.insert(lobby.answers.clone(), Json::Object(answers));
        if let Some(join) = &lobby.join {
            input.insert(join.clone(), Json::from(self.joining.clone()));
        }
        if let Some(leave) = &lobby.leave {
            input.insert(leave.clone(), Json::from(self.leaving.clone()));
        }
        Json::Object(input)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_that_look_alike_are_alike_and_invisible_characters_are_seen() {
        for twin in ["ana", "Ana", "ＡＮＡ", "\u{430}na", "\u{251}na", "aná", "an\u{0301}a", "a\u{034F}na"] {
            assert_eq!(super::looks_like(twin), super::looks_like("ana"), "{twin:?}");
        }
        for other in ["bo", "anna", "an", "ona"] {
            assert_ne!(super::looks_like(other), super::looks_like("ana"), "{other:?}");
        }
        for c in ['\u{200B}', '\u{202E}', '\u{034F}', '\u{FE0F}', '\u{E0041}', '\u{3164}', '\u{00AD}', '\u{2066}'] {
            assert!(super::invisible(c), "U+{:04X}", c as u32);
        }
        for c in ['a', 'ą', 'ж', '😀', ' '] {
            assert!(!super::invisible(c), "{c:?}");
        }
    }

    #[test]
    fn names_of_every_script_pass_and_letters_that_pass_for_others_do_not() {
        let lobby = super::Lobby {
            players: "players".into(),
            round: "round".into(),
            answers: "answers".into(),
            values: None,
            join: None,
            leave: None,
            timeout: std::time::Duration::from_secs(30),
            max_players: None,
            max_name: 40,
        };
        for name in ["ana", "José", "Zoë", "Łukasz", "Ana-María", "O'Brien", "Иван", "王伟", "ana 🎉", "bo2"]
        {
            assert!(lobby.check_name(name).is_ok(), "{name}: {:?}", lobby.check_name(name));
        }
        for name in ["\u{1D00}na", "\u{251}na", "an\u{200B}a", "a\u{FE0F}na", "\u{3164}", "ana\u{E0041}"] {
            let e = lobby.check_name(name).unwrap_err();
            assert!(e.detail().contains("cannot be a player's name"), "{name:?}: {e}");
        }
    }
}

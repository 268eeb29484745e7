//! Opening a session for someone: its id, the player it is for, and which variant of its pack's
//! experiment it plays; and a live game's outcome row, written as it opens and completed as it
//! ends. A player is kept only as a hash ([`player_hash`]): enough to give them
//! the same variant, to count their games apart, and to erase them, and nothing to read back.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use serde_json::Value as Json;

use super::Session;
use crate::error::{Error, Result};
use crate::pack::Pack;
use crate::packs::Packs;
use crate::runtime::Runtime;
use crate::store::{Ending, OutcomeRow};
use crate::vocab::now_ms;

/// The longest a player's key may be, in characters.
pub const PLAYER_MAX: usize = 128;

/// How a session is opened: [`Engine::open_as`](crate::Engine::open_as).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenAs {
    /// Its id (a new one when `None`); the id also seeds its randomness.
    pub id: Option<String>,
    /// The player it is for (at most [`PLAYER_MAX`] printable characters): the key its variant
    /// is chosen by, in place of its id.
    pub player: Option<String>,
    /// Which variant of the pack's experiment it plays.
    pub variant: VariantChoice,
    /// A designer's playtest: its game is not counted in live reports (nor is a game whose
    /// variant was named, a fork's or a replay's, nor one on the pack's own rules).
    pub debug: bool,
}

/// Which variant of its pack's experiment a session plays.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum VariantChoice {
    /// The one its player's key falls in (its id's without a player).
    #[default]
    ByKey,
    /// This one (a fork's or a replay's: its session's).
    Named(String),
    /// None: the pack's own rules (a simulated game).
    Rules,
}

impl OpenAs {
    /// A session of id `id` (a new one when `None`), its variant chosen by its key.
    pub fn with_id(id: Option<String>) -> OpenAs {
        OpenAs { id, ..OpenAs::default() }
    }
}

/// Who a session was opened for and what it plays, as its record keeps it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Who {
    /// The variant of its pack's experiment it plays.
    pub variant: Option<String>,
    /// Its player's hash.
    pub player: Option<String>,
    /// A live game, counted in live reports: the pack's version (without the variant's
    /// params) it opened at.
    pub counted: Option<String>,
}

/// A player's key, refused unless it is 1 to [`PLAYER_MAX`] characters, none of them a control
/// character.
pub fn check_player(player: &str) -> Result<()> {
    let n = player.chars().count();
    if n == 0 || n > PLAYER_MAX {
        return Err(Error::input(format!("a player is 1 to {PLAYER_MAX} characters, not {n}")));
    }
    if let Some(c) = player.chars().find(|c| c.is_control()) {
        return Err(Error::input(format!("a player is printable characters: it holds the control character {c:?}")));
    }
    Ok(())
}

/// How a player is kept: the first 16 bytes of the SHA-256 of their key, in hex.
pub fn player_hash(player: &str) -> String {
    Sha256::digest(player.as_bytes())[..16].iter().map(|b| format!("{b:02x}")).collect()
}

impl OpenAs {
    /// The session's id, who it is for, and the rules of `pack` (in `packs`) it plays.
    pub(crate) fn resolve(self, packs: &Packs, pack: &str) -> Result<(String, Who, Arc<Pack>)> {
        let base = packs.get(pack)?;
        if let Some(p) = &self.player {
            check_player(p)?;
        }
        let id = self.id.unwrap_or_else(super::new_id);
        let counted = (self.variant == VariantChoice::ByKey && !self.debug).then(|| base.version.clone());
        let variant = match (base.experiment(), self.variant) {
            (None, _) | (_, VariantChoice::Rules) => None,
            (Some(e), VariantChoice::ByKey) => {
                Some(e.assign(&base.name, self.player.as_deref().unwrap_or(&id)).name.clone())
            }
            (Some(_), VariantChoice::Named(v)) => Some(v),
        };
        let rules = packs.variant_of(base.clone(), variant.as_deref())?;
        Ok((id, Who { variant, player: self.player.as_deref().map(player_hash), counted }, rules))
    }
}

impl Who {
    /// Writes the outcome row of a live game as it opens (nothing for any other session). A
    /// failure is logged: the session has been made, and plays.
    pub(crate) async fn record_opening(&self, rt: &Runtime, pack: &Pack, id: &str, now: i64) {
        let (Some(version), Some(outcomes)) = (&self.counted, rt.store.outcomes()) else { return };
        let row = OutcomeRow {
            session: id.to_owned(),
            pack: pack.name.clone(),
            version: version.clone(),
            variant: self.variant.clone(),
            player: self.player.clone(),
            outcome: None,
            tracked: Default::default(),
            turns: 0,
            created_at: now,
            finished_at: None,
        };
        if let Err(e) = outcomes.opened(&row).await {
            tracing::warn!(session = %id, "cannot record a live game's opening: {e}");
        }
    }
}

impl Session {
    /// Completes its live game's outcome row as it ended (after `turns`), or drops it when its
    /// state was set by hand (or `turns` is none: an edit); a session with no row (no live
    /// game) is left alone. A failure is logged: the game has been recorded, and goes on.
    pub(crate) async fn record_ending(&self, turns: Option<u64>) {
        let Some(outcomes) = self.rt.store.outcomes() else { return };
        let written = match (self.edited_turn, turns) {
            (None, Some(turns)) => {
                let spec = self.pack.simulate();
                let outcome = match spec.outcome.as_deref().map(|f| self.field(f)) {
                    None => "finished".to_owned(),
                    Some(Some(Json::String(s))) => s,
                    Some(Some(other)) => other.to_string(),
                    Some(None) => "none".to_owned(),
                };
                let tracked = spec.track.iter().filter_map(|f| Some((f.clone(), self.field(f)?))).collect();
                let ending = Ending { outcome, tracked, turns, at: now_ms() };
                outcomes.ended(&self.id, &ending).await
            }
            _ => outcomes.discard(&self.id).await,
        };
        if let Err(e) = written {
            tracing::warn!(session = %self.id, "cannot record how a live game ended: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_player_is_printable_and_not_too_long() {
        assert!(check_player("ada@example.com").is_ok());
        assert!(check_player(&"é".repeat(128)).is_ok());
        let long = check_player(&"x".repeat(10_000)).unwrap_err();
        assert_eq!(long.detail(), "a player is 1 to 128 characters, not 10000");
        let control = check_player("ada\u{7}").unwrap_err();
        assert_eq!(control.detail(), "a player is printable characters: it holds the control character '\\u{7}'");
        assert!(check_player("").is_err());
    }

    #[test]
    fn a_player_is_kept_as_a_hash() {
        assert_eq!(player_hash("ada"), "fdee430d40bd57deeac186cd9790033d");
        assert_eq!(player_hash("ada").len(), 32);
    }
}

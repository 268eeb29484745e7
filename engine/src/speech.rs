//! What a face shows while a reply streams: for the nodes a pack's `display.stream` names, the
//! reply's text after its `display.stream_from` heading (a debater's speech, not the reflection
//! and critique before it), labelled with who speaks (`display.speaker`).

use std::collections::HashMap;
use std::sync::Mutex;

use regex::Regex;

/// A pack's streaming display, checked.
#[derive(Debug, Default)]
pub(crate) struct Streamed {
    /// The nodes whose replies stream.
    pub nodes: Vec<String>,
    /// What a reply shows only after (its first match).
    pub from: Option<Regex>,
    /// The state field naming who speaks.
    pub speaker: Option<String>,
}

/// The node a call belongs to: a map node's item (`speak[2]`) is its node's.
fn base(node: &str) -> &str {
    node.split_once('[').map_or(node, |(n, _)| n)
}

impl Streamed {
    /// Whether `node`'s calls stream (a map node's items, `node[2]`, as the node's).
    pub(crate) fn shows(&self, node: &str) -> bool {
        self.nodes.iter().any(|n| n == base(node))
    }
}

/// Who speaks in each streamed node of a turn, as the node started.
#[derive(Debug, Default)]
pub(crate) struct Speakers(Mutex<HashMap<String, String>>);

impl Speakers {
    pub(crate) fn set(&self, node: &str, speaker: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(node.to_owned(), speaker);
    }

    /// Who speaks in `node` (a map node's item speaks as its node).
    pub(crate) fn of(&self, node: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(base(node)).cloned()
    }
}

/// One streamed reply, piece by piece: what of it a face shows.
#[derive(Debug)]
pub(crate) struct SpeechFilter {
    from: Option<Regex>,
    /// The reply so far, until the heading is found.
    held: String,
    /// Whether the heading was found (or there is none to find).
    open: bool,
    /// Whether any text was shown: leading blank space is not.
    started: bool,
}

impl SpeechFilter {
    pub(crate) fn new(from: Option<Regex>) -> Self {
        let open = from.is_none();
        SpeechFilter { from, held: String::new(), open, started: false }
    }

    /// The part of `piece` to show, if any, and whether it is the first part shown.
    pub(crate) fn push(&mut self, piece: &str) -> Option<(String, bool)> {
        let shown = if self.open {
            piece.to_owned()
        } else {
            self.held.push_str(piece);
            let re = self.from.as_ref()?;
            let end = re.find(&self.held)?.end();
            self.open = true;
            let rest = self.held[end..].to_owned();
            self.held = String::new();
            rest
        };
        let shown = if self.started { shown } else { shown.trim_start().to_owned() };
        if shown.is_empty() {
            return None;
        }
        let start = !self.started;
        self.started = true;
        Some((shown, start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(from: Option<&str>, pieces: &[&str]) -> String {
        let mut f = SpeechFilter::new(from.map(|r| Regex::new(r).unwrap()));
        pieces.iter().filter_map(|p| f.push(p)).map(|(text, _)| text).collect()
    }

    #[test]
    fn only_what_follows_the_heading_is_shown() {
        let from = Some(r"(?im)^\W*phase\s*3\b[^\n]*\n");
        let pieces = [
            "PHASE 1 - REFLECTION:\nI think",
            "\nPHASE 2 - CRITIQUE:\nweak\nPHA",
            "SE 3 - REFINEMENT:",
            "\n  Cars ",
            "are good.",
        ];
        assert_eq!(shown(from, &pieces), "Cars are good.");
        // A model's own markup around the heading is no heading of its own.
        assert_eq!(shown(from, &["**Phase 3 – Refinement:**\nSpeech."]), "Speech.");
        // Never found: nothing is shown (the final reply says it all).
        assert_eq!(shown(from, &["just a speech"]), "");
    }

    #[test]
    fn the_first_piece_shown_starts_the_speech() {
        let mut f = SpeechFilter::new(None);
        assert_eq!(f.push(" "), None);
        assert_eq!(f.push("Arr"), Some(("Arr".into(), true)));
        assert_eq!(f.push("!"), Some(("!".into(), false)));
    }

    #[test]
    fn without_a_heading_everything_is_shown_but_the_leading_space() {
        assert_eq!(shown(None, &["\n ", " Arr", ", matey"]), "Arr, matey");
    }

    #[test]
    fn a_map_node_item_streams_and_speaks_as_its_node() {
        let s = Streamed { nodes: vec!["speak".into()], ..Default::default() };
        assert!(s.shows("speak") && s.shows("speak[2]") && !s.shows("speaker"));
        let who = Speakers::default();
        who.set("speak", "pro".into());
        assert_eq!(who.of("speak[1]").as_deref(), Some("pro"));
    }
}

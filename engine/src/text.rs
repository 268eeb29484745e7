//! Text primitives behind the host functions: folding, keyword tables, word counts, similarity.
//!
//! These are "heavy primitives": tokenizing and comparing text in Rhai would cost
//! more than the rest of a script, so scripts call these instead. They are public so that native
//! twins of scripted scorers compute exactly what the host functions do.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use unicode_normalization::UnicodeNormalization;

/// Lowercases and strips diacritics, so `Załoga`, `zaloga` and `ZAŁOGA` compare equal.
/// Letters that do not decompose (`ł`, `ø`, `đ`, `ß`) are mapped by hand.
pub fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.nfd() {
        if unicode_normalization::char::is_combining_mark(c) {
            continue;
        }
        match c {
            'ł' | 'Ł' => out.push('l'),
            'ø' | 'Ø' => out.push('o'),
            'đ' | 'Đ' => out.push('d'),
            'ß' => out.push_str("ss"),
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// The words of already folded text: runs of letters and digits.
pub fn words(folded: &str) -> impl Iterator<Item = &str> {
    folded.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

/// `text`'s folded words but those in `skip` (folded words too), joined by single spaces.
pub fn words_without(text: &str, skip: &[&str]) -> String {
    let folded = fold(text);
    let mut out = String::with_capacity(folded.len());
    for w in words(&folded).filter(|w| !skip.contains(w)) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// How many words `text` has.
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// `x` with at most `digits` decimals, as people read it: 0.6454972243679029 → "0.65",
/// 2.0 → "2", 0.1 + 0.2 → "0.3".
pub fn decimals(x: f64, digits: usize) -> String {
    let text = format!("{x:.digits$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    if text == "-0" { "0".to_owned() } else { text.to_owned() }
}

/// The first `limit` words of `text` (whitespace between them kept as single spaces).
pub fn truncate_words(text: &str, limit: usize) -> String {
    text.split_whitespace().take(limit).collect::<Vec<_>>().join(" ")
}

/// Whether `phrase` occurs in `text` starting at a word boundary, both folded.
/// A keyword is a stem: `zalog` finds `załoga` and `załogi`, `lie` finds `lies` but not `believe`.
pub fn has_phrase(folded_text: &str, folded_phrase: &str) -> bool {
    let phrase = folded_phrase.trim();
    if phrase.is_empty() {
        return false;
    }
    let mut start = 0;
    while let Some(i) = folded_text[start..].find(phrase) {
        let at = start + i;
        let boundary = folded_text[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        if boundary {
            return true;
        }
        start = at + phrase.len();
    }
    false
}

/// Groups of folded phrases, compiled once into one automaton, found at word starts in one pass
/// over a text (what `keywords_found` and `contains_any` run on parameters).
#[derive(Debug)]
pub(crate) struct PhraseSet {
    automaton: AhoCorasick,
    /// The group of each pattern.
    group: Vec<usize>,
    groups: usize,
}

impl PhraseSet {
    /// A set from groups of already folded phrases; empty phrases never match.
    pub(crate) fn new(groups: &[Vec<String>]) -> Option<Self> {
        let mut patterns = Vec::new();
        let mut group = Vec::new();
        for (g, phrases) in groups.iter().enumerate() {
            for p in phrases.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
                patterns.push(p.to_owned());
                group.push(g);
            }
        }
        // A full DFA: a parameter's phrases make a small one, and it is searched on every turn.
        let automaton = AhoCorasick::builder().kind(Some(AhoCorasickKind::DFA)).build(&patterns).ok()?;
        Some(PhraseSet { automaton, group, groups: groups.len() })
    }

    /// Which groups have a phrase at a word start in `folded_text`.
    pub(crate) fn found(&self, folded_text: &str) -> Vec<bool> {
        let mut found = vec![false; self.groups];
        for m in self.automaton.find_overlapping_iter(folded_text) {
            let boundary = folded_text[..m.start()].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            if boundary {
                found[self.group[m.pattern().as_usize()]] = true;
            }
        }
        found
    }
}

/// Cosine similarity of two texts' word counts, in [0, 1]; 1 for identical wording.
/// Words of one or two letters are ignored: they carry little meaning and much noise.
pub fn similarity(a: &str, b: &str) -> f64 {
    WordCounts::counted(a).cosine(&WordCounts::counted(b))
}

/// The highest [`similarity`] of `text` to any of `others`; 0 when there are none.
pub fn max_similarity<'a>(text: &str, others: impl IntoIterator<Item = &'a str>) -> f64 {
    let counts = WordCounts::counted(text);
    others.into_iter().map(|o| counts.cosine(&WordCounts::counted(o))).fold(0.0, f64::max)
}

/// For each of `texts`, its highest [`similarity`] to any text before it (0 for the first): how
/// much each message of a conversation repeats the earlier ones. Each text's words are counted
/// once, where calling [`max_similarity`] for each would count them again for every later text.
pub fn max_similarity_to_earlier(texts: &[&str]) -> Vec<f64> {
    let counts: Vec<Rc<WordCounts>> = texts.iter().map(|t| WordCounts::counted(t)).collect();
    (0..counts.len()).map(|i| counts[..i].iter().map(|o| counts[i].cosine(o)).fold(0.0, f64::max)).collect()
}

/// A text's folded words of three letters or more, counted, with the vector's norm: the folded
/// text and its distinct words' places in it, ordered by each word's hash and then the word, so
/// counting allocates nothing per word, sorting compares numbers rather than strings (but for
/// two words of one hash), and two texts compare in one merge. (Counts are whole numbers, so the
/// dot product and the norm are exact whatever the order they are summed in.)
struct WordCounts {
    folded: String,
    /// (the word's hash, where it is in `folded`, how many times it occurs), in [`WordCounts::order`].
    words: Vec<Counted>,
    norm: f64,
}

/// A distinct word of a [`WordCounts`]: its hash, its place in the folded text, its count.
type Counted = (u64, std::ops::Range<usize>, f64);

/// Texts this thread counted lately, by their hash, each with the text itself (a hit is checked
/// against it). A conversation's messages are compared again on every later turn of it (a judge
/// that asks how much each message repeats the ones before it), so most are counted once.
struct Recent {
    counted: HashMap<u64, (Box<str>, Rc<WordCounts>), foldhash::fast::FixedState>,
    bytes: usize,
}

impl Recent {
    /// At most this many texts, and bytes of them and their counts, are kept by a thread; past
    /// either the memory starts again.
    const TEXTS: usize = 512;
    const BYTES: usize = 4 << 20;
    /// A longer text is counted each time.
    const LONGEST: usize = 16 << 10;

    /// What keeping `text` and its counts takes: the text, its folded copy, the counted words.
    fn size(text: &str, counts: &WordCounts) -> usize {
        text.len() + counts.folded.len() + counts.words.capacity() * std::mem::size_of::<Counted>()
    }
}

thread_local! {
    static RECENT: RefCell<Recent> =
        RefCell::new(Recent { counted: HashMap::with_hasher(Default::default()), bytes: 0 });
}

impl WordCounts {
    /// `text`'s counts, from this thread's recent texts when it is one of them.
    fn counted(text: &str) -> Rc<WordCounts> {
        if text.len() > Recent::LONGEST {
            return Rc::new(WordCounts::of(text));
        }
        let key = foldhash::fast::FixedState::with_seed(0).hash_one(text);
        RECENT.with_borrow_mut(|recent| {
            if let Some((kept, counts)) = recent.counted.get(&key)
                && **kept == *text
            {
                return counts.clone();
            }
            let counts = Rc::new(WordCounts::of(text));
            let size = Recent::size(text, &counts);
            if recent.counted.len() >= Recent::TEXTS || recent.bytes + size > Recent::BYTES {
                recent.counted.clear();
                recent.bytes = 0;
            }
            recent.bytes += size;
            if let Some((old, old_counts)) = recent.counted.insert(key, (text.into(), counts.clone())) {
                recent.bytes -= Recent::size(&old, &old_counts);
            }
            counts
        })
    }

    fn of(text: &str) -> Self {
        // A fixed seed: the order is the same in every process (not that the result depends on it).
        let hasher = foldhash::fast::FixedState::with_seed(0);
        let folded = fold(text);
        let base = folded.as_ptr() as usize;
        let mut spans: Vec<Counted> = words(&folded)
            .filter(|w| w.chars().count() > 2)
            .map(|w| {
                let start = w.as_ptr() as usize - base;
                (hasher.hash_one(w), start..start + w.len(), 1.0)
            })
            .collect();
        spans.sort_unstable_by(|a, b| Self::order(&folded, a, &folded, b));
        let mut words: Vec<Counted> = Vec::with_capacity(spans.len());
        for span in spans {
            match words.last_mut() {
                Some(last) if Self::order(&folded, last, &folded, &span).is_eq() => last.2 += 1.0,
                _ => words.push(span),
            }
        }
        let norm = words.iter().map(|w| w.2 * w.2).sum::<f64>().sqrt();
        WordCounts { folded, words, norm }
    }

    /// Words by their hash, then (for two of one hash) by the words themselves.
    fn order(a_text: &str, a: &Counted, b_text: &str, b: &Counted) -> std::cmp::Ordering {
        a.0.cmp(&b.0).then_with(|| a_text[a.1.clone()].cmp(&b_text[b.1.clone()]))
    }

    fn cosine(&self, other: &WordCounts) -> f64 {
        if self.words.is_empty() || other.words.is_empty() {
            return 0.0;
        }
        let (mut i, mut j, mut dot) = (0, 0, 0.0);
        while i < self.words.len() && j < other.words.len() {
            let (a, b) = (&self.words[i], &other.words[j]);
            match Self::order(&self.folded, a, &other.folded, b) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    dot += a.2 * b.2;
                    i += 1;
                    j += 1;
                }
            }
        }
        (dot / (self.norm * other.norm)).clamp(0.0, 1.0)
    }
}

/// Vectors an embedding model made for texts (a selection's focus descriptions and the texts its
/// pack named). Two texts that both have one compare by the cosine of their vectors; any other
/// pair compares lexically, by [`similarity`], and is counted ([`Embeddings::compared_by_words`]):
/// the two scales differ, so a selection's breakdown says how many pairs fell back.
#[derive(Debug, Default)]
pub struct Embeddings {
    model: String,
    vectors: HashMap<String, Arc<[f32]>>,
    by_words: AtomicUsize,
}

impl Embeddings {
    /// An empty table for vectors made by `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Embeddings { model: model.into(), vectors: HashMap::new(), by_words: AtomicUsize::new(0) }
    }

    /// The stand-in's vectors ([`hashed_embedding`]) for `texts`: what a selection gets offline,
    /// and what benchmarks and tests score with.
    pub fn hashed<T: Into<String>>(texts: impl IntoIterator<Item = T>) -> Self {
        let mut e = Embeddings::new("stand-in");
        for t in texts {
            let t = t.into();
            let v = hashed_embedding(&t);
            e.insert(t, v.into());
        }
        e
    }

    /// The model that made the vectors.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Adds (or replaces) the vector of `text`.
    pub fn insert(&mut self, text: impl Into<String>, vector: Arc<[f32]>) {
        self.vectors.insert(text.into(), vector);
    }

    /// The vector of `text`, when it has one.
    pub fn get(&self, text: &str) -> Option<&[f32]> {
        self.vectors.get(text).map(|v| &v[..])
    }

    /// How many texts have vectors.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// True when no text has a vector.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The similarity of `a` and `b`: their vectors' cosine (clamped to [0, 1]) when both have
    /// one, else [`similarity`].
    pub fn similarity(&self, a: &str, b: &str) -> f64 {
        match (self.get(a), self.get(b)) {
            (Some(x), Some(y)) => cosine(x, y).clamp(0.0, 1.0),
            _ => {
                self.by_words.fetch_add(1, Ordering::Relaxed);
                similarity(a, b)
            }
        }
    }

    /// How many pairs were compared by words so far because a text had no vector.
    pub fn compared_by_words(&self) -> usize {
        self.by_words.load(Ordering::Relaxed)
    }

    /// The highest [`Embeddings::similarity`] of `text` to any of `others`; 0 when there are none.
    pub fn max_similarity<'a>(&self, text: &str, others: impl IntoIterator<Item = &'a str>) -> f64 {
        others.into_iter().map(|o| self.similarity(text, o)).fold(0.0, f64::max)
    }
}

/// [`Embeddings::similarity`] when there are embeddings, [`similarity`] when there are none: what
/// the `similarity` host function computes.
pub fn similarity_in(embeddings: Option<&Embeddings>, a: &str, b: &str) -> f64 {
    match embeddings {
        Some(e) => e.similarity(a, b),
        None => similarity(a, b),
    }
}

/// [`Embeddings::max_similarity`] when there are embeddings, [`max_similarity`] when there are
/// none: what the `max_similarity` host function computes.
pub fn max_similarity_in<'a>(
    embeddings: Option<&Embeddings>,
    text: &str,
    others: impl IntoIterator<Item = &'a str>,
) -> f64 {
    match embeddings {
        Some(e) => e.max_similarity(text, others),
        None => max_similarity(text, others),
    }
}

/// [`max_similarity_to_earlier`] by embeddings when there are any (what the host function of that
/// name computes).
pub fn max_similarity_to_earlier_in(embeddings: Option<&Embeddings>, texts: &[&str]) -> Vec<f64> {
    match embeddings {
        Some(e) => (0..texts.len()).map(|i| e.max_similarity(texts[i], texts[..i].iter().copied())).collect(),
        None => max_similarity_to_earlier(texts),
    }
}

/// The cosine of two vectors; 0 when either is all zeros, their lengths differ, or it is not a
/// number.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    let c = dot / (na.sqrt() * nb.sqrt());
    if c.is_finite() { c } else { 0.0 }
}

/// Dimensions of [`hashed_embedding`].
pub const HASHED_DIMENSIONS: usize = 256;

/// The stand-in model's embedding: the folded words of three letters or more and their
/// character trigrams, hashed (with a sign; words and trigrams apart) into [`HASHED_DIMENSIONS`]
/// dimensions and normalized.
/// Deterministic and offline; closer than [`similarity`] for words that share a stem (`foam`,
/// `foamy`), but it knows no synonyms: it stands in for a real model, it does not replace one.
pub fn hashed_embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; HASHED_DIMENSIONS];
    let mut add = |h: u64, weight: f32| {
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[(h % HASHED_DIMENSIONS as u64) as usize] += sign * weight;
    };
    let folded = fold(text);
    let mut padded: Vec<char> = Vec::new();
    for w in words(&folded).filter(|w| w.chars().count() > 2) {
        add(fnv(fnv(FNV_OFFSET, b"w:"), w.as_bytes()), 1.0);
        padded.clear();
        padded.push('<');
        padded.extend(w.chars());
        padded.push('>');
        for t in padded.windows(3) {
            let mut h = fnv(FNV_OFFSET, b"t:");
            for c in t {
                h = fnv(h, c.encode_utf8(&mut [0; 4]).as_bytes());
            }
            add(h, 0.5);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Whether any of `phrases` occurs in `text` at the start of a word, ignoring case and
/// diacritics: the host function `contains_any`.
pub fn contains_any<'a>(text: &str, phrases: impl IntoIterator<Item = &'a str>) -> bool {
    let t = fold(text);
    phrases.into_iter().any(|p| has_phrase(&t, &fold(p)))
}

/// A stable 64-bit FNV-1a hash, for deterministic choices (stand-in models, seeds).
pub(crate) fn hash(text: &str) -> u64 {
    fnv(FNV_OFFSET, text.as_bytes())
}

/// [`hash`] of `text` salted with `salt`: a different stable order for each salt.
pub(crate) fn hash_with(salt: u64, text: &str) -> u64 {
    fnv(fnv(FNV_OFFSET, &salt.to_le_bytes()), text.as_bytes())
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a from `h` on over `bytes`: hashing in parts hashes the parts joined.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `text` without the reasoning block a model put before its answer (`None` when it has none:
/// most replies, which are then not copied): `<think>…</think>` (or
/// `<thinking>…</thinking>`), as reasoning models served through OpenAI-compatible endpoints
/// write it. A block that never closes (a reply cut off while reasoning) is all reasoning:
/// nothing is left.
pub(crate) fn without_reasoning(text: &str) -> Option<String> {
    let start = text.trim_start();
    for (open, close) in [("<think>", "</think>"), ("<thinking>", "</thinking>")] {
        if start.get(..open.len()).is_some_and(|s| s.eq_ignore_ascii_case(open)) {
            let lower = start.to_ascii_lowercase();
            return Some(match lower.find(close) {
                Some(at) => start[at + close.len()..].trim_start().to_owned(),
                None => String::new(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimals_read_as_people_write_them() {
        assert_eq!(super::decimals(0.6454972243679029, 2), "0.65");
        assert_eq!(super::decimals(2.0, 2), "2");
        assert_eq!(super::decimals(0.1 + 0.2, 3), "0.3");
        assert_eq!(super::decimals(-0.0001, 2), "0");
        assert_eq!(super::decimals(12.5, 0), "12");
    }

    use super::*;

    #[test]
    fn folding_strips_polish_diacritics() {
        assert_eq!(fold("Załoga ŻĄDA Złota, weź go!"), "zaloga zada zlota, wez go!");
        assert_eq!(fold("Oto mój skarb"), "oto moj skarb");
    }

    #[test]
    fn texts_counted_lately_compare_as_texts_counted_anew() {
        let said = ["Give me the treasure now", "I am a royal envoy", "give me the treasure, envoy"];
        let fresh: Vec<f64> = (0..3).map(|i| WordCounts::of(said[2]).cosine(&WordCounts::of(said[i]))).collect();
        let first = max_similarity_to_earlier(&said);
        // Enough other texts to start the memory again, then the same ones: counted anew.
        for n in 0..Recent::TEXTS + 1 {
            similarity(&format!("filler text number {n}"), "filler");
        }
        assert_eq!(max_similarity_to_earlier(&said), first);
        assert_eq!(max_similarity_to_earlier(&said), first, "from memory");
        assert_eq!(first[2], fresh[0].max(fresh[1]));
        assert!(similarity("the treasure", "the treasure") > 1.0 - 1e-12);
        assert_eq!(similarity("the treasure", "a parrot"), 0.0);
    }

    #[test]
    fn max_similarity_to_earlier_is_max_similarity_to_each_prefix() {
        let said = ["Give me the treasure now", "I am a royal envoy", "give me the treasure, envoy", "a parrot"];
        let got = max_similarity_to_earlier(&said);
        assert_eq!(got.len(), 4);
        for (i, g) in got.iter().enumerate() {
            assert!((g - max_similarity(said[i], said[..i].iter().copied())).abs() < 1e-12, "{i}: {g}");
        }
        assert_eq!(got[0], 0.0);
        assert!(got[2] > 0.5 && got[3] == 0.0, "{got:?}");
        assert!(max_similarity_to_earlier(&[]).is_empty());
    }

    #[test]
    fn max_similarity_is_the_best_match() {
        let said = ["Give me the treasure now", "I am a royal envoy of the crown"];
        assert_eq!(max_similarity("anything", []), 0.0);
        assert!((max_similarity("give me the treasure now!", said) - 1.0).abs() < 1e-9);
        let m = max_similarity("the crown sends its envoy", said);
        assert!((m - similarity("the crown sends its envoy", said[1])).abs() < 1e-12 && m > 0.0 && m < 1.0);
    }

    #[test]
    fn phrases_match_at_word_starts() {
        let t = fold("Jestem starym marynarzem z twojej załogi");
        assert!(has_phrase(&t, "zalog"));
        assert!(has_phrase(&t, &fold("marynarz")));
        assert!(!has_phrase(&t, "arzem"));
        assert!(has_phrase(&fold("I told lies"), "lie"));
        assert!(!has_phrase(&fold("I believe you"), "lie"));
        assert!(has_phrase(&fold("wasza wysokość"), &fold("wasza wysokosc")));
        assert!(!has_phrase("anything", ""));
    }

    #[test]
    fn phrase_sets_agree_with_has_phrase() {
        let groups = vec![vec!["zalog".to_owned(), "crew".to_owned()], vec!["lie".to_owned()], vec![String::new()]];
        let set = PhraseSet::new(&groups).unwrap();
        for text in ["Jestem z twojej ZAŁOGI", "I believe you", "lies and crew", "", "nothing"] {
            let t = fold(text);
            let expected: Vec<bool> = groups.iter().map(|g| g.iter().any(|p| has_phrase(&t, p))).collect();
            assert_eq!(set.found(&t), expected, "{text}");
        }
    }

    #[test]
    fn similarity_is_one_for_same_words_and_zero_for_none_shared() {
        assert!((similarity("What else about oat milk?", "what ELSE about oat milk") - 1.0).abs() < 1e-9);
        assert_eq!(similarity("coffee helps focus", "oat milk taste"), 0.0);
        let s = similarity("Explore new aspects about oat milk", "What else do you notice about oat milk?");
        assert!(s > 0.3 && s < 0.8, "{s}");
        assert_eq!(similarity("", "x"), 0.0);
    }

    /// The cosine by sorted word lists equals the plain one (word → count tables).
    #[test]
    fn similarity_is_the_cosine_of_word_counts() {
        fn reference(a: &str, b: &str) -> f64 {
            let count = |t: &str| {
                let mut m: HashMap<String, f64> = HashMap::new();
                for w in words(&fold(t)).filter(|w| w.chars().count() > 2) {
                    *m.entry(w.to_owned()).or_default() += 1.0;
                }
                m
            };
            let (x, y) = (count(a), count(b));
            let norm = |m: &HashMap<String, f64>| m.values().map(|v| v * v).sum::<f64>().sqrt();
            if x.is_empty() || y.is_empty() {
                return 0.0;
            }
            let dot: f64 = x.iter().filter_map(|(w, n)| y.get(w).map(|m| n * m)).sum();
            (dot / (norm(&x) * norm(&y))).clamp(0.0, 1.0)
        }
        let texts = [
            "",
            "a an is",
            "the cat the cat the dog",
            "The dog, the CAT and the cat again: cat!",
            "Złoto? Mam go więcej, niż ty kiedykolwiek zobaczysz. ZŁOTO złoto",
            "zloto mam wiecej niz kiedykolwiek",
            "zebra apple mango apple zebra zebra",
            "mango zebra",
        ];
        for a in texts {
            for b in texts {
                // (The table's empty sum is -0.0; the merge's is 0.0, which is what a reader expects.)
                let (got, want) = (similarity(a, b), reference(a, b));
                assert!(got == want && got.is_sign_positive(), "{a:?} / {b:?}: {got} against {want}");
            }
        }
    }

    #[test]
    fn words_are_counted_and_cut() {
        assert_eq!(word_count("  one two\nthree "), 3);
        assert_eq!(truncate_words("one two three four", 2), "one two");
    }

    #[test]
    fn embeddings_compare_by_vector_when_both_texts_have_one() {
        let mut e = Embeddings::new("m");
        e.insert("a", Arc::from([1.0f32, 0.0]));
        e.insert("b", Arc::from([0.6f32, 0.8]));
        e.insert("c", Arc::from([-1.0f32, 0.0]));
        assert!((e.similarity("a", "b") - 0.6).abs() < 1e-6);
        assert_eq!(e.similarity("a", "c"), 0.0, "opposite vectors clamp to 0");
        // A pair where a text has no vector compares by words, and is counted.
        assert_eq!(e.compared_by_words(), 0);
        assert_eq!(e.similarity("a", "the crown"), 0.0);
        assert!((e.similarity("the crown", "the crown") - 1.0).abs() < 1e-9);
        assert_eq!(e.compared_by_words(), 2);
        assert!((e.max_similarity("a", ["c", "b"]) - 0.6).abs() < 1e-6);
        let by_vector = max_similarity_to_earlier_in(Some(&e), &["a", "c", "b"]);
        assert!(by_vector[..2] == [0.0, 0.0] && (by_vector[2] - 0.6).abs() < 1e-6, "{by_vector:?}");
        assert!((max_similarity_in(None, "give gold", ["give gold"]) - 1.0).abs() < 1e-9);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0, "lengths differ");
        assert_eq!(cosine(&[f32::INFINITY, 1.0], &[1.0, 1.0]), 0.0, "not a number");
    }

    #[test]
    fn hashed_embeddings_are_deterministic_and_see_shared_stems() {
        let a = hashed_embedding("What makes the foam matter?");
        assert_eq!(a, hashed_embedding("what makes the FOAM matter"));
        assert_eq!(a.len(), HASHED_DIMENSIONS);
        assert!((a.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        let stem = cosine(&hashed_embedding("foamy milk"), &hashed_embedding("the foam of the milk"));
        assert!(stem > similarity("foamy milk", "the foam of the milk"), "{stem}");
        let unrelated = cosine(&hashed_embedding("price of the carton"), &hashed_embedding("why texture matters"));
        assert!(unrelated < 0.3, "{unrelated}");
        assert!(hashed_embedding("a b").iter().all(|x| *x == 0.0));
    }

    #[test]
    fn hashing_in_parts_is_hashing_the_whole() {
        assert_eq!(fnv(fnv(FNV_OFFSET, b"w:"), "załoga".as_bytes()), hash("w:załoga"));
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_reasoning_block_is_not_the_answer() {
        assert_eq!(without_reasoning("<think>\nweighing it\n</think>\n\n{\"a\": 1}").unwrap(), "{\"a\": 1}");
        assert_eq!(without_reasoning("  <THINKING>x</THINKING>Arr.").unwrap(), "Arr.");
        assert_eq!(without_reasoning("<think>cut off while reasoning").unwrap(), "");
        assert_eq!(without_reasoning("I think <think> is a tag."), None);
    }
}

//! A remote model's pace put on any provider and search engine: each call answers after a time to
//! first token, then the reply's tokens at a rate, with seeded jitter, streaming piece by piece
//! when the caller streams. Benches use it to measure what the engine adds to the models' own
//! time (`engine/benches/latency.rs`); a playtest on the offline stand-in uses it to feel a turn
//! as slow as real models would make it.
//!
//! ```
//! use std::time::Duration;
//! use ruleweave::pace::{Pace, Shape};
//!
//! let pace = Pace::new(Shape::new(Duration::from_millis(300), 80.0))
//!     .profile("judge", Shape::new(Duration::from_millis(500), 40.0))
//!     .search(Shape::new(Duration::from_millis(400), 0.0))
//!     .seed(7);
//! let engine = ruleweave::Engine::builder(".").pace(pace).build();
//! # drop(engine);
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;
use crate::llm::{BoxFuture, EmbedRequest, EmbedResponse, LlmRequest, LlmResponse, Provider, TokenSink};
use crate::search::{Search, SearchResult};

/// How one kind of call takes its time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// From the request to the reply's first token (a search's whole time).
    pub first_token: Duration,
    /// Tokens of the reply per second after the first (0: the whole reply comes with the first).
    pub tokens_per_second: f64,
    /// How far a call's times may stray from the shape, as a share either way (0.2: ±20%), drawn
    /// from the pace's seed and the request, so the same request always takes the same time.
    pub jitter: f64,
}

impl Shape {
    /// A shape without jitter.
    pub fn new(first_token: Duration, tokens_per_second: f64) -> Self {
        Shape { first_token, tokens_per_second, jitter: 0.0 }
    }

    /// This shape with `jitter` (a share, clamped to 0–0.9).
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = if jitter.is_finite() { jitter.clamp(0.0, 0.9) } else { 0.0 };
        self
    }

    /// When piece `tokens` of a reply is due, after the first token.
    fn after_first(&self, tokens: u32, scale: f64) -> Duration {
        if self.tokens_per_second > 0.0 && self.tokens_per_second.is_finite() {
            Duration::from_secs_f64(f64::from(tokens) / self.tokens_per_second * scale)
        } else {
            Duration::ZERO
        }
    }
}

/// The pace of every model and search call of an engine: a shape for each profile, a default,
/// one for searches, and the seed of the jitter.
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    default: Shape,
    profiles: HashMap<String, Shape>,
    search: Shape,
    seed: u64,
}

impl Pace {
    /// Every call in `default`'s shape (searches too, until [`Pace::search`] says otherwise).
    pub fn new(default: Shape) -> Self {
        Pace { default, profiles: HashMap::new(), search: default, seed: 0 }
    }

    /// Calls of the pack's profile `name` (`judge`) in their own shape.
    pub fn profile(mut self, name: impl Into<String>, shape: Shape) -> Self {
        self.profiles.insert(name.into(), shape);
        self
    }

    /// Searches in this shape (only its time to first token counts).
    pub fn search(mut self, shape: Shape) -> Self {
        self.search = shape;
        self
    }

    /// The seed the jitter is drawn from.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The shape of a call of `profile`.
    pub fn shape_of(&self, profile: &str) -> Shape {
        self.profiles.get(profile).copied().unwrap_or(self.default)
    }

    /// The factor a call's times are scaled by: within `1 ± shape.jitter`, the same for the
    /// same `key`.
    fn scale(&self, shape: &Shape, key: &str) -> f64 {
        if shape.jitter == 0.0 {
            return 1.0;
        }
        // FNV's high bits barely move between keys that differ at their end: mixed (SplitMix64's
        // finalizer) before they are read as a fraction.
        let mut h = crate::text::hash_with(self.seed, key);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        let unit = (h >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + shape.jitter * (2.0 * unit - 1.0)
    }
}

/// When a paced reply's pieces are due, from the call's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing<'a> {
    /// Each word of the reply (with the space after it) and when it is sent, if the reply
    /// streams: the first at the time to first token, each later one when its share of the
    /// reply's tokens has come at the rate.
    pub pieces: Vec<(Duration, &'a str)>,
    /// When the call answers: the first token, then all of the reply's tokens at the rate.
    pub end: Duration,
}

impl Pace {
    /// When `response`'s pieces and its end are due, for `request`.
    pub fn timing<'a>(&self, request: &LlmRequest, response: &'a LlmResponse) -> Timing<'a> {
        let shape = self.shape_of(&request.profile);
        let key: String = request.messages.iter().map(|m| m.content.as_str()).collect();
        let scale = self.scale(&shape, &format!("{}\n{key}", request.profile));
        let first = shape.first_token.mul_f64(scale);
        let reply_tokens = match response.usage.completion_tokens {
            0 => crate::llm::estimate_tokens(&response.content),
            n => n,
        };
        let total = response.content.len().max(1) as f64;
        let mut before = 0usize;
        let mut pieces = Vec::new();
        for piece in response.content.split_inclusive(char::is_whitespace) {
            let share = (f64::from(reply_tokens) * before as f64 / total) as u32;
            pieces.push((first + shape.after_first(share, scale), piece));
            before += piece.len();
        }
        Timing { pieces, end: first + shape.after_first(reply_tokens, scale) }
    }
}

/// `inner` answering at `pace`: the answer is `inner`'s, its timing the pace's.
pub struct Paced<T: ?Sized> {
    pace: Arc<Pace>,
    inner: Arc<T>,
}

impl<T: ?Sized> Paced<T> {
    /// `inner` at `pace`.
    pub fn new(inner: Arc<T>, pace: Arc<Pace>) -> Self {
        Paced { pace, inner }
    }
}

impl Provider for Paced<dyn Provider> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn is_standin(&self) -> bool {
        self.inner.is_standin()
    }

    fn route(&self, profile: &str) -> Option<Arc<dyn Provider>> {
        let routed = self.inner.route(profile)?;
        Some(Arc::new(Paced::new(routed, self.pace.clone())))
    }

    fn complete<'a>(
        &'a self,
        request: &'a LlmRequest,
        tokens: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<LlmResponse>> {
        Box::pin(async move {
            let start = Instant::now();
            let response = self.inner.complete(request, None).await?;
            let timing = self.pace.timing(request, &response);
            if let Some(sink) = tokens {
                // A deadline per piece, so timer slack does not add up over a long reply.
                for (at, piece) in timing.pieces {
                    tokio::time::sleep_until(start + at).await;
                    sink(piece);
                }
            }
            tokio::time::sleep_until(start + timing.end).await;
            Ok(response)
        })
    }

    fn embed<'a>(&'a self, request: &'a EmbedRequest) -> BoxFuture<'a, Result<EmbedResponse>> {
        Box::pin(async move {
            let start = Instant::now();
            let response = self.inner.embed(request).await?;
            let shape = self.pace.shape_of(&request.profile);
            let scale = self.pace.scale(&shape, &request.texts.concat());
            tokio::time::sleep_until(start + shape.first_token.mul_f64(scale)).await;
            Ok(response)
        })
    }
}

impl Search for Paced<dyn Search> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn search<'a>(&'a self, query: &'a str, max_results: usize) -> BoxFuture<'a, Result<Vec<SearchResult>>> {
        Box::pin(async move {
            let start = Instant::now();
            let found = self.inner.search(query, max_results).await?;
            let shape = self.pace.search;
            let scale = self.pace.scale(&shape, query);
            tokio::time::sleep_until(start + shape.first_token.mul_f64(scale)).await;
            Ok(found)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, Usage};
    use std::sync::Mutex;

    struct Canned;

    impl Provider for Canned {
        fn name(&self) -> &str {
            "canned"
        }

        fn complete<'a>(&'a self, r: &'a LlmRequest, _: Option<TokenSink>) -> BoxFuture<'a, Result<LlmResponse>> {
            Box::pin(std::future::ready(Ok(LlmResponse {
                content: "one two three four five six".into(),
                model: r.model.clone(),
                usage: Usage { prompt_tokens: 3, completion_tokens: 8 },
                attempts: 1,
            })))
        }
    }

    fn request(profile: &str, text: &str) -> LlmRequest {
        LlmRequest {
            provider: None,
            default_model: None,
            profile: profile.into(),
            model: "m".into(),
            messages: vec![Message::new("user", text)],
            temperature: None,
            max_tokens: None,
            json: false,
            schema: None,
        }
    }

    fn reply(content: &str, tokens: u32) -> LlmResponse {
        LlmResponse {
            content: content.into(),
            model: "m".into(),
            usage: Usage { prompt_tokens: 3, completion_tokens: tokens },
            attempts: 1,
        }
    }

    #[test]
    fn a_call_takes_its_first_token_then_its_tokens_at_the_rate() {
        let pace = Pace::new(Shape::new(Duration::from_millis(200), 40.0))
            .profile("judge", Shape::new(Duration::from_millis(500), 0.0));
        let r = reply("one two three four five six", 8);
        // 200 ms, then 8 tokens at 40 a second.
        assert_eq!(pace.timing(&request("chat", "hi"), &r).end, Duration::from_millis(400));
        // A rate of 0: the whole reply comes with its first token.
        assert_eq!(pace.timing(&request("judge", "hi"), &r).end, Duration::from_millis(500));
        // Without the provider's count, the reply's estimated tokens (6 words: 8).
        assert_eq!(
            pace.timing(&request("chat", "hi"), &reply("one two three four five six", 0)).end,
            Duration::from_millis(400)
        );
    }

    #[test]
    fn a_streamed_reply_comes_word_by_word_from_the_first_token() {
        let pace = Pace::new(Shape::new(Duration::from_millis(100), 10.0));
        let r = reply("one two three four five six", 8);
        let t = pace.timing(&request("chat", "hi"), &r);
        assert_eq!(t.pieces.len(), 6);
        assert_eq!(t.pieces[0], (Duration::from_millis(100), "one "));
        // "two" starts 4 bytes into 27: its share of the reply's 8 tokens is 1 token, 100 ms at
        // 10 tokens a second.
        assert_eq!(t.pieces[1], (Duration::from_millis(200), "two "));
        assert_eq!(t.pieces.iter().map(|(_, p)| *p).collect::<String>(), "one two three four five six");
        assert!(t.pieces.windows(2).all(|w| w[0].0 <= w[1].0));
        // The reply's 8 tokens set its end: 100 ms, then 800.
        assert_eq!(t.end, Duration::from_millis(900));
    }

    #[tokio::test]
    async fn a_paced_call_streams_the_whole_reply_and_answers_it() {
        let pace = Pace::new(Shape::new(Duration::from_millis(2), 10_000.0));
        let paced = Paced::<dyn Provider>::new(Arc::new(Canned), Arc::new(pace));
        let seen = Arc::new(Mutex::new(String::new()));
        let s = seen.clone();
        let sink: TokenSink = Arc::new(move |piece: &str| s.lock().unwrap().push_str(piece));
        let r = paced.complete(&request("chat", "hi"), Some(sink)).await.unwrap();
        assert_eq!(r.content, "one two three four five six");
        assert_eq!(*seen.lock().unwrap(), r.content);
    }

    #[test]
    fn jitter_is_seeded_by_the_request_and_stays_within_its_share() {
        let shape = Shape::new(Duration::from_millis(100), 0.0).jitter(0.25);
        let pace = Pace::new(shape).seed(3);
        let scales: Vec<f64> = (0..200).map(|i| pace.scale(&shape, &format!("call {i}"))).collect();
        assert!(scales.iter().all(|s| (0.75..=1.25).contains(s)));
        assert!(scales.iter().any(|s| *s < 0.9) && scales.iter().any(|s| *s > 1.1));
        assert_eq!(pace.scale(&shape, "call 7"), scales[7]);
        assert_ne!(Pace::new(shape).seed(4).scale(&shape, "call 7"), scales[7]);
    }
}

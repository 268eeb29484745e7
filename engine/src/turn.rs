//! What one turn carries while it runs: its input and options, its seeded randomness, and the
//! record of what happened (events, model exchanges). The graph runtime and the host functions
//! share it, so events come out in one order whether a node or a script caused them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::data::Counts;
use crate::error::{Error, ErrorKind, Result};
use crate::event::{EmbedCount, Event, EventSink, LlmEvent};
use crate::exchange::{Exchange, ModelExchange, SearchExchange};
use crate::limits::Limits;
use crate::llm::{
    EmbedRequest, EmbedResponse, LlmRequest, LlmResponse, NamedProviders, Provider, TokenSink, estimate_tokens,
};
use crate::search::{Search, SearchResult};
use crate::speech::{Speakers, SpeechFilter, Streamed};
use crate::store::Bump;
use tracing::Instrument;

/// Sees every model call: the pack that made it and its `llm` event.
pub type LlmObserver = Arc<dyn Fn(&str, &LlmEvent) + Send + Sync>;

/// The context of one running turn.
pub(crate) struct TurnCtx {
    pub session_id: Arc<str>,
    /// 1 for a session's first turn.
    pub turn: u64,
    /// When the turn began, unix milliseconds; scripts see it through `now()`.
    pub now_ms: i64,
    pub options: rhai::Map,
    pub input: rhai::Map,
    pub provider: Arc<dyn Provider>,
    /// The runtime scripts block on when they call a model.
    pub runtime: Option<tokio::runtime::Handle>,
    live: Option<EventSink>,
    /// The most model calls, and model time, the turn may spend (`limits.max_llm_*`).
    max_calls: u32,
    max_time: Duration,
    /// The pack's name and who watches its model calls.
    pack: Arc<str>,
    observers: Arc<[LlmObserver]>,
    /// Providers a profile may name (`provider: groq`).
    named: Arc<NamedProviders>,
    /// The counters of the pack's tables as the turn began (table → its counts).
    counts: HashMap<String, Arc<Counts>>,
    /// Who answers scripts' `search()`.
    search: Option<Arc<dyn Search>>,
    rng: Mutex<ChaCha8Rng>,
    record: Mutex<Record>,
    /// What faces show of streamed replies (the pack's `display.stream`), and who speaks in each.
    streamed: Arc<Streamed>,
    speakers: Speakers,
    /// The models a script may choose beyond its pack's (`None`: any).
    pub allowed_models: Option<Arc<[String]>>,
    /// Whether model calls' trace spans hold the prompts and replies.
    trace_content: bool,
}

#[derive(Default)]
struct Record {
    events: Vec<Event>,
    exchanges: Vec<Exchange>,
    /// Model calls made so far, and the time spent waiting for them.
    calls: u32,
    waited: Duration,
    /// Counter bumps, applied when the turn commits.
    bumps: Vec<Bump>,
}

/// Everything a turn recorded.
pub(crate) struct Recorded {
    pub events: Vec<Event>,
    pub exchanges: Vec<Exchange>,
    pub bumps: Vec<Bump>,
}

/// The seed of a turn's randomness: the session's seed, a stream per turn.
pub(crate) fn turn_rng(seed: u64, turn: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(turn);
    rng
}

/// Who a turn is and what it starts from: what every turn context needs. A session's turn adds
/// its pack's settings with the setters below; a script called outside any session keeps their
/// defaults.
pub(crate) struct TurnStart {
    pub session_id: Arc<str>,
    /// 1 for a session's first turn (0 for its `init`).
    pub turn: u64,
    /// The session's seed: the turn's randomness is a stream of it.
    pub seed: u64,
    /// When the turn began, unix milliseconds.
    pub now_ms: i64,
    pub options: rhai::Map,
    pub input: rhai::Map,
    pub provider: Arc<dyn Provider>,
    /// Who sees the turn's events as they happen.
    pub live: Option<EventSink>,
}

impl TurnCtx {
    pub(crate) fn new(start: TurnStart) -> Self {
        let TurnStart { session_id, turn, seed, now_ms, options, input, provider, live } = start;
        TurnCtx {
            session_id,
            turn,
            now_ms,
            options,
            input,
            provider,
            runtime: tokio::runtime::Handle::try_current().ok(),
            live,
            max_calls: Limits::default().max_llm_calls,
            max_time: Limits::default().max_llm_time,
            pack: Arc::from(""),
            observers: Arc::new([]),
            named: Arc::new(NamedProviders::none()),
            counts: HashMap::new(),
            search: None,
            rng: Mutex::new(turn_rng(seed, turn)),
            record: Mutex::new(Record::default()),
            streamed: Arc::default(),
            speakers: Speakers::default(),
            allowed_models: None,
            trace_content: false,
        }
    }

    /// Puts prompts and replies on model calls' trace spans (see
    /// [`crate::EngineBuilder::trace_content`]).
    pub(crate) fn tracing_content(mut self, on: bool) -> Self {
        self.trace_content = on;
        self
    }

    /// Limits the models a script may choose beyond its pack's (see
    /// [`crate::EngineBuilder::allowed_models`]).
    pub(crate) fn allowing(mut self, models: Option<Arc<[String]>>) -> Self {
        self.allowed_models = models;
        self
    }

    /// Shows the replies of the pack's streamed nodes as `speech` events (see [`crate::speech`]).
    pub(crate) fn streaming(mut self, streamed: Arc<Streamed>) -> Self {
        self.streamed = streamed;
        self
    }

    /// A node starts: when its replies stream and the pack names who speaks, remember who.
    pub(crate) fn node_started(&self, node: &str, state: &rhai::Dynamic) {
        let Some(field) = &self.streamed.speaker else { return };
        if self.live.is_none() || !self.streamed.shows(node) {
            return;
        }
        let who = state.read_lock::<rhai::Map>().and_then(|m| m.get(field.as_str()).map(|v| v.to_string()));
        if let Some(who) = who.filter(|w| !w.is_empty()) {
            self.speakers.set(node, who);
        }
    }

    /// Bounds the model calls of the turn by the pack's limits.
    pub(crate) fn budget(mut self, limits: &Limits) -> Self {
        self.max_calls = limits.max_llm_calls;
        self.max_time = limits.max_llm_time;
        self
    }

    /// Shows every model call of the turn to `observers`, as made by `pack`.
    pub(crate) fn observed(mut self, pack: &str, observers: Arc<[LlmObserver]>) -> Self {
        self.pack = Arc::from(pack);
        self.observers = observers;
        self
    }

    /// The pack's counters as the turn began (see [`crate::data`]).
    pub(crate) fn counted(mut self, counts: HashMap<String, Arc<Counts>>) -> Self {
        self.counts = counts;
        self
    }

    /// The search engine scripts' `search()` asks.
    pub(crate) fn searching(mut self, search: Option<Arc<dyn Search>>) -> Self {
        self.search = search;
        self
    }

    /// Searches the web for `node`: counted against the model budget, an event, and recorded
    /// with the model exchanges (as an [`Exchange::Search`]).
    pub(crate) async fn search(&self, node: &str, query: &str, max_results: usize) -> Result<Vec<SearchResult>> {
        let engine = self.search.clone().ok_or_else(|| {
            Error::new(
                ErrorKind::Llm,
                "no search engine: set TAVILY_API_KEY (or RULEWEAVE_SEARCH=tavily), or give the pack a `search_standin:`",
            )
        })?;
        self.charge()?;
        let start = Instant::now();
        let span = tracing::info_span!(
            "search",
            otel.name = "execute_tool search",
            otel.status_code = tracing::field::Empty,
            node,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "search",
            search.engine = engine.name(),
            search.results = tracing::field::Empty,
            error.type = tracing::field::Empty,
            openinference.span.kind = "TOOL",
            tool.name = "search",
        );
        // Whatever the engine sent, scripts and checkpoints get its results trimmed to a budget.
        let result = self
            .within_budget(engine.search(query, max_results))
            .instrument(span.clone())
            .await
            .map(|found| found.into_iter().take(max_results).map(SearchResult::trimmed).collect::<Vec<_>>());
        self.record().waited += start.elapsed();
        let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
        match &result {
            Ok(found) => span.record("search.results", i64::try_from(found.len()).unwrap_or(i64::MAX)),
            Err(_) => span.record("otel.status_code", "ERROR").record("error.type", "search"),
        };
        self.emit(Event::Search {
            node: node.to_owned(),
            query: query.to_owned(),
            engine: engine.name().to_owned(),
            results: result.as_ref().map_or(0, Vec::len),
            latency_ms,
            error: result.as_ref().err().map(|e| e.detail().to_owned()),
        });
        self.record().exchanges.push(Exchange::Search(SearchExchange {
            node: node.to_owned(),
            engine: engine.name().to_owned(),
            query: query.to_owned(),
            results: result.as_ref().ok().cloned(),
            error: result.as_ref().err().map(|e| e.detail().to_owned()),
            latency_ms,
        }));
        result
    }

    /// The last model call `node` made in this turn, as its event shows it.
    pub(crate) fn last_call(&self, node: &str) -> Option<LlmEvent> {
        self.record().events.iter().rev().find_map(|e| match e {
            Event::Llm(l) if l.node == node => Some(l.clone()),
            _ => None,
        })
    }

    /// The counts of `table`, if it has counters.
    pub(crate) fn counts(&self, table: &str) -> Option<Arc<Counts>> {
        self.counts.get(table).cloned()
    }

    /// Records a counter bump, applied when the turn commits.
    pub(crate) fn bump(&self, bump: Bump) {
        self.record().bumps.push(bump);
    }

    /// The providers a profile may name.
    pub(crate) fn named(mut self, named: Arc<NamedProviders>) -> Self {
        self.named = named;
        self
    }

    /// The provider that answers `request`: its named one, or the default one (then asked for the
    /// profile's `default_model`, when it names one), saying so once a turn in an `info` log: a
    /// pack written for several vendors playing on one key is how it is meant to run, no problem
    /// for a face to show each turn.
    fn provider_for(&self, node: &str, request: &mut LlmRequest) -> Arc<dyn Provider> {
        if let Some(chosen) = self.provider.route(&request.profile) {
            return chosen;
        }
        let Some(name) = &request.provider else { return self.provider.clone() };
        match self.named.get(name) {
            Ok(p) => p,
            Err(why) => {
                let message = format!(
                    "profile `{}` asks for provider `{name}`, which is not set up ({why}): the default provider ({}) answers",
                    request.profile,
                    self.provider.name()
                );
                let said =
                    self.record().events.iter().any(|e| matches!(e, Event::Log { message: m, .. } if *m == message));
                if !said {
                    tracing::info!(node, "{message}");
                    self.emit(Event::Log { node: node.to_owned(), level: "info".into(), message });
                }
                if let Some(model) = request.default_model.take() {
                    request.model = model;
                }
                self.provider.clone()
            }
        }
    }

    /// Emits a model call's event, after showing it to the observers.
    fn emit_llm(&self, event: LlmEvent) {
        for observe in self.observers.iter() {
            observe(&self.pack, &event);
        }
        self.emit(Event::Llm(event));
    }

    /// The tokens this turn's model calls spent so far, per node (a map node's items counted
    /// together): (node, calls, prompt tokens, completion tokens), in the order nodes first called.
    pub(crate) fn tokens_by_node(&self) -> Vec<(String, u32, u64, u64)> {
        let mut out: Vec<(String, u32, u64, u64)> = Vec::new();
        for e in &self.record().events {
            let Event::Llm(e) = e else { continue };
            let node = e.node.split_once('[').map_or(e.node.as_str(), |(n, _)| n);
            let i = match out.iter().position(|(n, ..)| n == node) {
                Some(i) => i,
                None => {
                    out.push((node.to_owned(), 0, 0, 0));
                    out.len() - 1
                }
            };
            out[i].1 += 1;
            out[i].2 += u64::from(e.prompt_tokens);
            out[i].3 += u64::from(e.completion_tokens);
        }
        out
    }

    /// Counts one more model call, or refuses it when the turn's budget is spent.
    /// Runs a model (or search) call within what is left of the turn's model time
    /// (`limits.max_llm_ms`): a deadline, not only a check before the call. A call still running
    /// when the budget is spent is cut off and fails.
    async fn within_budget<T>(&self, call: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let left = self.max_time.saturating_sub(self.record().waited);
        match tokio::time::timeout(left, call).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(
                ErrorKind::Limit,
                format!(
                    "the call was cut off: this turn's model calls ran past {} ms, the most its pack allows \
                     (limits.max_llm_ms)",
                    self.max_time.as_millis()
                ),
            )),
        }
    }

    fn charge(&self) -> Result<()> {
        let mut r = self.record();
        if r.calls >= self.max_calls {
            return Err(Error::new(
                ErrorKind::Limit,
                format!("this turn has made {} model calls, the most its pack allows (limits.max_llm_calls)", r.calls),
            ));
        }
        if r.waited >= self.max_time {
            return Err(Error::new(
                ErrorKind::Limit,
                format!(
                    "this turn has waited {} ms for models, the most its pack allows (limits.max_llm_ms)",
                    r.waited.as_millis()
                ),
            ));
        }
        r.calls += 1;
        Ok(())
    }

    fn record(&self) -> MutexGuard<'_, Record> {
        // A panic while holding this lock would be a bug elsewhere; the record itself stays usable.
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an event and passes it to the live sink.
    pub(crate) fn emit(&self, event: Event) {
        if let Some(live) = &self.live {
            live(&event);
        }
        self.record().events.push(event);
    }

    /// The next 64 random bits of this turn.
    pub(crate) fn random_u64(&self) -> u64 {
        self.rng.lock().unwrap_or_else(|p| p.into_inner()).next_u64()
    }

    /// Where the turn's randomness stands (for resuming an interrupted turn exactly).
    pub(crate) fn random_position(&self) -> u128 {
        self.rng.lock().unwrap_or_else(|p| p.into_inner()).get_word_pos()
    }

    /// Moves the turn's randomness to a saved position.
    pub(crate) fn set_random_position(&self, position: u128) {
        self.rng.lock().unwrap_or_else(|p| p.into_inner()).set_word_pos(position);
    }

    /// Takes the model exchanges recorded so far (a step checkpoint keeps them).
    pub(crate) fn take_exchanges(&self) -> Vec<Exchange> {
        std::mem::take(&mut self.record().exchanges)
    }

    /// Takes everything recorded so far.
    pub(crate) fn take(&self) -> Recorded {
        let mut r = self.record();
        Recorded {
            events: std::mem::take(&mut r.events),
            exchanges: std::mem::take(&mut r.exchanges),
            bumps: std::mem::take(&mut r.bumps),
        }
    }

    /// Asks the turn's provider, records the exchange, and emits an `llm` event (and `token`
    /// events while the reply streams, when someone watches).
    pub(crate) async fn ask(&self, node: &str, mut request: LlmRequest) -> Result<LlmResponse> {
        self.charge()?;
        let start = Instant::now();
        let tokens: Option<TokenSink> = self.live.clone().map(|live| {
            let node = node.to_owned();
            let speech = self.streamed.shows(&node).then(|| {
                let speaker = self.speakers.of(&node);
                (speaker, Mutex::new(SpeechFilter::new(self.streamed.from.clone())))
            });
            Arc::new(move |text: &str| {
                live(&Event::Token { node: node.clone(), text: text.to_owned() });
                if let Some((speaker, filter)) = &speech
                    && let Some((text, start)) = filter.lock().unwrap_or_else(|p| p.into_inner()).push(text)
                {
                    live(&Event::Speech { node: node.clone(), speaker: speaker.clone(), text, start });
                }
            }) as TokenSink
        });
        let provider = self.provider_for(node, &mut request);
        let span = call_span("chat", node, provider.name(), &request.model);
        let result =
            self.within_budget(provider.complete(&request, tokens)).instrument(span.clone()).await.and_then(readable);
        self.record().waited += start.elapsed();
        let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
        let standin = provider.is_standin();
        let mut event = self.llm_event(&*provider, node, &request.profile, &request.model, latency_ms);
        match &result {
            Ok(r) => {
                event.model = r.model.clone();
                event.attempts = r.attempts;
                event.prompt_tokens = r.usage.prompt_tokens;
                event.completion_tokens = r.usage.completion_tokens;
                if standin && r.usage == Default::default() {
                    event.prompt_tokens = request.messages.iter().map(|m| estimate_tokens(&m.content)).sum();
                    event.completion_tokens = estimate_tokens(&r.content);
                }
            }
            Err(e) => event.error = Some(e.detail().to_owned()),
        }
        traced(&span, &event);
        if self.trace_content {
            with_content(&span, &request, result.as_ref().ok());
        }
        self.emit_llm(event);
        self.record().exchanges.push(Exchange::Model(ModelExchange {
            node: node.to_owned(),
            provider: provider.name().to_owned(),
            request,
            response: result.as_ref().ok().cloned(),
            error: result.as_ref().err().map(|e| e.detail().to_owned()),
            latency_ms,
        }));
        result
    }

    /// The `llm` event of a call by `node`, before its outcome is known.
    fn llm_event(&self, provider: &dyn Provider, node: &str, profile: &str, model: &str, latency_ms: f64) -> LlmEvent {
        LlmEvent {
            node: node.to_owned(),
            profile: profile.to_owned(),
            provider: provider.name().to_owned(),
            model: model.to_owned(),
            latency_ms,
            prompt_tokens: 0,
            completion_tokens: 0,
            attempts: 1,
            standin: provider.is_standin(),
            error: None,
            embedded: None,
        }
    }

    /// Asks the turn's provider for embeddings and emits an `llm` event with the texts counted.
    /// The vectors are not recorded in the checkpoint (they are large, and the provider caches
    /// them): a resumed turn asks again.
    pub(crate) async fn embed(&self, node: &str, request: &EmbedRequest) -> Result<EmbedResponse> {
        self.charge()?;
        let start = Instant::now();
        let span = call_span("embeddings", node, self.provider.name(), &request.model);
        let result = self.within_budget(self.provider.embed(request)).instrument(span.clone()).await;
        self.record().waited += start.elapsed();
        let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
        let mut event = self.llm_event(&*self.provider, node, &request.profile, &request.model, latency_ms);
        let mut cached = 0;
        match &result {
            Ok(r) => {
                event.model = r.model.clone();
                event.attempts = r.attempts;
                event.prompt_tokens = r.prompt_tokens;
                cached = r.cached;
            }
            Err(e) => event.error = Some(e.detail().to_owned()),
        }
        event.embedded = Some(EmbedCount { texts: request.texts.len(), cached });
        traced(&span, &event);
        self.emit_llm(event);
        result
    }
}

/// The trace span of a model call (`chat`, `embeddings`) by `node`, named and labelled by the
/// OpenTelemetry conventions for generative AI; [`traced`] adds what came back.
fn call_span(operation: &'static str, node: &str, provider: &str, model: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "model call",
        otel.name = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        otel.kind = "client",
        node,
        gen_ai.operation.name = operation,
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        gen_ai.input.messages = tracing::field::Empty,
        gen_ai.output.messages = tracing::field::Empty,
        error.type = tracing::field::Empty,
        // What Arize Phoenix's OpenInference conventions read: the span kind, the model, tokens,
        // and (with content asked for) input and output.
        openinference.span.kind = if operation == "embeddings" { "EMBEDDING" } else { "LLM" },
        llm.model_name = model,
        llm.token_count.prompt = tracing::field::Empty,
        llm.token_count.completion = tracing::field::Empty,
        input.value = tracing::field::Empty,
        output.value = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("{operation} {model}"));
    }
    span
}

/// Records on a model call's span what its event says came back.
fn traced(span: &tracing::Span, event: &LlmEvent) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.response.model", event.model.as_str());
    // As i64: OpenTelemetry has no unsigned integers, and tracing-opentelemetry would make text of them.
    span.record("gen_ai.usage.input_tokens", i64::from(event.prompt_tokens));
    span.record("gen_ai.usage.output_tokens", i64::from(event.completion_tokens));
    span.record("llm.token_count.prompt", i64::from(event.prompt_tokens));
    span.record("llm.token_count.completion", i64::from(event.completion_tokens));
    if let Some(error) = &event.error {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", "model_call");
        span.record("otel.status_description", error.as_str());
    }
}

/// Records a model call's prompt and reply on its span, as the GenAI conventions shape them
/// (`gen_ai.input.messages`, `gen_ai.output.messages`) and as OpenInference does (`input.value`,
/// `output.value`). Only when the operator asked: prompts may hold players' words.
fn with_content(span: &tracing::Span, request: &LlmRequest, reply: Option<&LlmResponse>) {
    if span.is_disabled() {
        return;
    }
    let part =
        |role: &str, content: &str| serde_json::json!({"role": role, "parts": [{"type": "text", "content": content}]});
    let input: Vec<serde_json::Value> = request.messages.iter().map(|m| part(&m.role, &m.content)).collect();
    let input = serde_json::Value::Array(input).to_string();
    span.record("gen_ai.input.messages", input.as_str());
    span.record("input.value", input.as_str());
    if let Some(r) = reply {
        span.record("gen_ai.output.messages", serde_json::json!([part("assistant", &r.content)]).to_string());
        span.record("output.value", r.content.as_str());
    }
}

/// A reply as scripts read it: without the reasoning a model wrote before its answer
/// (`<think>…</think>`, as reasoning models on OpenAI-compatible servers send it), and never
/// empty: an empty reply (a content filter, a reply that was all reasoning) is a failed call, as
/// an empty stream is, and takes the node's fallback.
fn readable(mut r: LlmResponse) -> Result<LlmResponse> {
    if let Some(answer) = crate::text::without_reasoning(&r.content) {
        r.content = answer;
    }
    if r.content.trim().is_empty() {
        return Err(Error::new(ErrorKind::Llm, "the model's reply is empty"));
    }
    Ok(r)
}

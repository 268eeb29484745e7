//! The process's log and, when the standard OpenTelemetry environment asks for it, its traces:
//! the engine's spans (a turn, its nodes, their model calls and searches, with the GenAI
//! conventions' attributes) and the server's (a span per HTTP request, continuing a caller's
//! `traceparent`), exported over OTLP/HTTP to whatever the operator runs (Arize Phoenix, Langfuse,
//! Jaeger, Grafana Tempo, an OpenTelemetry Collector).
//!
//! Off, and free, unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! is set; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off again.
//! `OTEL_EXPORTER_OTLP_PROTOCOL` is `http/protobuf` (the default) or `http/json`;
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES` mean what they always do. `OTEL_TRACES_SAMPLER` (with
//! `OTEL_TRACES_SAMPLER_ARG` for a ratio) chooses which traces are kept: `parentbased_always_on`
//! (the default), `parentbased_traceidratio` (that share of new traces, and every trace a caller's
//! sampled `traceparent` continues), `traceidratio`, `always_on`, `always_off`,
//! `parentbased_always_off`, in any case. A value it cannot honour (a name outside these, a ratio
//! outside 0 to 1) stops the process at startup, as a bad protocol or number does, where the
//! specification would have it warned about and ignored, that is tracing everything: deliberately
//! stricter. These settings are read only when traces are on. Finished spans wait in a bounded queue
//! (`OTEL_BSP_MAX_QUEUE_SIZE`, 2,048) that a thread of its own sends in batches
//! (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512, at least every `OTEL_BSP_SCHEDULE_DELAY` ms, 5,000): a
//! turn never waits for the collector, and when the queue is full (a collector that is down or
//! slow) a span is dropped and counted, never held. Prompts and replies go into spans only with
//! `RULEWEAVE_TRACE_CONTENT=1`: they may hold players' words.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter, SpanProcessor};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Spans the exporter sent, failed to send, and dropped because its queue was full: what
/// `/metrics` shows as `ruleweave_trace_spans_total{outcome}`.
#[derive(Debug, Default)]
pub struct SpanCounts {
    /// Sent to the collector.
    pub exported: AtomicU64,
    /// In a batch the collector refused or never answered.
    pub failed: AtomicU64,
    /// Never queued: the queue was full.
    pub dropped: AtomicU64,
}

/// What the process's exporter did, for `/metrics` (the subscriber is the process's, so are its
/// counts); unset while traces are off.
static COUNTS: std::sync::OnceLock<Arc<SpanCounts>> = std::sync::OnceLock::new();

/// The traces' state: the provider to flush on the way out (none while traces are off).
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends what is queued and stops the exporter (waits at most a few seconds for a collector
    /// that does not answer).
    pub fn shutdown(&self) {
        if let Some(p) = &self.provider
            && let Err(e) = p.shutdown_with_timeout(Duration::from_secs(5))
        {
            eprintln!("ruleweave: traces: {e}");
        }
    }
}

/// Installs the process's subscriber: the log on stderr (`RUST_LOG`, else `default_filter`), and
/// the OpenTelemetry exporter when the environment asks for one.
pub fn init(default_filter: &str, colour: bool) -> Result<Telemetry> {
    let log = tracing_subscriber::fmt::layer().with_ansi(colour).with_writer(std::io::stderr).with_filter(
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
    );
    let config = Config::from_env(|k| std::env::var(k).ok())?;
    let Some(config) = config else {
        tracing_subscriber::registry().with(log).init();
        return Ok(Telemetry::default());
    };
    let (telemetry, counts, layer) = config.exporting()?;
    tracing_subscriber::registry().with(log).with(layer).init();
    let _ = COUNTS.set(counts);
    Ok(telemetry)
}

/// A span per HTTP request (`POST /v1/sessions/{id}/turns`, named by its route), continuing the
/// caller's trace when the request carries a `traceparent`; the turn it runs is its child.
pub async fn request_span(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use tracing::Instrument as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    // A matched path is shared text: cloning it costs no allocation when nobody traces.
    let route = request.extensions().get::<axum::extract::MatchedPath>().cloned();
    let method = request.method().clone();
    let span = tracing::info_span!(
        "request",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = %method,
        http.route = route.as_ref().map_or("", |p| p.as_str()),
        url.path = request.uri().path(),
        http.response.status_code = tracing::field::Empty,
    );
    if span.is_disabled() {
        return next.run(request).await;
    }
    span.record("otel.name", format!("{method} {}", route.as_ref().map_or(request.uri().path(), |p| p.as_str())));
    let caller = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(request.headers())));
    let _ = span.set_parent(caller);
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", i64::from(response.status().as_u16()));
    if response.status().is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}

/// A request's headers as the trace-context propagator reads them: its `traceparent`, but not its
/// `tracestate`. A caller's trace state is the caller's vendors' data (W3C Trace Context lets
/// anyone put entries there): carried on, it would travel to every model provider and search
/// engine a turn calls and to the collector, third parties the caller never chose. The trace goes
/// on; its state starts empty here.
struct Headers<'a>(&'a axum::http::HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        if key.eq_ignore_ascii_case("tracestate") {
            return None;
        }
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).filter(|k| !k.eq_ignore_ascii_case("tracestate")).collect()
    }
}

/// `ruleweave_trace_spans_total{outcome="exported"|"failed"|"dropped"}` on `/metrics` while traces
/// are on.
#[derive(Debug)]
pub struct SpanMetrics;

impl prometheus_client::collector::Collector for SpanMetrics {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder<'_>) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric as _;
        use prometheus_client::metrics::counter::ConstCounter;
        let Some(counts) = COUNTS.get() else { return Ok(()) };
        let mut family = encoder.encode_descriptor(
            "trace_spans",
            "Trace spans finished, by what became of them: sent to the collector, in a batch it refused or never answered, or dropped from a full queue",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (outcome, n) in [("exported", &counts.exported), ("failed", &counts.failed), ("dropped", &counts.dropped)] {
            let labels = [("outcome", outcome)];
            ConstCounter::new(n.load(Ordering::Relaxed)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The spans the exporter sees: the engine's, the server's and the command line's, at `info`
/// and above.
fn spans_filter() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_target("ruleweave", tracing::Level::INFO)
        .with_target("ruleweave_server", tracing::Level::INFO)
        .with_target("ruleweave_host", tracing::Level::INFO)
}

/// The OpenTelemetry layer over `provider`, with the filter the server uses (the engine's spans and
/// the server's, at `info`); sets the process's propagator to W3C trace context.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S> + Send + Sync + 'static + use<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    // W3C trace context in and out: what `traceparent` headers mean to requests and model calls.
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("ruleweave"))
        .with_threads(false)
        .with_location(false)
        .with_tracked_inactivity(false)
        .with_filter(spans_filter())
}

/// What the environment asks of the exporter.
#[derive(Debug, Clone, PartialEq)]
struct Config {
    json: bool,
    queue: usize,
    batch: usize,
    delay: Duration,
    sampling: Sampling,
}

/// Which traces are kept: a share of them by trace id (`ratio`, 1 for all, 0 for none), and
/// whether a span with a parent follows its parent's choice instead (`parent_based`: a request
/// continuing a caller's sampled `traceparent` is traced whatever the ratio).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sampling {
    parent_based: bool,
    ratio: f64,
}

impl Sampling {
    /// From `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, the specification's names.
    fn from_env(set: impl Fn(&str) -> Option<String>) -> Result<Sampling> {
        let given = set("OTEL_TRACES_SAMPLER");
        let name = given.as_deref().map(|v| v.trim().to_ascii_lowercase());
        let ratio = || -> Result<f64> {
            match set("OTEL_TRACES_SAMPLER_ARG") {
                None => Ok(1.0),
                Some(v) => v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .with_context(|| format!("OTEL_TRACES_SAMPLER_ARG={v}: expected a ratio from 0 to 1")),
            }
        };
        let (parent_based, ratio) = match name.as_deref() {
            None | Some("parentbased_always_on") => (true, 1.0),
            Some("parentbased_always_off") => (true, 0.0),
            Some("parentbased_traceidratio") => (true, ratio()?),
            Some("always_on") => (false, 1.0),
            Some("always_off") => (false, 0.0),
            Some("traceidratio") => (false, ratio()?),
            Some(_) => bail!(
                "OTEL_TRACES_SAMPLER={}: expected parentbased_always_on, parentbased_traceidratio, \
                 parentbased_always_off, traceidratio, always_on or always_off (this build has no other)",
                given.as_deref().unwrap_or_default().trim()
            ),
        };
        Ok(Sampling { parent_based, ratio })
    }

    fn sampler(self) -> opentelemetry_sdk::trace::Sampler {
        use opentelemetry_sdk::trace::Sampler;
        let own = if self.ratio >= 1.0 {
            Sampler::AlwaysOn
        } else if self.ratio <= 0.0 {
            Sampler::AlwaysOff
        } else {
            Sampler::TraceIdRatioBased(self.ratio)
        };
        if self.parent_based { Sampler::ParentBased(Box::new(own)) } else { own }
    }
}

impl Config {
    /// `None` when traces are off.
    fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Config>> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
            || (set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() && set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none())
        {
            return Ok(None);
        }
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
        let json = match protocol.as_deref().map(str::trim) {
            None | Some("http/protobuf") => false,
            Some("http/json") => true,
            Some("grpc") => bail!(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this build sends traces over HTTP; use http/protobuf (a collector's port 4318)"
            ),
            Some(other) => bail!("OTEL_EXPORTER_OTLP_PROTOCOL={other}: expected http/protobuf or http/json"),
        };
        let number = |k: &str, default: u64| -> Result<u64> {
            match set(k) {
                None => Ok(default),
                Some(v) => v.trim().parse().with_context(|| format!("{k}={v}: expected a whole number")),
            }
        };
        let queue = number("OTEL_BSP_MAX_QUEUE_SIZE", 2048)?.clamp(1, 1 << 20) as usize;
        let batch = (number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)? as usize).clamp(1, queue);
        let delay = Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", 5000)?.clamp(1, 3_600_000));
        let sampling = Sampling::from_env(set)?;
        Ok(Some(Config { json, queue, batch, delay, sampling }))
    }

    /// The exporter, its queue (and what it counts), the provider, and the layer that feeds it.
    fn exporting<S>(
        self,
    ) -> Result<(Telemetry, Arc<SpanCounts>, impl tracing_subscriber::Layer<S> + Send + Sync + 'static)>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
    {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let protocol =
            if self.json { opentelemetry_otlp::Protocol::HttpJson } else { opentelemetry_otlp::Protocol::HttpBinary };
        use opentelemetry_otlp::WithExportConfig as _;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .build()
            .context("cannot set up the trace exporter")?;
        // The resource (service.name, OTEL_RESOURCE_ATTRIBUTES) goes with every batch: the
        // exporter needs it before it moves to the queue's thread.
        let resource = resource();
        exporter.set_resource(&resource);
        let counts = Arc::new(SpanCounts::default());
        let sampler = self.sampling.sampler();
        let queue = Queue::start(exporter, self, counts.clone())?;
        let provider = SdkTracerProvider::builder()
            .with_span_processor(queue)
            .with_resource(resource)
            .with_sampler(sampler)
            .build();
        let layer = layer(&provider);
        Ok((Telemetry { provider: Some(provider) }, counts, layer))
    }
}

/// The SDK's resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), named `ruleweave` when
/// neither names the service.
fn resource() -> opentelemetry_sdk::Resource {
    let detected = opentelemetry_sdk::Resource::builder().build();
    let unnamed = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_none_or(|v| v.as_str().starts_with("unknown_service"));
    if unnamed { opentelemetry_sdk::Resource::builder().with_service_name("ruleweave").build() } else { detected }
}

/// What the queue's thread is sent.
enum Message {
    Span(Box<SpanData>),
    Flush(SyncSender<()>),
    Stop(SyncSender<()>),
}

/// A span processor that never blocks the thread that ends a span: finished spans go into a
/// bounded queue (or are dropped and counted when it is full); one thread sends them in batches.
#[derive(Debug)]
struct Queue {
    sender: SyncSender<Message>,
    counts: Arc<SpanCounts>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Message::Span(_) => "Span",
            Message::Flush(_) => "Flush",
            Message::Stop(_) => "Stop",
        })
    }
}

impl Queue {
    fn start(exporter: impl SpanExporter + 'static, config: Config, counts: Arc<SpanCounts>) -> Result<Queue> {
        let (sender, receiver) = sync_channel(config.queue);
        let c = counts.clone();
        let worker = std::thread::Builder::new()
            .name("ruleweave-traces".into())
            .spawn(move || send_batches(exporter, receiver, config, c))
            .context("cannot start the trace exporter's thread")?;
        Ok(Queue { sender, counts, worker: Mutex::new(Some(worker)) })
    }

    /// Asks the thread for `message` and waits for its answer, at most `timeout`.
    fn ask(&self, message: impl FnOnce(SyncSender<()>) -> Message, timeout: Duration) -> OTelSdkResult {
        let (done, wait) = sync_channel(1);
        self.sender.send(message(done)).map_err(|_| OTelSdkError::AlreadyShutdown)?;
        wait.recv_timeout(timeout).map_err(|_| OTelSdkError::Timeout(timeout))
    }
}

impl SpanProcessor for Queue {
    fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        match self.sender.try_send(Message::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.ask(Message::Flush, Duration::from_secs(30))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let result = self.ask(Message::Stop, timeout);
        if result.is_ok()
            && let Some(worker) = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take()
        {
            let _ = worker.join();
        }
        result
    }
}

/// The queue's thread: collects spans into batches and sends each when it is full, when the
/// delay has passed since the batch's first span, or when asked to.
fn send_batches(exporter: impl SpanExporter, queue: Receiver<Message>, config: Config, counts: Arc<SpanCounts>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        eprintln!("ruleweave: traces: cannot start the exporter's runtime; spans will be dropped");
        return;
    };
    let mut batch: Vec<SpanData> = Vec::with_capacity(config.batch);
    let mut due: Option<Instant> = None;
    let send = |batch: &mut Vec<SpanData>| {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        match rt.block_on(exporter.export(std::mem::take(batch))) {
            Ok(()) => counts.exported.fetch_add(n, Ordering::Relaxed),
            Err(e) => {
                tracing::debug!("traces: a batch of {n} spans was not sent: {e}");
                counts.failed.fetch_add(n, Ordering::Relaxed)
            }
        };
    };
    loop {
        let message = match due {
            Some(at) => match queue.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    send(&mut batch);
                    due = None;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match queue.recv() {
                Ok(m) => m,
                Err(_) => break,
            },
        };
        match message {
            Message::Span(span) => {
                batch.push(*span);
                due.get_or_insert_with(|| Instant::now() + config.delay);
                if batch.len() >= config.batch {
                    send(&mut batch);
                    due = None;
                }
            }
            Message::Flush(done) => {
                send(&mut batch);
                due = None;
                let _ = done.send(());
            }
            Message::Stop(done) => {
                send(&mut batch);
                let _ = exporter.shutdown();
                let _ = done.send(());
                return;
            }
        }
    }
    send(&mut batch);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Option<Config>> {
        let vars: std::collections::HashMap<String, String> =
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Config::from_env(|k| vars.get(k).cloned())
    }

    #[test]
    fn traces_are_off_unless_an_endpoint_is_set() {
        assert_eq!(config(&[]).unwrap(), None);
        assert_eq!(config(&[("OTEL_SERVICE_NAME", "x")]).unwrap(), None);
        let on = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]).unwrap().unwrap();
        let every = Sampling { parent_based: true, ratio: 1.0 };
        assert_eq!(on, Config { json: false, queue: 2048, batch: 512, delay: Duration::from_secs(5), sampling: every });
        assert!(config(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://x/v1/traces")]).unwrap().is_some());
        let off = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_SDK_DISABLED", "true")];
        assert_eq!(config(&off).unwrap(), None);
        let none = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_TRACES_EXPORTER", "none")];
        assert_eq!(config(&none).unwrap(), None);
    }

    #[test]
    fn the_protocol_and_the_queue_come_from_the_standard_variables() {
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "500"),
            ("OTEL_BSP_SCHEDULE_DELAY", "250"),
        ])
        .unwrap()
        .unwrap();
        let every = Sampling { parent_based: true, ratio: 1.0 };
        assert_eq!(
            c,
            Config { json: true, queue: 100, batch: 100, delay: Duration::from_millis(250), sampling: every }
        );
        let grpc = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert!(grpc.unwrap_err().to_string().contains("http/protobuf"));
        let bad = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_BSP_MAX_QUEUE_SIZE", "lots")]);
        assert!(bad.unwrap_err().to_string().contains("OTEL_BSP_MAX_QUEUE_SIZE=lots"));
    }

    #[test]
    fn the_sampler_is_the_specifications_and_a_bad_one_is_refused() {
        let sampling = |sampler: &str, arg: Option<&str>| {
            let mut vars = vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_TRACES_SAMPLER", sampler)];
            vars.extend(arg.map(|a| ("OTEL_TRACES_SAMPLER_ARG", a)));
            config(&vars).map(|c| c.unwrap().sampling)
        };
        let s = |parent_based, ratio| Sampling { parent_based, ratio };
        assert_eq!(sampling("parentbased_traceidratio", Some("0.1")).unwrap(), s(true, 0.1));
        assert_eq!(sampling("parentbased_traceidratio", None).unwrap(), s(true, 1.0));
        assert_eq!(sampling("traceidratio", Some(" 0.25 ")).unwrap(), s(false, 0.25));
        assert_eq!(sampling("ALWAYS_OFF", None).unwrap(), s(false, 0.0));
        assert_eq!(sampling("always_on", Some("0.5")).unwrap(), s(false, 1.0), "the ratio is for the ratio samplers");
        assert_eq!(sampling("parentbased_always_off", None).unwrap(), s(true, 0.0));
        assert_eq!(sampling("", None).unwrap(), s(true, 1.0), "empty is unset");
        let e = sampling("traceidratio", Some("10%")).unwrap_err().to_string();
        assert!(e.contains("OTEL_TRACES_SAMPLER_ARG=10%") && e.contains("from 0 to 1"), "{e}");
        assert!(sampling("traceidratio", Some("1.5")).is_err());
        let e = sampling("jaeger_remote", None).unwrap_err().to_string();
        assert!(e.contains("OTEL_TRACES_SAMPLER=jaeger_remote") && e.contains("parentbased_traceidratio"), "{e}");
        use opentelemetry_sdk::trace::Sampler;
        assert!(matches!(s(true, 0.1).sampler(), Sampler::ParentBased(_)));
        assert!(matches!(s(false, 0.25).sampler(), Sampler::TraceIdRatioBased(r) if r == 0.25));
        assert!(matches!(s(false, 0.0).sampler(), Sampler::AlwaysOff));
        assert!(matches!(s(false, 1.0).sampler(), Sampler::AlwaysOn));
    }
}

//! Prometheus metrics: turns, turn latency, model calls, tokens and errors, per pack.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use ruleweave::{Event, TurnResult};

type Labels = Vec<(&'static str, String)>;

/// The server's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    turns: Family<Labels, Counter>,
    turn_seconds: Family<Labels, Histogram>,
    llm_calls: Family<Labels, Counter>,
    llm_tokens: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    sessions: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ruleweave");
        let turns = Family::<Labels, Counter>::default();
        let turn_seconds = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
        });
        let llm_calls = Family::<Labels, Counter>::default();
        let llm_tokens = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let sessions = Family::<Labels, Counter>::default();
        registry.register("turns", "Turns run, by pack and outcome", turns.clone());
        registry.register("turn_seconds", "Wall time of a turn, model calls included", turn_seconds.clone());
        registry.register("llm_calls", "Model calls, by pack, provider and outcome", llm_calls.clone());
        registry.register("llm_tokens", "Model tokens, by pack and kind (prompt or completion)", llm_tokens.clone());
        registry.register("errors", "Failed requests, by pack and error code", errors.clone());
        registry.register("sessions_opened", "Sessions opened, by pack", sessions.clone());
        Metrics { registry, turns, turn_seconds, llm_calls, llm_tokens, errors, sessions }
    }
}

impl Metrics {
    pub fn session_opened(&self, pack: &str) {
        self.sessions.get_or_create(&vec![("pack", pack.to_owned())]).inc();
    }

    pub fn turn(&self, pack: &str, r: &TurnResult) {
        self.turns.get_or_create(&vec![("pack", pack.to_owned()), ("outcome", "ok".into())]).inc();
        self.turn_seconds.get_or_create(&vec![("pack", pack.to_owned())]).observe(r.duration.as_secs_f64());
        for e in &r.events {
            if let Event::Llm(call) = e {
                let outcome = if call.error.is_some() { "error" } else { "ok" };
                let labels =
                    vec![("pack", pack.to_owned()), ("provider", call.provider.clone()), ("outcome", outcome.into())];
                self.llm_calls.get_or_create(&labels).inc();
                let prompt = vec![("pack", pack.to_owned()), ("kind", "prompt".into())];
                self.llm_tokens.get_or_create(&prompt).inc_by(call.prompt_tokens.into());
                let completion = vec![("pack", pack.to_owned()), ("kind", "completion".into())];
                self.llm_tokens.get_or_create(&completion).inc_by(call.completion_tokens.into());
            }
        }
    }

    pub fn failed_turn(&self, pack: &str) {
        self.turns.get_or_create(&vec![("pack", pack.to_owned()), ("outcome", "error".into())]).inc();
    }

    pub fn error(&self, pack: &str, code: &str) {
        self.errors.get_or_create(&vec![("pack", pack.to_owned()), ("code", code.to_owned())]).inc();
    }

    /// The metrics in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}

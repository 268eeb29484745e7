//! Prometheus metrics: turns, turn latency, model calls, tokens and errors, per pack.

use std::fmt::Write as _;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use ruleweave::{LlmEvent, TurnResult};

type Labels = Vec<(&'static str, Label)>;

/// A label value, escaped as the text format requires (`\\`, `\"`, `\n`): whatever a value
/// holds, it cannot end its line early and forge another. The server also labels only packs that
/// exist, so what a client sends cannot grow the metrics.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Label(String);

impl From<&str> for Label {
    fn from(s: &str) -> Self {
        Label(s.to_owned())
    }
}

impl EncodeLabelValue for Label {
    fn encode(&self, w: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => w.write_str("\\\\")?,
                '"' => w.write_str("\\\"")?,
                '\n' => w.write_str("\\n")?,
                c => w.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// The server's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    turns: Family<Labels, Counter>,
    turn_seconds: Family<Labels, Histogram>,
    llm_calls: Family<Labels, Counter>,
    llm_tokens: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    sessions: Family<Labels, Counter>,
    simulating: Gauge,
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
        let simulating = Gauge::default();
        registry.register(
            "simulations_running",
            "Batches of simulated games playing now (at most one per server)",
            simulating.clone(),
        );
        registry.register_collector(Box::new(crate::telemetry::SpanMetrics));
        Metrics { registry, turns, turn_seconds, llm_calls, llm_tokens, errors, sessions, simulating }
    }
}

impl Metrics {
    /// A batch of simulated games starts; it is counted until the guard is dropped.
    pub(super) fn simulating(&self) -> impl Drop + Send + use<> {
        struct Running(Gauge);
        impl Drop for Running {
            fn drop(&mut self) {
                self.0.dec();
            }
        }
        self.simulating.inc();
        Running(self.simulating.clone())
    }

    pub fn session_opened(&self, pack: &str) {
        self.sessions.get_or_create(&vec![("pack", pack.into())]).inc();
    }

    pub fn turn(&self, pack: &str, r: &TurnResult) {
        self.turns.get_or_create(&vec![("pack", pack.into()), ("outcome", "ok".into())]).inc();
        self.turn_seconds.get_or_create(&vec![("pack", pack.into())]).observe(r.duration.as_secs_f64());
    }

    /// Counts model calls and tokens as the engine makes them, those of failed turns included
    /// (for [`ruleweave::Engine::on_llm_call`]).
    pub fn llm_counter(&self) -> impl Fn(&str, &LlmEvent) + Send + Sync + 'static {
        let (calls, tokens) = (self.llm_calls.clone(), self.llm_tokens.clone());
        move |pack, call| {
            let outcome = if call.error.is_some() { "error" } else { "ok" };
            let labels =
                vec![("pack", pack.into()), ("provider", call.provider.as_str().into()), ("outcome", outcome.into())];
            calls.get_or_create(&labels).inc();
            tokens
                .get_or_create(&vec![("pack", pack.into()), ("kind", "prompt".into())])
                .inc_by(call.prompt_tokens.into());
            let completion = vec![("pack", pack.into()), ("kind", "completion".into())];
            tokens.get_or_create(&completion).inc_by(call.completion_tokens.into());
        }
    }

    pub fn failed_turn(&self, pack: &str) {
        self.turns.get_or_create(&vec![("pack", pack.into()), ("outcome", "error".into())]).inc();
    }

    pub fn error(&self, pack: &str, code: &str) {
        self.errors.get_or_create(&vec![("pack", pack.into()), ("code", code.into())]).inc();
    }

    /// The metrics in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_cannot_forge_a_line() {
        let m = Metrics::default();
        m.error("x\"} 1\nfake_injected_metric{a=\"b", "invalid_pack");
        let text = m.render();
        assert!(!text.lines().any(|l| l.starts_with("fake_injected_metric")), "{text}");
        assert!(text.contains(r#"pack="x\"} 1\nfake_injected_metric{a=\"b""#), "{text}");
    }
}

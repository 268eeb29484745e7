//! What the HTTP providers share: the client, the retry loop, and reading server-sent events.

use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::RetryPolicy;
use crate::error::{Error, ErrorKind, Result};

/// An HTTP client with rustls on the `ring` crypto provider (the one sqlx also uses, so a build
/// compiles one). `rustls` needs a process-wide default provider; this installs `ring` as that
/// default unless the host already installed one.
pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another thread installing the same default is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .build()
        .map_err(|e| Error::new(ErrorKind::Llm, format!("cannot build the HTTP client: {e}")))
}

/// `request` carrying the current trace span as its parent (`traceparent`), when traces are on.
#[cfg(feature = "otel")]
fn traced(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    struct Headers(Vec<(String, String)>);
    impl opentelemetry::propagation::Injector for Headers {
        fn set(&mut self, key: &str, value: String) {
            self.0.push((key.to_owned(), value));
        }
    }
    let span = tracing::Span::current();
    if span.is_disabled() {
        return request;
    }
    let mut headers = Headers(Vec::new());
    let cx = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut headers));
    headers.0.into_iter().fold(request, |r, (k, v)| r.header(k, v))
}

/// Without traces, the request as it is.
#[cfg(not(feature = "otel"))]
fn traced(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request
}

/// A pause every call to one provider keeps: a 429 holds back the provider's other calls until
/// its `Retry-After` (or the backoff) has passed, rather than each call learning it for itself.
#[derive(Debug, Default)]
pub(crate) struct Throttle(std::sync::Mutex<Option<tokio::time::Instant>>);

impl Throttle {
    /// Waits out the pause, if there is one.
    async fn wait(&self) {
        let until = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(until) = until {
            tokio::time::sleep_until(until).await;
        }
    }

    /// Pauses every call for `wait` from now (a longer pause already set stands).
    fn pause(&self, wait: Duration) {
        let until = tokio::time::Instant::now() + wait;
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *held = Some(held.map_or(until, |h| h.max(until)));
    }
}

/// Sends the request `make` builds, retrying 408, 429, 5xx, timeouts and dropped connections with
/// backoff; a 429 pauses the provider's other calls too (`throttle`), and with
/// `wait_out_rate_limits` does not count as a retry. Returns the successful response and how many
/// attempts it took.
pub(crate) async fn send(
    provider: &str,
    policy: &RetryPolicy,
    throttle: &Throttle,
    make: impl Fn() -> reqwest::RequestBuilder,
) -> Result<(reqwest::Response, u32)> {
    let (mut attempt, mut limited) = (0u32, 0u32);
    loop {
        throttle.wait().await;
        attempt += 1;
        let mut rate_limited = false;
        let (why, retry_after) = match traced(make()).send().await {
            Ok(resp) if resp.status().is_success() => return Ok((resp, attempt)),
            Ok(resp) => {
                let status = resp.status();
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, policy.max_backoff));
                // An error body is read for its message only: a few kilobytes at most.
                let body = read_capped(provider, resp, attempt, ERROR_BODY_BYTES).await.unwrap_or_default();
                let why = format!("HTTP {status}: {}", error_message(&String::from_utf8_lossy(&body)));
                let retryable = status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error();
                if !retryable {
                    return Err(fail(provider, &why, attempt));
                }
                rate_limited = status.as_u16() == 429;
                (why, retry_after)
            }
            Err(e) if e.is_timeout() => ("the request timed out".to_owned(), None),
            Err(e) if e.is_connect() || e.is_request() => (format!("the connection failed: {}", root_cause(&e)), None),
            Err(e) => return Err(fail(provider, &root_cause(&e), attempt)),
        };
        let waited_out = rate_limited && policy.wait_out_rate_limits;
        if waited_out {
            limited += 1;
        }
        // The attempts that count against `max_retries`: all but the rate limits waited out.
        let counted = attempt - limited;
        if !waited_out && counted > policy.max_retries {
            return Err(fail(provider, &why, attempt));
        }
        let wait = policy.backoff(if waited_out { limited - 1 } else { counted - 1 }, retry_after);
        tracing::warn!(provider, attempt, ?wait, "model call failed, retrying: {why}");
        if rate_limited {
            throttle.pause(wait);
            continue;
        }
        tokio::time::sleep(wait).await;
    }
}

/// A `Retry-After` header's seconds as a wait, capped at `cap` before it becomes a `Duration`
/// (a server may say `1e30`). `None` when it is not a number of seconds (an HTTP date, say).
fn retry_after(value: &str, cap: Duration) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs_f64(seconds.min(cap.as_secs_f64())))
}

fn fail(provider: &str, why: &str, attempts: u32) -> Error {
    let tries = if attempts == 1 { "1 attempt".to_owned() } else { format!("{attempts} attempts") };
    Error::new(ErrorKind::Llm, format!("{provider}: {why} (after {tries})"))
}

/// The innermost message of a reqwest error chain (the outer ones repeat the URL).
fn root_cause(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

/// The message of an API error body (`{"error": {"message": ...}}`), or the body itself, shortened.
fn error_message(body: &str) -> String {
    let v: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let msg = v
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")).or_else(|| v.get("error")))
        .and_then(|m| m.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| body.trim().to_owned());
    let mut short: String = msg.chars().take(300).collect();
    if short.is_empty() {
        short = "(empty body)".into();
    }
    short
}

/// The most bytes of an error reply read for its message.
const ERROR_BODY_BYTES: usize = 16 * 1024;

/// A reply's body, at most `max` bytes: one whose `Content-Length` says more is refused before a
/// byte is read, one that sends more is cut off as it passes the cap.
pub(crate) async fn read_capped(provider: &str, resp: reqwest::Response, attempts: u32, max: usize) -> Result<Vec<u8>> {
    if let Some(len) = resp.content_length()
        && len > max as u64
    {
        return Err(too_long(provider, &format!("says it is {len} bytes"), max, attempts));
    }
    let mut stream = resp.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| fail(provider, &format!("reading the reply failed: {}", root_cause(&e)), attempts))?;
        if body.len() + chunk.len() > max {
            return Err(too_long(provider, "went on past it", max, attempts));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn too_long(provider: &str, what: &str, max: usize, attempts: u32) -> Error {
    let why = format!(
        "the reply {what}: more than the {max} bytes this host reads from a model or search server \
         (RULEWEAVE_LLM_MAX_REPLY_BYTES)"
    );
    fail(provider, &why, attempts)
}

/// Reads a successful response body (at most `max` bytes) as JSON, with an error that says the
/// body was malformed.
pub(crate) async fn json_body(
    provider: &str,
    resp: reqwest::Response,
    attempts: u32,
    max: usize,
) -> Result<serde_json::Value> {
    let body = read_capped(provider, resp, attempts, max).await?;
    serde_json::from_slice(&body).map_err(|e| {
        let head: String = String::from_utf8_lossy(&body[..body.len().min(480)]).chars().take(120).collect();
        fail(provider, &format!("the reply is not valid JSON ({e}): {head}"), attempts)
    })
}

/// Calls `on_data` with the payload of every `data:` line of a server-sent-event body; a body
/// past `max` bytes in all is cut off with an error (a server that never stops sending).
pub(crate) async fn read_sse(
    provider: &str,
    resp: reqwest::Response,
    attempts: u32,
    max: usize,
    mut on_data: impl FnMut(&str) -> Result<()>,
) -> Result<()> {
    let mut stream = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    // How much of `buf` is known to hold no newline: each byte is looked at once.
    let mut scanned = 0;
    let mut total = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| fail(provider, &format!("the stream broke off: {}", root_cause(&e)), attempts))?;
        total += chunk.len();
        if total > max {
            return Err(too_long(provider, "streamed on past it", max, attempts));
        }
        buf.extend_from_slice(&chunk);
        while let Some(at) = buf[scanned..].iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=scanned + at).collect();
            scanned = 0;
            let line = String::from_utf8_lossy(&line);
            if let Some(data) = line.trim_end().strip_prefix("data:") {
                on_data(data.trim_start())?;
            }
        }
        scanned = buf.len();
    }
    let rest = String::from_utf8_lossy(&buf);
    if let Some(data) = rest.trim_end().strip_prefix("data:") {
        on_data(data.trim_start())?;
    }
    Ok(())
}

/// Milliseconds since `start`, for events.
pub(crate) fn elapsed_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_capped_before_it_becomes_a_duration() {
        let cap = Duration::from_secs(8);
        for huge in ["1e30", "99999999999999999999", "18446744073709551615", "1e308"] {
            assert_eq!(retry_after(huge, cap), Some(cap), "{huge}");
        }
        assert_eq!(retry_after(" 2.5 ", cap), Some(Duration::from_millis(2500)));
        for bad in ["-1", "NaN", "inf", "Wed, 21 Oct 2015 07:28:00 GMT", ""] {
            assert_eq!(retry_after(bad, cap), None, "{bad}");
        }
    }

    #[test]
    fn api_error_messages_are_extracted() {
        assert_eq!(error_message(r#"{"error": {"message": "Rate limit reached"}}"#), "Rate limit reached");
        assert_eq!(error_message("<html>bad gateway</html>"), "<html>bad gateway</html>");
        assert_eq!(error_message(""), "(empty body)");
    }
}

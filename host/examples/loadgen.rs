//! A load generator for `ruleweave serve`: many clients playing pirate conversations at once.
//!
//! ```sh
//! cargo build --release
//! target/release/ruleweave serve --store sqlite:///tmp/load.db &
//! cargo run --release -p ruleweave --example loadgen -- --clients 64 --seconds 20
//! ```
//!
//! Each client opens a session, plays up to 20 turns with the LangGraph baseline's messages (a new
//! session when the game is won), and starts over. Prints turns/s and latency percentiles.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The player's messages of the LangGraph baseline, as the pirate bench plays them.
const MESSAGES: &str = include_str!("../../tests/data/pirate_messages.txt");

struct Args {
    url: String,
    clients: usize,
    seconds: u64,
    difficulty: String,
    token: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        url: "http://127.0.0.1:8080".into(),
        clients: 64,
        seconds: 20,
        difficulty: "hard".into(),
        token: std::env::var("RULEWEAVE_TOKEN").ok(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--url" => a.url = value,
            "--clients" => a.clients = value.parse().expect("--clients N"),
            "--seconds" => a.seconds = value.parse().expect("--seconds N"),
            "--difficulty" => a.difficulty = value,
            "--token" => a.token = Some(value),
            other => panic!("unknown flag {other}: --url --clients --seconds --difficulty --token"),
        }
    }
    a
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    sessions: u64,
    errors: u64,
}

#[tokio::main]
async fn main() {
    let a = args();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().pool_max_idle_per_host(a.clients).build().unwrap();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let end = Instant::now() + Duration::from_secs(a.seconds);
    let mut tasks = Vec::new();
    for c in 0..a.clients {
        let (client, tally, url, difficulty, token) =
            (client.clone(), tally.clone(), a.url.clone(), a.difficulty.clone(), a.token.clone());
        tasks.push(tokio::spawn(async move {
            let messages: Vec<&str> = MESSAGES.lines().collect();
            let auth = |rb: reqwest::RequestBuilder| match &token {
                Some(t) => rb.bearer_auth(t),
                None => rb,
            };
            while Instant::now() < end {
                let created = auth(client.post(format!("{url}/v1/sessions")))
                    .json(&json!({"pack": "pirate", "options": {"difficulty": difficulty}}))
                    .send()
                    .await;
                let Ok(created) = created else {
                    tally.lock().unwrap().errors += 1;
                    continue;
                };
                let Ok(body) = created.json::<Value>().await else {
                    tally.lock().unwrap().errors += 1;
                    continue;
                };
                let Some(id) = body["id"].as_str().map(str::to_owned) else {
                    tally.lock().unwrap().errors += 1;
                    continue;
                };
                tally.lock().unwrap().sessions += 1;
                for t in 0..20 {
                    if Instant::now() >= end {
                        break;
                    }
                    let message = messages[(c + t) % messages.len()];
                    let start = Instant::now();
                    let r = auth(client.post(format!("{url}/v1/sessions/{id}/turns")))
                        .json(&json!({"input": {"message": message}}))
                        .send()
                        .await;
                    let took = start.elapsed().as_micros() as u64;
                    match r {
                        Ok(r) if r.status().is_success() => {
                            let _ = r.bytes().await;
                            tally.lock().unwrap().latencies_us.push(took);
                        }
                        Ok(r) if r.status() == reqwest::StatusCode::CONFLICT => break,
                        _ => {
                            tally.lock().unwrap().errors += 1;
                            break;
                        }
                    }
                }
                let _ = auth(client.delete(format!("{url}/v1/sessions/{id}"))).send().await;
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut t = tally.lock().unwrap();
    t.latencies_us.sort_unstable();
    let pct = |p: f64| -> f64 {
        if t.latencies_us.is_empty() {
            return 0.0;
        }
        let i = ((p / 100.0) * (t.latencies_us.len() - 1) as f64).round() as usize;
        t.latencies_us[i] as f64 / 1000.0
    };
    println!(
        "{} turns in {:.1} s: {:.0} turns/s; latency p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms; {} sessions, {} errors ({} clients)",
        t.latencies_us.len(),
        elapsed,
        t.latencies_us.len() as f64 / elapsed,
        pct(50.0),
        pct(99.0),
        pct(99.9),
        t.sessions,
        t.errors,
        a.clients
    );
}

//! A load generator for `ruleweave serve`: many clients playing pirate conversations at once.
//!
//! ```sh
//! cargo build --release
//! target/release/ruleweave serve --store sqlite:///tmp/load.db &
//! cargo run --release -p ruleweave --example loadgen -- --clients 64 --seconds 20
//! ```
//!
//! Each client opens a session, plays up to 20 turns with the LangGraph baseline's messages (a new
//! session when the game is won), and starts over. Prints turns/s and latency percentiles; with
//! `--pid` (the server's process id, on Linux), also the server's own CPU time per turn (user +
//! system, from `/proc/PID/stat`, so the load generator's share of the machine does not count)
//! and its peak resident memory.
//!
//! `--hold N` measures memory instead: it opens N sessions, plays one turn in each and keeps
//! them, then prints how much the server's resident memory grew per session.

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
    pid: Option<u32>,
    hold: Option<usize>,
}

fn args() -> Args {
    let mut a = Args {
        url: "http://127.0.0.1:8080".into(),
        clients: 64,
        seconds: 20,
        difficulty: "hard".into(),
        token: std::env::var("RULEWEAVE_TOKEN").ok(),
        pid: None,
        hold: None,
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
            "--pid" => a.pid = Some(value.parse().expect("--pid PID")),
            "--hold" => a.hold = Some(value.parse().expect("--hold N")),
            other => panic!("unknown flag {other}: --url --clients --seconds --difficulty --token --pid --hold"),
        }
    }
    a
}

/// The server's CPU time so far (user + system), from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command (which may hold spaces) start after its closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let (utime, stime): (u64, u64) = (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
    let ticks = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse::<u64>().ok())
        .unwrap_or(100);
    Some(Duration::from_micros((utime + stime) * 1_000_000 / ticks))
}

/// A field of `/proc/PID/status` in kB (`VmRSS`, `VmHWM`: peak resident memory).
fn memory_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `--hold N`: N sessions, one turn each, kept; the server's resident memory growth per session.
async fn hold(a: &Args, client: &reqwest::Client, n: usize) {
    let pid = a.pid.expect("--hold needs --pid (the server's process id)");
    let before = memory_kb(pid, "VmRSS").unwrap_or(0);
    let message = MESSAGES.lines().next().unwrap_or("Ahoy!");
    for i in 0..n {
        let mut rb = client.post(format!("{}/v1/sessions", a.url));
        if let Some(t) = &a.token {
            rb = rb.bearer_auth(t);
        }
        let created: Value = rb.json(&json!({"pack": "pirate"})).send().await.unwrap().json().await.unwrap();
        let id = created["id"].as_str().unwrap_or_else(|| panic!("no session: {created}"));
        let mut rb = client.post(format!("{}/v1/sessions/{id}/turns", a.url));
        if let Some(t) = &a.token {
            rb = rb.bearer_auth(t);
        }
        rb.json(&json!({"input": {"message": message}})).send().await.unwrap();
        if (i + 1) % 1000 == 0 {
            eprintln!("{} sessions", i + 1);
        }
    }
    let after = memory_kb(pid, "VmRSS").unwrap_or(0);
    println!(
        "{n} sessions held, one turn each: resident memory {before} kB → {after} kB, {:.0} bytes per session",
        (after.saturating_sub(before) * 1024) as f64 / n as f64
    );
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
    if let Some(n) = a.hold {
        return hold(&a, &client, n).await;
    }
    let cpu_before = a.pid.and_then(cpu_time);
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
    if let (Some(pid), Some(before)) = (a.pid, cpu_before) {
        let used = cpu_time(pid).unwrap_or(before).saturating_sub(before);
        let turns = t.latencies_us.len().max(1) as f64;
        println!(
            "server CPU: {:.2} s over the run, {:.0} µs per turn (so {:.0} turns/s would fill two cores); peak RSS {} MB",
            used.as_secs_f64(),
            used.as_micros() as f64 / turns,
            2.0 * turns / used.as_secs_f64().max(1e-9),
            memory_kb(pid, "VmHWM").unwrap_or(0) / 1024
        );
    }
}

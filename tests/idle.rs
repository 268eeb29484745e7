//! What runs for hours costs nothing at rest. `serve` (with and without `--watch`), `play` and
//! `lsp`, each left alone, spend under [`MOST`] of CPU over a [`WINDOW`], read from
//! `/proc/PID/stat` (every thread of the process, user and system time). A watcher goes back to
//! rest after a reload and after the console's "use this value", and the SQLite database a turn
//! writes under the watched `data/` never wakes it.
//!
//! The window is a measurement, not a wait: nothing is expected to happen in it, so it is slept
//! through whole; every wait for something (a port, a line printed, a reload) is on its signal.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::lsp::{Raw, uri_of};
use crate::support::{self, copy_of, edit, get, http, post, start_with};

/// How long each process is left alone.
const WINDOW: Duration = Duration::from_secs(10);

/// The most CPU a process may spend at rest over [`WINDOW`] (2% of a core).
const MOST: Duration = Duration::from_millis(200);

/// The CPU time (user and system, all threads) the process has spent so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process is running");
    // The command name, in parentheses, may hold spaces: the fields are read after its end.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
    // utime and stime are the stat file's 14th and 15th fields; fields[0] is its 3rd.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

/// The kernel's clock ticks a second (`USER_HZ`), the unit of `/proc/PID/stat`'s times.
fn clock_ticks() -> u64 {
    let out = std::process::Command::new("getconf").arg("CLK_TCK").output().expect("getconf runs");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("CLK_TCK is a number")
}

/// Leaves the processes alone for one [`WINDOW`] and asserts that each spent under [`MOST`].
fn assert_at_rest(when: &str, processes: &[(&str, u32)]) {
    let before: Vec<Duration> = processes.iter().map(|(_, pid)| cpu(*pid)).collect();
    std::thread::sleep(WINDOW);
    let spent: Vec<(&str, Duration)> =
        processes.iter().zip(before).map(|((name, pid), before)| (*name, cpu(*pid) - before)).collect();
    for (name, spent) in &spent {
        assert!(*spent < MOST, "{when}, `{name}` spent {spent:?} of CPU in {WINDOW:?} at rest (at most {MOST:?})");
    }
}

/// `ruleweave play PACK` on a pipe: its lines as they come, and a bounded wait for one.
struct Play {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Play {
    fn start(root: &std::path::Path, pack: &str) -> Play {
        let mut cmd = support::ruleweave(root);
        cmd.args(["play", pack, "--store", "memory"]).stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = cmd.stderr(Stdio::null()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Play { child, stdin, lines }
    }

    fn wait_for(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = String::new();
        while !seen.contains(text) {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => seen.push_str(&(line + "\n")),
                Err(_) => panic!("play never printed `{text}`; it printed:\n{seen}"),
            }
        }
    }
}

impl Drop for Play {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_play_and_lsp_cost_nothing_at_rest() {
    let copy = copy_of(&["config", "scripts", "prompts", "data", "schemas"]);
    let root = copy.path().canonicalize().unwrap();
    // The watching server keeps its sessions in a database under the watched `data/`: its
    // writes are no edit of a pack.
    let db = format!("sqlite://{}", root.join("data/ruleweave.db").display());
    let watching = start_with(&root, &db, &[], &["--watch"]);
    let plain = start_with(&root, "memory", &[], &[]);
    let play = Play::start(&root, "pirate");
    play.wait_for("model: the pack's stand-in model");
    let mut lsp = Raw::ready(&root);
    let manifest = uri_of(&root.join("config/pirate.yaml"));
    lsp.open(&manifest, &std::fs::read_to_string(root.join("config/pirate.yaml")).unwrap());
    lsp.diagnostics(&manifest);

    // A turn on each server (the watching one writes its database), then rest.
    for server in [&watching, &plain] {
        let (status, session) = post(&format!("{}/v1/sessions", server.url), json!({"pack": "pirate"})).await;
        assert_eq!(status, reqwest::StatusCode::CREATED, "{session}");
        let turns = format!("{}/v1/sessions/{}/turns", server.url, session["id"].as_str().unwrap());
        let (status, turn) = post(&turns, json!({"input": {"message": "I am the king's own tax collector"}})).await;
        assert_eq!(status, reqwest::StatusCode::OK, "{turn}");
    }
    let processes = [
        ("serve --watch", watching.child.id()),
        ("serve", plain.child.id()),
        ("play", play.child.id()),
        ("lsp", lsp.child.id()),
    ];
    assert_at_rest("after a turn", &processes);
    let packs = get(&format!("{}/v1/packs", watching.url)).await;
    let pirate = packs["packs"].as_array().unwrap().iter().find(|p| p["name"] == "pirate").unwrap().clone();
    assert_eq!(pirate["reloads"], json!(0), "a turn's database writes reloaded the pack: {pirate}");

    // An edit: both watchers reload it, and rest again.
    edit(&root, "config/pirate.yaml", "close_margin: 5", "close_margin: 6");
    watching.wait_for_line("pirate reloaded");
    play.wait_for("pirate reloaded (version ");
    // "Use this value": the server writes the manifest and reloads; its watcher sees the write.
    let put = http()
        .put(format!("{}/v1/packs/pirate/params", watching.url))
        .json(&json!({"params": {"close_margin": 7}}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), reqwest::StatusCode::OK);
    let written: Value = put.json().await.unwrap();
    assert_eq!(written["params"]["close_margin"], json!(7), "{written}");
    play.wait_for("pirate reloaded (version ");
    assert_at_rest(
        "after an edit and a \"use this value\"",
        &[("serve --watch", watching.child.id()), ("play", play.child.id())],
    );
    let packs = get(&format!("{}/v1/packs", watching.url)).await;
    let pirate = packs["packs"].as_array().unwrap().iter().find(|p| p["name"] == "pirate").unwrap().clone();
    assert_eq!(pirate["reloads"], json!(2), "one reload for each change, none at rest: {pirate}");
    writeln!(&play.stdin, "/quit").unwrap();
}

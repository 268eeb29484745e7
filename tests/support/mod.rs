//! Helpers for the end-to-end tests: the `ruleweave` binary and a local model server.

#![allow(dead_code)]

pub mod jobs;
pub mod mock_llm;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use ruleweave_testkit::{copy_of, copy_tree, edit, needed, postgres, repo_root};

/// `ruleweave` with a clean model environment: no keys, stand-in unless a test says otherwise.
pub fn ruleweave(root: &Path) -> Command {
    clean(Command::new(env!("CARGO_BIN_EXE_ruleweave")), root)
}

/// How much memory [`ruleweave_bounded`] lets the process map: far more than any pack needs,
/// far less than a runaway one would take.
pub const MEMORY_BOUND: u64 = 3 << 30;

/// `ruleweave` under a bound on its address space ([`MEMORY_BOUND`], through util-linux's
/// `prlimit`): an allocation past it fails, and the process aborts instead of exhausting the
/// machine. A case that ends well never comes near it.
pub fn ruleweave_bounded(root: &Path) -> Command {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={MEMORY_BOUND}")).arg("--").arg(env!("CARGO_BIN_EXE_ruleweave"));
    clean(cmd, root)
}

fn clean(mut cmd: Command, root: &Path) -> Command {
    cmd.current_dir(root);
    for var in [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "GROQ_API_KEY",
        "GROQ_BASE_URL",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
        "TAVILY_API_KEY",
        "TAVILY_BASE_URL",
        "RULEWEAVE_SEARCH",
        "RULEWEAVE_LLM",
        "RULEWEAVE_MODEL",
        "RULEWEAVE_MODEL_MAP",
        "RULEWEAVE_LLM_RETRIES",
        "RULEWEAVE_LLM_BACKOFF_MS",
        "RULEWEAVE_LLM_MAX_BACKOFF_MS",
        "RULEWEAVE_LLM_TIMEOUT_MS",
        "RULEWEAVE_LLM_MAX_REPLY_BYTES",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    // A developer's own OpenTelemetry settings would send the tests' traces elsewhere, or
    // override what a test sets.
    for (var, _) in std::env::vars_os() {
        if var.to_str().is_some_and(|v| v.starts_with("OTEL_")) {
            cmd.env_remove(var);
        }
    }
    cmd
}

/// A running `ruleweave serve`; killed when dropped.
pub struct Process {
    pub child: std::process::Child,
    pub url: String,
    /// What it prints on stderr, line by line.
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Process {
    /// Waits (at most 30 s) until the server prints a line holding `text`.
    pub fn wait_for_line(&self, text: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(_) => panic!("the server never printed `{text}`"),
            }
        }
    }

    /// Sends SIGTERM and waits (at most 30 s) until the server says it is shutting down.
    pub fn terminate(&self) {
        let pid = self.child.id().to_string();
        assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        self.wait_for_line("shutting down; finishing the turns in flight");
    }

    /// How the server exited, once it has said it stopped (at most 30 s, so a server that hangs
    /// in its shutdown fails the test instead of holding it).
    pub fn exit_status(&mut self) -> std::process::ExitStatus {
        self.wait_for_line("ruleweave: stopped");
        self.child.wait().unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `ruleweave serve` on a free port and waits until it listens.
pub fn start(root: &Path, store: &str, env: &[(&str, &str)]) -> Process {
    start_with(root, store, env, &[])
}

/// Two replicas of `serve` on one PostgreSQL when the tests have one (`RULEWEAVE_TEST_POSTGRES`),
/// else one server on a memory store: what a capability is tested on.
pub fn replicas(root: &Path, env: &[(&str, &str)]) -> Vec<Process> {
    match postgres() {
        Some(url) => (0..2).map(|_| start(root, &url, env)).collect(),
        None => vec![start(root, "memory", env)],
    }
}

/// [`start`] with more arguments to `serve`.
pub fn start_with(root: &Path, store: &str, env: &[(&str, &str)], args: &[&str]) -> Process {
    let mut cmd = ruleweave(root);
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--store", store]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    start_cmd(cmd)
}

/// Starts `cmd` (a `serve` command) and waits until it says where it listens; its stderr goes on
/// being read (and dropped) so it never blocks.
pub fn start_cmd(mut cmd: Command) -> Process {
    use std::io::BufRead;
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent && let Some(url) = line.strip_prefix("ruleweave: listening on ") {
                let _ = tx.send(url.to_owned());
                sent = true;
            }
            let _ = lines_tx.send(line);
        }
    });
    let url = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the server did not start");
    Process { child, url, lines }
}

/// POSTs `body` as JSON; a connection failure reads as 503.
pub async fn post(url: &str, body: serde_json::Value) -> (reqwest::StatusCode, serde_json::Value) {
    match http().post(url).json(&body).send().await {
        Ok(r) => {
            let status = r.status();
            (status, r.json().await.unwrap_or(serde_json::Value::Null))
        }
        Err(e) => (reqwest::StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({"error": e.to_string()})),
    }
}

/// GETs `url` as JSON.
pub async fn get(url: &str) -> serde_json::Value {
    http().get(url).send().await.unwrap().json().await.unwrap()
}

/// Runs `cmd` with `stdin` as its input.
pub fn run_with_stdin(mut cmd: Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The JSON lines of stdout.
pub fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A file in a fresh temporary directory.
pub fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// An HTTP client for tests (rustls needs its crypto provider chosen first).
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build().unwrap()
}

/// A server started in this process on a free port.
pub struct Server {
    pub url: String,
    pub state: ruleweave_host::server::Shared,
}

/// Starts the API for `engine` on 127.0.0.1 (a free port).
pub async fn serve(engine: ruleweave::Engine, token: Option<&str>, body_limit: usize) -> Server {
    use std::sync::Arc;
    let settings =
        ruleweave_host::server::Settings { token: token.map(str::to_owned), body_limit, ..Default::default() };
    let state = Arc::new(ruleweave_host::server::AppState::new(engine, settings));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // The product's listener (header deadlines, peer addresses, the connection cap), as `serve`
    // runs it, until the test's runtime ends.
    tokio::spawn(ruleweave_host::server::listen(state.clone(), listener, std::future::pending()));
    Server { url, state }
}

/// Writes a pack root into a fresh temporary directory: `files` are (path, contents).
pub fn write_root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// A pack that counts turns and never finishes unless told "stop".
pub fn counter_root() -> tempfile::TempDir {
    write_root(&[
        (
            "config/counter.yaml",
            "state:\n  n: {type: int, reducer: add}\n  log: {type: list, reducer: append}\n  done: {type: bool}\ninput:\n  text: {type: string, required: true}\noutput: [n]\nfinish: {when: done, message: Counted to the end.}\ngraph:\n  nodes:\n    count: {script: count.rhai::count}\n  edges:\n    - START -> count\n    - count -> END\n",
        ),
        ("scripts/counter/count.rhai", r#"fn count() { #{ n: 1, log: input().text, done: input().text == "stop" } }"#),
    ])
}

/// A fresh copy of `tests/reload/` (the `marker` pack), to edit while it serves.
#[allow(dead_code)]
pub fn reload_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&repo_root().join("tests/reload"), dir.path());
    dir
}

//! What a keystroke costs in an editor: `ruleweave lsp` (the binary this package builds) gets a
//! changed buffer and answers with its diagnostics. One sample is one `didChange` of a pack's
//! manifest (alternating between two texts, so every change is a change) until the
//! `publishDiagnostics` that answers it; that spans the server's settling delay (50 ms after the
//! last change, so a burst of keystrokes is checked once), the check of the whole pack on the
//! buffers, and the round trip over stdio. The target is 150 ms on each shipped pack.
//!
//! `cargo bench -p ruleweave --bench lsp`; `cargo test --benches` runs each once.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

struct Server {
    child: Child,
    stdin: ChildStdin,
    frames: mpsc::Receiver<Value>,
}

impl Server {
    fn start(root: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ruleweave"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ruleweave lsp starts");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    match line.trim_end() {
                        "" => break,
                        l => length = l.strip_prefix("Content-Length: ").and_then(|n| n.parse().ok()).unwrap_or(length),
                    }
                }
                let mut body = vec![0; length];
                if stdout.read_exact(&mut body).is_err() || tx.send(serde_json::from_slice(&body).unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut s = Server { child, stdin, frames };
        let init = json!({"processId": null, "rootUri": uri(root), "capabilities": {}});
        s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}));
        s.until(|v| v["id"] == 1);
        s.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        s
    }

    fn send(&mut self, v: Value) {
        let body = v.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn until(&self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self.frames.recv_timeout(Duration::from_secs(60)).expect("the server answers");
            if pred(&v) {
                return v;
            }
        }
    }

    /// Sends `text` as the new content of `file` and waits for its diagnostics: the time taken.
    fn keystroke(&mut self, file: &str, version: i64, text: &str) -> Duration {
        let start = Instant::now();
        let doc = json!({"uri": file, "version": version});
        let params = json!({"textDocument": doc, "contentChanges": [{"text": text}]});
        self.send(json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params}));
        self.until(|v| v["method"] == "textDocument/publishDiagnostics" && v["params"]["version"] == version);
        start.elapsed()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap();
    let mut group = c.benchmark_group("lsp");
    group.sample_size(20);
    for pack in ["pirate", "interview", "party", "designer", "debate"] {
        let path = root.join(format!("config/{pack}.yaml"));
        let text = std::fs::read_to_string(&path).unwrap();
        let typed = format!("{text}\n# a comment typed\n");
        let file = uri(&path);
        let mut server = Server::start(&root);
        let doc = json!({"uri": file, "languageId": "yaml", "version": 0, "text": text});
        server.send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}));
        let mut version = 0;
        group.bench_function(format!("keystroke to diagnostics ({pack} manifest)"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    version += 1;
                    let body = if version % 2 == 1 { &typed } else { &text };
                    total += server.keystroke(&file, version, body);
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

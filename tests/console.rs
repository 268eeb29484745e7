//! The playtest console in a real browser: headless Chromium (Debian's `chromium`), driven over
//! the DevTools protocol, opens the page a real `ruleweave serve --watch` serves, plays turns,
//! sees the turn's breakdown and the state's changes, sees a reload notice after a file edit,
//! replays the session on the edited rules, and forks from a checkpoint. Every wait is on the page
//! itself (a DOM mutation that makes a condition true), bounded.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::{copy_of, start_with};
use tokio_tungstenite::tungstenite::Message;

/// A headless Chromium and a connection to its one page.
struct Browser {
    child: Child,
    ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    next: u64,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The browser to drive: `RULEWEAVE_CHROMIUM`, else `chromium` on the PATH.
fn chromium() -> Option<String> {
    let exe = std::env::var("RULEWEAVE_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let found = Command::new(&exe).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    found.is_ok_and(|s| s.success()).then_some(exe)
}

impl Browser {
    async fn launch(exe: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(exe)
            .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let browser_url = rx.recv_timeout(Duration::from_secs(60)).expect("chromium says where its DevTools listen");
        let port = browser_url.split(':').nth(2).unwrap().split('/').next().unwrap().to_owned();
        let targets: Value = support::http()
            .get(format!("http://127.0.0.1:{port}/json/list"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let page = targets.as_array().unwrap().iter().find(|t| t["type"] == "page").expect("a page").clone();
        let (ws, _) = tokio_tungstenite::connect_async(page["webSocketDebuggerUrl"].as_str().unwrap()).await.unwrap();
        Browser { child, ws, next: 0, _profile: profile }
    }

    /// Sends a DevTools command and returns its result (events on the way are skipped).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.ws
            .send(Message::Text(json!({"id": id, "method": method, "params": params}).to_string().into()))
            .await
            .unwrap();
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(60), self.ws.next()).await.expect("the browser answers");
            let Some(Ok(Message::Text(text))) = msg else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `js` in the page (awaiting a promise) and returns its value.
    async fn eval(&mut self, js: &str) -> Value {
        let r =
            self.call("Runtime.evaluate", json!({"expression": js, "awaitPromise": true, "returnByValue": true})).await;
        assert!(r.get("exceptionDetails").is_none(), "{js}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Waits (at most 30 s) until `condition`, a JS expression, is truthy: checked each time the
    /// page changes, not on a timer.
    async fn wait_for(&mut self, condition: &str) -> Value {
        let js = format!(
            "new Promise((resolve, reject) => {{
               const check = () => {{ try {{ const v = ({condition}); if (v) {{ obs.disconnect(); clearTimeout(t); resolve(v); }} }} catch (_) {{}} }};
               const obs = new MutationObserver(check);
               obs.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
               const t = setTimeout(() => {{ obs.disconnect(); reject(new Error('timed out waiting for: ' + {cond:?})); }}, 30000);
               check();
             }})",
            cond = condition
        );
        self.eval(&js).await
    }

    async fn click(&mut self, selector: &str) {
        self.wait_for(&format!("document.querySelector({selector:?})")).await;
        self.eval(&format!("document.querySelector({selector:?}).click()")).await;
    }

    async fn text(&mut self, selector: &str) -> String {
        self.eval(&format!("document.querySelector({selector:?}).textContent"))
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_designer_playtests_in_the_browser() {
    let Some(exe) = chromium() else {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI tests the console in chromium: install it");
        eprintln!("SKIPPED: no chromium on this machine (.ci/run installs it)");
        return;
    };
    let root = copy_of(&["config/pirate.yaml", "scripts/pirate", "prompts/pirate"]);
    let server = start_with(root.path(), "memory", &[], &["--watch"]);
    let mut b = Browser::launch(&exe).await;
    b.call("Page.navigate", json!({"url": format!("{}/", server.url)})).await;

    // Pick the pack, open a session, play a turn with the keyboard shortcut.
    b.click("button.pack[data-pack='pirate']").await;
    b.click("#open").await;
    b.wait_for("!document.getElementById('play').hidden").await;
    b.eval(
        "const i = document.getElementById('input'); i.value = 'Ahoy, captain! I am the harbour master\\'s daughter.';
         i.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', ctrlKey: true, bubbles: true}))",
    )
    .await;
    // The breakdown: the route, each node, the judge's call; the state's changes highlighted.
    b.wait_for("document.querySelector('#breakdown .route')").await;
    let route = b.text("#breakdown .route").await;
    assert!(route.contains("intake › merit_check › generate_response › validate_response"), "{route}");
    assert!(b.text("#breakdown").await.contains("merit_check: judge on standin"));
    b.wait_for("document.querySelector(\"#state .field.changed[data-field='merit_score']\")").await;
    let game = b.text("#conversation .msg.game").await;
    assert!(!game.is_empty(), "the captain answered");
    assert!(b.text("#timeline").await.contains("route validate_response → END"));
    b.wait_for("document.querySelectorAll('#checkpoints .checkpoint').length == 2").await;

    // A rule changes on disk: the reload shows; a replay on the edited rules shows what changed.
    b.wait_for("document.getElementById('reloads').textContent.includes('watching')").await;
    let manifest = root.path().join("config/pirate.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replacen("conversation length x 2", "conversation length x 2 (edited)", 1)).unwrap();
    let reload = b.wait_for("document.querySelector('#reloads .reload.ok') && document.querySelector('#reloads .reload.ok').textContent").await;
    assert!(reload.as_str().unwrap().starts_with("pirate reloaded (version"), "{reload}");
    b.click("#replay-btn").await;
    let replayed = b
        .wait_for("document.querySelector('#replay .replay-turn') && document.getElementById('replay').textContent")
        .await;
    assert!(replayed.as_str().unwrap().contains("0 of 1 turn(s) changed"), "{replayed}");
    assert!(replayed.as_str().unwrap().contains("turn 1: unchanged"), "{replayed}");

    // Fork from the start: a new session, said so, with no turns.
    let first = b.text("#sid").await;
    b.click("#checkpoints button.fork[data-seq='0']").await;
    let forked = b
        .wait_for(&format!(
            "document.getElementById('sid').textContent != {first:?} && document.getElementById('forked').textContent"
        ))
        .await;
    assert!(forked.as_str().unwrap().contains(&format!("forked from {first} at checkpoint 0")), "{forked}");
    assert_eq!(b.eval("document.querySelectorAll('#conversation .msg').length").await, json!(0));
}

//! A headless Chromium (Debian's `chromium`, or `RULEWEAVE_CHROMIUM`) driven over the DevTools
//! protocol, for the tests of faces a person sees in a browser: open a page, evaluate in it,
//! click, wait until a condition holds (on the page's own changes, bounded), take screenshots.
//! [`chromium`] is the one rule for a machine without one: CI fails, a developer's machine skips.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// The browser to drive: `RULEWEAVE_CHROMIUM`, else `chromium` on the PATH; without one, `None`,
/// by the kit's one rule ([`crate::lacking`]: CI fails, a developer's machine skips).
pub fn chromium() -> Option<String> {
    let exe = std::env::var("RULEWEAVE_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let found = Command::new(&exe).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if found.is_ok_and(|s| s.success()) {
        return Some(exe);
    }
    crate::lacking("no chromium on this machine", "CI tests the browser faces in it", "this browser test did not run");
    None
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A headless Chromium and a connection to its one page; the browser is killed when dropped.
pub struct Browser {
    child: Child,
    ws: Socket,
    next: u64,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts `exe` headless, in a profile of its own, and connects to its page.
    pub async fn launch(exe: &str) -> Browser {
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
        // The page's own socket is the browser's, at `/devtools/page/<its target id>`.
        let (mut browser, _) = tokio_tungstenite::connect_async(browser_url.as_str()).await.unwrap();
        let targets = call(&mut browser, 1, "Target.getTargets", json!({})).await;
        let page =
            targets["targetInfos"].as_array().unwrap().iter().find(|t| t["type"] == "page").expect("a page").clone();
        let base = browser_url.split("/devtools/").next().unwrap();
        let page_url = format!("{base}/devtools/page/{}", page["targetId"].as_str().unwrap());
        let (ws, _) = tokio_tungstenite::connect_async(page_url.as_str()).await.unwrap();
        Browser { child, ws, next: 0, _profile: profile }
    }

    /// Sends a DevTools command and returns its result (events on the way are skipped).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        call(&mut self.ws, self.next, method, params).await
    }

    /// Evaluates `js` in the page (awaiting a promise) and returns its value.
    pub async fn eval(&mut self, js: &str) -> Value {
        let r =
            self.call("Runtime.evaluate", json!({"expression": js, "awaitPromise": true, "returnByValue": true})).await;
        assert!(r.get("exceptionDetails").is_none(), "{js}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Waits (at most 30 s) until `condition`, a JS expression, is truthy: checked each time the
    /// page changes, not on a timer.
    pub async fn wait_for(&mut self, condition: &str) -> Value {
        self.wait_for_within(condition, 30).await
    }

    /// [`Browser::wait_for`], bounded at `seconds` (work the server does at an unoptimised
    /// build's pace, beside the other tests).
    pub async fn wait_for_within(&mut self, condition: &str, seconds: u32) -> Value {
        let ms = seconds * 1000;
        let js = format!(
            "new Promise((resolve, reject) => {{
               const check = () => {{ try {{ const v = ({condition}); if (v) {{ obs.disconnect(); clearTimeout(t); resolve(v); }} }} catch (_) {{}} }};
               const obs = new MutationObserver(check);
               obs.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
               const t = setTimeout(() => {{ obs.disconnect(); reject(new Error('timed out waiting for: ' + {cond:?})); }}, {ms});
               check();
             }})",
            cond = condition
        );
        self.eval(&js).await
    }

    /// Clicks the element `selector` names, once it is there.
    pub async fn click(&mut self, selector: &str) {
        self.wait_for(&format!("document.querySelector({selector:?})")).await;
        self.eval(&format!("document.querySelector({selector:?}).click()")).await;
    }

    /// The text of the element `selector` names.
    pub async fn text(&mut self, selector: &str) -> String {
        self.eval(&format!("document.querySelector({selector:?}).textContent"))
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Saves a PNG of the page as a person sees it at `path`.
    pub async fn screenshot(&mut self, path: &Path) {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"})).await;
        let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }

    /// Sets the window's size (the screenshots').
    pub async fn size(&mut self, width: u32, height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await;
    }
}

/// Sends command `id` on `ws` and returns its result (events on the way are skipped).
async fn call(ws: &mut Socket, id: u64, method: &str, params: Value) -> Value {
    ws.send(Message::Text(json!({"id": id, "method": method, "params": params}).to_string().into())).await.unwrap();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(300), ws.next()).await.expect("the browser answers");
        let Some(Ok(Message::Text(text))) = msg else { continue };
        let v: Value = serde_json::from_str(&text).unwrap();
        if v["id"] == id {
            assert!(v.get("error").is_none(), "{method}: {v}");
            return v["result"].clone();
        }
    }
}

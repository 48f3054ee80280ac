//! Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! commands in on fd 3, replies out on fd 4, each message JSON ended by a NUL byte), for
//! pages whose state comes over a connection that Chromium's load tracking does not wait
//! for: a live dashboard keeps an event stream open, so `--dump-dom` would dump before the
//! first update and `--virtual-time-budget` would wait forever; the browser test's page
//! writes a WebSocket echo, which virtual time does not wait for. A shell maps the pipe onto
//! our stdin and stdout.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

use super::chromium::Chromium;

/// Longest one command may take to answer (a loaded 2-core machine included).
const REPLY_LIMIT: Duration = Duration::from_secs(30);

/// A browser with one page open.
pub struct Session {
    child: Child,
    commands: ChildStdin,
    replies: mpsc::Receiver<Value>,
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Session {
    /// Starts Chromium with a `width` x `height` window and opens `url` in it.
    pub fn open(browser: &Chromium, url: &str, width: u32, height: u32) -> Session {
        let profile = tempfile::tempdir().expect("a temporary profile directory");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2"#)
            .arg(browser.path())
            .args(Chromium::FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={width},{height}"))
            .args([
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                "about:blank",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.path().display()));
        let commands = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, replies) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop();
                if let Ok(value) = serde_json::from_slice::<Value>(&message) {
                    if sender.send(value).is_err() {
                        break;
                    }
                }
                message.clear();
            }
        });
        let mut session = Session {
            child,
            commands,
            replies,
            session: String::new(),
            next_id: 0,
            _profile: profile,
        };
        let target = session.call("Target.createTarget", json!({ "url": "about:blank" }));
        let target = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = session.call(
            "Target.attachToTarget",
            json!({ "targetId": target, "flatten": true }),
        );
        session.session = attached["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        session.call("Page.enable", json!({}));
        session.call("Page.navigate", json!({ "url": url }));
        session
    }

    /// Sends one command (to the page once attached) and waits for its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("JSON");
        bytes.push(0);
        self.commands
            .write_all(&bytes)
            .unwrap_or_else(|e| panic!("chromium's pipe: {e}"));
        let deadline = Instant::now() + REPLY_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = self
                .replies
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to {method} within {REPLY_LIMIT:?}: {e}"));
            if reply["id"] == json!(id) {
                if let Some(error) = reply.get("error") {
                    panic!("{method} failed: {error}");
                }
                return reply["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        result["result"]["value"].clone()
    }

    /// The page's DOM as HTML now.
    pub fn dom(&mut self) -> String {
        self.eval("document.documentElement.outerHTML")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The text of the element with `id`, if there is one.
    pub fn text(&mut self, id: &str) -> Option<String> {
        let expression = format!(
            "(e => e ? e.textContent : null)(document.getElementById({}))",
            json!(id)
        );
        self.eval(&expression).as_str().map(str::to_owned)
    }

    /// Waits until the text of the element with `id` satisfies `ready` and returns it, or
    /// panics with the page's DOM after `limit`.
    pub fn wait_for_text(
        &mut self,
        id: &str,
        ready: impl Fn(&str) -> bool,
        limit: Duration,
    ) -> String {
        let started = Instant::now();
        loop {
            if let Some(text) = self.text(id).filter(|text| ready(text)) {
                return text;
            }
            if started.elapsed() > limit {
                let dom = self.dom();
                panic!("#{id} did not change as awaited within {limit:?}:\n{dom}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the page's `updates` counter reaches `n`, or panics after `limit`.
    pub fn wait_for_updates(&mut self, n: u64, limit: Duration) -> u64 {
        let started = Instant::now();
        loop {
            let seen = self.updates();
            if seen >= n {
                return seen;
            }
            if started.elapsed() > limit {
                let dom = self.dom();
                panic!("the page showed {seen} updates, not {n}, within {limit:?}:\n{dom}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The page's `updates` counter.
    pub fn updates(&mut self) -> u64 {
        self.text("updates")
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    }

    /// A PNG of the page's viewport.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        let data = shot["data"].as_str().expect("base64 image data");
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("valid base64")
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! A minimal Chrome DevTools Protocol client: one WebSocket to the browser, commands matched to
//! responses by `id`, one flattened session per page (`sessionId` on every frame), and the few
//! page events the browser test reads (console, exceptions, log entries, WebSocket handshakes).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::{timeout, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long any single wait in the browser test may take.
pub const WAIT: Duration = Duration::from_secs(20);
/// How often a DOM condition is re-checked while waiting for it.
const POLL: Duration = Duration::from_millis(20);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// The browser-level DevTools connection. Dropping it stops the reader task.
pub struct Cdp {
    writer: tokio::sync::Mutex<SplitSink<Socket, Message>>,
    /// Each command's response is handed to its caller here; the reader drops every sender when
    /// the socket ends, so a caller waiting on a dead browser fails at once instead of timing out.
    pending: Pending,
    next_id: AtomicU64,
    /// Page events worth showing when a test fails, and WebSocket handshake events.
    events: Arc<Mutex<Vec<Value>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Cdp {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Cdp {
    /// Connects to the browser's DevTools WebSocket (`ws://127.0.0.1:PORT/devtools/browser/…`).
    pub async fn connect(url: &str) -> Result<Arc<Cdp>, String> {
        let (socket, _) = timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .map_err(|_| format!("DevTools socket {url} did not open within {WAIT:?}"))?
            .map_err(|e| format!("DevTools socket {url}: {e}"))?;
        let (writer, mut reader) = socket.split();
        let pending: Pending = Arc::default();
        let events: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (route_pending, route_events) = (pending.clone(), events.clone());
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = reader.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(id) = frame["id"].as_u64() {
                    let waiter = route_pending.lock().unwrap().remove(&id);
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(frame);
                    }
                } else if frame["method"].as_str().is_some_and(is_recorded_event) {
                    route_events.lock().unwrap().push(frame);
                }
            }
            route_pending.lock().unwrap().clear();
        });
        Ok(Arc::new(Cdp {
            writer: tokio::sync::Mutex::new(writer),
            pending,
            next_id: AtomicU64::new(1),
            events,
            reader,
        }))
    }

    /// Sends one command (to the browser, or to a page's session) and returns its `result`.
    pub async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            frame["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let sent = self
            .writer
            .lock()
            .await
            .send(Message::text(frame.to_string()))
            .await;
        if let Err(e) = sent {
            self.pending.lock().unwrap().remove(&id);
            return Err(format!("{method}: DevTools socket write failed: {e}"));
        }
        let reply = match timeout(WAIT, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => return Err(format!("{method}: the browser went away")),
            Err(_) => {
                self.pending.lock().unwrap().remove(&id);
                return Err(format!("{method}: no answer within {WAIT:?}"));
            }
        };
        match reply.get("error") {
            Some(error) => Err(format!("{method}: {error}")),
            None => Ok(reply["result"].clone()),
        }
    }

    /// Opens a new tab and attaches a flattened session to it.
    pub async fn new_page(self: &Arc<Self>) -> Result<Page, String> {
        let target = self
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .ok_or("Target.attachToTarget gave no sessionId")?
            .to_owned();
        let page = Page {
            cdp: self.clone(),
            session,
            extra_logs: Arc::default(),
        };
        for domain in [
            "Page.enable",
            "Runtime.enable",
            "Log.enable",
            "Network.enable",
        ] {
            page.call(domain, json!({})).await?;
        }
        Ok(page)
    }
}

fn is_recorded_event(method: &str) -> bool {
    matches!(
        method,
        "Runtime.consoleAPICalled"
            | "Runtime.exceptionThrown"
            | "Log.entryAdded"
            | "Inspector.targetCrashed"
            | "Network.webSocketCreated"
            | "Network.webSocketWillSendHandshakeRequest"
            | "Network.webSocketHandshakeResponseReceived"
            | "Network.webSocketFrameError"
            | "Network.webSocketClosed"
            | "Network.loadingFailed"
    )
}

/// One tab, driven through its DevTools session.
pub struct Page {
    cdp: Arc<Cdp>,
    session: String,
    /// Log files (label, path) whose tails are added to a failure message, e.g. the server's.
    extra_logs: Arc<Mutex<Vec<(String, PathBuf)>>>,
}

impl Page {
    /// Sends one command to this page's session.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        self.cdp.call(Some(&self.session), method, params).await
    }

    /// Adds a log file whose tail is shown when a wait on this page fails.
    pub fn add_log(&self, label: &str, path: PathBuf) {
        self.extra_logs
            .lock()
            .unwrap()
            .push((label.to_owned(), path));
    }

    /// The recorded events of this page with the given method name.
    pub fn events(&self, method: &str) -> Vec<Value> {
        self.cdp
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["sessionId"] == self.session.as_str() && e["method"] == method)
            .map(|e| e["params"].clone())
            .collect()
    }

    /// Waits until this page has recorded an event `method` whose params satisfy `matches`.
    pub async fn wait_for_event(
        &self,
        what: &str,
        method: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(found) = self.events(method).into_iter().find(|e| matches(e)) {
                return found;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("timed out after {WAIT:?} waiting for {what}"))
                    .await
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Page-side failures so far: uncaught exceptions and `console.error` calls.
    pub fn page_errors(&self) -> Vec<String> {
        let mut errors: Vec<String> = self
            .events("Runtime.exceptionThrown")
            .iter()
            .map(describe_exception)
            .collect();
        errors.extend(
            self.events("Runtime.consoleAPICalled")
                .iter()
                .filter(|c| c["type"] == "error")
                .map(describe_console_call),
        );
        errors
    }

    /// Evaluates a JavaScript expression (promises awaited) and returns its JSON value.
    pub async fn eval(&self, expression: &str) -> Result<Value, String> {
        let reply = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(details) = reply.get("exceptionDetails") {
            return Err(format!(
                "`{expression}` threw: {}",
                describe_exception(details)
            ));
        }
        Ok(reply["result"]["value"].clone())
    }

    /// Polls `expression` until it yields a truthy value, which is returned. Fails the test
    /// with the page's text, console and logs after [`WAIT`].
    pub async fn wait_for(&self, what: &str, expression: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let last = self.eval(expression).await;
            match &last {
                Ok(value) if truthy(value) => return value.clone(),
                _ if Instant::now() >= deadline => {
                    self.fail(&format!(
                        "timed out after {WAIT:?} waiting for {what}; last check gave {last:?}"
                    ))
                    .await
                }
                _ => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// Fails the test with `message` and everything known about the page.
    pub async fn fail(&self, message: &str) -> ! {
        panic!("{message}\n{}", self.diagnostics().await)
    }

    /// The page's visible text, its console and exceptions, and the attached logs' tails.
    pub async fn diagnostics(&self) -> String {
        let text = match timeout(
            Duration::from_secs(3),
            self.eval("document.body?.innerText ?? ''"),
        )
        .await
        {
            Ok(Ok(text)) => text.as_str().unwrap_or_default().to_owned(),
            Ok(Err(e)) => format!("<unavailable: {e}>"),
            Err(_) => "<unavailable: the page did not answer>".to_owned(),
        };
        let mut out = format!("--- page text ---\n{text}\n--- page console ---\n");
        for frame in self.cdp.events.lock().unwrap().iter() {
            if frame["sessionId"] != self.session.as_str() {
                continue;
            }
            let p = &frame["params"];
            let line = match frame["method"].as_str().unwrap_or_default() {
                "Runtime.consoleAPICalled" => describe_console_call(p),
                "Runtime.exceptionThrown" => describe_exception(p),
                "Log.entryAdded" => format!(
                    "{} ({}): {}",
                    p["entry"]["level"].as_str().unwrap_or("log"),
                    p["entry"]["url"].as_str().unwrap_or("?"),
                    p["entry"]["text"].as_str().unwrap_or_default()
                ),
                "Inspector.targetCrashed" => "the page crashed".to_owned(),
                _ => continue,
            };
            out.push_str(&line);
            out.push('\n');
        }
        for (label, path) in self.extra_logs.lock().unwrap().iter() {
            out.push_str(&log_tail(label, path));
        }
        out
    }

    /// Loads `url` in a new document and waits until that document has finished loading (the
    /// old one is marked first, so its own `complete` state is never mistaken for the new one).
    pub async fn navigate(&self, url: &str) {
        if let Err(e) = self.eval("window.__replacedByNavigation = true").await {
            self.fail(&format!("marking the current document: {e}"))
                .await;
        }
        let reply = self.call("Page.navigate", json!({"url": url})).await;
        match reply {
            Ok(r) if r.get("errorText").is_none() => {}
            other => self.fail(&format!("navigating to {url}: {other:?}")).await,
        }
        self.wait_for(
            &format!("{url} to load"),
            "document.readyState === 'complete' && window.__replacedByNavigation === undefined",
        )
        .await;
    }

    /// Clicks an element the way a person would: a real mouse press and release at its
    /// centre, once it is visible, enabled and not covered by another element.
    pub async fn click(&self, selector: &str) {
        let sel = serde_json::to_string(selector).unwrap();
        let point = self
            .wait_for(
                &format!("{selector} to be clickable"),
                &format!(
                    "(() => {{ const el = document.querySelector({sel}); \
                     if (!el || el.disabled || el.closest('[hidden]')) return null; \
                     el.scrollIntoView({{block: 'center'}}); \
                     const r = el.getBoundingClientRect(); \
                     if (r.width === 0 || r.height === 0) return null; \
                     const x = r.left + r.width / 2, y = r.top + r.height / 2; \
                     const hit = document.elementFromPoint(x, y); \
                     return hit && (hit === el || el.contains(hit)) ? {{x, y}} : null; }})()"
                ),
            )
            .await;
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            let params = json!({
                "type": kind, "x": point["x"], "y": point["y"], "button": "left", "clickCount": 1,
            });
            if let Err(e) = self.call("Input.dispatchMouseEvent", params).await {
                self.fail(&format!("clicking {selector}: {e}")).await;
            }
        }
    }

    /// Clicks a text field and types `text` into it, as a keyboard would insert it.
    pub async fn type_into(&self, selector: &str, text: &str) {
        self.click(selector).await;
        if let Err(e) = self.call("Input.insertText", json!({"text": text})).await {
            self.fail(&format!("typing into {selector}: {e}")).await;
        }
    }

    /// Presses and releases Enter in the focused element.
    pub async fn press_enter(&self) {
        for kind in ["keyDown", "keyUp"] {
            let mut params = json!({
                "type": kind, "key": "Enter", "code": "Enter",
                "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13,
            });
            if kind == "keyDown" {
                params["text"] = json!("\r");
            }
            if let Err(e) = self.call("Input.dispatchKeyEvent", params).await {
                self.fail(&format!("pressing Enter: {e}")).await;
            }
        }
    }

    /// Puts a file on an `<input type=file>`, as choosing it in the file dialog would.
    pub async fn set_file_input(&self, selector: &str, path: &std::path::Path) {
        let result: Result<Value, String> = async {
            let doc = self.call("DOM.getDocument", json!({"depth": 0})).await?;
            let node = self
                .call(
                    "DOM.querySelector",
                    json!({"nodeId": doc["root"]["nodeId"], "selector": selector}),
                )
                .await?;
            self.call(
                "DOM.setFileInputFiles",
                json!({"nodeId": node["nodeId"], "files": [path]}),
            )
            .await
        }
        .await;
        if let Err(e) = result {
            self.fail(&format!("setting {selector} to {}: {e}", path.display()))
                .await;
        }
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let shot = match self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await
        {
            Ok(shot) => shot,
            Err(e) => self.fail(&format!("screenshot: {e}")).await,
        };
        let data = shot["data"].as_str().unwrap_or_default();
        data_encoding::BASE64
            .decode(data.as_bytes())
            .expect("the screenshot is base64")
    }
}

/// The last lines of a log file, headed by `label`, for a failure message.
pub fn log_tail(label: &str, path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    // Headless Chromium on a machine without a session bus complains about D-Bus at every
    // start; those lines say nothing about the page.
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| !l.contains(":ERROR:dbus/"))
        .collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    format!("--- {label} (last lines) ---\n{tail}\n")
}

/// JavaScript truthiness of a JSON value returned by `Runtime.evaluate`.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn describe_console_call(call: &Value) -> String {
    let args: Vec<String> = call["args"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|a| match &a["value"] {
            Value::String(s) => s.clone(),
            Value::Null => a["description"].as_str().unwrap_or("?").to_owned(),
            other => other.to_string(),
        })
        .collect();
    format!(
        "console.{}: {}",
        call["type"].as_str().unwrap_or("log"),
        args.join(" ")
    )
}

fn describe_exception(details: &Value) -> String {
    let details = details.get("exceptionDetails").unwrap_or(details);
    let text = details["exception"]["description"]
        .as_str()
        .or_else(|| details["text"].as_str())
        .unwrap_or("exception");
    format!("uncaught: {text}")
}

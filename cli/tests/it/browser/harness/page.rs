//! One browser tab driven through its DevTools session: evaluate, wait for a DOM condition with a
//! deadline, click and type as a person would, choose a file, take a screenshot, and explain a
//! failure with the page's text, console and the attached logs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::{timeout, Instant};

use super::cdp::Cdp;
use super::wait::WAIT;

/// How often a DOM condition is re-checked while waiting for it.
const POLL: Duration = Duration::from_millis(20);

/// One tab, driven through its DevTools session.
pub(crate) struct Page {
    cdp: Arc<Cdp>,
    session: String,
    /// Log files (label, path) whose tails are added to a failure message, e.g. the server's.
    extra_logs: Arc<Mutex<Vec<(String, PathBuf)>>>,
}

impl Page {
    /// Opens a new tab and attaches a flattened session to it.
    pub(super) async fn open(cdp: &Arc<Cdp>) -> Result<Page, String> {
        let target = cdp
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let attached = cdp
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
        let page = Page::new(cdp.clone(), session);
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

    pub(super) fn new(cdp: Arc<Cdp>, session: String) -> Page {
        Page {
            cdp,
            session,
            extra_logs: Arc::default(),
        }
    }

    /// Sends one command to this page's session.
    pub(crate) async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        self.cdp.call(Some(&self.session), method, params).await
    }

    /// Adds a log file whose tail is shown when a wait on this page fails.
    pub(crate) fn add_log(&self, label: &str, path: PathBuf) {
        self.extra_logs
            .lock()
            .unwrap()
            .push((label.to_owned(), path));
    }

    /// The recorded events of this page with the given method name (their `params`).
    pub(crate) fn events(&self, method: &str) -> Vec<Value> {
        self.cdp
            .session_events(&self.session)
            .into_iter()
            .filter(|e| e["method"] == method)
            .map(|e| e["params"].clone())
            .collect()
    }

    /// Waits until this page has recorded an event `method` whose params satisfy `matches`.
    pub(crate) async fn wait_for_event(
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
    pub(crate) fn page_errors(&self) -> Vec<String> {
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
    pub(crate) async fn eval(&self, expression: &str) -> Result<Value, String> {
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
    pub(crate) async fn wait_for(&self, what: &str, expression: &str) -> Value {
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
    pub(crate) async fn fail(&self, message: &str) -> ! {
        panic!("{message}\n{}", self.diagnostics().await)
    }

    /// The page's visible text, its console and exceptions, and the attached logs' tails.
    pub(crate) async fn diagnostics(&self) -> String {
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
        for frame in self.cdp.session_events(&self.session) {
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
    pub(crate) async fn navigate(&self, url: &str) {
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
    pub(crate) async fn click(&self, selector: &str) {
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
    pub(crate) async fn type_into(&self, selector: &str, text: &str) {
        self.click(selector).await;
        if let Err(e) = self.call("Input.insertText", json!({"text": text})).await {
            self.fail(&format!("typing into {selector}: {e}")).await;
        }
    }

    /// Presses and releases Enter in the focused element.
    pub(crate) async fn press_enter(&self) {
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
    pub(crate) async fn set_file_input(&self, selector: &str, path: &Path) {
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
    pub(crate) async fn screenshot(&self) -> Vec<u8> {
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
pub(crate) fn log_tail(label: &str, path: &Path) -> String {
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

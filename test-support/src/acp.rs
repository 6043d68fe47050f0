//! A client of carrier's `/acp` profile, written from ACP v1's public schema (JSON-RPC 2.0, one
//! message per text frame): requests with its own integer ids, and waits for the messages it
//! expects, keeping the others in order. Every message it reads and writes can be kept in a
//! recording ([`AcpClient::recording`]), which the schema check validates.

use std::collections::VecDeque;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::agent::Ended;
use crate::common::{Ws, WAIT};
use crate::stash::Stashed;
use std::process::{ExitStatus, Stdio};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// One message of a recording: which way it went and the message as it was on the wire.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `"in"`: carrier sent it; `"out"`: the client did.
    pub direction: &'static str,
    /// The text frame.
    pub text: String,
}

/// A connection to `/acp`.
pub struct AcpClient {
    /// The WebSocket, for reads and writes the helpers do not cover.
    pub ws: Ws,
    stash: VecDeque<Value>,
    binary: VecDeque<bytes::Bytes>,
    next_id: i64,
    recording: Option<Vec<Recorded>>,
}

impl AcpClient {
    /// Connects to `url` (a `ws://…/acp` URL with its token); panics if it cannot.
    pub async fn connect(url: &str) -> AcpClient {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect timed out")
            .expect("connect");
        AcpClient {
            ws,
            stash: VecDeque::new(),
            binary: VecDeque::new(),
            next_id: 0,
            recording: None,
        }
    }

    /// Connects and runs `initialize`; returns the client and the result.
    pub async fn initialized(url: &str) -> (AcpClient, Value) {
        let mut c = AcpClient::connect(url).await;
        let result = c.initialize().await;
        (c, result)
    }

    /// Keeps every message from now on for [`AcpClient::recording`].
    pub fn record(&mut self) {
        self.recording = Some(Vec::new());
    }

    /// The messages kept since [`AcpClient::record`].
    pub fn recording(&self) -> &[Recorded] {
        self.recording.as_deref().unwrap_or_default()
    }

    /// Sends one text frame as is.
    pub async fn send_raw(&mut self, text: &str) {
        if let Some(r) = &mut self.recording {
            r.push(Recorded {
                direction: "out",
                text: text.to_owned(),
            });
        }
        self.ws
            .send(Message::text(text.to_owned()))
            .await
            .expect("send");
    }

    /// Sends one message.
    pub async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    /// Sends a request and returns its id (without waiting for the answer).
    pub async fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Sends a request and waits for its answer (`{result}` or `{error}`, the whole
    /// response); what came before it stays stashed.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.response(id).await
    }

    /// [`AcpClient::call`] that must succeed: its `result`.
    pub async fn ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params).await;
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// `initialize` with protocol version 1.
    pub async fn initialize(&mut self) -> Value {
        self.ok(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "carrier-tests", "version": "0"}}),
        )
        .await
    }

    /// `session/new`: the new session's id.
    pub async fn new_session(&mut self) -> String {
        let result = self
            .ok("session/new", json!({"cwd": "/tmp", "mcpServers": []}))
            .await;
        result["sessionId"]
            .as_str()
            .expect("a sessionId")
            .to_owned()
    }

    /// `session/load`: the updates replayed before its answer, in order.
    pub async fn load_session(&mut self, session_id: &str) -> Vec<Value> {
        let id = self
            .send_request(
                "session/load",
                json!({"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}),
            )
            .await;
        let mut replayed = Vec::new();
        loop {
            let m = self.next().await;
            if m["id"] == id {
                assert_eq!(m["result"], json!({}), "session/load: {m}");
                return replayed;
            }
            assert_eq!(m["method"], "session/update", "during session/load: {m}");
            replayed.push(m);
        }
    }

    /// Sends `session/prompt` with one text block; returns the request id.
    pub async fn prompt(&mut self, session_id: &str, text: &str) -> i64 {
        self.send_request(
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Every message up to and including the answer to request `id`, in order.
    pub async fn until_response(&mut self, id: i64) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let m = self.next().await;
            let done = m["id"] == id && m.get("method").is_none();
            out.push(m);
            if done {
                return out;
            }
        }
    }

    /// The answer to request `id`; messages before it stay stashed.
    pub async fn response(&mut self, id: i64) -> Value {
        self.wait_for(|m| m["id"] == id && m.get("method").is_none())
            .await
    }

    /// The next request or notification of `method`; messages before it stay stashed.
    pub async fn wait_method(&mut self, method: &str) -> Value {
        self.wait_for(|m| m["method"] == method).await
    }

    /// The first message (stashed first) that `pick` takes; the others stay stashed, in order.
    pub async fn wait_for(&mut self, pick: impl Fn(&Value) -> bool) -> Value {
        self.take(pick).await
    }

    /// The next message (stashed first).
    pub async fn next(&mut self) -> Value {
        self.take_next().await
    }

    /// Messages received but not yet consumed.
    pub fn stashed(&self) -> &VecDeque<Value> {
        &self.stash
    }

    /// Answers carrier's request `request` (a `session/request_permission`) with `option_id`.
    pub async fn choose(&mut self, request: &Value, option_id: &str) {
        self.send(json!({
            "jsonrpc": "2.0",
            "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": option_id}},
        }))
        .await;
    }

    /// Waits for the connection to end and reports how.
    pub async fn ended(&mut self) -> Ended {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("timed out waiting for the close");
            match msg {
                Some(Ok(Message::Close(Some(frame)))) => return Ended::Close(frame.code.into()),
                Some(Ok(Message::Close(None))) => return Ended::Close(1005),
                Some(Ok(Message::Text(t))) => {
                    let m = self.keep(&t);
                    self.stash.push_back(m);
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Ended::Eof,
            }
        }
    }

    /// The next binary frame; text frames before it are stashed.
    pub async fn binary(&mut self) -> bytes::Bytes {
        if let Some(b) = self.binary.pop_front() {
            return b;
        }
        loop {
            match self.frame().await {
                Message::Binary(b) => return b,
                Message::Text(t) => {
                    let m = self.keep(&t);
                    self.stash.push_back(m);
                }
                other => panic!("expected a binary frame, got {other:?}"),
            }
        }
    }

    async fn frame(&mut self) -> Message {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("timed out waiting for a frame");
            match msg {
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(m)) => return m,
                other => panic!("the connection ended: {other:?}"),
            }
        }
    }

    async fn read(&mut self) -> Value {
        loop {
            match self.frame().await {
                Message::Text(t) => return self.keep(&t),
                Message::Binary(b) => self.binary.push_back(b),
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    fn keep(&mut self, text: &str) -> Value {
        if let Some(r) = &mut self.recording {
            r.push(Recorded {
                direction: "in",
                text: text.to_owned(),
            });
        }
        let value: Value = serde_json::from_str(text).expect("carrier sent invalid JSON");
        assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC 2.0: {text}");
        value
    }
}

/// The texts of the `session/update`s of `kind` among `messages`, joined.
pub fn chunks(messages: &[Value], kind: &str) -> String {
    messages
        .iter()
        .filter(|m| {
            m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
        })
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// The `sessionUpdate` kinds of the `session/update`s among `messages`, in order.
pub fn update_kinds(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .map(str::to_owned)
        .collect()
}

/// What `acp/tests/fixtures/sdk-client.mjs` and `sdk_client.py` must have seen against the
/// embedded agent, whichever transport carried them (`loaded`: the prompt another client ran
/// in s1 before).
pub fn check_sdk_summary(summary: &Value, loaded: &str) {
    assert_eq!(summary["initialize"]["protocolVersion"], 1, "{summary}");
    assert_eq!(summary["turn"]["stopReason"], "end_turn", "{summary}");
    assert_eq!(
        summary["turn"]["text"], "echo: hello from the sdk",
        "{summary}"
    );
    assert_eq!(
        summary["permission"],
        json!({
            "asked": 1,
            "title": "demo.tool",
            "options": ["allow_once", "reject_once"],
            "stopReason": "end_turn",
            "text": "tool ran: sdk-tool",
        }),
        "{summary}"
    );
    assert_eq!(summary["cancel"]["stopReason"], "cancelled", "{summary}");
    let streamed = summary["cancel"]["text"].as_str().unwrap_or_default();
    let whole = "echo: one two three four five six seven eight nine ten";
    assert!(
        !streamed.is_empty() && whole.starts_with(streamed) && streamed != whole,
        "cancelled mid-reply: {summary}"
    );
    assert_eq!(
        summary["cancelAsked"]["stopReason"], "cancelled",
        "{summary}"
    );
    assert_eq!(
        summary["load"],
        json!({"user": loaded, "agent": format!("echo: {loaded}")}),
        "{summary}"
    );
    assert_eq!(summary["observer"]["code"], -32603, "{summary}");
    assert!(
        summary["observer"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("forbidden: observe role"),
        "{summary}"
    );
}

/// `carrier acp` as an editor runs it: a child with piped stdin and stdout, spoken to in JSON
/// lines. Every stdout line must be a JSON-RPC 2.0 message. Only `carrier-cli`'s tests use it
/// (they have the binary).
pub struct AcpStdio {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: tempfile::NamedTempFile,
    stash: VecDeque<Value>,
    next_id: i64,
    recording: Vec<Recorded>,
}

impl AcpStdio {
    /// `carrier acp ARGS…` with `env` set (and `RUST_LOG` unset, so stderr holds only what
    /// the command says).
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> AcpStdio {
        let stderr = tempfile::NamedTempFile::new().expect("temp file");
        let mut command = Command::new(crate::serve_process::carrier_bin());
        command
            .arg("acp")
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("CARRIER_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().expect("reopen"))
            .kill_on_drop(true);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("spawn carrier acp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        AcpStdio {
            child,
            stdin,
            stdout,
            stderr,
            stash: VecDeque::new(),
            next_id: 0,
            recording: Vec::new(),
        }
    }

    /// What the command wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }

    /// Every line written and read so far.
    pub fn recording(&self) -> &[Recorded] {
        &self.recording
    }

    /// Writes `bytes` to stdin as they are.
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Writes one message as one line.
    pub async fn send(&mut self, message: Value) {
        let line = message.to_string();
        self.recording.push(Recorded {
            direction: "out",
            text: line.clone(),
        });
        self.write_raw(format!("{line}\n").as_bytes()).await;
    }

    /// Sends a request and returns its id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and waits for its answer (the whole response).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.wait_for(|m| m["id"] == id && m.get("method").is_none())
            .await
    }

    /// [`AcpStdio::call`] that must succeed: its `result`.
    pub async fn ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params).await;
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// Every message up to and including the answer to request `id`, in order.
    pub async fn until_response(&mut self, id: i64) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let m = self.next().await;
            let done = m["id"] == id && m.get("method").is_none();
            out.push(m);
            if done {
                return out;
            }
        }
    }

    /// The first message (stashed first) that `pick` takes; the others stay stashed, in order.
    pub async fn wait_for(&mut self, pick: impl Fn(&Value) -> bool) -> Value {
        self.take(pick).await
    }

    /// The next message (stashed first).
    pub async fn next(&mut self) -> Value {
        self.take_next().await
    }

    async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("no stdout line in time; stderr: {}", self.stderr()))
            .expect("read stdout")
            .unwrap_or_else(|| panic!("stdout ended; stderr: {}", self.stderr()));
        self.recording.push(Recorded {
            direction: "in",
            text: line.clone(),
        });
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a stdout line that is not JSON ({e}): {line:?}"));
        assert_eq!(
            value["jsonrpc"], "2.0",
            "not JSON-RPC 2.0 on stdout: {line}"
        );
        value
    }

    /// Closes stdin, as an editor does when it is done.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the command to exit; returns its status and whatever stdout still held.
    pub async fn exit(&mut self) -> (ExitStatus, String) {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("carrier acp did not exit; stderr: {}", self.stderr()))
            .expect("wait");
        let mut rest = String::new();
        let _ = self.stdout.get_mut().read_to_string(&mut rest).await;
        (status, rest)
    }
}

/// The embedded demo agent with prompts more, for what it never does on its own: `/fail` ends
/// the turn on an error (`session.error`, then an aborted `turn_completed`); `/asks N` asks `N`
/// permissions at once and then waits for the turn to be cancelled; `/updates` acts as an ACP
/// agent does ([`ACP_UPDATES`] as agent updates, a permission offering ACP's four options for
/// its tool call, a reply naming the option chosen, and the stop reason `max_tokens`).
pub fn test_agent(delay: std::time::Duration) -> carrier::agent::AgentProfile {
    use carrier::agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
    let embedded = EmbeddedAgent::default().with_demo_delay(delay);
    AgentProfile::builder(InMemoryDirectory::new(move |_| {
        std::sync::Arc::new(TestAgent {
            inner: embedded.session(),
        })
    }))
    .build()
}

/// What the test agent's `/updates` reports, one of each kind of ACP update carrier forwards
/// (written with the keys in an order no serializer of carrier's would pick, so a client can
/// tell they arrive byte for byte).
pub const ACP_UPDATES: &[&str] = &[
    r#"{"toolCallId":"call_1","sessionUpdate":"tool_call","title":"Read a file","kind":"read","status":"pending","rawInput":{"path":"/tmp/x"}}"#,
    r#"{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"in_progress"}"#,
    r#"{"sessionUpdate":"plan","entries":[{"content":"look","priority":"high","status":"pending"}]}"#,
    r#"{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}"#,
    r#"{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"web","description":"Search the web"}]}"#,
    r#"{"sessionUpdate":"current_mode_update","currentModeId":"ask"}"#,
    r#"{"sessionUpdate":"usage_update","used":53000,"size":200000}"#,
];

struct TestAgent {
    inner: std::sync::Arc<dyn carrier::agent::ProtocolSession>,
}

impl carrier::agent::ProtocolSession for TestAgent {
    fn start_turn(&self, turn: carrier::agent::TurnStart) -> Result<(), carrier::agent::HostError> {
        if turn.prompt == "/fail" {
            let sink = turn.sink;
            tokio::spawn(async move {
                let _ = sink.delta("partial");
                let _ = sink.fail("agent_exited", "the test agent went away");
            });
            return Ok(());
        }
        if turn.prompt == "/updates" {
            let sink = turn.sink;
            tokio::spawn(async move {
                for update in ACP_UPDATES {
                    let raw = serde_json::value::RawValue::from_string((*update).to_owned())
                        .expect("an update is JSON");
                    let object = carrier::protocol::events::RawObject::new(raw).expect("an object");
                    if sink.agent_update(object).is_err() {
                        return;
                    }
                }
                let tool_call: Value = serde_json::from_str(ACP_UPDATES[0]).expect("JSON");
                let options = ["allow_once", "allow_always", "reject_once", "reject_always"]
                    .iter()
                    .map(|kind| {
                        serde_json::from_value(
                            json!({"optionId": format!("opt-{kind}"), "name": kind, "kind": kind}),
                        )
                        .expect("an option")
                    })
                    .collect();
                let asked = sink.ask_permission_offering(None, "Read a file", tool_call, options);
                let Ok(choice) = asked.choice().await else {
                    return;
                };
                let chosen = choice
                    .option_id
                    .unwrap_or_else(|| format!("{:?}", choice.decision));
                let _ = sink.delta(&format!("chose {chosen}"));
                let _ = sink.finish_streamed("max_tokens", false);
            });
            return Ok(());
        }
        if let Some(n) = turn.prompt.strip_prefix("/asks ") {
            let n: usize = n.trim().parse().unwrap_or(1);
            let sink = turn.sink;
            tokio::spawn(async move {
                let asked: Vec<_> = (0..n)
                    .map(|i| sink.ask_permission("test.tool", json!({ "i": i })))
                    .collect();
                sink.cancelled().await;
                drop(asked);
            });
            return Ok(());
        }
        self.inner.start_turn(turn)
    }

    fn abort_turn(&self, turn_id: &str) {
        self.inner.abort_turn(turn_id);
    }

    fn permission_decided(
        &self,
        turn_id: &str,
        request_id: &str,
        decision: carrier::agent::Decision,
    ) {
        self.inner.permission_decided(turn_id, request_id, decision);
    }

    fn history(&self, limit: Option<u32>) -> Option<carrier::agent::AgentAnswer> {
        self.inner.history(limit)
    }

    fn status(&self) -> Option<carrier::agent::AgentAnswer> {
        self.inner.status()
    }

    fn shutdown(&self) {
        self.inner.shutdown();
    }
}

/// Writes recordings as the schema check reads them (`acp/tests/fixtures/validate.mjs`): JSON
/// lines `{"from": "carrier" | "peer", "text": …}`.
pub fn write_recording(path: &std::path::Path, recording: &[Recorded]) {
    let mut out = String::new();
    for r in recording {
        let from = if r.direction == "in" {
            "carrier"
        } else {
            "peer"
        };
        out.push_str(&json!({"from": from, "text": r.text}).to_string());
        out.push('\n');
    }
    std::fs::write(path, out).expect("write the recording");
}

/// Runs the schema check over `files` (carrier as ACP `agent` or `client`); returns what it
/// saw (its summary), having asserted that every message carrier sent is valid.
pub fn validate_recordings(carrier_is: &str, files: &[std::path::PathBuf]) -> Value {
    let fixtures = crate::node::acp_fixtures();
    let mut node = std::process::Command::new("node");
    node.arg("validate.mjs")
        .args(["--carrier-is", carrier_is])
        .args(files)
        .current_dir(&fixtures);
    let out = crate::node::run(node, "node validate.mjs");
    let summary: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the schema check printed no summary ({e}):\n{}",
            out.report()
        )
    });
    assert!(
        out.success,
        "messages carrier sent fail ACP v1's schema:\n{}",
        serde_json::to_string_pretty(&summary["failures"]).unwrap_or_default()
    );
    summary
}

impl Stashed for AcpClient {
    fn stash(&mut self) -> &mut VecDeque<Value> {
        &mut self.stash
    }

    async fn read_one(&mut self) -> Value {
        self.read().await
    }
}

impl Stashed for AcpStdio {
    fn stash(&mut self) -> &mut VecDeque<Value> {
        &mut self.stash
    }

    async fn read_one(&mut self) -> Value {
        self.read().await
    }
}

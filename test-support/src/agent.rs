//! The agent-protocol side: a JSON client over `tokio-tungstenite` that handshakes, sends
//! requests and waits for specific frames with timeouts (never sleep-and-hope).

use std::collections::VecDeque;
use std::time::Duration;

use carrier::agent::{AgentProfile, EmbeddedAgent};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::common::{Ws, WAIT};
use crate::stash::Stashed;

/// The embedded agent with a demo delay.
pub fn embedded(delay: Duration) -> AgentProfile {
    AgentProfile::embedded(EmbeddedAgent::default().with_demo_delay(delay))
}

/// Handshake params for protocol 1.2 (what this build speaks), merged with `extra`.
pub fn handshake_params(extra: Value) -> Value {
    let mut p = json!({
        "protocol_version": "1.2",
        "min_compatible_protocol": "1.0",
        "client": {"name": "carrier-tests", "version": "0"},
    });
    if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            p.insert(k.clone(), v.clone());
        }
    }
    p
}

/// A test client: reads frames in order, stashing those a wait skipped over.
pub struct Client {
    /// The WebSocket, for reads and writes the helpers do not cover.
    pub ws: Ws,
    stash: VecDeque<Value>,
    next_id: u64,
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// A close frame with this code.
    Close(u16),
    /// The stream ended without a close frame.
    Eof,
}

impl Client {
    /// Connects to `url` (a `ws://` URL with its token); panics if it cannot.
    pub async fn connect(url: &str) -> Client {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect timed out")
            .expect("connect");
        Client {
            ws,
            stash: VecDeque::new(),
            next_id: 0,
        }
    }

    /// Sends one text frame as is.
    pub async fn send_raw(&mut self, text: &str) {
        self.ws
            .send(Message::text(text.to_owned()))
            .await
            .expect("send");
    }

    /// Sends a request and returns its id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let frame = json!({"id": id, "method": method, "params": params});
        self.send_raw(&frame.to_string()).await;
        id
    }

    /// Sends a request and waits for its response frame (`{id, result}` or `{id, error}`).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.response(&id).await
    }

    /// A request that must succeed: its `result`.
    pub async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// A request that must fail: its `error`.
    pub async fn err(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params).await;
        assert!(
            r.get("result").is_none(),
            "{method} unexpectedly succeeded: {r}"
        );
        r["error"].clone()
    }

    /// Handshakes with protocol 1.0 (plus `extra` params) and returns the result.
    pub async fn handshake(&mut self, extra: Value) -> Value {
        self.ok("system.handshake", handshake_params(extra)).await
    }

    /// Waits for the response to `id`, stashing other frames.
    pub async fn response(&mut self, id: &str) -> Value {
        self.wait_for(|f| f["id"] == id && f.get("method").is_none())
            .await
    }

    /// Waits for the next event named `name`, stashing other frames.
    pub async fn event(&mut self, name: &str) -> Value {
        self.wait_for(|f| f["event"] == name).await
    }

    /// Waits for a frame matching `pred`; frames skipped stay stashed, in order.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.take(pred).await
    }

    /// The next frame (stashed first).
    pub async fn next(&mut self) -> Value {
        self.take_next().await
    }

    /// Reads one text frame from the socket; panics on anything else or after [`WAIT`].
    async fn read(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("timed out waiting for a frame");
            match msg {
                Some(Ok(Message::Text(t))) => {
                    return serde_json::from_str(&t).expect("server sent invalid JSON")
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    /// Waits for the connection to end (skipping data frames) and reports how.
    pub async fn ended(&mut self) -> Ended {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("timed out waiting for the close");
            match msg {
                Some(Ok(Message::Close(Some(frame)))) => return Ended::Close(frame.code.into()),
                Some(Ok(Message::Close(None))) => return Ended::Close(1005),
                Some(Ok(Message::Text(t))) => {
                    if let Ok(v) = serde_json::from_str(&t) {
                        self.stash.push_back(v);
                    }
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Ended::Eof,
            }
        }
    }

    /// Every session event of `turn_id` up to and including its `turn_completed`, in order.
    pub async fn turn_events(&mut self, turn_id: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let e = self
                .wait_for(|f| {
                    f["event"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("session."))
                        && (f["payload"]["turn_id"] == turn_id
                            || f["event"] == "session.permission_resolved")
                })
                .await;
            let done = e["event"] == "session.turn_completed";
            events.push(e);
            if done {
                return events;
            }
        }
    }

    /// Submits `prompt` and returns the `turn_id`.
    pub async fn submit(&mut self, prompt: &str) -> String {
        let r = self.ok("session.submit", json!({ "prompt": prompt })).await;
        r["turn_id"].as_str().expect("turn_id").to_owned()
    }

    /// Frames received but not yet consumed.
    pub fn stashed(&self) -> &VecDeque<Value> {
        &self.stash
    }

    /// Closes the socket from the client side.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// The deltas of a list of events, concatenated.
pub fn concat_deltas(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["event"] == "session.text_delta")
        .filter_map(|e| e["payload"]["delta"].as_str())
        .collect()
}

/// The event names of a list of events.
pub fn names(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Asserts the seqs are consecutive.
pub fn assert_consecutive(events: &[Value]) {
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    for w in seqs.windows(2) {
        assert_eq!(w[1], w[0] + 1, "seqs not consecutive: {seqs:?}");
    }
}

impl Stashed for Client {
    fn stash(&mut self) -> &mut VecDeque<Value> {
        &mut self.stash
    }

    async fn read_one(&mut self) -> Value {
        self.read().await
    }
}

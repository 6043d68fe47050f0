//! A client of the seed system's own text wire (the carrier's Robota profile), written from
//! that system's public message types (`TClientMessage` / `TServerMessage` of
//! `woojubb/robota`, `packages/agent-transport-protocol/src/ws-protocol.ts`): `{type, …}` JSON
//! objects, no handshake, binary frames passed through as they come.

use std::collections::VecDeque;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::agent::Ended;
use crate::common::{Ws, WAIT};
use crate::stash::Stashed;

/// A connection speaking the seed system's wire. Reads frames in order; text frames skipped by
/// a wait stay stashed, binary frames are kept apart for [`RobotaClient::binary`].
pub struct RobotaClient {
    /// The WebSocket, for reads and writes the helpers do not cover.
    pub ws: Ws,
    stash: VecDeque<Value>,
    binary: VecDeque<Bytes>,
}

impl RobotaClient {
    /// Connects to `url` (a `ws://` URL with its token); panics if it cannot.
    pub async fn connect(url: &str) -> RobotaClient {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect timed out")
            .expect("connect");
        RobotaClient {
            ws,
            stash: VecDeque::new(),
            binary: VecDeque::new(),
        }
    }

    /// Connects and reads what the server pushes on connect: `messages`, then
    /// `execution_workspace_event`. Returns both.
    pub async fn connect_greeted(url: &str) -> (RobotaClient, Value, Value) {
        let mut c = RobotaClient::connect(url).await;
        let messages = c.next().await;
        assert_eq!(messages["type"], "messages", "first on connect: {messages}");
        let workspace = c.next().await;
        assert_eq!(
            workspace["type"], "execution_workspace_event",
            "second on connect: {workspace}"
        );
        (c, messages, workspace)
    }

    /// Sends one message.
    pub async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    /// Sends one text frame as is.
    pub async fn send_raw(&mut self, text: &str) {
        self.ws
            .send(Message::text(text.to_owned()))
            .await
            .expect("send");
    }

    /// Sends one binary frame.
    pub async fn send_binary(&mut self, data: Vec<u8>) {
        self.ws.send(Message::binary(data)).await.expect("send");
    }

    /// Sends `{type}` with `fields` and returns the next message (the answer of a read).
    pub async fn ask(&mut self, kind: &str, fields: Value) -> Value {
        let mut message = fields;
        message["type"] = json!(kind);
        self.send(message).await;
        self.next().await
    }

    /// The next text message (stashed first).
    pub async fn next(&mut self) -> Value {
        self.take_next().await
    }

    /// Waits for a message of `kind`; messages skipped stay stashed, in order.
    pub async fn wait_for(&mut self, kind: &str) -> Value {
        self.take(|m| m["type"] == kind).await
    }

    /// Every message up to and including the first of `kind`, in order (stashed first).
    pub async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let m = self.next().await;
            let done = m["type"] == kind;
            out.push(m);
            if done {
                return out;
            }
        }
    }

    /// Every message up to and including the first `complete` or `interrupted`, in order. The
    /// two that end every turn after it, as the seed system's session sends them — `thinking`
    /// off (with no `driverId`: the turn has let go of its driver) then the execution
    /// workspace snapshot — are read and checked, not returned ([`Self::until_turn_settles`]
    /// returns them).
    pub async fn until_turn_ends(&mut self) -> Vec<Value> {
        let mut out = self.until_turn_settles().await;
        out.truncate(out.len() - 2);
        out
    }

    /// Every message of a turn's end, in order: up to the first `complete` or `interrupted`,
    /// then the `thinking` off and the execution workspace snapshot that follow it (checked).
    pub async fn until_turn_settles(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let m = self.next().await;
            let done = m["type"] == "complete" || m["type"] == "interrupted";
            out.push(m);
            if done {
                break;
            }
        }
        let thinking = self.next().await;
        assert_eq!(
            thinking,
            json!({"type": "thinking", "isThinking": false}),
            "after the turn's end: {out:?}"
        );
        let workspace = self.next().await;
        assert_eq!(
            workspace["type"], "execution_workspace_event",
            "last of the turn's end: {workspace}"
        );
        assert_eq!(workspace["snapshot"]["entries"], json!([]), "{workspace}");
        out.extend([thinking, workspace]);
        out
    }

    /// Submits `prompt`, aborts the turn at its first `text_delta`, and returns every message
    /// from the submit to the turn's end (an `interrupted`, or a `complete` if the turn won; see
    /// [`Self::until_turn_ends`]).
    pub async fn submit_and_abort(&mut self, prompt: &str) -> Vec<Value> {
        self.send(json!({"type": "submit", "prompt": prompt})).await;
        let mut seen = self.until("text_delta").await;
        self.send(json!({"type": "abort"})).await;
        seen.extend(self.until_turn_ends().await);
        seen
    }

    /// The next binary frame (those that came between text messages first).
    pub async fn binary(&mut self) -> Bytes {
        if let Some(b) = self.binary.pop_front() {
            return b;
        }
        loop {
            match self.frame().await {
                Message::Binary(b) => return b,
                Message::Text(t) => self.stash.push_back(parse(&t)),
                other => panic!("expected a binary frame, got {other:?}"),
            }
        }
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
                Some(Ok(Message::Text(t))) => self.stash.push_back(parse(&t)),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Ended::Eof,
            }
        }
    }

    /// Messages received but not yet consumed.
    pub fn stashed(&self) -> &VecDeque<Value> {
        &self.stash
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
                Message::Text(t) => return parse(&t),
                Message::Binary(b) => self.binary.push_back(b),
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("server sent invalid JSON")
}

/// The `type`s of `messages`, in order.
pub fn types(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The concatenation of the `text_delta`s among `messages`.
pub fn deltas(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["type"] == "text_delta")
        .filter_map(|m| m["delta"].as_str())
        .collect()
}

impl Stashed for RobotaClient {
    fn stash(&mut self) -> &mut VecDeque<Value> {
        &mut self.stash
    }

    async fn read_one(&mut self) -> Value {
        self.read().await
    }
}

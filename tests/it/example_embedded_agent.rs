//! `examples/embedded_agent.rs`, its host started as the example starts it, driven over a real
//! socket by an independent client (tokio-tungstenite, with the channel frames encoded and
//! decoded here from the wire layout): a turn whose permission prompt is answered, a denied
//! one, an aborted one, the `telemetry` channel's `cpu` event and the `audio` channel's acks;
//! then by the project's Rust client (`examples/rust_client.rs`) and its JavaScript package.

#[path = "../../examples/embedded_agent.rs"]
#[allow(dead_code)] // the example's `main` is not run here
mod example;

#[path = "../../examples/rust_client.rs"]
#[allow(dead_code)] // the example's `main` is not run here
mod rust_client;

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long any one frame may take to arrive; the `cpu` event comes every second.
const WAIT: Duration = Duration::from_secs(5);

/// One frame from the server: a text frame's JSON, or a decoded channel frame.
#[derive(Debug, Clone, PartialEq)]
enum Frame {
    Text(Value),
    Channel {
        channel: String,
        seq: u32,
        /// `Some((event, payload))` for an event frame, `None` for opaque bytes.
        event: Option<(String, Value)>,
    },
}

/// A channel frame: "RBF", version 1, kind, name length, name, seq (u32 BE), body.
fn encode_channel(channel: &str, seq: u32, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut frame = b"RBF\x01".to_vec();
    frame.push(kind);
    frame.push(channel.len() as u8);
    frame.extend_from_slice(channel.as_bytes());
    frame.extend_from_slice(&seq.to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

fn decode_channel(frame: &[u8]) -> Frame {
    assert_eq!(&frame[..4], b"RBF\x01", "channel frame header");
    let (kind, n) = (frame[4], frame[5] as usize);
    let channel = String::from_utf8(frame[6..6 + n].to_vec()).expect("channel name");
    let seq = u32::from_be_bytes(frame[6 + n..10 + n].try_into().expect("seq"));
    let body = &frame[10 + n..];
    let event = (kind == 2).then(|| {
        let v: Value = serde_json::from_slice(body).expect("event body");
        (
            v["event"].as_str().expect("event name").to_owned(),
            v["payload"].clone(),
        )
    });
    Frame::Channel {
        channel,
        seq,
        event,
    }
}

struct Client {
    ws: WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>,
    stash: VecDeque<Frame>,
    next_id: u64,
}

impl Client {
    async fn connect(url: &str, token: &str) -> Client {
        let url = format!("{url}?token={token}");
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
            .await
            .expect("connect in time")
            .expect("connect");
        let mut client = Client {
            ws,
            stash: VecDeque::new(),
            next_id: 0,
        };
        let hello = json!({"protocol_version": "1.0", "min_compatible_protocol": "1.0",
            "client": {"name": "example-test", "version": "1"}});
        let handshake = client.ok("system.handshake", hello).await;
        let names: Vec<&str> = handshake["channels"]
            .as_array()
            .expect("channels")
            .iter()
            .map(|c| c["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names.len(), 2, "{handshake}");
        assert!(names.contains(&"telemetry") && names.contains(&"audio"));
        client
    }

    async fn read(&mut self) -> Frame {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a frame in time");
            match msg {
                Some(Ok(Message::Text(t))) => {
                    return Frame::Text(serde_json::from_str(&t).expect("JSON"))
                }
                Some(Ok(Message::Binary(b))) => return decode_channel(&b),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    /// The first frame matching `pred`; skipped frames are kept, in order.
    async fn wait_for(&mut self, pred: impl Fn(&Frame) -> bool) -> Frame {
        if let Some(i) = self.stash.iter().position(&pred) {
            return self.stash.remove(i).expect("index");
        }
        loop {
            let f = self.read().await;
            if pred(&f) {
                return f;
            }
            self.stash.push_back(f);
        }
    }

    async fn text(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        match self
            .wait_for(|f| matches!(f, Frame::Text(v) if pred(v)))
            .await
        {
            Frame::Text(v) => v,
            Frame::Channel { .. } => unreachable!(),
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let frame = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::text(frame)).await.expect("send");
        self.text(|f| f["id"] == id.as_str()).await
    }

    async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params).await;
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    async fn event(&mut self, name: &str) -> Value {
        self.text(|f| f["event"] == name).await
    }

    async fn submit(&mut self, prompt: &str) -> String {
        let r = self.ok("session.submit", json!({ "prompt": prompt })).await;
        r["turn_id"].as_str().expect("turn_id").to_owned()
    }

    /// The turn's deltas, concatenated, and its `turn_completed` payload.
    async fn finish(&mut self, turn_id: &str) -> (String, Value) {
        let mut deltas = String::new();
        loop {
            let e = self
                .text(|f| {
                    f["payload"]["turn_id"] == turn_id
                        && (f["event"] == "session.text_delta"
                            || f["event"] == "session.turn_completed")
                })
                .await;
            if e["event"] == "session.turn_completed" {
                return (deltas, e["payload"].clone());
            }
            deltas.push_str(e["payload"]["delta"].as_str().expect("delta"));
        }
    }

    /// Closes this client, then stops the host (which would otherwise wait for the close).
    async fn close(mut self, host: carrier::server::WsTransport) {
        let _ = self.ws.close(None).await;
        host.stop().await;
    }

    async fn send_audio(&mut self, seq: u32, bytes: usize) {
        let frame = encode_channel("audio", seq, 1, &vec![7u8; bytes]);
        self.ws.send(Message::binary(frame)).await.expect("send");
    }

    async fn channel_event(&mut self, channel: &str, name: &str) -> Value {
        let frame = self
            .wait_for(|f| {
                matches!(f, Frame::Channel { channel: c, event: Some((e, _)), .. }
                    if c == channel && e == name)
            })
            .await;
        match frame {
            Frame::Channel {
                event: Some((_, payload)),
                ..
            } => payload,
            other => unreachable!("{other:?}"),
        }
    }
}

async fn host() -> (carrier::server::WsTransport, Client) {
    let host = example::start_host(0).await.expect("host starts");
    let url = host.url().expect("running");
    assert!(
        url.starts_with("ws://127.0.0.1:") && url.ends_with('/'),
        "{url}"
    );
    let token = host.resolved_token().expect("minted token").to_owned();
    let client = Client::connect(&url, &token).await;
    (host, client)
}

#[tokio::test]
async fn a_prompt_streams_back_reversed() {
    let (host, mut c) = host().await;
    let turn = c.submit("hello big world").await;
    let (deltas, done) = c.finish(&turn).await;
    assert_eq!(deltas, "dlrow gib olleh");
    assert_eq!(done["text"], "dlrow gib olleh");
    assert_eq!(done["aborted"], false);
    c.close(host).await;
}

#[tokio::test]
async fn a_prompt_with_rm_asks_first_and_the_answer_reaches_the_agent() {
    let (host, mut c) = host().await;
    let turn = c.submit("rm -rf build").await;
    let ask = c.event("session.permission_request").await;
    // The carrier chose the request id; the host never saw one.
    assert_eq!(ask["payload"]["request_id"], format!("{turn}.p1"));
    assert_eq!(ask["payload"]["tool"], "shell");
    assert_eq!(ask["payload"]["input"]["command"], "rm -rf build");
    let status = c.ok("session.status", json!({})).await;
    assert_eq!(status["state"], "awaiting_permission");
    let answer = json!({"request_id": ask["payload"]["request_id"], "decision": "allow"});
    c.ok("session.permission.respond", answer).await;
    let (deltas, done) = c.finish(&turn).await;
    assert_eq!(
        (deltas.as_str(), &done["text"]),
        ("dliub fr- mr", &json!("dliub fr- mr"))
    );

    let turn = c.submit("rm it").await;
    let ask = c.event("session.permission_request").await;
    assert_eq!(ask["payload"]["request_id"], format!("{turn}.p1"));
    let answer = json!({"request_id": ask["payload"]["request_id"], "decision": "deny"});
    c.ok("session.permission.respond", answer).await;
    let (_, done) = c.finish(&turn).await;
    assert_eq!(done["text"], "denied");
    c.close(host).await;
}

#[tokio::test]
async fn an_abort_ends_the_waiting_turn_and_the_next_turn_runs() {
    let (host, mut c) = host().await;
    let turn = c.submit("rm everything").await;
    let ask = c.event("session.permission_request").await;
    c.ok("session.abort", json!({ "turn_id": turn })).await;
    let (_, done) = c.finish(&turn).await;
    assert_eq!(done["aborted"], true);
    // The prompt went with the turn: answering it now finds nothing.
    let answer = json!({"request_id": ask["payload"]["request_id"], "decision": "allow"});
    let late = c.request("session.permission.respond", answer).await;
    assert_eq!(late["error"]["code"], "not_found", "{late}");
    let next = c.submit("ab").await;
    let (_, done) = c.finish(&next).await;
    assert_eq!(done["text"], "ba");
    c.close(host).await;
}

#[tokio::test]
async fn telemetry_sends_cpu_events_every_second() {
    let (host, mut c) = host().await;
    let first = c.channel_event("telemetry", "cpu").await;
    let second = c.channel_event("telemetry", "cpu").await;
    assert!(
        first["load"].is_number() && second["load"].is_number(),
        "{first}"
    );
    assert_eq!(
        second["tick"].as_u64().expect("tick"),
        first["tick"].as_u64().expect("tick") + 1
    );
    c.close(host).await;
}

#[tokio::test]
async fn audio_frames_are_acked_to_their_sender_with_the_running_byte_count() {
    let (host, mut c) = host().await;
    c.send_audio(0, 100).await;
    assert_eq!(c.channel_event("audio", "ack").await["bytes"], 100);
    c.send_audio(1, 50).await;
    assert_eq!(c.channel_event("audio", "ack").await["bytes"], 150);
    // Another connection's frame is acked to it alone (this client's next ack comes next).
    let url = host.url().expect("running");
    let mut other = Client::connect(&url, host.resolved_token().expect("token")).await;
    other.send_audio(0, 1).await;
    assert_eq!(other.channel_event("audio", "ack").await["bytes"], 151);
    c.send_audio(2, 1).await;
    assert_eq!(c.channel_event("audio", "ack").await["bytes"], 152);
    let _ = other.ws.close(None).await;
    c.close(host).await;
}

/// The JavaScript package (`js/`) against the same host: `tests/js/embedded_agent.test.mjs`
/// under `node --test`. Node 20 needs the package's `ws` dev dependency: installed with
/// `npm ci` from the committed lock file unless `js/node_modules` is up to date.
#[tokio::test]
async fn the_javascript_package_drives_the_example() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    tokio::task::spawn_blocking(carrier_test_support::node::js_dev_dependencies)
        .await
        .expect("npm ci in js/");
    let host = example::start_host(0).await.expect("host starts");
    let mut node = tokio::process::Command::new("node");
    node.args([
        "--test",
        "--test-timeout=30000",
        "tests/js/embedded_agent.test.mjs",
    ])
    .current_dir(repo)
    .env("CARRIER_URL", host.url().expect("running"))
    .env("CARRIER_TOKEN", host.resolved_token().expect("token"))
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), node.output())
        .await
        .expect("node --test within 2 minutes")
        .expect("node runs (Node.js 20+ is needed)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{report}");
    for line in ["# pass 3", "# fail 0", "# cancelled 0", "# skipped 0"] {
        assert!(stdout.contains(line), "expected {line:?}:\n{report}");
    }
    host.stop().await;
}

/// The Rust client example against the same host: the permission prompt answered both ways,
/// the reply streamed, the acks counted, a telemetry event.
#[tokio::test]
async fn the_rust_client_example_drives_the_example() {
    use carrier::client::Decision;
    let host = example::start_host(0).await.expect("host starts");
    let url = host.url().expect("running");
    let token = host.resolved_token().expect("token").to_owned();

    let run = rust_client::drive(&url, &token, Decision::Allow);
    let seen = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("within 30 s")
        .expect("the client's run");
    assert!(seen.asked);
    let reversed: String = "please rm the build folder".chars().rev().collect();
    assert_eq!(seen.reply, reversed);
    assert_eq!(seen.deltas.concat(), reversed);
    assert!(
        seen.deltas.len() > 1,
        "streamed in pieces: {:?}",
        seen.deltas
    );
    assert_eq!(seen.acks, [100, 300, 600]);
    assert!(seen.cpu["tick"].is_u64(), "{}", seen.cpu);

    let run = rust_client::drive(&url, &token, Decision::Deny);
    let seen = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("within 30 s")
        .expect("the client's run");
    assert!(seen.asked);
    assert_eq!(seen.reply, "denied");
    // The host's count runs across connections.
    assert_eq!(seen.acks, [700, 900, 1200]);
    host.stop().await;
}

//! A `tokio-tungstenite` client for bulk channels that counts inbound credit itself (protocol
//! 1.1) or announces 1.0 and counts nothing: the independent client of the bulk credit tests.
//!
//! The connection is split: `BulkReader` reads everything (adding `channel.credit` grants to
//! the shared [`Credit`] as they come), and [`BulkWriter`] sends, waiting for credit first when
//! the server announced some.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier::protocol::channel_frame;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;

use crate::common::WAIT;
use tokio_tungstenite::WebSocketStream;

/// A WebSocket over a plain TCP stream (the socket's options set before connecting).
pub type PlainWs = WebSocketStream<TcpStream>;

/// Credit a client holds on one bulk channel: a permit per byte of frame body.
#[derive(Clone)]
pub struct Credit(Arc<Semaphore>);

impl Credit {
    fn new(bytes: u64) -> Self {
        Credit(Arc::new(Semaphore::new(bytes as usize)))
    }

    /// Adds a grant.
    pub fn grant(&self, bytes: u64) {
        self.0.add_permits(bytes as usize);
    }

    /// Bytes the client may send now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }

    /// Waits until `bytes` may be sent, and spends them.
    pub async fn spend(&self, bytes: usize) {
        self.0
            .acquire_many(bytes as u32)
            .await
            .expect("credit semaphore open")
            .forget();
    }
}

/// Options of one test connection.
#[derive(Debug, Clone, Copy)]
pub struct BulkOptions<'a> {
    /// Protocol version announced ("1.1" or "1.0").
    pub version: &'a str,
    /// The socket's receive buffer, when it should be small.
    pub rcvbuf: Option<u32>,
}

/// Connects to `port` with `token`, handshakes and returns the socket and the handshake result.
pub async fn connect_bulk(port: u16, token: &str, opts: BulkOptions<'_>) -> (PlainWs, Value) {
    let socket = TcpSocket::new_v4().expect("socket");
    if let Some(n) = opts.rcvbuf {
        socket.set_recv_buffer_size(n).expect("rcvbuf");
    }
    let tcp = socket
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("connect");
    let url = format!("ws://127.0.0.1:{port}/?token={token}");
    let (mut ws, _) = tokio_tungstenite::client_async(url, tcp)
        .await
        .expect("upgrade");
    let hs = json!({"id": "hs", "method": "system.handshake", "params": {
        "protocol_version": opts.version, "min_compatible_protocol": "1.0",
        "client": {"name": "bulk-credit-test", "version": "0"}}});
    ws.send(Message::text(hs.to_string())).await.expect("send");
    loop {
        let msg = tokio::time::timeout(super::WAIT, ws.next())
            .await
            .expect("handshake answer within WAIT")
            .expect("open")
            .expect("frame");
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).expect("json");
            if v["id"] == "hs" {
                let result = v.get("result").cloned().unwrap_or_else(|| panic!("{v}"));
                return (ws, result);
            }
        }
    }
}

/// The `credit` the handshake result gives a channel, if any.
pub fn descriptor_credit(result: &Value, channel: &str) -> Option<u64> {
    result["channels"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == channel)?
        .get("credit")?
        .as_u64()
}

/// The credit of a connection on `channel`: `None` when the server announced none (a 1.0
/// connection), then sends are paced by TCP only.
pub fn credit_for(result: &Value, channel: &str) -> Option<Credit> {
    descriptor_credit(result, channel).map(Credit::new)
}

/// The write half, which honours credit when there is some.
pub struct BulkWriter {
    /// The sink.
    pub sink: SplitSink<PlainWs, Message>,
    /// The credit on the channel written to, if the server gave any.
    pub credit: Option<Credit>,
    /// The channel.
    pub channel: String,
    seq: u32,
}

impl BulkWriter {
    /// Sends one binary frame of `body` on the channel, after waiting for credit for it.
    pub async fn send(&mut self, body: Bytes) {
        if let Some(c) = &self.credit {
            c.spend(body.len()).await;
        }
        let frame = channel_frame::encode_binary(&self.channel, self.seq, body).expect("encode");
        self.seq += 1;
        self.sink
            .send(Message::binary(frame.to_vec()))
            .await
            .expect("send");
    }

    /// Sends `frames` frames of `frame` bytes, each filled with its number (mod 256), as
    /// [`pings_behind_bulk`] reads them.
    pub async fn send_numbered(&mut self, frames: usize, frame: usize) {
        for i in 0..frames {
            self.send(Bytes::from(vec![i as u8; frame])).await;
        }
    }

    /// Sends a text message (a request).
    pub async fn text(&mut self, v: Value) {
        self.sink
            .send(Message::text(v.to_string()))
            .await
            .expect("send");
    }
}

/// Splits a handshaken connection into its writer (on `channel`) and its read half.
pub fn split_bulk(
    ws: PlainWs,
    result: &Value,
    channel: &str,
) -> (BulkWriter, SplitStream<PlainWs>, Option<Credit>) {
    let credit = credit_for(result, channel);
    let (sink, stream) = ws.split();
    (
        BulkWriter {
            sink,
            credit: credit.clone(),
            channel: channel.to_string(),
            seq: 0,
        },
        stream,
        credit,
    )
}

/// What a read half received.
#[derive(Debug)]
pub enum Read {
    /// A text message, parsed.
    Text(Value),
    /// A channel frame: its channel, seq and body length.
    Frame {
        /// The channel.
        channel: String,
        /// The server's seq.
        seq: u32,
        /// The body's bytes.
        body: Bytes,
    },
    /// The close frame's code and reason, or `None` for the end of the stream.
    Closed(Option<(u16, String)>),
}

/// Reads the next message within `wait`; `None` when nothing came in time. A
/// `channel.credit` grant is added to `credit` before it is returned.
pub async fn read_next(
    stream: &mut SplitStream<PlainWs>,
    credit: Option<&Credit>,
    wait: Duration,
) -> Option<Read> {
    loop {
        let msg = tokio::time::timeout(wait, stream.next()).await.ok()?;
        let read = match msg {
            None | Some(Err(_)) => Read::Closed(None),
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["event"] == "channel.credit" {
                    if let Some(c) = credit {
                        c.grant(v["payload"]["bytes"].as_u64().expect("bytes"));
                    }
                }
                Read::Text(v)
            }
            Some(Ok(Message::Binary(b))) => {
                let f = channel_frame::decode(b).expect("channel frame");
                let body = match f.body {
                    channel_frame::FrameBody::Binary(b) => b,
                    other => Bytes::from(format!("{other:?}")),
                };
                Read::Frame {
                    channel: f.channel.to_string(),
                    seq: f.seq,
                    body,
                }
            }
            Some(Ok(Message::Close(c))) => {
                Read::Closed(c.map(|c| (u16::from(c.code), c.reason.to_string())))
            }
            Some(Ok(_)) => continue,
        };
        return Some(read);
    }
}

/// Reads what the carrier sends on `stream` until it closes or nothing comes for `wait`, adding
/// the credit grants to `credit`: the read half of a client that only sends, which must keep
/// its credit coming.
pub async fn take_grants(mut stream: SplitStream<PlainWs>, credit: Option<Credit>, wait: Duration) {
    while let Some(read) = read_next(&mut stream, credit.as_ref(), wait).await {
        if matches!(read, Read::Closed(_)) {
            return;
        }
    }
}

/// Reads `frames` bulk frames of `frame` bytes (numbered in their first byte, in order) and,
/// after every `ping_after` of them, sends a `system.ping` on `writer` once the last one is
/// answered: for each ping, how many bulk frames arrived between sending it and its answer.
/// `who` names the reader in a panic.
pub async fn pings_behind_bulk(
    reader: &mut SplitStream<PlainWs>,
    writer: &mut BulkWriter,
    credit: Option<&Credit>,
    (frames_to_read, frame, ping_after): (usize, usize, usize),
    who: &str,
) -> Vec<usize> {
    let mut frames = 0usize;
    let mut waiting: Option<(String, usize)> = None;
    let mut behind = Vec::new();
    while frames < frames_to_read || waiting.is_some() {
        match read_next(reader, credit, WAIT).await.expect("within WAIT") {
            Read::Frame { body, .. } => {
                assert_eq!(body.len(), frame);
                assert_eq!(body[0], frames as u8, "in order");
                frames += 1;
                if frames % ping_after == 0 && waiting.is_none() && frames < frames_to_read {
                    let id = format!("p{frames}");
                    writer
                        .text(json!({"id": id, "method": "system.ping", "params": {}}))
                        .await;
                    waiting = Some((id, frames));
                }
            }
            Read::Text(v) if v.get("id").is_some() => {
                let (id, at) = waiting.take().expect("an answer to a ping");
                assert_eq!(v["id"], id.as_str());
                behind.push(frames - at);
            }
            Read::Text(_) => {}
            Read::Closed(c) => panic!("{who} closed: {c:?}"),
        }
    }
    behind
}

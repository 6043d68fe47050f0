//! A rogue server's pieces, for clients' tests (RFC 6455 §5.1: a client must fail the connection
//! on a masked frame): frames masked as no server may send them, a handshake answer, and the
//! accepting side of a `tokio-tungstenite` server, whose upgrade answer can be spoiled. Its
//! waits are [`WAIT`] each unless given.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// How long the rogue waits for its peer.
pub const WAIT: Duration = Duration::from_secs(20);

/// One WebSocket frame as a server must not send it: masked with `key`.
pub fn masked_frame(opcode: u8, payload: &[u8], key: [u8; 4]) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n < 65536 => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&key);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    out
}

/// The handshake result a carrier with one `echo` channel `e` would give.
pub fn handshake_result(id: &Value) -> Value {
    json!({
        "id": id,
        "result": {
            "protocol_version": "1.0",
            "min_compatible_protocol": "1.0",
            "server": {"name": "rogue", "version": "0"},
            "role": "drive",
            "session_id": "s1",
            "epoch": "e1",
            "version_skew": false,
            "features": {},
            "channels": [{"name": "e", "events": ["*"], "binary": true, "delivery": "reliable"}],
            "limits": {"max_message_bytes": 16777216},
            "resume": {"outcome": "new"},
        }
    })
}

/// Accepts one WebSocket client and reads its first text message (the handshake request).
pub async fn accept_handshake(listener: &TcpListener) -> (WebSocketStream<TcpStream>, Value) {
    let (tcp, _) = listener.accept().await.expect("accept");
    let mut ws = tokio_tungstenite::accept_async(tcp)
        .await
        .expect("the upgrade");
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                let request: Value = serde_json::from_str(&text).expect("JSON");
                return (ws, request);
            }
            Ok(Some(Ok(_))) => continue,
            other => panic!("no handshake request: {other:?}"),
        }
    }
}

/// Whether the peer has closed the TCP connection (or sent a close) within [`WAIT`].
pub async fn peer_goes_away(ws: &mut WebSocketStream<TcpStream>) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return false,
            Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => return true,
            Ok(Some(Ok(_))) => continue,
        }
    }
}

/// A listener on 127.0.0.1 and the `ws://` URL of its port.
pub async fn listen() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("addr"));
    (listener, url)
}

/// Accepts one WebSocket connection within `wait`, the upgrade answer passed through `edit`
/// first.
// tungstenite's upgrade callback type fixes the large error response.
#[allow(clippy::result_large_err)]
pub async fn accept_edited(
    listener: &TcpListener,
    edit: fn(&mut Response),
    wait: Duration,
) -> WebSocketStream<TcpStream> {
    let (stream, _) = tokio::time::timeout(wait, listener.accept())
        .await
        .expect("the client connects")
        .expect("accept");
    let callback = move |_: &Request, mut response: Response| {
        edit(&mut response);
        Ok(response)
    };
    tokio_tungstenite::accept_hdr_async(stream, callback)
        .await
        .expect("upgrade")
}

/// An upgrade answer without `Sec-WebSocket-Accept`.
pub fn drop_accept(response: &mut Response) {
    response.headers_mut().remove("sec-websocket-accept");
}

/// An upgrade answer whose `Sec-WebSocket-Accept` answers another key.
pub fn wrong_accept(response: &mut Response) {
    // The RFC's example answer, for another key than the client's.
    response.headers_mut().insert(
        "sec-websocket-accept",
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".parse().expect("value"),
    );
}

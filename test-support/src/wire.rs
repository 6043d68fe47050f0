//! The carrier-core side: a payload-agnostic test profile, a `tokio-tungstenite` connector, a
//! raw WebSocket client for byte-exact frame tests, and raw HTTP requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier::server::{CarrierContext, Connection, TextProfile, TextSession};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use crate::common::{Ws, WAIT};

/// What the test profile observed.
#[derive(Default)]
pub struct Stats {
    /// Sessions closed.
    pub closes: AtomicUsize,
    /// The most bytes ever seen queued on one connection.
    pub max_queued: AtomicUsize,
    /// Messages queued.
    pub sent: AtomicUsize,
    /// Sends refused.
    pub send_errors: AtomicUsize,
    /// The outbound budget a session reported.
    pub budget: AtomicUsize,
}

/// A minimal text profile: `hs` completes the handshake, `flood N SIZE` streams N text
/// messages of SIZE bytes, `seq N` streams `m0..m{N-1}`, anything else is echoed.
pub struct TestProfile {
    /// What its sessions observed, shared with the test.
    pub stats: Arc<Stats>,
}

struct TestSession {
    conn: Connection,
    stats: Arc<Stats>,
}

impl TextProfile for TestProfile {
    fn open(&self, conn: Connection, _ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(TestSession {
            conn,
            stats: self.stats.clone(),
        })
    }
}

impl TextSession for TestSession {
    fn on_text(&mut self, text: &str) {
        let mut words = text.split_whitespace();
        match words.next() {
            Some("hs") => {
                self.conn.mark_handshaken();
                let _ = self.conn.send_text("ok");
            }
            Some("flood") => {
                let n: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let size: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(1);
                let conn = self.conn.clone();
                let stats = self.stats.clone();
                tokio::spawn(async move {
                    let payload = Bytes::from(vec![b'x'; size]);
                    stats.budget.store(conn.queue_budget(), Ordering::SeqCst);
                    for _ in 0..n {
                        let r = conn.send_text(payload.clone());
                        stats
                            .max_queued
                            .fetch_max(conn.queued_bytes(), Ordering::SeqCst);
                        match r {
                            Ok(()) => stats.sent.fetch_add(1, Ordering::SeqCst),
                            Err(_) => stats.send_errors.fetch_add(1, Ordering::SeqCst),
                        };
                        tokio::task::yield_now().await;
                    }
                });
            }
            Some("seq") => {
                let n: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                for i in 0..n {
                    let _ = self.conn.send_text(format!("m{i}"));
                }
            }
            _ => {
                let _ = self.conn.send_text(text.to_string());
            }
        }
    }

    fn on_close(&mut self) {
        self.stats.closes.fetch_add(1, Ordering::SeqCst);
    }
}

/// Connects with tokio-tungstenite, applying extra headers. Returns the socket and response
/// headers, or the HTTP status of a refused upgrade.
pub async fn connect_with(
    url: &str,
    headers: &[(&str, &str)],
) -> Result<
    (
        Ws,
        tokio_tungstenite::tungstenite::http::Response<Option<Vec<u8>>>,
    ),
    u16,
> {
    let mut req = url.into_client_request().expect("request");
    for (k, v) in headers {
        let name = tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes())
            .expect("header name");
        req.headers_mut()
            .insert(name, HeaderValue::from_str(v).expect("header value"));
    }
    match tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(req)).await {
        Ok(Ok((ws, resp))) => Ok((ws, resp)),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(resp))) => Err(resp.status().as_u16()),
        Ok(Err(e)) => panic!("connect failed: {e}"),
        Err(_) => panic!("connect timed out"),
    }
}

/// Connects a WebSocket client to `url`; panics if it cannot.
pub async fn connect(url: &str) -> Ws {
    connect_with(url, &[]).await.expect("upgrade").0
}

/// Connects and completes the test profile's handshake.
pub async fn connect_handshaken(url: &str) -> Ws {
    let mut ws = connect(url).await;
    ws.send(Message::text("hs")).await.expect("send");
    assert_eq!(next_text(&mut ws).await, "ok");
    ws
}

/// The next message, skipping pings/pongs; panics after [`WAIT`].
pub async fn next_message(ws: &mut Ws) -> Option<Message> {
    loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("timed out waiting for a message")
        {
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(m)) => return Some(m),
            Some(Err(_)) | None => return None,
        }
    }
}

/// The next text message, skipping other frames; panics on a close, an error or after [`WAIT`].
pub async fn next_text(ws: &mut Ws) -> String {
    match next_message(ws).await {
        Some(Message::Text(t)) => t.to_string(),
        other => panic!("expected text, got {other:?}"),
    }
}

/// Asserts the very next frame is a close with `code` (no data frame before it).
pub async fn expect_close(ws: &mut Ws, code: u16) {
    match next_message(ws).await {
        Some(Message::Close(Some(frame))) => assert_eq!(
            u16::from(frame.code),
            code,
            "close reason: {}",
            frame.reason
        ),
        other => panic!("expected close {code}, got {other:?}"),
    }
}

/// The `tokio-tungstenite` close code for `code`.
pub fn close_code(code: u16) -> CloseCode {
    CloseCode::from(code)
}

/// A raw WebSocket client over a plain TCP stream: writes masked frames byte by byte and reads
/// server frames, for tests that need exact control (fragments, silence, no data frames).
pub struct Raw {
    /// The socket, for writing bytes the helpers do not frame.
    pub tcp: TcpStream,
    buf: Vec<u8>,
}

/// One server frame as read by [`Raw`].
#[derive(Debug, PartialEq, Eq)]
pub struct RawFrame {
    /// The FIN bit.
    pub fin: bool,
    /// The opcode (1 text, 2 binary, 8 close, 9 ping, 10 pong).
    pub opcode: u8,
    /// The payload, unmasked.
    pub payload: Vec<u8>,
}

impl RawFrame {
    /// The status code of a close frame that carries one.
    pub fn close_code(&self) -> Option<u16> {
        (self.opcode == 8 && self.payload.len() >= 2)
            .then(|| u16::from_be_bytes([self.payload[0], self.payload[1]]))
    }
}

impl Raw {
    /// Performs the upgrade with `path_and_query` and extra header lines; returns the status
    /// line's code and the client.
    pub async fn upgrade(port: u16, path_and_query: &str, extra: &[&str]) -> (u16, Raw) {
        let mut tcp = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("tcp connect");
        let mut req = format!(
            "GET {path_and_query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        );
        for line in extra {
            req.push_str(line);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        tcp.write_all(req.as_bytes()).await.expect("write request");
        let mut raw = Raw {
            tcp,
            buf: Vec::new(),
        };
        let head_end = loop {
            if let Some(i) = raw.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, raw.tcp.read(&mut chunk))
                .await
                .expect("response timeout")
                .expect("read");
            assert!(n > 0, "connection closed before the response");
            raw.buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&raw.buf[..head_end]).to_string();
        raw.buf.drain(..head_end);
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, raw)
    }

    /// A raw client over a stream that is already past the upgrade.
    pub fn from_stream(tcp: TcpStream) -> Raw {
        Raw {
            tcp,
            buf: Vec::new(),
        }
    }

    /// Writes one frame without a masking key (which RFC 6455 forbids a client to do).
    pub async fn send_unmasked(&mut self, fin: bool, opcode: u8, payload: &[u8]) {
        assert!(payload.len() < 126, "short frames only");
        let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode, payload.len() as u8];
        f.extend_from_slice(payload);
        let _ = self.tcp.write_all(&f).await;
    }

    /// Writes one masked frame.
    pub async fn send(&mut self, fin: bool, opcode: u8, payload: &[u8]) {
        let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode];
        let len = payload.len();
        if len < 126 {
            f.push(0x80 | len as u8);
        } else if len <= 65535 {
            f.push(0x80 | 126);
            f.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            f.push(0x80 | 127);
            f.extend_from_slice(&(len as u64).to_be_bytes());
        }
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        // The peer may already have closed; a failed write shows up in the next read.
        let _ = self.tcp.write_all(&f).await;
    }

    async fn fill(&mut self, n: usize) -> bool {
        while self.buf.len() < n {
            let mut chunk = vec![0u8; 64 * 1024];
            match tokio::time::timeout(WAIT, self.tcp.read(&mut chunk))
                .await
                .expect("read timeout")
            {
                Ok(0) | Err(_) => return false,
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
            }
        }
        true
    }

    /// Reads one server frame; `None` at EOF.
    pub async fn recv(&mut self) -> Option<RawFrame> {
        if !self.fill(2).await {
            return None;
        }
        let fin = self.buf[0] & 0x80 != 0;
        let opcode = self.buf[0] & 0x0f;
        assert_eq!(self.buf[1] & 0x80, 0, "server frames must not be masked");
        let (hl, len) = match self.buf[1] & 0x7f {
            126 => {
                if !self.fill(4).await {
                    return None;
                }
                (4, u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize)
            }
            127 => {
                if !self.fill(10).await {
                    return None;
                }
                (
                    10,
                    u64::from_be_bytes(self.buf[2..10].try_into().ok()?) as usize,
                )
            }
            n => (2, n as usize),
        };
        if !self.fill(hl + len).await {
            return None;
        }
        let payload = self.buf[hl..hl + len].to_vec();
        self.buf.drain(..hl + len);
        Some(RawFrame {
            fin,
            opcode,
            payload,
        })
    }

    /// Reads frames until a non-control one (or close) arrives.
    pub async fn recv_data(&mut self) -> Option<RawFrame> {
        loop {
            let f = self.recv().await?;
            if f.opcode == 9 || f.opcode == 10 {
                continue;
            }
            return Some(f);
        }
    }
}

/// Polls `cond` until it holds or [`WAIT`] passes.
pub async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Reads a counter of [`Stats`].
pub fn count(a: &AtomicUsize) -> usize {
    a.load(Ordering::SeqCst)
}

/// Sends one raw HTTP request and returns the status code, or `None` if the server closed the
/// connection without answering. Panics if nothing happens within [`WAIT`] (a hang).
pub async fn http_status(port: u16, request: &[u8]) -> Option<u16> {
    let head = http_head(port, request).await;
    head.split_whitespace().nth(1).and_then(|s| s.parse().ok())
}

/// Sends one raw HTTP request and returns the response head as text (empty if the server
/// closed the connection without answering).
pub async fn http_head(port: u16, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    // The server may refuse before reading everything; a failed write is not the verdict.
    let _ = tcp.write_all(request).await;
    let mut buf = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            match tcp.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        return;
                    }
                }
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the server neither answered nor closed: a hang");
    String::from_utf8_lossy(&buf).into_owned()
}

/// An upgrade request for `path` with `Host: host` (none if `None`), a valid key and version,
/// and the `extra` header lines.
pub fn upgrade_request(path: &str, host: Option<&str>, extra: &[&str]) -> Vec<u8> {
    let mut req = format!("GET {path} HTTP/1.1\r\n");
    if let Some(h) = host {
        req.push_str(&format!("Host: {h}\r\n"));
    }
    req.push_str("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n");
    for line in extra {
        req.push_str(line);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.into_bytes()
}

/// Upgrades with `path` and returns the first frame the server sends unprompted, or
/// after a handshake attempt.
pub async fn first_answer(port: u16, path: &str, extra: &[&str]) -> RawFrame {
    let (status, mut raw) = Raw::upgrade(port, path, extra).await;
    assert_eq!(status, 101, "{path}");
    raw.send(true, 1, b"hs").await;
    raw.recv_data().await.expect("a frame")
}

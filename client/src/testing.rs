//! In-memory sockets for testing transports and clients without a network: the seam the
//! client's reference suite (`client/tests/it/reference.rs`) runs on, for whoever writes a
//! [`Connector`] or a [`Transport`](super::Transport) of their own and wants the same suite.
//!
//! [`fake_network`] returns a [`FakeConnector`] (plug it into a
//! [`ReconnectingTransport`](super::ReconnectingTransport)) and the [`FakeServer`] that stands on
//! the other side: it accepts each dialled connection as a [`FakePeer`], can refuse dials, and
//! records when every dial happened (on the tokio clock, so paused-time tests can check backoff
//! delays exactly). [`parsed_bound`] is the client's estimate of a text message's parsed size
//! (what [`WsOptions::max_parsed_bytes`](super::WsOptions::max_parsed_bytes) is held against),
//! for a test that holds it against real memory.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::socket::{Connector, Incoming, Outgoing, Socket, SocketReader, SocketWriter};
use super::subscribers::lock;
use super::transport::{CloseInfo, TransportError};

/// The most the client reckons parsing `text` into JSON values can take (what
/// [`WsOptions::max_parsed_bytes`](super::WsOptions::max_parsed_bytes) is held against).
pub fn parsed_bound(text: &[u8]) -> usize {
    super::parse_bound::parsed_bound(text)
}

/// A connector and the fake server its dials reach.
pub fn fake_network() -> (FakeConnector, FakeServer) {
    let (accepted_tx, accepted_rx) = mpsc::unbounded_channel();
    let (dials, _) = watch::channel(Vec::new());
    let shared = Arc::new(Shared {
        refusing: Mutex::new(false),
        dials,
        accepted: accepted_tx,
    });
    (
        FakeConnector {
            shared: Arc::clone(&shared),
        },
        FakeServer {
            shared,
            accepted: accepted_rx,
        },
    )
}

struct Shared {
    refusing: Mutex<bool>,
    dials: watch::Sender<Vec<Instant>>,
    accepted: mpsc::UnboundedSender<FakePeer>,
}

/// Dials the [`FakeServer`] it was created with.
pub struct FakeConnector {
    shared: Arc<Shared>,
}

impl Connector for FakeConnector {
    fn connect(&self) -> BoxFuture<'_, Result<Socket, TransportError>> {
        Box::pin(async move {
            self.shared
                .dials
                .send_modify(|dials| dials.push(Instant::now()));
            if *lock(&self.shared.refusing) {
                return Err(TransportError::Connect {
                    addr: "fake".into(),
                    reason: "refused by the fake server".into(),
                });
            }
            let (to_client, from_server) = mpsc::unbounded_channel();
            let (to_server, from_client) = mpsc::unbounded_channel();
            self.shared
                .accepted
                .send(FakePeer {
                    to_client,
                    from_client,
                })
                .map_err(|_| TransportError::Connect {
                    addr: "fake".into(),
                    reason: "the fake server is gone".into(),
                })?;
            Ok(Socket {
                reader: Box::new(FakeReader { from_server }),
                writer: Box::new(FakeWriter { to_server }),
            })
        })
    }
}

struct FakeReader {
    from_server: mpsc::UnboundedReceiver<Incoming>,
}

impl SocketReader for FakeReader {
    fn read(&mut self) -> BoxFuture<'_, Result<Incoming, TransportError>> {
        Box::pin(async move {
            self.from_server
                .recv()
                .await
                .ok_or_else(|| TransportError::Io("the fake peer dropped the connection".into()))
        })
    }
}

struct FakeWriter {
    to_server: mpsc::UnboundedSender<Outgoing>,
}

impl SocketWriter for FakeWriter {
    fn write(&mut self, message: Outgoing) -> BoxFuture<'_, Result<(), TransportError>> {
        let sent = self
            .to_server
            .send(message)
            .map_err(|_| TransportError::Io("the fake peer dropped the connection".into()));
        Box::pin(async move { sent })
    }
}

/// The server side of the fake network.
pub struct FakeServer {
    shared: Arc<Shared>,
    accepted: mpsc::UnboundedReceiver<FakePeer>,
}

impl FakeServer {
    /// The next connection a client dialled; `None` when the connector is gone.
    pub async fn accept(&mut self) -> Option<FakePeer> {
        self.accepted.recv().await
    }

    /// While `true`, every dial fails (as if nothing listened).
    pub fn refuse_dials(&self, refuse: bool) {
        *lock(&self.shared.refusing) = refuse;
    }

    /// When each dial happened, successful or not.
    pub fn dial_times(&self) -> Vec<Instant> {
        self.shared.dials.borrow().clone()
    }

    /// Waits until at least `count` dials happened and returns their times.
    pub async fn wait_for_dials(&self, count: usize) -> Vec<Instant> {
        let mut dials = self.shared.dials.subscribe();
        let waited = dials
            .wait_for(|dials| dials.len() >= count)
            .await
            .map(|dials| dials.clone());
        // The sender lives in `self`, so it cannot be gone while we wait.
        waited.unwrap_or_else(|_| self.dial_times())
    }
}

/// One accepted fake connection, seen from the server.
pub struct FakePeer {
    to_client: mpsc::UnboundedSender<Incoming>,
    from_client: mpsc::UnboundedReceiver<Outgoing>,
}

impl FakePeer {
    /// The next message the client wrote; `None` once the client's writer is gone.
    pub async fn recv(&mut self) -> Option<Outgoing> {
        self.from_client.recv().await
    }

    /// The next text frame the client wrote, parsed (pongs are skipped); `None` when the
    /// connection ended or the client wrote something else (binary, close, invalid JSON).
    pub async fn recv_json(&mut self) -> Option<Value> {
        loop {
            match self.recv().await? {
                Outgoing::Text(text) => return serde_json::from_str(&text).ok(),
                Outgoing::Pong(_) => continue,
                Outgoing::Binary(_) | Outgoing::Close(_) => return None,
            }
        }
    }

    /// A message the client wrote that is already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<Outgoing> {
        self.from_client.try_recv().ok()
    }

    /// Sends raw text as one text frame (it need not be JSON).
    pub fn send_text(&self, text: &str) {
        self.push(Incoming::Text(Bytes::copy_from_slice(text.as_bytes())));
    }

    /// Sends `frame` as one text frame.
    pub fn send_json(&self, frame: &Value) {
        self.send_text(&frame.to_string());
    }

    /// Sends one binary frame.
    pub fn send_binary(&self, payload: Bytes) {
        self.push(Incoming::Binary(payload));
    }

    /// Sends a ping.
    pub fn ping(&self, payload: Bytes) {
        self.push(Incoming::Ping(payload));
    }

    /// Closes the connection in order, with `code` and `reason`.
    pub fn close(self, code: u16, reason: &str) {
        self.push(Incoming::Close(Some(CloseInfo {
            code,
            reason: reason.to_owned(),
        })));
    }

    /// Drops the connection without a close frame (the client sees a read error).
    pub fn break_connection(self) {
        drop(self);
    }

    fn push(&self, message: Incoming) {
        // A client that already went away simply misses it, as on a real network.
        let _ = self.to_client.send(message);
    }
}

//! The `Transport` trait: the one swappable seam between a client and the channel that carries
//! its frames (docs/protocol.md, "Client behaviour"). The contract is documented on [`Transport`].

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde_json::Value;

use tokio::sync::OwnedSemaphorePermit;

use super::backlog::Backlog;
use carrier_discovery::listener::{ForeignListener, UnattributedListener};

/// Where a connection stands, as seen by its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionState {
    /// No socket and no reconnect pending: never connected, `disconnect()` was called, or the
    /// server refused this client for good (close 1008).
    Disconnected,
    /// Dialling, or waiting out a backoff delay before the next attempt.
    Connecting,
    /// The socket is open (for [`Client`](super::Client): open and handshaken).
    Connected,
    /// Handshaken with a peer of the same major but a different minor protocol version. Only the
    /// handshake layer reports this state; a bare transport stays at `Connected`.
    VersionSkew,
}

impl ConnectionState {
    /// The wire-style name (`"disconnected"`, `"connecting"`, `"connected"`, `"version_skew"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Disconnected => "disconnected",
            ConnectionState::Connecting => "connecting",
            ConnectionState::Connected => "connected",
            ConnectionState::VersionSkew => "version_skew",
        }
    }

    /// True for the two states in which frames can be exchanged.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ConnectionState::Connected | ConnectionState::VersionSkew
        )
    }
}

impl fmt::Display for ConnectionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the peer closed the connection: the close code and its reason text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseInfo {
    /// The close code (e.g. 1000 normal, 1001 going away, 1008 policy: unauthorized or role
    /// refused).
    pub code: u16,
    /// The reason text the peer sent, possibly empty.
    pub reason: String,
}

impl CloseInfo {
    /// Close code for an authentication or role refusal; a transport never reconnects after it.
    pub const POLICY_VIOLATION: u16 = carrier_protocol::close::CloseCode::POLICY.as_u16();

    /// True when this close means "you are not allowed in", so retrying cannot help.
    pub fn is_refusal(&self) -> bool {
        self.code == Self::POLICY_VIOLATION
    }
}

impl fmt::Display for CloseInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason.is_empty() {
            write!(f, "close {}", self.code)
        } else {
            write!(f, "close {} ({})", self.code, self.reason)
        }
    }
}

/// Room for one frame in a connection's outbound buffer. It travels with the frame through the
/// queue and is given back when the frame has been written or dropped.
#[must_use = "room not used for a frame is given back at once"]
pub struct Room {
    permit: Option<OwnedSemaphorePermit>,
}

impl Room {
    /// Room from a transport that does not bound its buffer.
    pub fn unbounded() -> Room {
        Room { permit: None }
    }

    /// Room held from a bounded buffer until dropped.
    pub(crate) fn held(permit: OwnedSemaphorePermit) -> Room {
        Room {
            permit: Some(permit),
        }
    }
}

impl fmt::Debug for Room {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Room")
            .field("bytes", &self.permit.as_ref().map(|p| p.num_permits()))
            .finish()
    }
}

/// Why a transport operation failed. Cloneable so one failure can be reported to many waiters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// `send` was called while no socket is open (before `connect`, during a reconnect, or
    /// after `disconnect`).
    #[error("not connected")]
    NotConnected,
    /// The connection's outbound buffer is full: nothing was queued. Wait for room with the
    /// async sends, or try again later.
    #[error("the outbound buffer is full ({budget} bytes queued and not yet written)")]
    BufferFull {
        /// The buffer's budget in bytes.
        budget: usize,
    },
    /// Every text frame is one JSON object (docs/protocol.md, "Envelope"); anything else is refused
    /// before it reaches the wire.
    #[error("a text frame must be a JSON object")]
    NotAnObject,
    /// The transport carries only text frames.
    #[error("this transport does not carry binary frames")]
    BinaryUnsupported,
    /// The URL could not be used; fix the command line or configuration.
    #[error("invalid url `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing accepted the connection (refused, unreachable, timed out).
    #[error("could not connect to {addr}: {reason}")]
    Connect {
        /// The address dialled.
        addr: String,
        /// The underlying failure.
        reason: String,
    },
    /// The server answered the upgrade with an HTTP status instead of switching protocols
    /// (403: host or origin not allowed; 503: too many connections).
    #[error("the server refused the WebSocket upgrade with HTTP {status}")]
    UpgradeRejected {
        /// The HTTP status code.
        status: u16,
    },
    /// The server switched protocols, but its answer is not the WebSocket handshake RFC 6455
    /// §4.1 requires of it (a missing or wrong `Sec-WebSocket-Accept`, no `Upgrade:
    /// websocket`, a subprotocol or extension this client did not offer): it is not a
    /// WebSocket server, or something between rewrote the answer. Nothing was written after
    /// the upgrade request.
    #[error("the server's answer to the WebSocket upgrade is invalid: {reason}; nothing was sent after the upgrade request")]
    InvalidUpgrade {
        /// What is wrong with the answer.
        reason: String,
    },
    /// The server sent a message larger than this client takes
    /// ([`WsOptions::max_message_bytes`](super::WsOptions::max_message_bytes)). The connection
    /// was closed with 1009 and is not retried: the server would send it again.
    #[error("the server sent a message of more than {limit} bytes, this client's max_message_bytes; the connection was closed (1009)")]
    MessageTooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
    /// The server sent a text message whose parsed form would take more memory than this
    /// client holds for one message
    /// ([`WsOptions::max_parsed_bytes`](super::WsOptions::max_parsed_bytes)); it was not
    /// parsed. The connection was closed with 1009 and is not retried.
    #[error("the server sent a text message that would take about {estimate} bytes once parsed, more than this client's max_parsed_bytes ({limit}); the connection was closed (1009)")]
    ParsedTooLarge {
        /// What parsing it would take, estimated from the text before parsing.
        estimate: usize,
        /// The cap, in bytes.
        limit: usize,
    },
    /// Reading or writing an open connection failed.
    #[error("connection failed: {0}")]
    Io(String),
    /// The listener on the port belongs to another local user: nothing was sent to it, neither
    /// token nor frame. Ports are first come, first served, so this is what a port squatted
    /// after the carrier stopped looks like. Reconnects repeat the check.
    #[error(transparent)]
    ForeignListener(#[from] ForeignListener),
    /// Whose listener is on the port could not be found out (on Linux: `/proc/net/tcp` is
    /// unreadable or lists no entry for the connection): nothing was sent to it.
    #[error(transparent)]
    UnattributedListener(#[from] UnattributedListener),
}

impl TransportError {
    /// A message too large for this client: the connection ends with close 1009 and no
    /// reconnect, since a new connection would bring the same message again.
    pub(crate) fn is_oversize(&self) -> bool {
        matches!(
            self,
            TransportError::MessageTooLarge { .. } | TransportError::ParsedTooLarge { .. }
        )
    }
}

/// Handler for inbound text frames, each one JSON object.
pub type MessageHandler = Box<dyn Fn(&Value) + Send + Sync>;
/// Handler for inbound binary frames (payload channels, docs/protocol.md, "Channels"), each one
/// message.
pub type BinaryHandler = Box<dyn Fn(&Bytes) + Send + Sync>;
/// Handler for state changes; called once per change, never with an unchanged state.
pub type StateHandler = Box<dyn Fn(ConnectionState) + Send + Sync>;

/// A registered handler. Dropping it or calling [`dispose`](Subscription::dispose) unregisters
/// the handler; after that it is never called again.
#[must_use = "dropping a Subscription unregisters its handler at once"]
pub struct Subscription {
    // `None` once disposed, so drop after dispose does nothing.
    unsubscribe: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Subscription {
    /// A subscription that runs `unsubscribe` exactly once, on dispose or drop.
    pub fn new(unsubscribe: impl FnOnce() + Send + Sync + 'static) -> Subscription {
        Subscription {
            unsubscribe: Some(Box::new(unsubscribe)),
        }
    }

    /// A subscription with nothing to undo (e.g. binary handlers on a text-only transport).
    pub fn inert() -> Subscription {
        Subscription { unsubscribe: None }
    }

    /// Unregisters the handler now.
    pub fn dispose(mut self) {
        self.run();
    }

    fn run(&mut self) {
        if let Some(unsubscribe) = self.unsubscribe.take() {
            unsubscribe();
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.run();
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("active", &self.unsubscribe.is_some())
            .finish()
    }
}

/// A client-side frame pipe.
///
/// A transport does not interpret method names, route responses by id or reorder anything; the
/// handshake, request correlation and resume all live one layer up in
/// [`Client`](super::Client). Its obligations are:
///
/// - **one `send` = exactly one frame** on the wire, and every inbound text frame is delivered
///   to the message handlers as one JSON object;
/// - **no errors for bad input**: inbound text that is not a JSON object is dropped and logged;
/// - **observable state**: `disconnected` → `connecting` → `connected`, reported to the state
///   handlers on every change (a bare transport never reports `version_skew`);
/// - **best-effort reconnect** after an unexpected break (see
///   [`ReconnectingTransport`](super::ReconnectingTransport)).
///
/// Handlers run on the transport's own task, in arrival order, and must not block; a handler may
/// call `send` (it is synchronous) and may subscribe or dispose other handlers.
///
/// `connect` and `disconnect` return [`BoxFuture`] instead of being `async fn`s so that the trait
/// stays object-safe: the handshake layer holds any transport as `Arc<dyn Transport>`, and a new
/// transport (a pipe, native messaging) plugs in without generics leaking into its callers.
pub trait Transport: Send + Sync {
    /// The current state.
    fn state(&self) -> ConnectionState;

    /// Opens the connection. Resolves once the socket is open (state `connected`, reported to
    /// the state handlers before this returns) or the first attempt failed (state back to
    /// `disconnected`; no background retry after a failed first attempt). Calling it while
    /// connected or reconnecting does nothing.
    fn connect(&self) -> BoxFuture<'_, Result<(), TransportError>>;

    /// Closes the connection on purpose (close 1000) and stops any reconnect; state becomes
    /// `disconnected`. Safe to call more than once.
    fn disconnect(&self) -> BoxFuture<'_, ()>;

    /// Queues exactly one text frame. Fails with [`TransportError::NotConnected`] when no socket
    /// is open, with [`TransportError::NotAnObject`] when `frame` is not a JSON object, and with
    /// [`TransportError::BufferFull`] when the outbound buffer has no room for it.
    ///
    /// It must not call any handler before returning (callers may hold locks), and a transport
    /// must report leaving `connected` before it accepts frames for a new socket, so a caller
    /// that checks the state and then sends never lands on a socket it has not seen open.
    fn send(&self, frame: &Value) -> Result<(), TransportError>;

    /// Registers a handler for every inbound text frame that is a JSON object.
    fn on_message(&self, handler: MessageHandler) -> Subscription;

    /// Registers a handler for state changes.
    fn on_state_change(&self, handler: StateHandler) -> Subscription;

    /// Queues exactly one binary frame. Text-only transports keep the default, which fails with
    /// [`TransportError::BinaryUnsupported`].
    fn send_binary(&self, frame: Bytes) -> Result<(), TransportError> {
        let _ = frame;
        Err(TransportError::BinaryUnsupported)
    }

    /// Registers a handler for inbound binary frames. Text-only transports keep the default,
    /// which never calls the handler.
    fn on_binary(&self, handler: BinaryHandler) -> Subscription {
        drop(handler);
        Subscription::inert()
    }

    /// How the peer last closed the connection, if it did; cleared by the next `connect`.
    /// The handshake layer uses it to tell "refused (1008)" from "lost".
    fn last_close(&self) -> Option<CloseInfo> {
        None
    }

    /// Why the connection last broke without a close frame (a read or write error, a frame no
    /// server may send), if it did; cleared by the next `connect`.
    fn last_error(&self) -> Option<TransportError> {
        None
    }

    /// Waits for room for a frame of `bytes` in the outbound buffer. Transports without a
    /// bounded buffer keep the default, which never waits.
    fn reserve(&self, bytes: usize) -> BoxFuture<'_, Result<Room, TransportError>> {
        let _ = bytes;
        Box::pin(std::future::ready(Ok(Room::unbounded())))
    }

    /// Room for a frame of `bytes` now, or [`TransportError::BufferFull`].
    fn try_reserve(&self, bytes: usize) -> Result<Room, TransportError> {
        let _ = bytes;
        Ok(Room::unbounded())
    }

    /// Queues one text frame already serialized (one JSON object) in reserved `room`. The
    /// default parses it back and calls [`send`](Transport::send).
    fn send_text_in(&self, text: String, room: Room) -> Result<(), TransportError> {
        drop(room);
        let frame: Value = serde_json::from_str(&text).map_err(|_| TransportError::NotAnObject)?;
        self.send(&frame)
    }

    /// Queues one binary frame in reserved `room`. The default calls
    /// [`send_binary`](Transport::send_binary).
    fn send_binary_in(&self, frame: Bytes, room: Room) -> Result<(), TransportError> {
        drop(room);
        self.send_binary(frame)
    }

    /// Pauses reading after each inbound message while `backlog` is over its budget (the
    /// handshake layer's streams). The default ignores it.
    fn pace_inbound(&self, backlog: Arc<Backlog>) {
        drop(backlog);
    }
}

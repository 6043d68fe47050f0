//! What a [`Connector`] opens: a socket split in its read and write halves, and the messages
//! that cross them. The reconnecting transport drives these; the WebSocket dialer and the
//! reference suite's in-memory network implement them.

use bytes::Bytes;
use futures_util::future::BoxFuture;

use super::transport::{CloseInfo, TransportError};

/// One message handed to a socket's write half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    /// A text frame (one serialized JSON object).
    Text(String),
    /// A binary frame.
    Binary(Bytes),
    /// The answer to an inbound ping, with its payload.
    Pong(Bytes),
    /// A close frame; nothing is written after it.
    Close(CloseInfo),
}

/// One message read from a socket's read half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A whole (reassembled) text message.
    Text(Bytes),
    /// A whole (reassembled) binary message.
    Binary(Bytes),
    /// A ping; the transport answers it with [`Outbound::Pong`].
    Ping(Bytes),
    /// The peer closed the socket, with its code and reason when it sent one.
    Close(Option<CloseInfo>),
}

/// The read half of an open socket.
pub trait SocketReader: Send + 'static {
    /// The next inbound message. An error means the socket is broken.
    fn read(&mut self) -> BoxFuture<'_, Result<Inbound, TransportError>>;
}

/// The write half of an open socket, owned by the socket's single writer task.
pub trait SocketWriter: Send + 'static {
    /// Writes (and flushes) one message. An error means the socket is broken.
    fn write(&mut self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>>;
}

/// An open socket, split in its two halves.
pub struct Socket {
    /// Where inbound messages come from.
    pub reader: Box<dyn SocketReader>,
    /// Where outbound messages go.
    pub writer: Box<dyn SocketWriter>,
}

/// Opens sockets: called once by `connect()` and again for every reconnect attempt.
pub trait Connector: Send + Sync + 'static {
    /// Dials once. No retries here; the caller owns the retry policy.
    fn connect(&self) -> BoxFuture<'_, Result<Socket, TransportError>>;
}

//! What a [`Connector`] opens: a socket split in its read and write halves, and the messages
//! that cross them. The reconnecting transport drives these; the WebSocket dialer and the
//! reference suite's in-memory network implement them.

use std::sync::Mutex;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::subscribers::lock;
use super::transport::Room;
use super::transport::{CloseInfo, TransportError};
use carrier_protocol::close::CloseCode;

/// What a socket's writer is handed, in order.
pub(crate) enum Queued {
    /// A message with the room it holds (none for closes: control frames are small and must
    /// not wait behind data).
    Message(Outgoing, Room),
    /// Answer the latest ping: the payload is taken from the socket's [`OwedPong`] when the
    /// writer gets here.
    Pong,
}

/// The one pong a socket owes. A server may ping faster than the socket can write (or than it
/// reads our answers): RFC 6455 §5.5.3 lets an endpoint answer only the most recent ping, so
/// a new ping replaces the payload still owed, and at most one [`Queued::Pong`] is in the queue
/// — what pings make the client hold is one payload of at most 125 bytes, however many come.
#[derive(Default)]
pub(crate) struct OwedPong {
    payload: Mutex<Option<Bytes>>,
}

impl OwedPong {
    /// Owes a pong with `payload` instead of any owed before; `true` when none was owed, so the
    /// caller queues one [`Queued::Pong`] (a pong already queued will carry this payload).
    pub(crate) fn owe(&self, payload: Bytes) -> bool {
        lock(&self.payload).replace(payload).is_none()
    }

    /// The payload owed, which is then no longer owed.
    fn take(&self) -> Option<Bytes> {
        lock(&self.payload).take()
    }
}

/// One message handed to a socket's write half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
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
pub enum Incoming {
    /// A whole (reassembled) text message.
    Text(Bytes),
    /// A whole (reassembled) binary message.
    Binary(Bytes),
    /// A ping; the transport answers it with [`Outgoing::Pong`].
    Ping(Bytes),
    /// The peer closed the socket, with its code and reason when it sent one.
    Close(Option<CloseInfo>),
}

/// The read half of an open socket.
pub trait SocketReader: Send + 'static {
    /// The next inbound message. An error means the socket is broken.
    fn read(&mut self) -> BoxFuture<'_, Result<Incoming, TransportError>>;
}

/// The write half of an open socket, owned by the socket's single writer task.
pub trait SocketWriter: Send + 'static {
    /// Writes (and flushes) one message. An error means the socket is broken.
    fn write(&mut self, message: Outgoing) -> BoxFuture<'_, Result<(), TransportError>>;
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

/// The code to echo for a peer's close: its own, unless it is one a peer may not send (the
/// protocol's rule: reserved, unassigned, 1005/1006/1015, or outside the valid ranges).
pub(crate) fn echo_code(info: Option<&CloseInfo>) -> u16 {
    match info.map(|info| CloseCode(info.code)) {
        Some(code) if code.may_be_sent() => code.as_u16(),
        _ => CloseCode::NORMAL.as_u16(),
    }
}

/// The socket's single writer: drains the queue in order until a close is written, the queue is
/// dropped, or a write fails. `pong` is the socket's owed pong, taken when its turn comes.
pub(crate) async fn write_all(
    mut writer: Box<dyn SocketWriter>,
    mut pending: mpsc::UnboundedReceiver<Queued>,
    pong: std::sync::Arc<OwedPong>,
) -> Result<(), TransportError> {
    while let Some(queued) = pending.recv().await {
        let (message, room) = match queued {
            Queued::Message(message, room) => (message, room),
            Queued::Pong => match pong.take() {
                Some(payload) => (Outgoing::Pong(payload), Room::unbounded()),
                None => continue,
            },
        };
        let closing = matches!(message, Outgoing::Close(_));
        writer.write(message).await?;
        // Written: its bytes leave the budget.
        drop(room);
        if closing {
            break;
        }
    }
    Ok(())
}

/// A close frame: it holds no room.
pub(crate) fn control(message: Outgoing) -> Queued {
    Queued::Message(message, Room::unbounded())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(code: u16) -> CloseInfo {
        CloseInfo {
            code,
            reason: String::new(),
        }
    }

    #[test]
    fn a_close_is_echoed_with_its_code_unless_that_code_must_not_be_sent() {
        assert_eq!(echo_code(Some(&close(1001))), 1001);
        assert_eq!(echo_code(Some(&close(1008))), 1008);
        assert_eq!(echo_code(Some(&close(4000))), 4000);
        for reserved in [1004, 1005, 1006, 1015, 1016, 2000, 2999, 999, 5000] {
            assert_eq!(echo_code(Some(&close(reserved))), 1000, "{reserved}");
        }
        assert_eq!(echo_code(None), 1000);
    }
}

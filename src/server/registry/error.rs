//! Why a host-side channel operation was refused.

use crate::protocol::channel_frame::ChannelFrameError;
use crate::server::handle::ConnectionId;
use crate::server::outbound::DeliveryError;

/// A host-side channel operation that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// Another open channel already has this name.
    #[error("a channel named {0:?} is already registered")]
    NameTaken(String),
    /// The name is empty or longer than 255 bytes.
    #[error("channel names are 1 to 255 bytes of UTF-8, got {0} bytes")]
    InvalidName(usize),
    /// The event is not in the descriptor's `events`.
    #[error("event {event:?} is not declared on channel {channel:?}")]
    UndeclaredEvent {
        /// Channel name.
        channel: String,
        /// The event.
        event: String,
    },
    /// Binary on a channel that did not declare it.
    #[error("channel {0:?} does not declare binary frames")]
    BinaryNotDeclared(String),
    /// The channel was closed.
    #[error("channel {0:?} is closed")]
    Closed(String),
    /// No admitted, handshaken connection with that id.
    #[error("no connection {0}")]
    UnknownConnection(ConnectionId),
    /// The frame could not be encoded.
    #[error(transparent)]
    Encode(#[from] ChannelFrameError),
    /// A synchronous send on a bulk channel whose window is full (on the connection, or on one
    /// of the receivers of a broadcast): nothing was queued. The async sends wait instead.
    #[error("channel {0:?}: the bulk window is full; nothing was queued")]
    WindowFull(String),
    /// A bulk send was made on a channel that is not `bulk`.
    #[error("channel {0:?} is not a bulk channel")]
    NotBulk(String),
    /// The connection did not take the frame (closed, or failed as a slow reader).
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

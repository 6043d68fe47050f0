//! Why a host-side channel operation was refused.

use crate::handle::ConnectionId;
use crate::outbound::DeliveryError;
use carrier_protocol::channel_frame::ChannelFrameError;

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
    /// A synchronous send on a bulk channel that some receiver has no room for: nothing was
    /// queued, on any receiver, and the frame took no seq, so sending the same body again later
    /// duplicates nothing. The async sends ([`super::ChannelHandle::send_bulk_to`],
    /// [`super::ChannelHandle::broadcast_bulk`]) wait for room instead.
    #[error(
        "channel {channel:?}: the bulk window is full on {}; nothing was queued",
        receivers_text(receivers)
    )]
    WindowFull {
        /// Channel name.
        channel: String,
        /// The receivers of this send whose window on the channel is full. Empty when the send
        /// was refused only because an async bulk send of the channel is waiting for room: it
        /// holds the channel's order until its frame is queued.
        receivers: Vec<ConnectionId>,
    },
    /// A bulk send was made on a channel that is not `bulk`.
    #[error("channel {0:?} is not a bulk channel")]
    NotBulk(String),
    /// The connection did not take the frame (closed, or failed as a slow reader).
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

/// `c1, c4`, or what an empty list of full receivers means.
fn receivers_text(receivers: &[ConnectionId]) -> String {
    if receivers.is_empty() {
        return "the receiver an async send of the channel waits for".to_string();
    }
    let ids: Vec<String> = receivers.iter().map(ToString::to_string).collect();
    ids.join(", ")
}

//! What a channel hands its host: [`ChannelInbound`] messages (a frame a client sent, or its
//! disconnect), and what a delivery that has to wait leaves to the reader ([`Backpressure`]).
//! Apart from the channel entry, so the credit ledgers that hold such messages for the host and
//! the entry that delivers them both use it without importing each other.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::handle::ConnectionId;
use carrier_protocol::channel_frame::EventBytes;

/// What a client sent on a channel, or that it went away.
#[derive(Debug, Clone, PartialEq)]
pub enum InboundBody {
    /// Opaque bytes: a slice of the received message, not a copy.
    Binary(Bytes),
    /// A declared event: its name and its body's bytes as received (the payload is parsed on
    /// request, [`EventBytes::payload`]). Forward it unchanged with [`FrameBody::EventBytes`].
    ///
    /// [`FrameBody::EventBytes`]: carrier_protocol::channel_frame::FrameBody::EventBytes
    Event(EventBytes),
    /// The connection, which had sent on this channel, has ended.
    Disconnected,
}

/// One inbound channel message with the connection it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelInbound {
    /// The sending connection.
    pub connection: ConnectionId,
    /// The client's own seq for this channel (0 for `Disconnected`).
    pub seq: u32,
    /// What arrived.
    pub body: InboundBody,
}

/// The rest of a delivery that has to wait (a full inbound stream, a full credit ledger): the
/// reader awaits it before reading on.
pub(crate) type Backpressure = Pin<Box<dyn Future<Output = ()> + Send>>;

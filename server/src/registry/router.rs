//! Inbound routing: one binary message of a handshaken connection, checked against the channel
//! it names and handed to that channel's sink, or refused.
//!
//! The router sends nothing itself: a refusal comes back to the connection as a
//! [`ChannelRefusal`], which the connection answers with a `protocol_error` event and stays
//! open.

use bytes::Bytes;
use serde_json::{Map, Value};

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::credit::CreditLedger;
use super::entry::ChannelEntry;
use super::map::ChannelMap;
use super::message::{Backpressure, ChannelInbound, InboundBody};
use crate::handle::Connection;
use crate::inbound_budget::Payment;
use carrier_protocol::channel::DeliveryClass;
use carrier_protocol::channel_frame::{self, EventBytes, FrameKind};
use carrier_protocol::error::{protocol_error_event, ProtocolErrorCode};
use carrier_protocol::Role;

/// Why an inbound channel frame was not delivered, with what the `protocol_error` event reports
/// about it: the code, a message, and the frame's channel and seq where they could be read. A
/// text profile with a wire of its own answers it in that wire
/// ([`crate::TextSession::channel_refused`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRefusal {
    pub(crate) code: ProtocolErrorCode,
    pub(crate) message: String,
    /// The frame's channel; `None` when not even the header could be read.
    pub(crate) channel: Option<String>,
    /// The frame's seq; `None` when not even the header could be read.
    pub(crate) seq: Option<u32>,
    /// The undeclared event's name, for [`ProtocolErrorCode::UndeclaredEvent`].
    pub(crate) event: Option<String>,
    /// What the codec refused, for [`ProtocolErrorCode::MalformedFrame`].
    pub(crate) frame_error: Option<channel_frame::ChannelFrameError>,
    /// The channel is host → clients only (code [`ProtocolErrorCode::Forbidden`]).
    pub(crate) host_only: bool,
}

impl ChannelRefusal {
    fn new(code: ProtocolErrorCode, message: impl Into<String>, channel: &str, seq: u32) -> Self {
        ChannelRefusal {
            code,
            message: message.into(),
            channel: Some(channel.to_string()),
            seq: Some(seq),
            event: None,
            frame_error: None,
            host_only: false,
        }
    }

    /// The `protocol_error` code.
    pub fn code(&self) -> ProtocolErrorCode {
        self.code
    }

    /// The carrier's own explanation (the `message` of its `protocol_error` event).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The frame's channel; `None` when not even the header could be read.
    pub fn channel(&self) -> Option<&str> {
        self.channel.as_deref()
    }

    /// The frame's seq; `None` when not even the header could be read.
    pub fn seq(&self) -> Option<u32> {
        self.seq
    }

    /// The name of the event the channel did not declare (code `undeclared_event`).
    pub fn undeclared_event(&self) -> Option<&str> {
        self.event.as_deref()
    }

    /// Whether the frame was refused because its channel takes frames from the host only
    /// (`direction: "host_to_clients"`, code `forbidden`), not because of the sender's role.
    pub fn host_only_channel(&self) -> bool {
        self.host_only
    }

    /// What the channel-frame codec refused (code `malformed_frame`).
    pub fn frame_error(&self) -> Option<&channel_frame::ChannelFrameError> {
        self.frame_error.as_ref()
    }

    /// The `protocol_error` event a carrier connection answers it with (a text message, with
    /// `channel` and `seq` when known), unless its text profile answers in a wire of its own
    /// ([`crate::TextSession::channel_refused`]).
    pub fn error_event(&self) -> Vec<u8> {
        let mut extra = Map::new();
        if let Some(c) = &self.channel {
            extra.insert("channel".into(), Value::from(c.as_str()));
        }
        if let Some(s) = self.seq {
            extra.insert("seq".into(), Value::from(s));
        }
        protocol_error_event(self.code, &self.message, extra)
    }
}

/// The channel a connection sent on last, so a stream of frames on one channel costs no map
/// lookups (the registry's map and the channel's set of senders). One per connection, held by
/// its reader; a channel closed since is looked up again.
#[derive(Default)]
pub(crate) struct RouteCache {
    last: Option<Arc<ChannelEntry>>,
    /// The connection's credit on `last`, when that is a bulk channel and it has credit.
    ledger: Option<Arc<CreditLedger>>,
}

/// Routes one inbound binary message of a handshaken connection to its channel's sink.
///
/// Synchronous on purpose: a handler sink and a stream with room take the message at once.
/// Only a full stream (for a connection without credit) or a full credit ledger returns the
/// rest of the delivery (`Ok(Some(..))`), which the reader awaits before it reads on
/// (backpressure). An `async fn` here would make every connection's reader future carry this
/// state for its whole life (~380 bytes per connection).
///
/// The body is checked before anything else, as a full decode would: an event body only as far
/// as its name (docs/protocol.md, "Channels"), and handed on as the bytes received.
/// `payment` pays for `msg`'s buffer (see [`Payment`]): a credited bulk frame that has to wait
/// for its host moves it to its credit ledger.
pub(super) fn route(
    map: &ChannelMap,
    conn: &Connection,
    msg: Bytes,
    payment: Option<Payment>,
    cache: &mut RouteCache,
) -> Result<Option<Backpressure>, ChannelRefusal> {
    let malformed = |e: channel_frame::ChannelFrameError| {
        let header = channel_frame::peek(&msg).ok();
        ChannelRefusal {
            code: ProtocolErrorCode::MalformedFrame,
            message: e.to_string(),
            channel: header.as_ref().map(|h| h.channel.to_string()),
            seq: header.as_ref().map(|h| h.seq),
            event: None,
            frame_error: Some(e),
            host_only: false,
        }
    };
    let header = channel_frame::peek(&msg).map_err(malformed)?;
    let (channel, seq) = (header.channel, header.seq);
    let body = msg.slice(header.body_offset..);
    // Bytes of the frame's body: what a bulk channel's credit counts.
    let body_len = body.len();
    let body = match header.kind {
        FrameKind::Binary => Body::Binary(body),
        FrameKind::Event => Body::Event(EventBytes::parse(body).map_err(malformed)?),
    };
    if conn.role() < Role::Drive {
        return Err(ChannelRefusal::new(
            ProtocolErrorCode::Forbidden,
            "observe connections may not send channel frames",
            channel,
            seq,
        ));
    }
    let entry = match &cache.last {
        Some(e) if &*e.name == channel && !e.closed.load(Ordering::Acquire) => e.clone(),
        _ => {
            let Some(entry) = map.channels.get(channel).map(|e| e.clone()) else {
                return Err(ChannelRefusal::new(
                    ProtocolErrorCode::UnknownChannel,
                    "no channel with this name is registered",
                    channel,
                    seq,
                ));
            };
            // Once per connection and channel (the cache skips it after).
            if !entry.senders.contains(&conn.id()) {
                entry.senders.insert(conn.id());
            }
            cache.last = Some(entry.clone());
            cache.ledger = None;
            entry
        }
    };
    if !entry.descriptor.direction.clients_send() {
        let mut refusal = ChannelRefusal::new(
            ProtocolErrorCode::Forbidden,
            "this channel carries frames from the host to clients only",
            channel,
            seq,
        );
        refusal.host_only = true;
        return Err(refusal);
    }
    let body = match body {
        Body::Binary(bytes) if entry.descriptor.binary => InboundBody::Binary(bytes),
        Body::Binary(_) => {
            return Err(ChannelRefusal::new(
                ProtocolErrorCode::BinaryNotDeclared,
                "this channel does not accept binary frames",
                channel,
                seq,
            ));
        }
        Body::Event(event) if entry.descriptor.declares(event.event()) => InboundBody::Event(event),
        Body::Event(event) => {
            let mut refusal = ChannelRefusal::new(
                ProtocolErrorCode::UndeclaredEvent,
                format!("event {:?} is not declared on this channel", event.event()),
                channel,
                seq,
            );
            refusal.event = Some(event.event().to_owned());
            return Err(refusal);
        }
    };
    let msg = ChannelInbound {
        connection: conn.id(),
        seq,
        body,
    };
    if entry.descriptor.delivery == DeliveryClass::Bulk && conn.has_bulk_credit() {
        let ledger = cache
            .ledger
            .get_or_insert_with(|| entry.ledger(conn, map.inbound.get(), &map.bulk_frames_dropped))
            .clone();
        let bytes = body_len;
        if let Err(remaining) = ledger.spend(bytes) {
            return Err(ChannelRefusal::new(
                ProtocolErrorCode::CreditExceeded,
                format!(
                    "a bulk frame body of {bytes} bytes is over the remaining credit of \
                     {remaining} bytes on this channel; wait for channel.credit"
                ),
                channel,
                seq,
            ));
        }
        return Ok(entry.deliver_credited(&ledger, msg, bytes, payment));
    }
    Ok(entry.deliver(msg))
}

/// A frame's body once checked, before the channel's declaration is.
enum Body {
    Binary(Bytes),
    Event(EventBytes),
}

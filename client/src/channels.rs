//! Payload channels on the client: each channel's inbound frames as a stream, and sends that
//! number their own `seq`, wait for room in the outbound buffer and, on a bulk channel of a
//! server with `bulk_credit`, for credit.

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use super::calls::Client;
use super::error::{ChannelSendError, ClientError};
use super::machine::{ChannelGo, SendKind};
use super::routes::ChannelStream;
use super::subscribers::lock;
use super::transport::Room;
use carrier_protocol::channel_frame::{self, EncodedFrame, EventBytes, FrameBody};

/// A frame about to be sent: its kind and body, encoded once its `seq` is known.
enum Outgoing<'a> {
    Binary(Bytes),
    Event { event: &'a str, body: EventBytes },
}

impl Outgoing<'_> {
    fn kind(&self) -> SendKind<'_> {
        match self {
            Outgoing::Binary(_) => SendKind::Binary,
            Outgoing::Event { event, .. } => SendKind::Event(event),
        }
    }

    fn body_len(&self) -> usize {
        match self {
            Outgoing::Binary(body) => body.len(),
            Outgoing::Event { body, .. } => body.bytes().len(),
        }
    }

    fn encode(&self, channel: &str, seq: u32) -> Result<Bytes, ChannelSendError> {
        let encoded = match self {
            Outgoing::Binary(body) => channel_frame::encode_binary(channel, seq, body.clone()),
            Outgoing::Event { body, .. } => {
                channel_frame::encode(channel, seq, &FrameBody::EventBytes(body.clone()))
            }
        };
        encoded
            .map(join)
            .map_err(|error| encode_error(channel, error))
    }
}

fn join(frame: EncodedFrame) -> Bytes {
    let mut out = BytesMut::with_capacity(frame.len());
    out.extend_from_slice(&frame.head);
    out.extend_from_slice(&frame.body);
    out.freeze()
}

fn encode_error(channel: &str, error: impl std::fmt::Display) -> ChannelSendError {
    ChannelSendError::Encode {
        channel: channel.to_owned(),
        reason: error.to_string(),
    }
}

/// The frame header's size at most: fixed part and a 255-byte name.
const MAX_HEAD: usize = 10 + channel_frame::MAX_CHANNEL_NAME;

impl Client {
    /// The inbound frames of `channel` (binary and event frames, and `channel.dropped`
    /// notices), in arrival order, from now on. Several streams of one channel each get every
    /// frame. What a stream holds counts against the client's inbound backlog (see
    /// [`ClientOptions::inbound_backlog`](super::ClientOptions::inbound_backlog)): read it or
    /// drop it.
    pub fn channel(&self, channel: &str) -> ChannelStream {
        self.inner.channels.subscribe(channel)
    }

    /// Sends an event frame on `channel`, numbered with the channel's next `seq` (returned).
    /// Waits while the outbound buffer is full and, on a bulk channel with credit, until the
    /// server has granted enough. Fails at once when the channel does not declare `event`.
    pub async fn send_channel_event(
        &self,
        channel: &str,
        event: &str,
        payload: &Value,
    ) -> Result<u32, ClientError> {
        let frame = event_frame(channel, event, payload)?;
        self.send_channel(channel, frame).await
    }

    /// Sends an opaque binary frame on `channel`, numbered with the channel's next `seq`
    /// (returned). Waits like [`send_channel_event`](Client::send_channel_event).
    pub async fn send_channel_binary(
        &self,
        channel: &str,
        body: Bytes,
    ) -> Result<u32, ClientError> {
        self.send_channel(channel, Outgoing::Binary(body)).await
    }

    /// [`send_channel_event`](Client::send_channel_event) without waiting: a full outbound
    /// buffer fails with [`TransportError::BufferFull`](super::TransportError::BufferFull),
    /// too little credit with [`ChannelSendError::AwaitingCredit`]; nothing is sent then.
    pub fn try_send_channel_event(
        &self,
        channel: &str,
        event: &str,
        payload: &Value,
    ) -> Result<u32, ClientError> {
        let frame = event_frame(channel, event, payload)?;
        self.try_send_channel(channel, frame)
    }

    /// [`send_channel_binary`](Client::send_channel_binary) without waiting, failing as
    /// [`try_send_channel_event`](Client::try_send_channel_event) does.
    pub fn try_send_channel_binary(&self, channel: &str, body: Bytes) -> Result<u32, ClientError> {
        self.try_send_channel(channel, Outgoing::Binary(body))
    }

    /// Credit left on a bulk `channel` of the current connection (`None`: not counted — not a
    /// bulk channel, or a server without `bulk_credit`).
    pub fn channel_credit(&self, channel: &str) -> Option<u64> {
        lock(&self.inner.core).machine.credit(channel)
    }

    /// One frame now or not at all: room in the outbound buffer and, on a counted bulk channel,
    /// enough credit.
    fn try_send_channel(&self, channel: &str, frame: Outgoing<'_>) -> Result<u32, ClientError> {
        let room = self
            .inner
            .transport
            .try_reserve(MAX_HEAD + frame.body_len())?;
        self.send_now(channel, &frame, room)?.ok_or_else(|| {
            ChannelSendError::AwaitingCredit {
                channel: channel.to_owned(),
                left: self.channel_credit(channel).unwrap_or(0),
            }
            .into()
        })
    }

    async fn send_channel(&self, channel: &str, frame: Outgoing<'_>) -> Result<u32, ClientError> {
        let inner = &self.inner;
        loop {
            // Room first (it may wait for the writer), then credit and seq under the lock.
            let room = inner.transport.reserve(MAX_HEAD + frame.body_len()).await?;
            let granted = inner.credit.notified();
            tokio::pin!(granted);
            granted.as_mut().enable();
            if let Some(seq) = self.send_now(channel, &frame, room)? {
                return Ok(seq);
            }
            // Woken by a grant or a connection change; the room is given back meanwhile.
            granted.await;
        }
    }

    /// Sends `frame` if the machine lets it go now: `Ok(None)` when it must wait for credit.
    fn send_now(
        &self,
        channel: &str,
        frame: &Outgoing<'_>,
        room: Room,
    ) -> Result<Option<u32>, ClientError> {
        let mut core = lock(&self.inner.core);
        match core
            .machine
            .channel_frame(channel, frame.kind(), frame.body_len())?
        {
            ChannelGo::Send { seq } => {
                let bytes = frame.encode(channel, seq)?;
                // Under the lock, so frames leave in `seq` order.
                self.inner.transport.send_binary_in(bytes, room)?;
                Ok(Some(seq))
            }
            ChannelGo::AwaitCredit { .. } => Ok(None),
        }
    }
}

fn event_frame<'a>(
    channel: &str,
    event: &'a str,
    payload: &Value,
) -> Result<Outgoing<'a>, ClientError> {
    let encoded = channel_frame::encode_event_frame(channel, 0, event, payload)
        .map_err(|error| encode_error(channel, error))?;
    let body = EventBytes::parse(encoded.body).map_err(|error| encode_error(channel, error))?;
    Ok(Outgoing::Event { event, body })
}

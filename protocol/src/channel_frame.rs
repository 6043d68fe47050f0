//! The RBF v1 channel-frame codec (docs/protocol.md, "Channels"): one binary WebSocket message
//! carries one frame.
//!
//! ```text
//! 0..2  magic "RBF"   3  version = 1   4  kind: 0x01 opaque binary, 0x02 event (UTF-8 JSON)
//! 5     channel-name length N (1..=255)   6..6+N  channel name (UTF-8)
//! +4    seq (u32, big-endian)   rest  body
//! ```
//!
//! Both directions avoid copying payloads. [`decode`] hands an opaque payload back as a slice of
//! the received message, and [`encode`] returns the header and the body as two separate shared
//! buffers ([`EncodedFrame`]), so a payload that is fanned out is never duplicated.
//! [`peek`] reads only the header, for routing before the body is looked at.
//!
//! An event body is the JSON object `{"event": string, "payload": any}`. On decode a missing
//! `payload` reads as `null`, other keys are ignored (room for later additions), and an empty
//! `event` name is refused, as the reference codec does. The encoder refuses everything the
//! decoder refuses, so whatever [`encode`] accepts round-trips.
//!
//! ```
//! use bytes::Bytes;
//! use carrier_protocol::channel_frame::{decode, encode_binary, FrameBody};
//!
//! let encoded = encode_binary("audio", 7, Bytes::from_static(b"\x01\x02")).unwrap();
//! let frame = decode(Bytes::from(encoded.to_vec())).unwrap();
//! assert_eq!(frame.channel, "audio");
//! assert_eq!(frame.seq, 7);
//! assert_eq!(frame.body, FrameBody::Binary(Bytes::from_static(b"\x01\x02")));
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde_json::Value;

mod error;
mod layout;
#[cfg(test)]
mod tests;

pub use error::ChannelFrameError;
pub use layout::{MAGIC, MAX_CHANNEL_NAME, VERSION};
use layout::{PREFIX_LEN, SEQ_LEN};

/// What a frame carries, as told by its kind byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// `0x01`: opaque bytes the carrier never interprets.
    Binary = 1,
    /// `0x02`: a UTF-8 JSON object `{"event", "payload"}`.
    Event = 2,
}

impl FrameKind {
    /// The kind for a wire byte, or `None` for a byte no kind uses.
    pub fn from_byte(byte: u8) -> Option<FrameKind> {
        match byte {
            1 => Some(FrameKind::Binary),
            2 => Some(FrameKind::Event),
            _ => None,
        }
    }
}

/// The body of a decoded (or to-be-encoded) frame.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameBody {
    /// Opaque bytes. After [`decode`] this is a slice of the received message, not a copy.
    Binary(Bytes),
    /// A named application event with its JSON payload (`null` when the sender left it out).
    Event {
        /// The event name; never empty.
        event: String,
        /// The event's payload.
        payload: Value,
    },
    /// An event whose body is sent exactly as these bytes: an event received and forwarded
    /// unchanged (key order and spacing survive: docs/protocol.md, "Channels"). Never made by
    /// [`decode`].
    EventBytes(EventBytes),
}

/// An event frame's body as received: the bytes of its JSON object, checked to be an object
/// whose `event` is a non-empty string, and that name. The payload is parsed only when asked
/// for ([`EventBytes::payload`]), so routing an event costs one scan of its body and no tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventBytes {
    event: String,
    bytes: Bytes,
}

impl EventBytes {
    /// Checks `bytes` as [`decode`] checks an event body (UTF-8, a JSON object, a non-empty
    /// string `event`) and keeps them as they are.
    pub fn parse(bytes: Bytes) -> Result<Self, ChannelFrameError> {
        let event = event_name(&bytes)?;
        Ok(EventBytes { event, bytes })
    }

    /// The event name; never empty.
    pub fn event(&self) -> &str {
        &self.event
    }

    /// The body's bytes as received: `{"event": …, "payload": …}` with the sender's key order
    /// and spacing.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The payload, parsed now (`null` when the sender left it out).
    pub fn payload(&self) -> Result<Value, ChannelFrameError> {
        match decode_event_body(&self.bytes)? {
            FrameBody::Event { payload, .. } => Ok(payload),
            _ => Ok(Value::Null),
        }
    }
}

/// The event name of an event body, with the refusals of [`decode`], without building the
/// body's JSON tree (every other field, the payload too, is only scanned).
fn event_name(body: &[u8]) -> Result<String, ChannelFrameError> {
    use serde::de::IgnoredAny;
    use std::borrow::Cow;

    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow, default)]
        event: Option<Cow<'a, str>>,
    }

    let text = std::str::from_utf8(body).map_err(|_| ChannelFrameError::EventBodyNotUtf8)?;
    let not_json = |err: serde_json::Error| ChannelFrameError::EventBodyNotJson {
        detail: err.to_string(),
    };
    if !text.trim_start().starts_with('{') {
        // Valid JSON that is not an object, or not JSON at all.
        serde_json::from_str::<IgnoredAny>(text).map_err(not_json)?;
        return Err(ChannelFrameError::EventBodyNotObject);
    }
    let head: Head<'_> = match serde_json::from_str(text) {
        Ok(head) => head,
        // `event` of another type, or twice: as `decode` would see it, no string name.
        Err(err) if err.is_data() => return Err(ChannelFrameError::MissingEventName),
        Err(err) => return Err(not_json(err)),
    };
    match head.event {
        None => Err(ChannelFrameError::MissingEventName),
        Some(event) if event.is_empty() => Err(ChannelFrameError::EmptyEventName),
        Some(event) => Ok(event.into_owned()),
    }
}

impl FrameBody {
    /// The wire kind this body is sent as.
    pub fn kind(&self) -> FrameKind {
        match self {
            FrameBody::Binary(_) => FrameKind::Binary,
            FrameBody::Event { .. } | FrameBody::EventBytes(_) => FrameKind::Event,
        }
    }
}

/// One channel frame: which channel, its sender's sequence number, and what it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelFrame {
    /// The channel name, 1..=255 bytes of UTF-8.
    pub channel: String,
    /// The sender's per-channel sequence number (`seq`; docs/protocol.md, "Channels").
    pub seq: u32,
    /// The payload.
    pub body: FrameBody,
}

/// The header of a frame, borrowed from the message: enough to route it without reading the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader<'a> {
    /// Binary or event.
    pub kind: FrameKind,
    /// The channel name, borrowed from the message.
    pub channel: &'a str,
    /// The sender's sequence number.
    pub seq: u32,
    /// Where the body starts in the message (the body runs to its end).
    pub body_offset: usize,
}

/// Reads and checks a frame's header without looking at its body.
///
/// Refuses anything [`decode`] refuses about the header; the body is not checked here (an event
/// body's JSON is only parsed by [`decode`]).
pub fn peek(msg: &[u8]) -> Result<FrameHeader<'_>, ChannelFrameError> {
    // Check the magic on whatever is present first, so short non-RBF data reads as "not a frame".
    let magic_seen = &msg[..msg.len().min(MAGIC.len())];
    if !MAGIC.starts_with(magic_seen) {
        return Err(ChannelFrameError::BadMagic);
    }
    let [_, _, _, version, kind, name_len, ..] = *msg else {
        return Err(ChannelFrameError::TooShort { len: msg.len() });
    };
    if version != VERSION {
        return Err(ChannelFrameError::UnsupportedVersion(version));
    }
    let kind = FrameKind::from_byte(kind).ok_or(ChannelFrameError::UnknownKind(kind))?;
    if name_len == 0 {
        return Err(ChannelFrameError::EmptyChannelName);
    }
    let name_end = PREFIX_LEN + usize::from(name_len);
    let body_offset = name_end + SEQ_LEN;
    let (Some(name), Some(seq)) = (
        msg.get(PREFIX_LEN..name_end),
        msg.get(name_end..body_offset),
    ) else {
        return Err(ChannelFrameError::Truncated {
            needed: body_offset,
            len: msg.len(),
        });
    };
    let channel = std::str::from_utf8(name).map_err(|_| ChannelFrameError::ChannelNameNotUtf8)?;
    let seq = u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]);
    Ok(FrameHeader {
        kind,
        channel,
        seq,
        body_offset,
    })
}

/// Decodes one received binary message.
///
/// A binary payload is `msg.slice(..)` of the input: it shares the message's memory.
pub fn decode(msg: Bytes) -> Result<ChannelFrame, ChannelFrameError> {
    let header = peek(&msg)?;
    let body = match header.kind {
        FrameKind::Binary => FrameBody::Binary(msg.slice(header.body_offset..)),
        FrameKind::Event => decode_event_body(&msg[header.body_offset..])?,
    };
    Ok(ChannelFrame {
        channel: header.channel.to_owned(),
        seq: header.seq,
        body,
    })
}

fn decode_event_body(body: &[u8]) -> Result<FrameBody, ChannelFrameError> {
    let text = std::str::from_utf8(body).map_err(|_| ChannelFrameError::EventBodyNotUtf8)?;
    let value: Value =
        serde_json::from_str(text).map_err(|err| ChannelFrameError::EventBodyNotJson {
            detail: err.to_string(),
        })?;
    let Value::Object(mut fields) = value else {
        return Err(ChannelFrameError::EventBodyNotObject);
    };
    let Some(Value::String(event)) = fields.remove("event") else {
        return Err(ChannelFrameError::MissingEventName);
    };
    if event.is_empty() {
        return Err(ChannelFrameError::EmptyEventName);
    }
    let payload = fields.remove("payload").unwrap_or(Value::Null);
    Ok(FrameBody::Event { event, payload })
}

/// An encoded frame in two shared parts, so a payload is never copied to be sent.
///
/// Send `head` followed by `body` as one binary message (or [`to_vec`](Self::to_vec) when a
/// single buffer is needed). Cloning is cheap: both parts are reference-counted.
#[derive(Debug, Clone)]
pub struct EncodedFrame {
    /// Magic, version, kind, name length, name and `seq`.
    pub head: Bytes,
    /// The payload: for binary frames the caller's own `Bytes`, for events the serialized JSON.
    pub body: Bytes,
}

impl EncodedFrame {
    /// The length of the whole message in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// Whether the message is empty; never true for a frame made by [`encode`].
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.body.is_empty()
    }

    /// The whole message in one freshly allocated buffer (this copies the payload).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.body);
        out
    }
}

/// Encodes a frame. Refuses an empty or over-long (> 255 bytes) channel name and an empty event
/// name.
pub fn encode(
    channel: &str,
    seq: u32,
    body: &FrameBody,
) -> Result<EncodedFrame, ChannelFrameError> {
    match body {
        FrameBody::Binary(payload) => encode_binary(channel, seq, payload.clone()),
        FrameBody::Event { event, payload } => encode_event_frame(channel, seq, event, payload),
        FrameBody::EventBytes(body) => Ok(EncodedFrame {
            head: encode_head(FrameKind::Event, channel, seq)?,
            body: body.bytes.clone(),
        }),
    }
}

/// Encodes an opaque binary frame; `payload` becomes the frame's `body` without a copy.
pub fn encode_binary(
    channel: &str,
    seq: u32,
    payload: Bytes,
) -> Result<EncodedFrame, ChannelFrameError> {
    Ok(EncodedFrame {
        head: encode_head(FrameKind::Binary, channel, seq)?,
        body: payload,
    })
}

/// Encodes an event frame with the compact JSON body `{"event":…,"payload":…}`.
pub fn encode_event_frame(
    channel: &str,
    seq: u32,
    event: &str,
    payload: &Value,
) -> Result<EncodedFrame, ChannelFrameError> {
    /// The wire body, borrowed; field order is the order the keys are written in.
    #[derive(Serialize)]
    struct EventBody<'a> {
        event: &'a str,
        payload: &'a Value,
    }

    let head = encode_head(FrameKind::Event, channel, seq)?;
    if event.is_empty() {
        return Err(ChannelFrameError::EmptyEventName);
    }
    let body = serde_json::to_vec(&EventBody { event, payload }).map_err(|err| {
        ChannelFrameError::EventNotSerializable {
            detail: err.to_string(),
        }
    })?;
    Ok(EncodedFrame {
        head,
        body: crate::envelope::encode::exact(body),
    })
}

fn encode_head(kind: FrameKind, channel: &str, seq: u32) -> Result<Bytes, ChannelFrameError> {
    let name = channel.as_bytes();
    let name_len = match u8::try_from(name.len()) {
        Ok(0) => return Err(ChannelFrameError::EmptyChannelName),
        Ok(len) => len,
        Err(_) => return Err(ChannelFrameError::ChannelNameTooLong { len: name.len() }),
    };
    let mut head = BytesMut::with_capacity(PREFIX_LEN + name.len() + SEQ_LEN);
    head.put_slice(&MAGIC);
    head.put_u8(VERSION);
    head.put_u8(kind as u8);
    head.put_u8(name_len);
    head.put_slice(name);
    head.put_u32(seq);
    Ok(head.freeze())
}

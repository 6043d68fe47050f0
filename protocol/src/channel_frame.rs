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

#[cfg(test)]
mod tests {
    //! Unit tests of the codec internals; the wire vectors and properties live in `tests/`.

    use super::*;
    use serde_json::json;

    #[test]
    fn header_is_written_big_endian_after_the_name() {
        let frame = encode_binary("ab", 0x0102_0304, Bytes::new()).unwrap();
        assert_eq!(&frame.head[..], b"RBF\x01\x01\x02ab\x01\x02\x03\x04");
        assert!(frame.body.is_empty());
        assert_eq!(frame.len(), 12);
        assert!(!frame.is_empty());
    }

    #[test]
    fn encode_binary_shares_the_payload_instead_of_copying_it() {
        let payload = Bytes::from(vec![9u8; 64]);
        let frame = encode_binary("a", 1, payload.clone()).unwrap();
        assert_eq!(frame.body.as_ptr(), payload.as_ptr());
    }

    #[test]
    fn encode_refuses_empty_and_overlong_names_and_accepts_255_bytes() {
        let body = FrameBody::Binary(Bytes::new());
        assert_eq!(
            encode("", 0, &body).unwrap_err(),
            ChannelFrameError::EmptyChannelName
        );
        let long = "é".repeat(128); // 256 bytes
        assert_eq!(
            encode(&long, 0, &body).unwrap_err(),
            ChannelFrameError::ChannelNameTooLong { len: 256 }
        );
        assert!(encode(&"x".repeat(MAX_CHANNEL_NAME), 0, &body).is_ok());
    }

    #[test]
    fn encode_event_refuses_an_empty_event_name() {
        let err = encode_event_frame("ui", 0, "", &Value::Null).unwrap_err();
        assert_eq!(err, ChannelFrameError::EmptyEventName);
    }

    #[test]
    fn event_without_payload_decodes_as_null_and_extra_keys_are_ignored() {
        let mut msg = encode_head(FrameKind::Event, "ui", 5).unwrap().to_vec();
        msg.extend_from_slice(br#"{"extra":[1],"event":"tick"}"#);
        let frame = decode(Bytes::from(msg)).unwrap();
        assert_eq!(
            frame.body,
            FrameBody::Event {
                event: "tick".into(),
                payload: Value::Null
            }
        );
    }

    #[test]
    fn event_name_must_be_a_string() {
        let mut msg = encode_head(FrameKind::Event, "ui", 5).unwrap().to_vec();
        msg.extend_from_slice(br#"{"event":7,"payload":1}"#);
        assert_eq!(
            decode(Bytes::from(msg)).unwrap_err(),
            ChannelFrameError::MissingEventName
        );
    }

    #[test]
    fn event_body_that_is_not_utf8_is_refused_as_such() {
        let mut msg = encode_head(FrameKind::Event, "ui", 5).unwrap().to_vec();
        msg.extend_from_slice(b"{\"event\":\"\xff\"}");
        assert_eq!(
            decode(Bytes::from(msg)).unwrap_err(),
            ChannelFrameError::EventBodyNotUtf8
        );
    }

    #[test]
    fn channel_name_that_is_not_utf8_is_refused() {
        let msg = b"RBF\x01\x01\x01\xff\x00\x00\x00\x00";
        assert_eq!(
            peek(msg).unwrap_err(),
            ChannelFrameError::ChannelNameNotUtf8
        );
    }

    #[test]
    fn short_input_is_bad_magic_unless_it_could_still_be_a_frame() {
        assert_eq!(peek(b"{}").unwrap_err(), ChannelFrameError::BadMagic);
        assert_eq!(
            peek(b"").unwrap_err(),
            ChannelFrameError::TooShort { len: 0 }
        );
        assert_eq!(
            peek(b"RB").unwrap_err(),
            ChannelFrameError::TooShort { len: 2 }
        );
    }

    #[test]
    fn peek_reports_where_the_body_starts_without_parsing_it() {
        let mut msg = encode_head(FrameKind::Event, "chat", 9).unwrap().to_vec();
        msg.extend_from_slice(b"not json");
        let header = peek(&msg).unwrap();
        assert_eq!(header.kind, FrameKind::Event);
        assert_eq!(header.channel, "chat");
        assert_eq!(header.seq, 9);
        assert_eq!(&msg[header.body_offset..], b"not json");
    }

    #[test]
    fn every_error_maps_to_malformed_frame() {
        let err = decode(Bytes::from_static(b"RBF\x02")).unwrap_err();
        assert_eq!(err.wire_code(), "malformed_frame");
    }

    #[test]
    fn event_round_trips_through_two_part_encoding() {
        let payload = json!({"w": 1, "list": [true, null]});
        let encoded = encode_event_frame("ui", 3, "resize", &payload).unwrap();
        let frame = decode(Bytes::from(encoded.to_vec())).unwrap();
        assert_eq!(
            frame,
            ChannelFrame {
                channel: "ui".into(),
                seq: 3,
                body: FrameBody::Event {
                    event: "resize".into(),
                    payload
                }
            }
        );
    }

    #[test]
    fn event_payload_floats_survive_decode_and_re_encode_exactly() {
        // Needs serde_json's `float_roundtrip`: without it this value comes back one ULP off.
        let payload = json!({ "x": 5.339675471477256e214 });
        let msg = encode_event_frame("m", 1, "level", &payload)
            .unwrap()
            .to_vec();
        let FrameBody::Event { payload: got, .. } = decode(Bytes::from(msg)).unwrap().body else {
            panic!("event frame decoded as binary");
        };
        assert_eq!(got, payload);
    }

    /// Event bodies as senders write them, valid and not: [`EventBytes::parse`] accepts and refuses
    /// exactly what [`decode`] does, with the same error, and reads the same name and payload.
    #[test]
    fn event_bytes_check_bodies_as_decode_does() {
        let bodies: &[&[u8]] = &[
            br#"{"event":"a","payload":1}"#,
            br#"{ "payload" : {"z":1,"a":[2, 3]} ,  "event" : "note" }"#,
            br#"{"event":"only"}"#,
            br#"{"event":"esc\u00e9\"q"}"#,
            br#"{"event":""}"#,
            br#"{"event":7}"#,
            br#"{"payload":1}"#,
            br#"[1,2]"#,
            br#"3"#,
            br#"  "str" "#,
            br#"{"event":"a""#,
            br#"{"event":"a"} x"#,
            br#"nope"#,
            b"",
            b"{\"event\":\"\xff\"}",
            br#"{"event":"a","payload":{"deep":[[[[{}]]]]},"extra":null}"#,
        ];
        for body in bodies {
            let mut msg = encode_head(FrameKind::Event, "ch", 0).unwrap().to_vec();
            msg.extend_from_slice(body);
            let decoded = decode(Bytes::from(msg)).map(|f| f.body);
            let parsed = EventBytes::parse(Bytes::copy_from_slice(body));
            match (&decoded, &parsed) {
                (Ok(FrameBody::Event { event, payload }), Ok(bytes)) => {
                    assert_eq!(bytes.event(), event);
                    assert_eq!(&bytes.payload().unwrap(), payload);
                    assert_eq!(&bytes.bytes()[..], *body);
                }
                (Err(a), Err(b)) => assert_eq!(
                    std::mem::discriminant(a),
                    std::mem::discriminant(b),
                    "{:?}: {a} / {b}",
                    String::from_utf8_lossy(body)
                ),
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
    }

    #[test]
    fn an_event_forwarded_as_bytes_is_encoded_byte_for_byte() {
        let body = Bytes::from_static(br#"{ "payload": {"z":1,  "a":2}, "event":"sig" }"#);
        let event = EventBytes::parse(body.clone()).unwrap();
        let frame = encode("relay", 9, &FrameBody::EventBytes(event)).unwrap();
        assert_eq!(frame.body, body);
        let back = decode(Bytes::from(frame.to_vec())).unwrap();
        assert_eq!(back.seq, 9);
        assert_eq!(
            back.body,
            FrameBody::Event {
                event: "sig".into(),
                payload: serde_json::json!({"a": 2, "z": 1})
            }
        );
    }
}

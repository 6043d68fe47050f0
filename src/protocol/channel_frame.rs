//! Channel-frame codec (SPEC section 7). Placeholder with the agreed API; replaced by the
//! full codec work.

use bytes::{BufMut, Bytes, BytesMut};

/// Magic bytes.
pub const MAGIC: [u8; 3] = *b"RBF";
/// Layout version.
pub const VERSION: u8 = 1;
/// Longest channel name in bytes.
pub const MAX_CHANNEL_NAME: usize = 255;

/// Body of a channel frame.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameBody {
    /// Opaque bytes.
    Binary(Bytes),
    /// A channel event.
    Event {
        /// Event name.
        event: String,
        /// Event payload.
        payload: serde_json::Value,
    },
}

/// A decoded channel frame.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelFrame {
    /// Channel name.
    pub channel: String,
    /// Sequence number.
    pub seq: u32,
    /// Body.
    pub body: FrameBody,
}

/// Invalid frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelFrameError {
    /// Anything wrong.
    #[error("malformed channel frame: {0}")]
    Malformed(&'static str),
}

/// Encoded frame parts.
#[derive(Debug, Clone)]
pub struct EncodedFrame {
    /// magic..seq
    pub head: Bytes,
    /// payload
    pub body: Bytes,
}

/// Header fields.
pub struct FrameHeader<'a> {
    /// Channel.
    pub channel: &'a str,
    /// Seq.
    pub seq: u32,
}

/// Peek.
pub fn peek(msg: &[u8]) -> Result<FrameHeader<'_>, ChannelFrameError> {
    if msg.len() < 6 || msg[..3] != MAGIC || msg[3] != VERSION {
        return Err(ChannelFrameError::Malformed("header"));
    }
    let n = msg[5] as usize;
    if n == 0 || msg.len() < 6 + n + 4 {
        return Err(ChannelFrameError::Malformed("short"));
    }
    let channel =
        std::str::from_utf8(&msg[6..6 + n]).map_err(|_| ChannelFrameError::Malformed("name"))?;
    let seq = u32::from_be_bytes([msg[6 + n], msg[7 + n], msg[8 + n], msg[9 + n]]);
    Ok(FrameHeader { channel, seq })
}

/// Decode.
pub fn decode(msg: Bytes) -> Result<ChannelFrame, ChannelFrameError> {
    let h = peek(&msg)?;
    let off = 10 + h.channel.len();
    let (channel, seq) = (h.channel.to_string(), h.seq);
    let body = match msg[4] {
        1 => FrameBody::Binary(msg.slice(off..)),
        2 => {
            let v: serde_json::Value = serde_json::from_slice(&msg[off..])
                .map_err(|_| ChannelFrameError::Malformed("json"))?;
            let event = v
                .get("event")
                .and_then(|e| e.as_str())
                .ok_or(ChannelFrameError::Malformed("event"))?
                .to_string();
            FrameBody::Event {
                event,
                payload: v.get("payload").cloned().unwrap_or_default(),
            }
        }
        _ => return Err(ChannelFrameError::Malformed("kind")),
    };
    Ok(ChannelFrame { channel, seq, body })
}

fn head(kind: u8, channel: &str, seq: u32) -> Result<Bytes, ChannelFrameError> {
    if channel.is_empty() || channel.len() > MAX_CHANNEL_NAME {
        return Err(ChannelFrameError::Malformed("name length"));
    }
    let mut b = BytesMut::with_capacity(10 + channel.len());
    b.put_slice(&MAGIC);
    b.put_u8(VERSION);
    b.put_u8(kind);
    b.put_u8(channel.len() as u8);
    b.put_slice(channel.as_bytes());
    b.put_u32(seq);
    Ok(b.freeze())
}

/// Encode binary.
pub fn encode_binary(
    channel: &str,
    seq: u32,
    payload: Bytes,
) -> Result<EncodedFrame, ChannelFrameError> {
    Ok(EncodedFrame {
        head: head(1, channel, seq)?,
        body: payload,
    })
}

/// Encode event.
pub fn encode_event(
    channel: &str,
    seq: u32,
    event: &str,
    payload: &serde_json::Value,
) -> Result<EncodedFrame, ChannelFrameError> {
    let body = serde_json::to_vec(&serde_json::json!({"event": event, "payload": payload}))
        .map_err(|_| ChannelFrameError::Malformed("json"))?;
    Ok(EncodedFrame {
        head: head(2, channel, seq)?,
        body: Bytes::from(body),
    })
}

/// Encode.
pub fn encode(
    channel: &str,
    seq: u32,
    body: &FrameBody,
) -> Result<EncodedFrame, ChannelFrameError> {
    match body {
        FrameBody::Binary(b) => encode_binary(channel, seq, b.clone()),
        FrameBody::Event { event, payload } => encode_event(channel, seq, event, payload),
    }
}

//! The typed refusals of the channel-frame codec.

use super::layout::{MAX_CHANNEL_NAME, PREFIX_LEN, VERSION};

/// Every way a channel frame can be refused. All of them are answered on the wire with the
/// `protocol_error` code [`wire_code`](ChannelFrameError::wire_code) gives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelFrameError {
    /// The message ends before the name length byte, so not even the fixed header is there.
    #[error("channel frame is {len} bytes, shorter than the {PREFIX_LEN}-byte fixed header")]
    TooShort {
        /// The message length.
        len: usize,
    },
    /// The message does not start with `RBF`: it is not a channel frame at all.
    #[error("not a channel frame: it does not start with the magic bytes \"RBF\"")]
    BadMagic,
    /// The version byte is not one this codec speaks.
    #[error("channel frame version {0} is not supported (this carrier speaks version {VERSION})")]
    UnsupportedVersion(u8),
    /// The kind byte is neither binary (1) nor event (2).
    #[error("channel frame kind {0} is unknown (expected 1 = binary or 2 = event)")]
    UnknownKind(u8),
    /// The channel name is empty (length byte 0 on the wire, or `""` given to the encoder).
    #[error("channel name is empty; a channel frame must name its channel")]
    EmptyChannelName,
    /// The encoder was given a channel name longer than [`MAX_CHANNEL_NAME`] bytes.
    #[error("channel name is {len} bytes; at most {MAX_CHANNEL_NAME} fit in a channel frame")]
    ChannelNameTooLong {
        /// The name's length in bytes.
        len: usize,
    },
    /// The name and `seq` the header announces run past the end of the message.
    #[error(
        "channel frame is truncated: its header needs {needed} bytes but the message has {len}"
    )]
    Truncated {
        /// Bytes the header needs.
        needed: usize,
        /// Bytes the message has.
        len: usize,
    },
    /// The channel name bytes are not valid UTF-8.
    #[error("channel name is not valid UTF-8")]
    ChannelNameNotUtf8,
    /// An event frame's body is not valid UTF-8.
    #[error("event frame body is not valid UTF-8")]
    EventBodyNotUtf8,
    /// An event frame's body is not JSON (an empty body included).
    #[error("event frame body is not valid JSON: {detail}")]
    EventBodyNotJson {
        /// What the JSON parser reported.
        detail: String,
    },
    /// An event frame's body is JSON but not an object.
    #[error("event frame body must be a JSON object {{\"event\", \"payload\"}}")]
    EventBodyNotObject,
    /// An event frame's body has no `event` key, or its value is not a string.
    #[error("event frame body has no string \"event\" name")]
    MissingEventName,
    /// An event frame's `event` name is the empty string (on decode, or given to the encoder).
    #[error("event name is empty")]
    EmptyEventName,
    /// The event payload could not be serialized to JSON (the encoder side only).
    #[error("event payload could not be serialized: {detail}")]
    EventNotSerializable {
        /// What the serializer reported.
        detail: String,
    },
}

impl ChannelFrameError {
    /// The `protocol_error` code a server answers with (docs/protocol.md, "Errors"): always
    /// `"malformed_frame"` — the variants only refine the human-readable message.
    pub fn wire_code(&self) -> &'static str {
        "malformed_frame"
    }
}

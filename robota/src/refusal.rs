//! A binary frame the carrier could not route, answered as the seed system's server answers it:
//! its `protocol_error` message with that server's strings (its channel registry's and its
//! channel-frame decoder's), never the agent protocol's `protocol_error` event.

use super::client::MAX_ECHO_BYTES;
use carrier_protocol::channel_frame::ChannelFrameError;
use carrier_protocol::envelope::truncate;
use carrier_protocol::error::ProtocolErrorCode;
use carrier_server::ChannelRefusal;

/// The answer's message. Where the seed system has no such refusal (credit, which this wire
/// never grants), the carrier's own explanation.
pub(super) fn message(refusal: &ChannelRefusal) -> String {
    let channel = refusal.channel().unwrap_or_default();
    match refusal.code() {
        ProtocolErrorCode::UnknownChannel => format!("No channel registered for \"{channel}\""),
        ProtocolErrorCode::BinaryNotDeclared => {
            format!("Channel \"{channel}\" did not declare binary payload support")
        }
        ProtocolErrorCode::UndeclaredEvent => {
            let event = truncate(
                refusal.undeclared_event().unwrap_or_default(),
                MAX_ECHO_BYTES,
            );
            format!("Channel \"{channel}\" did not declare event \"{event}\"")
        }
        // The seed system has no host-only channels: the carrier's own words.
        ProtocolErrorCode::Forbidden if refusal.host_only_channel() => {
            format!("Channel \"{channel}\" carries frames from the host to clients only")
        }
        // The wire's own answer to an observer's controls.
        ProtocolErrorCode::Forbidden => "forbidden: observe role".to_owned(),
        ProtocolErrorCode::MalformedFrame => match refusal.frame_error() {
            Some(e) => malformed(e),
            None => format!("channel frame: {}", refusal.message()),
        },
        _ => refusal.message().to_owned(),
    }
}

/// The seed decoder's words for what it refuses; the checks the carrier adds (a channel name
/// that is not UTF-8, which the seed decodes lossily) keep the carrier's words.
fn malformed(e: &ChannelFrameError) -> String {
    match e {
        ChannelFrameError::BadMagic => "channel frame: bad magic (not a channel frame)".into(),
        ChannelFrameError::TooShort { .. } => "channel frame: truncated header".into(),
        ChannelFrameError::UnsupportedVersion(v) => {
            format!("channel frame: unsupported version {v}")
        }
        ChannelFrameError::UnknownKind(k) => format!("channel frame: unknown kind {k}"),
        ChannelFrameError::EmptyChannelName => "channel frame: empty channel name".into(),
        ChannelFrameError::Truncated { .. } => {
            "channel frame: truncated (header longer than the frame)".into()
        }
        ChannelFrameError::EventBodyNotUtf8 | ChannelFrameError::EventBodyNotJson { .. } => {
            "channel frame: malformed JSON body".into()
        }
        ChannelFrameError::EventBodyNotObject => {
            "channel frame: event body must be a JSON object".into()
        }
        ChannelFrameError::MissingEventName | ChannelFrameError::EmptyEventName => {
            "channel frame: event body is missing a non-empty `event` name".into()
        }
        other => format!("channel frame: {other}"),
    }
}

//! Errors a client sees: the wire error object (docs/protocol.md, "Errors"), and what can go wrong
//! locally.

use std::time::Duration;

use super::transport::{CloseInfo, TransportError};

/// What happened to the effect a request asked for (docs/protocol.md, "Errors"): the protocol's
/// type.
pub use carrier_protocol::error::EffectState;
/// The error codes of the protocol (docs/protocol.md, "Errors") this client knows: the protocol's
/// type.
pub use carrier_protocol::error::ErrorCode;
/// The `error` object of a response, read tolerantly (the protocol's reader).
pub use carrier_protocol::error::ReceivedError;
/// An error `code` from the wire: the protocol's tolerant reader, so a code this client does not
/// know is kept in [`ReceivedErrorCode::Unknown`] rather than refused. It compares equal to the
/// [`ErrorCode`] it holds (`error.code == ErrorCode::Busy`).
pub use carrier_protocol::error::ReceivedErrorCode;

/// Why a [`Client`](super::Client) call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The peer answered with an error object.
    #[error("`{method}` failed: {error}")]
    Remote {
        /// The method that was called.
        method: String,
        /// The error object as received.
        error: ReceivedError,
    },
    /// The client refused the request itself, in the wire error's shape (today always
    /// `unsupported_feature`); nothing was sent.
    #[error("`{method}` not sent: {error}")]
    Preflight {
        /// The method that was not sent.
        method: String,
        /// The error, as the server would have sent it.
        error: ReceivedError,
    },
    /// No answer in time; the effect is unknown.
    #[error("`{method}` got no answer within {after:?}; its effect is unknown")]
    Timeout {
        /// The method that was called.
        method: String,
        /// How long the client waited.
        after: Duration,
    },
    /// There is no connection to send on (never connected, disconnected, or closed for good).
    #[error("not connected")]
    NotConnected,
    /// The connection broke after the request was sent; the effect is unknown.
    #[error("the connection was lost before `{method}` was answered; its effect is unknown")]
    ConnectionLost {
        /// The method that was called.
        method: String,
    },
    /// The server closed the connection with 1008: wrong or missing token, or a role above the
    /// listener's grant. The client does not retry.
    #[error("the server refused this client ({close}); check the token and the requested role")]
    Refused {
        /// The close the server sent.
        close: CloseInfo,
    },
    /// The transport failed (could not connect, upgrade refused, bad URL).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The peer's answer did not have the documented shape.
    #[error("malformed answer to `{method}`: {reason}")]
    MalformedResponse {
        /// The method that was called.
        method: String,
        /// What was wrong with the answer.
        reason: String,
    },
    /// `system.handshake` is owned by the client (it is sent by `connect` and on every
    /// reconnect); it cannot be requested directly.
    #[error("`system.handshake` is sent by the client itself; call Client::connect")]
    ReservedMethod,
    /// A channel frame was refused before it was sent.
    #[error(transparent)]
    Channel(#[from] ChannelSendError),
}

/// Why a channel frame was not sent (nothing went out).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChannelSendError {
    /// The server declared no channel of that name in the handshake.
    #[error("the server has no channel `{channel}`")]
    Unknown {
        /// The channel named.
        channel: String,
    },
    /// The channel carries frames from the host to clients only (`direction:
    /// "host_to_clients"`), or in a direction this client does not know: the server would
    /// refuse the frame with `forbidden`.
    #[error("channel `{channel}` carries frames from the host to clients only")]
    HostToClients {
        /// The channel named.
        channel: String,
    },
    /// The channel does not accept opaque binary frames.
    #[error("channel `{channel}` accepts no binary frames")]
    BinaryRefused {
        /// The channel named.
        channel: String,
    },
    /// The channel does not declare this event.
    #[error("channel `{channel}` declares no event `{event}`")]
    EventNotDeclared {
        /// The channel named.
        channel: String,
        /// The event named.
        event: String,
    },
    /// A bulk frame's body is larger than all the credit the server ever grants at once on
    /// this channel: it could never be sent. Send it in smaller frames.
    #[error("a {bytes}-byte frame on bulk channel `{channel}` exceeds its credit of {credit} bytes; send smaller frames")]
    OverCredit {
        /// The channel named.
        channel: String,
        /// The frame body's size.
        bytes: u64,
        /// The channel's credit in the handshake.
        credit: u64,
    },
    /// A bulk channel has too little credit left for the frame and the send was not to wait.
    #[error("bulk channel `{channel}` has {left} bytes of credit left, too few for this frame")]
    AwaitingCredit {
        /// The channel named.
        channel: String,
        /// Credit left.
        left: u64,
    },
    /// The frame could not be encoded (e.g. a name over 255 bytes).
    #[error("cannot encode a frame for channel `{channel}`: {reason}")]
    Encode {
        /// The channel named.
        channel: String,
        /// What the codec said.
        reason: String,
    },
}

impl ClientError {
    /// The wire error object, for errors that have one (remote or preflight).
    pub fn wire(&self) -> Option<&ReceivedError> {
        match self {
            ClientError::Remote { error, .. } | ClientError::Preflight { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The wire error code, for errors that have one.
    pub fn code(&self) -> Option<&ReceivedErrorCode> {
        self.wire().map(|error| &error.code)
    }

    /// What happened to the requested effect. Remote errors without an `effect_state` count as
    /// `unknown`; local failures before sending count as `none`.
    pub fn effect_state(&self) -> EffectState {
        match self {
            ClientError::Remote { error, .. } => error.effect_state.unwrap_or(EffectState::Unknown),
            ClientError::Timeout { .. }
            | ClientError::ConnectionLost { .. }
            | ClientError::MalformedResponse { .. } => EffectState::Unknown,
            ClientError::Preflight { .. }
            | ClientError::NotConnected
            | ClientError::Refused { .. }
            | ClientError::Transport(_)
            | ClientError::Channel(_)
            | ClientError::ReservedMethod => EffectState::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_state_defaults_follow_where_the_failure_happened() {
        let remote = ClientError::Remote {
            method: "session.submit".into(),
            error: ReceivedError {
                code: ErrorCode::Internal.into(),
                message: "boom".into(),
                effect_state: None,
                data: None,
            },
        };
        assert_eq!(remote.effect_state(), EffectState::Unknown);
        assert_eq!(ClientError::NotConnected.effect_state(), EffectState::None);
        assert_eq!(remote.code(), Some(&ErrorCode::Internal.into()));
    }
}

//! Errors a client sees: the wire error object of SPEC section 6, and what can go wrong locally.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::transport::{CloseInfo, TransportError};

/// What happened to the effect a request asked for (SPEC section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectState {
    /// Nothing happened; the request is safe to retry.
    None,
    /// It may or may not have happened; check before retrying.
    Unknown,
    /// It happened.
    Applied,
}

/// An error `code` from the wire. Codes this client does not know are kept in
/// [`ErrorCode::Other`] rather than refused, so a newer server's errors still come through.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ErrorCode {
    /// `protocol_error`: not a valid envelope, or params failed validation.
    ProtocolError,
    /// `handshake_required`: a request before the handshake.
    HandshakeRequired,
    /// `version_incompatible`: the protocol versions cannot talk.
    VersionIncompatible,
    /// `method_not_found`: unknown method.
    MethodNotFound,
    /// `forbidden`: the connection's role is below the method's least role.
    Forbidden,
    /// `unsupported_feature`: the peer's protocol lacks a feature the request needs.
    UnsupportedFeature,
    /// `busy`: a turn is already running.
    Busy,
    /// `too_large`: a text message over the soft limit.
    TooLarge,
    /// `not_found`: unknown session, turn or request id.
    NotFound,
    /// `limit_exceeded`: the request would pass a published limit (e.g. `max_sessions`).
    LimitExceeded,
    /// `internal`: a host or session failure.
    Internal,
    /// Any other code, as sent.
    Other(String),
}

impl ErrorCode {
    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::ProtocolError => "protocol_error",
            ErrorCode::HandshakeRequired => "handshake_required",
            ErrorCode::VersionIncompatible => "version_incompatible",
            ErrorCode::MethodNotFound => "method_not_found",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::UnsupportedFeature => "unsupported_feature",
            ErrorCode::Busy => "busy",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::NotFound => "not_found",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::Internal => "internal",
            ErrorCode::Other(code) => code,
        }
    }
}

impl From<String> for ErrorCode {
    fn from(code: String) -> ErrorCode {
        match code.as_str() {
            "protocol_error" => ErrorCode::ProtocolError,
            "handshake_required" => ErrorCode::HandshakeRequired,
            "version_incompatible" => ErrorCode::VersionIncompatible,
            "method_not_found" => ErrorCode::MethodNotFound,
            "forbidden" => ErrorCode::Forbidden,
            "unsupported_feature" => ErrorCode::UnsupportedFeature,
            "busy" => ErrorCode::Busy,
            "too_large" => ErrorCode::TooLarge,
            "not_found" => ErrorCode::NotFound,
            "limit_exceeded" => ErrorCode::LimitExceeded,
            "internal" => ErrorCode::Internal,
            _ => ErrorCode::Other(code),
        }
    }
}

impl From<ErrorCode> for String {
    fn from(code: ErrorCode) -> String {
        code.as_str().to_owned()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` object of a response: `{code, message, effect_state?, data?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireError {
    /// What kind of failure.
    pub code: ErrorCode,
    /// A human-readable explanation.
    pub message: String,
    /// What happened to the requested effect, when the peer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_state: Option<EffectState>,
    /// Structured details (e.g. `{feature, component, required_protocol, actual_protocol,
    /// recovery}` for `unsupported_feature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Why a [`Client`](super::Client) call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The peer answered with an error object.
    #[error("`{method}` failed: {error}")]
    Remote {
        /// The method that was called.
        method: String,
        /// The error object as received.
        error: WireError,
    },
    /// The client refused the request itself, in the wire error's shape (today always
    /// `unsupported_feature`); nothing was sent.
    #[error("`{method}` not sent: {error}")]
    Preflight {
        /// The method that was not sent.
        method: String,
        /// The error, as the server would have sent it.
        error: WireError,
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
}

impl ClientError {
    /// The wire error object, for errors that have one (remote or preflight).
    pub fn wire(&self) -> Option<&WireError> {
        match self {
            ClientError::Remote { error, .. } | ClientError::Preflight { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The wire error code, for errors that have one.
    pub fn code(&self) -> Option<&ErrorCode> {
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
            | ClientError::ReservedMethod => EffectState::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_error_round_trips_with_known_and_unknown_codes() {
        let error: WireError = serde_json::from_value(json!({
            "code": "busy", "message": "a turn is running", "effect_state": "none"
        }))
        .unwrap();
        assert_eq!(error.code, ErrorCode::Busy);
        assert_eq!(error.effect_state, Some(EffectState::None));
        let other: WireError =
            serde_json::from_value(json!({"code": "rate_limited", "message": "slow down"}))
                .unwrap();
        assert_eq!(other.code, ErrorCode::Other("rate_limited".into()));
        assert_eq!(
            serde_json::to_value(&other).unwrap(),
            json!({"code": "rate_limited", "message": "slow down"})
        );
    }

    #[test]
    fn effect_state_defaults_follow_where_the_failure_happened() {
        let remote = ClientError::Remote {
            method: "session.submit".into(),
            error: WireError {
                code: ErrorCode::Internal,
                message: "boom".into(),
                effect_state: None,
                data: None,
            },
        };
        assert_eq!(remote.effect_state(), EffectState::Unknown);
        assert_eq!(ClientError::NotConnected.effect_state(), EffectState::None);
        assert_eq!(remote.code(), Some(&ErrorCode::Internal));
    }
}

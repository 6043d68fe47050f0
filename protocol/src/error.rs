//! Error codes and error objects (SPEC section 6).
//!
//! Two readers of the same wire: [`ErrorCode`] and [`ErrorObject`] are strict (what this
//! carrier sends and its schemas describe); [`ReceivedErrorCode`] and [`ReceivedError`] are
//! the tolerant ones a client reads with, keeping a code it does not know instead of refusing
//! it, so a newer server's errors still come through.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `error.code` of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not a valid envelope, or params failed validation (`data.reason = "invalid_params"`).
    ProtocolError,
    /// A request before the handshake.
    HandshakeRequired,
    /// Incompatible protocol versions.
    VersionIncompatible,
    /// Unknown method.
    MethodNotFound,
    /// The connection's role is below the method's least role.
    Forbidden,
    /// The peer's protocol lacks a feature the request needs.
    UnsupportedFeature,
    /// A turn is already running.
    Busy,
    /// A text message over the soft limit.
    TooLarge,
    /// Unknown session, turn or request id.
    NotFound,
    /// The request would pass a bound published in the handshake `limits`
    /// (`data: {limit, value}`: the limit's name and its value).
    LimitExceeded,
    /// A host or session failure.
    Internal,
}

impl ErrorCode {
    /// Every code, in the order of SPEC section 6.
    pub const ALL: [ErrorCode; 11] = [
        ErrorCode::ProtocolError,
        ErrorCode::HandshakeRequired,
        ErrorCode::VersionIncompatible,
        ErrorCode::MethodNotFound,
        ErrorCode::Forbidden,
        ErrorCode::UnsupportedFeature,
        ErrorCode::Busy,
        ErrorCode::TooLarge,
        ErrorCode::NotFound,
        ErrorCode::LimitExceeded,
        ErrorCode::Internal,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
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
        }
    }
}

/// `payload.code` of a `protocol_error` event: the answer to a frame with no usable `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolErrorCode {
    /// Not JSON, not an object, or a binary frame that is not a channel frame.
    MalformedFrame,
    /// A channel frame for a channel that is not registered (or was closed).
    UnknownChannel,
    /// A channel event the channel did not declare.
    UndeclaredEvent,
    /// Binary on a channel that did not declare binary.
    BinaryNotDeclared,
    /// The connection's role may not do this (e.g. an observer sending channel frames).
    Forbidden,
    /// A frame before the handshake.
    HandshakeRequired,
    /// A JSON object that is not a valid request (an event or response from a client, …).
    InvalidEnvelope,
    /// A message over the soft limit.
    TooLarge,
}

impl ProtocolErrorCode {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolErrorCode::MalformedFrame => "malformed_frame",
            ProtocolErrorCode::UnknownChannel => "unknown_channel",
            ProtocolErrorCode::UndeclaredEvent => "undeclared_event",
            ProtocolErrorCode::BinaryNotDeclared => "binary_not_declared",
            ProtocolErrorCode::Forbidden => "forbidden",
            ProtocolErrorCode::HandshakeRequired => "handshake_required",
            ProtocolErrorCode::InvalidEnvelope => "invalid_envelope",
            ProtocolErrorCode::TooLarge => "too_large",
        }
    }
}

/// What happened to the requested effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EffectState {
    /// Nothing happened; safe to retry.
    None,
    /// May or may not have happened.
    Unknown,
    /// It happened.
    Applied,
}

/// The `error` object of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorObject {
    /// Machine-readable code.
    pub code: ErrorCode,
    /// Human-readable explanation.
    pub message: String,
    /// What happened to the requested effect, when it matters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub effect_state: Option<EffectState>,
    /// Code-specific details.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            effect_state: None,
            data: None,
        }
    }

    /// Sets `effect_state`.
    pub fn effect(mut self, state: EffectState) -> Self {
        self.effect_state = Some(state);
        self
    }

    /// Sets `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// Encodes `{"event":"protocol_error","payload":{code, message, ...extra}}`. `extra` carries
/// `channel`/`seq` for channel frames and `limit`/`size` for `too_large`.
pub fn protocol_error_event(
    code: ProtocolErrorCode,
    message: &str,
    extra: Map<String, Value>,
) -> Vec<u8> {
    let mut payload = Map::with_capacity(2 + extra.len());
    payload.insert("code".into(), Value::from(code.as_str()));
    payload.insert("message".into(), Value::from(message));
    payload.extend(extra);
    let frame = serde_json::json!({ "event": "protocol_error", "payload": payload });
    let mut bytes = frame.to_string().into_bytes();
    bytes.shrink_to_fit();
    bytes
}

/// An error `code` as a peer sent it: one of the [`ErrorCode`]s, or any other string, kept as
/// sent in [`ReceivedErrorCode::Other`] (the tolerant reader of `error.code`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ReceivedErrorCode {
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

impl ReceivedErrorCode {
    /// The strict code, unless the peer sent one this build does not know.
    pub fn known(&self) -> Option<ErrorCode> {
        Some(match self {
            ReceivedErrorCode::ProtocolError => ErrorCode::ProtocolError,
            ReceivedErrorCode::HandshakeRequired => ErrorCode::HandshakeRequired,
            ReceivedErrorCode::VersionIncompatible => ErrorCode::VersionIncompatible,
            ReceivedErrorCode::MethodNotFound => ErrorCode::MethodNotFound,
            ReceivedErrorCode::Forbidden => ErrorCode::Forbidden,
            ReceivedErrorCode::UnsupportedFeature => ErrorCode::UnsupportedFeature,
            ReceivedErrorCode::Busy => ErrorCode::Busy,
            ReceivedErrorCode::TooLarge => ErrorCode::TooLarge,
            ReceivedErrorCode::NotFound => ErrorCode::NotFound,
            ReceivedErrorCode::LimitExceeded => ErrorCode::LimitExceeded,
            ReceivedErrorCode::Internal => ErrorCode::Internal,
            ReceivedErrorCode::Other(_) => return None,
        })
    }

    /// The wire spelling (the strict code's, or the unknown code as sent).
    pub fn as_str(&self) -> &str {
        match (self.known(), self) {
            (Some(code), _) => code.as_str(),
            (None, ReceivedErrorCode::Other(code)) => code,
            (None, _) => unreachable!("every variant but Other is known"),
        }
    }
}

impl From<ErrorCode> for ReceivedErrorCode {
    fn from(code: ErrorCode) -> ReceivedErrorCode {
        match code {
            ErrorCode::ProtocolError => ReceivedErrorCode::ProtocolError,
            ErrorCode::HandshakeRequired => ReceivedErrorCode::HandshakeRequired,
            ErrorCode::VersionIncompatible => ReceivedErrorCode::VersionIncompatible,
            ErrorCode::MethodNotFound => ReceivedErrorCode::MethodNotFound,
            ErrorCode::Forbidden => ReceivedErrorCode::Forbidden,
            ErrorCode::UnsupportedFeature => ReceivedErrorCode::UnsupportedFeature,
            ErrorCode::Busy => ReceivedErrorCode::Busy,
            ErrorCode::TooLarge => ReceivedErrorCode::TooLarge,
            ErrorCode::NotFound => ReceivedErrorCode::NotFound,
            ErrorCode::LimitExceeded => ReceivedErrorCode::LimitExceeded,
            ErrorCode::Internal => ReceivedErrorCode::Internal,
        }
    }
}

impl From<String> for ReceivedErrorCode {
    fn from(code: String) -> ReceivedErrorCode {
        match ErrorCode::ALL.iter().find(|known| known.as_str() == code) {
            Some(&known) => known.into(),
            None => ReceivedErrorCode::Other(code),
        }
    }
}

impl From<ReceivedErrorCode> for String {
    fn from(code: ReceivedErrorCode) -> String {
        code.as_str().to_owned()
    }
}

impl fmt::Display for ReceivedErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` object of a response as a peer sent it: [`ErrorObject`] with a
/// [`ReceivedErrorCode`], so an unknown code is kept rather than refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceivedError {
    /// What kind of failure.
    pub code: ReceivedErrorCode,
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

impl From<ErrorObject> for ReceivedError {
    fn from(error: ErrorObject) -> ReceivedError {
        ReceivedError {
            code: error.code.into(),
            message: error.message,
            effect_state: error.effect_state,
            data: error.data,
        }
    }
}

impl fmt::Display for ReceivedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_strict_code_reads_back_as_itself() {
        for code in ErrorCode::ALL {
            let received = ReceivedErrorCode::from(code.as_str().to_owned());
            assert_eq!(received.known(), Some(code));
            assert_eq!(received.as_str(), code.as_str());
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
        }
    }

    #[test]
    fn received_error_round_trips_with_known_and_unknown_codes() {
        let error: ReceivedError = serde_json::from_value(json!({
            "code": "busy", "message": "a turn is running", "effect_state": "none"
        }))
        .unwrap();
        assert_eq!(error.code, ReceivedErrorCode::Busy);
        assert_eq!(error.effect_state, Some(EffectState::None));
        let other: ReceivedError =
            serde_json::from_value(json!({"code": "rate_limited", "message": "slow down"}))
                .unwrap();
        assert_eq!(other.code, ReceivedErrorCode::Other("rate_limited".into()));
        assert_eq!(other.code.known(), None);
        assert_eq!(
            serde_json::to_value(&other).unwrap(),
            json!({"code": "rate_limited", "message": "slow down"})
        );
    }
}

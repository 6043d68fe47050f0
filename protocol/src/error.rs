//! Error codes and error objects (SPEC section 6).

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

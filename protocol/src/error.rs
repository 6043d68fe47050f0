//! Error codes and error objects (docs/protocol.md, "Errors").
//!
//! Two readers of the same wire: [`ErrorCode`] and [`ErrorObject`] are strict (what this
//! carrier sends and its schemas describe); [`ReceivedErrorCode`] and [`ReceivedError`] are
//! the tolerant ones a client reads with, keeping a code it does not know instead of refusing
//! it, so a newer server's errors still come through. The codes are listed once, in
//! [`ErrorCode`]; the tolerant code wraps it rather than restating it.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Defines a wire code enum from one list: each variant with its wire string, and from the same
/// list `ALL` (every code, in the list's order) and `as_str`.
macro_rules! wire_codes {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$doc:meta])* $variant:ident = $wire:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
        )]
        pub enum $name {
            $( $(#[$doc])* #[serde(rename = $wire)] $variant, )*
        }

        impl $name {
            /// Every code, in the order of the protocol reference.
            pub const ALL: [$name; [$(stringify!($variant)),*].len()] = [$($name::$variant),*];

            /// The wire string.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $wire, )*
                }
            }
        }
    };
}

wire_codes! {
    /// `error.code` of a response.
    pub enum ErrorCode {
        /// Not a valid envelope, or params failed validation (`data.reason = "invalid_params"`).
        ProtocolError = "protocol_error",
        /// A request before the handshake.
        HandshakeRequired = "handshake_required",
        /// Incompatible protocol versions.
        VersionIncompatible = "version_incompatible",
        /// Unknown method.
        MethodNotFound = "method_not_found",
        /// The connection's role is below the method's least role.
        Forbidden = "forbidden",
        /// The peer's protocol lacks a feature the request needs.
        UnsupportedFeature = "unsupported_feature",
        /// A turn is already running.
        Busy = "busy",
        /// A text message over the soft limit.
        TooLarge = "too_large",
        /// Unknown session, turn or request id.
        NotFound = "not_found",
        /// The request would pass a bound published in the handshake `limits`
        /// (`data: {limit, value}`: the limit's name and its value).
        LimitExceeded = "limit_exceeded",
        /// A host or session failure.
        Internal = "internal",
    }
}

wire_codes! {
    /// `payload.code` of a `protocol_error` event: the answer to a frame with no usable `id`.
    pub enum ProtocolErrorCode {
        /// Not JSON, not an object, or a binary frame that is not a channel frame.
        MalformedFrame = "malformed_frame",
        /// A channel frame for a channel that is not registered (or was closed).
        UnknownChannel = "unknown_channel",
        /// A channel event the channel did not declare.
        UndeclaredEvent = "undeclared_event",
        /// Binary on a channel that did not declare binary.
        BinaryNotDeclared = "binary_not_declared",
        /// The sender may not do this: an observer sending channel frames, or any client
        /// sending on a channel that is host → clients only.
        Forbidden = "forbidden",
        /// A frame before the handshake.
        HandshakeRequired = "handshake_required",
        /// A JSON object that is not a valid request (an event or response from a client, …).
        InvalidEnvelope = "invalid_envelope",
        /// A message over the soft limit.
        TooLarge = "too_large",
        /// A bulk channel frame whose body is larger than the sender's remaining credit
        /// (protocol 1.1): not delivered, the connection stays open.
        CreditExceeded = "credit_exceeded",
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

/// An error `code` as a peer sent it (the tolerant reader of `error.code`): one of the
/// [`ErrorCode`]s this build knows, or any other string, kept as sent so a newer peer's code
/// still comes through. It compares equal to the [`ErrorCode`] it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ReceivedErrorCode {
    /// A code this build knows.
    Known(ErrorCode),
    /// A code this build does not know, as sent (read from the wire, never one of
    /// [`ErrorCode::ALL`]).
    Unknown(String),
}

impl ReceivedErrorCode {
    /// The strict code, unless the peer sent one this build does not know.
    pub fn known(&self) -> Option<ErrorCode> {
        match self {
            ReceivedErrorCode::Known(code) => Some(*code),
            ReceivedErrorCode::Unknown(_) => None,
        }
    }

    /// The wire spelling (the strict code's, or the unknown code as sent).
    pub fn as_str(&self) -> &str {
        match self {
            ReceivedErrorCode::Known(code) => code.as_str(),
            ReceivedErrorCode::Unknown(code) => code,
        }
    }
}

impl From<ErrorCode> for ReceivedErrorCode {
    fn from(code: ErrorCode) -> ReceivedErrorCode {
        ReceivedErrorCode::Known(code)
    }
}

impl From<String> for ReceivedErrorCode {
    fn from(code: String) -> ReceivedErrorCode {
        match ErrorCode::ALL
            .into_iter()
            .find(|known| known.as_str() == code)
        {
            Some(known) => ReceivedErrorCode::Known(known),
            None => ReceivedErrorCode::Unknown(code),
        }
    }
}

impl From<ReceivedErrorCode> for String {
    fn from(code: ReceivedErrorCode) -> String {
        match code {
            ReceivedErrorCode::Known(code) => code.as_str().to_owned(),
            ReceivedErrorCode::Unknown(code) => code,
        }
    }
}

impl PartialEq<ErrorCode> for ReceivedErrorCode {
    fn eq(&self, other: &ErrorCode) -> bool {
        self.known() == Some(*other)
    }
}

impl PartialEq<ReceivedErrorCode> for ErrorCode {
    fn eq(&self, other: &ReceivedErrorCode) -> bool {
        other == self
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
        assert_eq!(error.code, ReceivedErrorCode::Known(ErrorCode::Busy));
        assert_eq!(error.effect_state, Some(EffectState::None));
        let other: ReceivedError =
            serde_json::from_value(json!({"code": "rate_limited", "message": "slow down"}))
                .unwrap();
        assert_eq!(
            other.code,
            ReceivedErrorCode::Unknown("rate_limited".into())
        );
        assert_eq!(other.code.known(), None);
        assert_eq!(
            serde_json::to_value(&other).unwrap(),
            json!({"code": "rate_limited", "message": "slow down"})
        );
    }
}

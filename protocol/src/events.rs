//! Event payload types (SPEC sections 5 and 6): the session events the hub numbers with `seq`,
//! and the carrier's own `protocol_error` and `channel.dropped` events (no `seq`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::error::ProtocolErrorCode;
use super::methods::Decision;

/// Who drives a turn: the identity the host configured for the listener, never a client's
/// claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriverInfo {
    /// Host-configured driver id.
    pub driver_id: String,
    /// Host-configured surface name.
    pub surface: String,
}

/// `session.turn_started`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnStarted {
    /// The new turn.
    pub turn_id: String,
    /// Who submitted it.
    pub driver: DriverInfo,
    /// The submitted prompt, so an observer or a second driver sees what was asked.
    pub prompt: String,
}

/// `session.text_delta`: the next piece of the reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TextDelta {
    /// The turn.
    pub turn_id: String,
    /// Text to append.
    pub delta: String,
}

/// `session.permission_request`: the agent waits for `session.permission.respond`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionRequest {
    /// The turn.
    pub turn_id: String,
    /// Answer with this id.
    pub request_id: String,
    /// The tool that wants to run.
    pub tool: String,
    /// The tool's input.
    pub input: Value,
}

/// `session.permission_resolved`: a permission request was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionResolved {
    /// The answered request.
    pub request_id: String,
    /// The answer.
    pub decision: Decision,
}

/// `session.turn_completed`: the turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnCompleted {
    /// The turn.
    pub turn_id: String,
    /// The whole reply (what was streamed, when aborted), at most `limits.max_reply_bytes`.
    pub text: String,
    /// Whether it was aborted.
    pub aborted: bool,
    /// `true` when `text` was cut to `limits.max_reply_bytes` (the deltas hold all of it);
    /// absent otherwise. An agent process may set it on a reply it cut itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
}

/// `session.error`: something went wrong in the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionErrorEvent {
    /// The turn, when the error belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Machine-readable code (e.g. `agent_timeout`, `agent_exited`, `internal`).
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

/// The payload of the `protocol_error` event: the answer to a frame with no usable id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProtocolErrorPayload {
    /// What was wrong.
    pub code: ProtocolErrorCode,
    /// Human-readable explanation.
    pub message: String,
    /// The channel of a refused channel frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The client's seq of a refused channel frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u32>,
    /// For `too_large`: the soft limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// For `too_large`: the message size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// The payload of `channel.dropped`: frames of a lossy channel dropped for this receiver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChannelDropped {
    /// The lossy channel.
    pub channel: String,
    /// Frames dropped since the last notice.
    pub count: u64,
}

/// One session event, before the hub numbers it.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// `session.turn_started`.
    TurnStarted(TurnStarted),
    /// `session.text_delta`.
    TextDelta(TextDelta),
    /// `session.permission_request`.
    PermissionRequest(PermissionRequest),
    /// `session.permission_resolved`.
    PermissionResolved(PermissionResolved),
    /// `session.turn_completed`.
    TurnCompleted(TurnCompleted),
    /// `session.error`.
    Error(SessionErrorEvent),
}

/// An event name or payload that is not a valid session event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not one of the session events of SPEC section 5.
    #[error("unknown session event {0:?}")]
    UnknownEvent(String),
    /// The payload does not match the event's type.
    #[error("invalid payload for {event}: {reason}")]
    InvalidPayload {
        /// The event name.
        event: &'static str,
        /// What was wrong.
        reason: String,
    },
}

impl SessionEvent {
    /// The wire name.
    pub fn name(&self) -> &'static str {
        match self {
            SessionEvent::TurnStarted(_) => "session.turn_started",
            SessionEvent::TextDelta(_) => "session.text_delta",
            SessionEvent::PermissionRequest(_) => "session.permission_request",
            SessionEvent::PermissionResolved(_) => "session.permission_resolved",
            SessionEvent::TurnCompleted(_) => "session.turn_completed",
            SessionEvent::Error(_) => "session.error",
        }
    }

    /// Encodes `{event, seq, payload}` once, for every receiver.
    pub fn encode(&self, seq: u64) -> Result<bytes::Bytes, serde_json::Error> {
        use super::envelope::encode_event;
        let name = self.name();
        match self {
            SessionEvent::TurnStarted(p) => encode_event(name, Some(seq), p),
            SessionEvent::TextDelta(p) => encode_event(name, Some(seq), p),
            SessionEvent::PermissionRequest(p) => encode_event(name, Some(seq), p),
            SessionEvent::PermissionResolved(p) => encode_event(name, Some(seq), p),
            SessionEvent::TurnCompleted(p) => encode_event(name, Some(seq), p),
            SessionEvent::Error(p) => encode_event(name, Some(seq), p),
        }
    }

    /// Validates a session event received as JSON (e.g. from an agent process): only the
    /// event names and field types of SPEC section 5.
    pub fn from_wire(event: &str, payload: Value) -> Result<SessionEvent, EventError> {
        fn typed<T: serde::de::DeserializeOwned>(
            name: &'static str,
            payload: Value,
        ) -> Result<T, EventError> {
            serde_json::from_value(payload).map_err(|e| EventError::InvalidPayload {
                event: name,
                reason: e.to_string(),
            })
        }
        Ok(match event {
            "session.turn_started" => {
                SessionEvent::TurnStarted(typed("session.turn_started", payload)?)
            }
            "session.text_delta" => SessionEvent::TextDelta(typed("session.text_delta", payload)?),
            "session.permission_request" => {
                SessionEvent::PermissionRequest(typed("session.permission_request", payload)?)
            }
            "session.permission_resolved" => {
                SessionEvent::PermissionResolved(typed("session.permission_resolved", payload)?)
            }
            "session.turn_completed" => {
                SessionEvent::TurnCompleted(typed("session.turn_completed", payload)?)
            }
            "session.error" => SessionEvent::Error(typed("session.error", payload)?),
            other => return Err(EventError::UnknownEvent(other.chars().take(64).collect())),
        })
    }
}

/// One numbered session event as a client reads it: the tolerant reader of [`SessionEvent`]
/// with its `seq`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSessionEvent {
    /// The per-session sequence number.
    pub seq: u64,
    /// What happened.
    pub kind: ReceivedSessionEventKind,
}

/// The session events of SPEC section 5 as a client reads them (the tolerant reader of
/// [`SessionEvent`]). An event with an unknown name, or whose payload does not have the
/// documented fields, arrives as [`ReceivedSessionEventKind::Other`] rather than being lost.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "event", content = "payload")]
pub enum ReceivedSessionEventKind {
    /// `session.turn_started`: a turn began; `driver` is the host-configured identity.
    #[serde(rename = "session.turn_started")]
    TurnStarted {
        /// The turn.
        turn_id: String,
        /// Who drives it, as the host configured it.
        #[serde(default)]
        driver: Value,
        /// The submitted prompt, whoever submitted it; `None` from a carrier that predates
        /// the field.
        #[serde(default)]
        prompt: Option<String>,
    },
    /// `session.text_delta`: the next piece of the turn's reply.
    #[serde(rename = "session.text_delta")]
    TextDelta {
        /// The turn.
        turn_id: String,
        /// Text to append.
        delta: String,
    },
    /// `session.permission_request`: the turn waits for an allow/deny answer.
    #[serde(rename = "session.permission_request")]
    PermissionRequest {
        /// The turn.
        turn_id: String,
        /// The id to answer with `session.permission.respond`.
        request_id: String,
        /// The tool that wants to run.
        tool: String,
        /// The tool's input.
        #[serde(default)]
        input: Value,
    },
    /// `session.permission_resolved`: a permission prompt was answered.
    #[serde(rename = "session.permission_resolved")]
    PermissionResolved {
        /// The prompt.
        request_id: String,
        /// The answer.
        decision: Decision,
    },
    /// `session.turn_completed`: the turn ended.
    #[serde(rename = "session.turn_completed")]
    TurnCompleted {
        /// The turn.
        turn_id: String,
        /// The whole reply.
        #[serde(default)]
        text: String,
        /// True when it was aborted (by `session.abort`, a timeout or an agent exit).
        #[serde(default)]
        aborted: bool,
        /// True when `text` was cut to the server's `max_reply_bytes`; the deltas hold the
        /// whole reply.
        #[serde(default)]
        truncated: bool,
    },
    /// `session.error`: something went wrong in the session.
    #[serde(rename = "session.error")]
    Error {
        /// The turn, when the error belongs to one.
        #[serde(default)]
        turn_id: Option<String>,
        /// What kind of failure (e.g. `agent_timeout`, `agent_exited`).
        code: String,
        /// A human-readable explanation.
        message: String,
    },
    /// Any other session event, as received.
    #[serde(skip)]
    Other {
        /// The event name.
        event: String,
        /// The payload.
        payload: Value,
    },
}

impl ReceivedSessionEventKind {
    /// Types an event by name; falls back to [`ReceivedSessionEventKind::Other`].
    pub fn parse(event: &str, payload: &Value) -> ReceivedSessionEventKind {
        serde_json::from_value(json!({ "event": event, "payload": payload })).unwrap_or_else(|_| {
            ReceivedSessionEventKind::Other {
                event: event.to_owned(),
                payload: payload.clone(),
            }
        })
    }

    /// The turn this event belongs to, if any.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            ReceivedSessionEventKind::TurnStarted { turn_id, .. }
            | ReceivedSessionEventKind::TextDelta { turn_id, .. }
            | ReceivedSessionEventKind::PermissionRequest { turn_id, .. }
            | ReceivedSessionEventKind::TurnCompleted { turn_id, .. } => Some(turn_id),
            ReceivedSessionEventKind::Error { turn_id, .. } => turn_id.as_deref(),
            ReceivedSessionEventKind::PermissionResolved { .. }
            | ReceivedSessionEventKind::Other { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_and_validate_round_trip() {
        let ev = SessionEvent::TextDelta(TextDelta {
            turn_id: "t1".into(),
            delta: " world".into(),
        });
        let bytes = ev.encode(4).unwrap();
        assert_eq!(
            &bytes[..],
            br#"{"event":"session.text_delta","seq":4,"payload":{"turn_id":"t1","delta":" world"}}"#
        );
        let payload = serde_json::json!({"turn_id": "t1", "delta": " world"});
        assert_eq!(
            SessionEvent::from_wire("session.text_delta", payload).unwrap(),
            ev
        );
        assert!(SessionEvent::from_wire("session.nope", Value::Null).is_err());
        let bad = serde_json::json!({"turn_id": 5, "delta": "x"});
        assert!(SessionEvent::from_wire("session.text_delta", bad).is_err());
    }
}

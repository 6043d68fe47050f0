//! Event payload types (docs/protocol.md, "Events"): the session events the hub numbers with `seq`,
//! and the carrier's own `protocol_error` and `channel.dropped` events (no `seq`).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::catalog::{schema_of, SchemaFn};
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
    /// The choices an ACP agent offers (protocol 1.2): answer with one of their `optionId`s
    /// (`option_id`) or with `allow`/`deny`, which pick the `allow_once`/`reject_once` option.
    /// Absent for other agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<PermissionOption>>,
}

/// One choice of a permission prompt, as an ACP agent offers it (ACP's `PermissionOption`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionOption {
    /// What `session.permission.respond` names as `option_id`.
    #[serde(rename = "optionId")]
    pub option_id: String,
    /// The label to show.
    pub name: String,
    /// What choosing it means.
    pub kind: PermissionOptionKind,
}

/// What choosing a [`PermissionOption`] means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// Allow this once.
    AllowOnce,
    /// Allow this and remember it.
    AllowAlways,
    /// Refuse this once.
    RejectOnce,
    /// Refuse this and remember it.
    RejectAlways,
}

impl PermissionOptionKind {
    /// The decision choosing it makes: `allow` for the allow kinds, `deny` for the others.
    pub fn decision(self) -> Decision {
        match self {
            PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways => Decision::Allow,
            PermissionOptionKind::RejectOnce | PermissionOptionKind::RejectAlways => Decision::Deny,
        }
    }
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
    /// Why an ACP agent ended the turn (its `stopReason`: `end_turn`, `max_tokens`,
    /// `max_turn_requests`, `refusal`, `cancelled`); absent for other agents, and when the
    /// carrier ended the turn itself (an abort, a timeout, an exit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
}

/// `session.agent_update` (protocol 1.2, feature `agent_updates`): something an agent reports
/// beside its text — an ACP agent's tool call or its update, plan, thought, available
/// commands, mode, usage, … — carried as the agent sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentUpdate {
    /// The turn it belongs to; absent for an update outside any turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The agent's update object, byte for byte as the agent sent it (for an ACP agent: the
    /// `update` of its `session/update`, `sessionUpdate` naming its kind).
    pub update: RawObject,
}

/// A JSON object kept as the bytes it arrived as: written back out unchanged, never
/// re-serialized.
#[derive(Clone)]
pub struct RawObject(Box<RawValue>);

impl RawObject {
    /// `raw` when it is a JSON object; `None` otherwise.
    pub fn new(raw: Box<RawValue>) -> Option<RawObject> {
        raw.get().starts_with('{').then_some(RawObject(raw))
    }

    /// The object's JSON text, as it arrived.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Never: an object is at least `{}`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The object as a [`Value`] (a copy; the bytes stay as they were).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.get()).unwrap_or(Value::Null)
    }
}

impl std::fmt::Debug for RawObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl PartialEq for RawObject {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        RawObject::new(raw).ok_or_else(|| serde::de::Error::custom("expected a JSON object"))
    }
}

impl JsonSchema for RawObject {
    fn schema_name() -> Cow<'static, str> {
        "RawObject".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": true,
            "description": "A JSON object, carried byte for byte as its sender wrote it."
        })
    }
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

/// The payload of `channel.credit`: more bytes of bulk frame bodies this connection may send on
/// a bulk channel (protocol 1.1, feature `bulk_credit`). Grants add up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChannelCredit {
    /// The bulk channel.
    pub channel: String,
    /// Bytes of frame bodies granted, on top of what the connection had.
    pub bytes: u64,
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
    /// `session.agent_update` (protocol 1.2): only connections whose protocol has
    /// `agent_updates` are sent it.
    AgentUpdate(AgentUpdate),
}

/// An event name or payload that is not a valid session event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not one of the session events of docs/protocol.md, "Events".
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
    /// The catalog's event (the variants share their names).
    pub fn event_name(&self) -> EventName {
        match self {
            SessionEvent::TurnStarted(_) => EventName::TurnStarted,
            SessionEvent::TextDelta(_) => EventName::TextDelta,
            SessionEvent::PermissionRequest(_) => EventName::PermissionRequest,
            SessionEvent::PermissionResolved(_) => EventName::PermissionResolved,
            SessionEvent::TurnCompleted(_) => EventName::TurnCompleted,
            SessionEvent::Error(_) => EventName::Error,
            SessionEvent::AgentUpdate(_) => EventName::AgentUpdate,
        }
    }

    /// The wire name.
    pub fn name(&self) -> &'static str {
        self.event_name().as_str()
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
            SessionEvent::AgentUpdate(p) => encode_event(name, Some(seq), p),
        }
    }

    /// Validates a session event received as JSON (e.g. from an agent process): only the
    /// event names and field types of docs/protocol.md, "Events".
    pub fn from_wire(event: &str, payload: Value) -> Result<SessionEvent, EventError> {
        fn typed<T: serde::de::DeserializeOwned>(
            name: EventName,
            payload: Value,
        ) -> Result<T, EventError> {
            serde_json::from_value(payload).map_err(|e| EventError::InvalidPayload {
                event: name.as_str(),
                reason: e.to_string(),
            })
        }
        let unknown = || EventError::UnknownEvent(event.chars().take(64).collect());
        let name = EventName::from_name(event).ok_or_else(unknown)?;
        Ok(match name {
            EventName::TurnStarted => SessionEvent::TurnStarted(typed(name, payload)?),
            EventName::TextDelta => SessionEvent::TextDelta(typed(name, payload)?),
            EventName::PermissionRequest => SessionEvent::PermissionRequest(typed(name, payload)?),
            EventName::PermissionResolved => {
                SessionEvent::PermissionResolved(typed(name, payload)?)
            }
            EventName::TurnCompleted => SessionEvent::TurnCompleted(typed(name, payload)?),
            EventName::Error => SessionEvent::Error(typed(name, payload)?),
            EventName::AgentUpdate => SessionEvent::AgentUpdate(typed(name, payload)?),
            // The carrier's own events, never a session's.
            EventName::ProtocolError | EventName::ChannelDropped | EventName::ChannelCredit => {
                return Err(unknown())
            }
        })
    }
}

/// Whether `frame`, as [`SessionEvent::encode`] wrote it, is a `session.agent_update` (the
/// encoder writes the event's name first), so a replay can leave agent updates out for a
/// connection whose protocol predates them without decoding every frame.
pub fn is_agent_update_frame(frame: &[u8]) -> bool {
    frame.starts_with(br#"{"event":"session.agent_update","#)
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

/// The session events (docs/protocol.md, "Events") as a client reads them (the tolerant reader of
/// [`SessionEvent`]). An event with an unknown name, or whose payload does not have the
/// documented fields, arrives as [`ReceivedSessionEventKind::Other`] rather than being lost.
///
/// Read an event with [`ReceivedSessionEventKind::parse`], or with `Deserialize` from
/// `{"event": <wire name>, "payload": …}` (strict: an unknown event is an error). The wire
/// names come from the catalog ([`EventName`]), whose variants these share: the derive keys
/// the variants by their Rust names, and `remote = "Self"` turns it into an inherent
/// `deserialize` (of `{"event": "TurnStarted", …}`) for `parse` to call once it has looked the
/// wire name up, instead of the `Deserialize` impl.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "event", content = "payload", remote = "Self")]
pub enum ReceivedSessionEventKind {
    /// `session.turn_started`: a turn began; `driver` is the host-configured identity.
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
    TextDelta {
        /// The turn.
        turn_id: String,
        /// Text to append.
        delta: String,
    },
    /// `session.permission_request`: the turn waits for an allow/deny answer.
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
        /// The choices an ACP agent offers (answer with one's `option_id`); `None` for
        /// other agents and from a carrier before protocol 1.2.
        #[serde(default)]
        options: Option<Vec<PermissionOption>>,
    },
    /// `session.permission_resolved`: a permission prompt was answered.
    PermissionResolved {
        /// The prompt.
        request_id: String,
        /// The answer.
        decision: Decision,
    },
    /// `session.turn_completed`: the turn ended.
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
        /// Why an ACP agent ended the turn (its `stopReason`), when it did.
        #[serde(default)]
        stop_reason: Option<String>,
    },
    /// `session.error`: something went wrong in the session.
    Error {
        /// The turn, when the error belongs to one.
        #[serde(default)]
        turn_id: Option<String>,
        /// What kind of failure (e.g. `agent_timeout`, `agent_exited`).
        code: String,
        /// A human-readable explanation.
        message: String,
    },
    /// `session.agent_update` (protocol 1.2): what the agent reports beside its text, e.g. an
    /// ACP agent's tool call (its `update` object, `sessionUpdate` naming the kind).
    AgentUpdate {
        /// The turn, when it belongs to one.
        #[serde(default)]
        turn_id: Option<String>,
        /// The agent's update object, as it sent it.
        update: serde_json::Map<String, Value>,
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
        ReceivedSessionEventKind::typed(event, payload.clone()).unwrap_or_else(|_| {
            ReceivedSessionEventKind::Other {
                event: event.to_owned(),
                payload: payload.clone(),
            }
        })
    }

    /// A session event of the catalog with the documented fields, or why not.
    fn typed(event: &str, payload: Value) -> Result<ReceivedSessionEventKind, serde_json::Error> {
        use serde::de::Error as _;
        let name = EventName::from_name(event)
            .filter(|name| name.spec().session)
            .ok_or_else(|| serde_json::Error::custom(format!("unknown session event {event:?}")))?;
        // The derived reader, keyed by the variant's Rust name (see the type's doc).
        ReceivedSessionEventKind::deserialize(
            json!({ "event": name.variant_name(), "payload": payload }),
        )
    }

    /// The turn this event belongs to, if any.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            ReceivedSessionEventKind::TurnStarted { turn_id, .. }
            | ReceivedSessionEventKind::TextDelta { turn_id, .. }
            | ReceivedSessionEventKind::PermissionRequest { turn_id, .. }
            | ReceivedSessionEventKind::TurnCompleted { turn_id, .. } => Some(turn_id),
            ReceivedSessionEventKind::Error { turn_id, .. }
            | ReceivedSessionEventKind::AgentUpdate { turn_id, .. } => turn_id.as_deref(),
            ReceivedSessionEventKind::PermissionResolved { .. }
            | ReceivedSessionEventKind::Other { .. } => None,
        }
    }
}

/// Reads `{"event": <wire name>, "payload": …}` strictly: an unknown event or a payload without
/// the documented fields is an error (where [`ReceivedSessionEventKind::parse`] keeps it as
/// [`ReceivedSessionEventKind::Other`]).
impl<'de> Deserialize<'de> for ReceivedSessionEventKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            event: String,
            payload: Value,
        }
        let wire = Wire::deserialize(deserializer)?;
        ReceivedSessionEventKind::typed(&wire.event, wire.payload)
            .map_err(<D::Error as serde::de::Error>::custom)
    }
}

// The event catalog: every event the server sends, its wire name and payload type, listed
// once (the method catalog, `super::catalog`, lists the methods the same way).

/// Everything the catalog knows about one event.
#[derive(Debug, Clone, Copy)]
pub struct EventSpec {
    /// The event.
    pub event: EventName,
    /// Its wire name.
    pub name: &'static str,
    /// Whether it is a session event (numbered with `seq`).
    pub session: bool,
    /// The Rust name of its payload type.
    pub payload_type: &'static str,
    /// The payload's JSON Schema.
    pub payload_schema: SchemaFn,
}

macro_rules! events {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $wire:literal => $payload:ty, session: $session:expr
    ),* $(,)?) => {
        /// Every event the server sends. Its wire name is [`EventName::as_str`]; the session
        /// events ([`SessionEvent`] and its tolerant reader) carry the same
        /// variant names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventName {
            $( $(#[$doc])* $variant, )*
        }

        impl EventName {
            /// The Rust name of the variant, which the session events' tolerant reader shares.
            pub(crate) fn variant_name(self) -> &'static str {
                match self {
                    $( EventName::$variant => stringify!($variant), )*
                }
            }
        }

        /// Every event the server sends, in the order the generated "Events" table lists it.
        pub static EVENTS: &[EventSpec] = &[
            $( EventSpec {
                event: EventName::$variant,
                name: $wire,
                session: $session,
                payload_type: stringify!($payload),
                payload_schema: schema_of::<$payload>,
            }, )*
        ];
    };
}

events! {
    /// `session.turn_started`.
    TurnStarted = "session.turn_started" => TurnStarted, session: true,
    /// `session.text_delta`.
    TextDelta = "session.text_delta" => TextDelta, session: true,
    /// `session.permission_request`.
    PermissionRequest = "session.permission_request" => PermissionRequest, session: true,
    /// `session.permission_resolved`.
    PermissionResolved = "session.permission_resolved" => PermissionResolved, session: true,
    /// `session.turn_completed`.
    TurnCompleted = "session.turn_completed" => TurnCompleted, session: true,
    /// `session.error`.
    Error = "session.error" => SessionErrorEvent, session: true,
    /// `session.agent_update`: what an agent reports beside its text (protocol 1.2).
    AgentUpdate = "session.agent_update" => AgentUpdate, session: true,
    /// `protocol_error`: the answer to a frame with no usable id.
    ProtocolError = "protocol_error" => ProtocolErrorPayload, session: false,
    /// `channel.dropped`: frames of a lossy channel dropped for this receiver.
    ChannelDropped = "channel.dropped" => ChannelDropped, session: false,
    /// `channel.credit`: more bytes this connection may send on a bulk channel (protocol 1.1).
    ChannelCredit = "channel.credit" => ChannelCredit, session: false,
}

impl EventName {
    /// Looks a wire name up.
    pub fn from_name(name: &str) -> Option<EventName> {
        EVENTS.iter().find(|s| s.name == name).map(|s| s.event)
    }

    /// The catalog entry.
    pub fn spec(self) -> &'static EventSpec {
        // The table is built from the same list as the enum, in the same order.
        &EVENTS[self as usize]
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_table_and_enum_agree() {
        for (i, spec) in EVENTS.iter().enumerate() {
            assert_eq!(spec.event as usize, i);
            assert_eq!(EventName::from_name(spec.name), Some(spec.event));
            assert_eq!(spec.event.as_str(), spec.name);
        }
        assert_eq!(EventName::from_name("session.nope"), None);
    }

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

    #[test]
    fn an_agent_update_is_sent_byte_for_byte_as_the_agent_wrote_it() {
        // Spacing, key order and escapes as an agent might write them.
        let update = r#"{ "sessionUpdate":"tool_call","toolCallId" :"c1","title":"\u00e9 x" , "rawInput":{"b":1,"a":2.50}}"#;
        let raw = serde_json::from_str::<Box<RawValue>>(update).unwrap();
        let event = SessionEvent::AgentUpdate(AgentUpdate {
            turn_id: Some("t1".into()),
            update: RawObject::new(raw).unwrap(),
        });
        let frame = event.encode(9).unwrap();
        let expected = format!(
            r#"{{"event":"session.agent_update","seq":9,"payload":{{"turn_id":"t1","update":{update}}}}}"#
        );
        assert_eq!(std::str::from_utf8(&frame).unwrap(), expected);
        assert!(is_agent_update_frame(&frame));
        let delta = SessionEvent::TextDelta(TextDelta {
            turn_id: "t1".into(),
            delta: "session.agent_update".into(),
        });
        assert!(!is_agent_update_frame(&delta.encode(10).unwrap()));

        for not_an_object in ["[]", "1", "\"x\"", "null"] {
            let raw = serde_json::from_str::<Box<RawValue>>(not_an_object).unwrap();
            assert!(RawObject::new(raw).is_none(), "{not_an_object}");
            let payload = json!({"update": serde_json::from_str::<Value>(not_an_object).unwrap()});
            assert!(SessionEvent::from_wire("session.agent_update", payload).is_err());
        }
    }

    #[test]
    fn option_kinds_decide_allow_or_deny() {
        let option: PermissionOption = serde_json::from_value(
            json!({"optionId": "a", "name": "Allow", "kind": "allow_always"}),
        )
        .unwrap();
        assert_eq!(option.kind.decision(), Decision::Allow);
        assert_eq!(PermissionOptionKind::RejectOnce.decision(), Decision::Deny);
        assert_eq!(
            serde_json::to_value(&option).unwrap(),
            json!({"optionId": "a", "name": "Allow", "kind": "allow_always"})
        );
    }

    /// One payload with the documented fields per session event of the catalog.
    fn sample(name: EventName) -> Value {
        match name {
            EventName::TurnStarted => json!({
                "turn_id": "t1", "driver": {"driver_id": "d", "surface": "s"}, "prompt": "hi"
            }),
            EventName::TextDelta => json!({"turn_id": "t1", "delta": "x"}),
            EventName::PermissionRequest => {
                json!({"turn_id": "t1", "request_id": "p1", "tool": "sh", "input": {}})
            }
            EventName::PermissionResolved => json!({"request_id": "p1", "decision": "allow"}),
            EventName::TurnCompleted => json!({"turn_id": "t1", "text": "x", "aborted": false}),
            EventName::Error => json!({"code": "agent_exited", "message": "gone"}),
            EventName::AgentUpdate => {
                json!({"turn_id": "t1", "update": {"sessionUpdate": "plan", "entries": []}})
            }
            EventName::ProtocolError | EventName::ChannelDropped | EventName::ChannelCredit => {
                Value::Null
            }
        }
    }

    #[test]
    fn every_session_event_of_the_catalog_is_read_by_both_readers_under_its_wire_name() {
        let session: Vec<_> = EVENTS.iter().filter(|e| e.session).collect();
        assert_eq!(session.len(), 7);
        for spec in session {
            let strict = SessionEvent::from_wire(spec.name, sample(spec.event)).unwrap();
            assert_eq!(strict.event_name(), spec.event);
            assert_eq!(strict.name(), spec.name);
            let kind = ReceivedSessionEventKind::parse(spec.name, &sample(spec.event));
            assert!(
                !matches!(kind, ReceivedSessionEventKind::Other { .. }),
                "{}: {kind:?}",
                spec.name
            );
            let wire = json!({"event": spec.name, "payload": sample(spec.event)});
            assert_eq!(
                serde_json::from_value::<ReceivedSessionEventKind>(wire).unwrap(),
                kind
            );
        }
        for carrier in [
            "protocol_error",
            "channel.dropped",
            "channel.credit",
            "session.mood",
        ] {
            assert!(SessionEvent::from_wire(carrier, json!({})).is_err());
            assert!(matches!(
                ReceivedSessionEventKind::parse(carrier, &json!({})),
                ReceivedSessionEventKind::Other { .. }
            ));
            let wire = json!({"event": carrier, "payload": {}});
            assert!(serde_json::from_value::<ReceivedSessionEventKind>(wire).is_err());
        }
    }
}

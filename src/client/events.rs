//! What a [`Client`](super::Client) tells its application: typed session events (SPEC
//! section 5) and connection milestones such as a resume outcome.

use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ClientError;

/// The answer to a permission prompt: the protocol's type.
pub use crate::protocol::methods::Decision;

/// One session event, delivered once and in `seq` order.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// The per-session sequence number.
    pub seq: u64,
    /// What happened.
    pub kind: SessionEventKind,
}

/// The session events of SPEC section 5. An event with an unknown name, or whose payload does
/// not have the documented fields, arrives as [`SessionEventKind::Other`] rather than being lost.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "event", content = "payload")]
pub enum SessionEventKind {
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

impl SessionEventKind {
    /// Types an event by name; falls back to [`SessionEventKind::Other`].
    pub fn parse(event: &str, payload: &Value) -> SessionEventKind {
        serde_json::from_value(json!({ "event": event, "payload": payload })).unwrap_or_else(|_| {
            SessionEventKind::Other {
                event: event.to_owned(),
                payload: payload.clone(),
            }
        })
    }

    /// The turn this event belongs to, if any.
    pub fn turn_id(&self) -> Option<&str> {
        match self {
            SessionEventKind::TurnStarted { turn_id, .. }
            | SessionEventKind::TextDelta { turn_id, .. }
            | SessionEventKind::PermissionRequest { turn_id, .. }
            | SessionEventKind::TurnCompleted { turn_id, .. } => Some(turn_id),
            SessionEventKind::Error { turn_id, .. } => turn_id.as_deref(),
            SessionEventKind::PermissionResolved { .. } | SessionEventKind::Other { .. } => None,
        }
    }
}

/// How a handshake bound this connection to a session (the handshake result's `resume`): the
/// protocol's type.
pub use crate::protocol::methods::ResumeOutcome;

/// One entry of `session.history`, read tolerantly: the protocol's reader.
pub use crate::protocol::methods::ReceivedHistoryEntry as HistoryEntry;

/// Everything a [`Client`](super::Client) reports to [`on_event`](super::Client::on_event)
/// handlers.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// A handshake succeeded (the first one, or one after a reconnect) and requests flow again.
    Ready {
        /// How the connection was bound to its session.
        outcome: ResumeOutcome,
        /// True when the server's minor protocol version differs from the client's.
        version_skew: bool,
    },
    /// A session event, exactly once: duplicates replayed after a resume are dropped.
    Session(SessionEvent),
    /// An event that is not a session event (e.g. `protocol_error`), as received.
    Notice {
        /// The event name.
        event: String,
        /// The payload.
        payload: Value,
    },
    /// After a `gap` or `reset`, the session history was fetched again.
    HistoryRefetched {
        /// The outcome that caused the refetch.
        outcome: ResumeOutcome,
        /// The history, oldest first.
        entries: Vec<HistoryEntry>,
    },
    /// After a `gap` or `reset`, fetching the history failed.
    HistoryRefetchFailed {
        /// The outcome that caused the refetch.
        outcome: ResumeOutcome,
        /// Why it failed.
        error: ClientError,
    },
    /// A handshake failed (e.g. `version_incompatible`); the client disconnected and will not
    /// retry.
    HandshakeFailed(ClientError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_events_are_typed() {
        assert_eq!(
            SessionEventKind::parse(
                "session.text_delta",
                &json!({"turn_id": "t1", "delta": " world"})
            ),
            SessionEventKind::TextDelta {
                turn_id: "t1".into(),
                delta: " world".into()
            }
        );
        let done = SessionEventKind::parse(
            "session.turn_completed",
            &json!({"turn_id": "t1", "text": "echo: hi", "aborted": false}),
        );
        assert_eq!(done.turn_id(), Some("t1"));
        assert!(matches!(
            done,
            SessionEventKind::TurnCompleted {
                truncated: false,
                ..
            }
        ));
        let cut = SessionEventKind::parse(
            "session.turn_completed",
            &json!({"turn_id": "t1", "text": "ec", "aborted": false, "truncated": true}),
        );
        assert!(matches!(
            cut,
            SessionEventKind::TurnCompleted {
                truncated: true,
                ..
            }
        ));
        let entry: HistoryEntry = serde_json::from_value(
            json!({"role": "assistant", "text": "ec", "turn_id": "t1", "truncated": true}),
        )
        .unwrap();
        assert!(entry.truncated);
    }

    #[test]
    fn unknown_or_malformed_events_are_kept_as_other() {
        let odd = SessionEventKind::parse("session.text_delta", &json!({"delta": 3}));
        assert!(
            matches!(odd, SessionEventKind::Other { ref event, .. } if event == "session.text_delta")
        );
        let new = SessionEventKind::parse("session.mood", &json!({"mood": "calm"}));
        assert!(matches!(new, SessionEventKind::Other { .. }));
    }

    #[test]
    fn resume_outcomes_parse_from_the_wire() {
        let gap: ResumeOutcome =
            serde_json::from_value(json!({"outcome": "gap", "from": 4, "to": 9})).unwrap();
        assert_eq!(gap, ResumeOutcome::Gap { from: 4, to: 9 });
        assert!(gap.needs_history());
        let resumed: ResumeOutcome =
            serde_json::from_value(json!({"outcome": "resumed", "replayed": 2})).unwrap();
        assert!(!resumed.needs_history());
    }
}

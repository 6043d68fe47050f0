//! What a [`Client`](super::Client) tells its application: typed session events
//! (docs/protocol.md, "Events") and connection milestones such as a resume outcome.

use serde_json::Value;

use super::error::ClientError;
use super::transport::ConnectionState;

/// The answer to a permission prompt: the protocol's type.
pub use carrier_protocol::methods::Decision;

/// One session event, delivered once and in `seq` order: the protocol's tolerant reader.
pub use carrier_protocol::events::ReceivedSessionEvent;
/// The session events (docs/protocol.md, "Events") as the client types them (unknown ones arrive
/// as [`ReceivedSessionEventKind::Other`]): the protocol's type.
pub use carrier_protocol::events::ReceivedSessionEventKind;

/// How a handshake bound this connection to a session (the handshake result's `resume`): the
/// protocol's type.
pub use carrier_protocol::methods::ResumeOutcome;

/// One entry of `session.history`, read tolerantly: the protocol's reader.
pub use carrier_protocol::methods::ReceivedHistoryEntry;

/// Everything a [`Client`](super::Client) reports to [`on_event`](super::Client::on_event)
/// handlers.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// The client's state changed, as [`Client::state`](super::Client::state) reports it:
    /// `Connecting` (dialling or handshaking; after a break, reconnecting), `Connected` or
    /// `VersionSkew` (handshaken, just before [`ClientEvent::Ready`]), `Disconnected` (closed,
    /// refused, or given up).
    State(ConnectionState),
    /// A handshake succeeded (the first one, or one after a reconnect) and requests flow again.
    Ready {
        /// How the connection was bound to its session.
        outcome: ResumeOutcome,
        /// True when the server's minor protocol version differs from the client's.
        version_skew: bool,
    },
    /// A session event, exactly once: duplicates replayed after a resume are dropped.
    Session(ReceivedSessionEvent),
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
        entries: Vec<ReceivedHistoryEntry>,
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
    use serde_json::json;

    #[test]
    fn known_events_are_typed() {
        assert_eq!(
            ReceivedSessionEventKind::parse(
                "session.text_delta",
                &json!({"turn_id": "t1", "delta": " world"})
            ),
            ReceivedSessionEventKind::TextDelta {
                turn_id: "t1".into(),
                delta: " world".into()
            }
        );
        let done = ReceivedSessionEventKind::parse(
            "session.turn_completed",
            &json!({"turn_id": "t1", "text": "echo: hi", "aborted": false}),
        );
        assert_eq!(done.turn_id(), Some("t1"));
        assert!(matches!(
            done,
            ReceivedSessionEventKind::TurnCompleted {
                truncated: false,
                ..
            }
        ));
        let cut = ReceivedSessionEventKind::parse(
            "session.turn_completed",
            &json!({"turn_id": "t1", "text": "ec", "aborted": false, "truncated": true}),
        );
        assert!(matches!(
            cut,
            ReceivedSessionEventKind::TurnCompleted {
                truncated: true,
                ..
            }
        ));
        let entry: ReceivedHistoryEntry = serde_json::from_value(
            json!({"role": "assistant", "text": "ec", "turn_id": "t1", "truncated": true}),
        )
        .unwrap();
        assert!(entry.truncated);
    }

    #[test]
    fn unknown_or_malformed_events_are_kept_as_other() {
        let odd = ReceivedSessionEventKind::parse("session.text_delta", &json!({"delta": 3}));
        assert!(
            matches!(odd, ReceivedSessionEventKind::Other { ref event, .. } if event == "session.text_delta")
        );
        let new = ReceivedSessionEventKind::parse("session.mood", &json!({"mood": "calm"}));
        assert!(matches!(new, ReceivedSessionEventKind::Other { .. }));
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

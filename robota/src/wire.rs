//! The seed system's text wire: the messages the server sends, as types, and how the carrier's
//! session events and history become them. One JSON object per text frame, tagged by `type`;
//! field names are the seed system's (camelCase). Nothing here does I/O.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use carrier_agent::foreign::EntryMeta;
use carrier_protocol::events::{DriverInfo, SessionEvent};
use carrier_protocol::methods::{HistoryEntry, HistoryRole};
use carrier_protocol::timestamp::rfc3339_millis;
use carrier_server::DEFAULT_DRIVER_ID;

/// What the carrier has no figures for: the context window of a turn is reported as zeros.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ContextState {
    max_tokens: u64,
    used_tokens: u64,
    used_percentage: u64,
    remaining_percentage: u64,
}

/// The result of a turn (`complete` and `interrupted`): the reply; the carrier keeps no tool
/// summaries and no structured history, so those are empty.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ExecutionResult<'a> {
    response: &'a str,
    history: [Value; 0],
    tool_summaries: [Value; 0],
    context_state: ContextState,
}

/// One conversation message (`messages`): a prompt or a reply of the session's history.
#[derive(Debug, Serialize)]
pub(super) struct UniversalMessage<'a> {
    id: String,
    role: &'static str,
    content: &'a str,
    /// When the carrier recorded it (RFC 3339, UTC, milliseconds).
    timestamp: String,
    /// `"interrupted"` for the reply of an aborted turn, else `"complete"`.
    state: &'static str,
    /// `{"truncated": true}` for a reply the carrier cut to its reply cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Value>,
}

/// The execution workspace: the carrier runs no background work, so it has no entries.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WorkspaceSnapshot<'a> {
    session_id: &'a str,
    updated_at: String,
    entries: [Value; 0],
}

impl<'a> WorkspaceSnapshot<'a> {
    /// The empty workspace of `session_id`, as of now.
    pub(super) fn empty(session_id: &'a str) -> Self {
        WorkspaceSnapshot {
            session_id,
            updated_at: rfc3339_millis(now_ms()),
            entries: [],
        }
    }
}

/// `permission_request.event`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PermissionEvent<'a> {
    id: &'a str,
    tool_name: &'a str,
    tool_args: &'a Value,
}

/// `prompt_resolved.event`.
#[derive(Debug, Serialize)]
pub(super) struct ResolvedEvent<'a> {
    id: &'a str,
}

/// A background task log page with no lines.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EmptyLogPage<'a> {
    pub(super) task_id: &'a str,
    pub(super) lines: [Value; 0],
}

/// Every message the server sends on this wire. `driver_id` is the host-configured identity
/// of the turn's driver, on the messages a turn authors.
#[derive(Debug, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub(super) enum ServerMessage<'a> {
    Messages {
        messages: Vec<UniversalMessage<'a>>,
    },
    ExecutionWorkspaceEvent {
        snapshot: WorkspaceSnapshot<'a>,
    },
    UserMessage {
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        driver_id: Option<&'a str>,
    },
    Thinking {
        is_thinking: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        driver_id: Option<&'a str>,
    },
    TextDelta {
        delta: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        driver_id: Option<&'a str>,
    },
    PermissionRequest {
        event: PermissionEvent<'a>,
    },
    PromptResolved {
        event: ResolvedEvent<'a>,
    },
    Complete {
        result: ExecutionResult<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        driver_id: Option<&'a str>,
    },
    Interrupted {
        result: ExecutionResult<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        driver_id: Option<&'a str>,
    },
    Error {
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        driver_id: Option<&'a str>,
    },
    Context {
        state: ContextState,
    },
    Executing {
        executing: bool,
    },
    /// The carrier queues no prompts: always `null`.
    Pending {
        pending: Option<&'a str>,
    },
    CommandResult {
        name: &'a str,
        message: String,
        success: bool,
    },
    BackgroundTasks {
        tasks: [Value; 0],
    },
    BackgroundTask {
        task_id: &'a str,
        task: Option<Value>,
    },
    BackgroundJobGroups {
        groups: [Value; 0],
    },
    BackgroundJobGroup {
        group_id: &'a str,
        group: Option<Value>,
    },
    BackgroundTaskLog {
        task_id: &'a str,
        page: EmptyLogPage<'a>,
    },
    BackgroundTaskControlResult {
        action: &'static str,
        task_id: &'a str,
        success: bool,
        message: String,
    },
    ProtocolError {
        message: &'a str,
    },
}

impl ServerMessage<'_> {
    /// The message as one text frame.
    pub(super) fn encode(&self) -> Bytes {
        // Every field is a string, a number, a bool or JSON the carrier already holds, so
        // this cannot fail; an empty object would be caught by the client as an unknown type.
        Bytes::from(serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec()))
    }

    /// The context state a turn ended with, or `get-context`'s.
    pub(super) fn context() -> Self {
        ServerMessage::Context {
            state: ContextState::default(),
        }
    }
}

/// The seed system's own identity for the local operator, the default driver of its turns
/// (`OWNER_DRIVER_ID` of its transport interface); its GUI labels a turn of any other driver
/// as a co-driver's.
const OWNER_DRIVER_ID: &str = "owner";

/// The `driverId` a turn of `driver` carries on this wire: the carrier's default driver is the
/// seed system's owner, a host-configured one is itself; `None` for an empty id.
pub(super) fn driver_id(driver: &DriverInfo) -> Option<String> {
    match driver.driver_id.as_str() {
        "" => None,
        DEFAULT_DRIVER_ID => Some(OWNER_DRIVER_ID.to_owned()),
        id => Some(id.to_owned()),
    }
}

/// The messages one session event becomes, in order. `driver` is the driver of the turn the
/// event belongs to; `session_id` names the session in the workspace snapshot a turn ends with.
///
/// A turn ends as the seed system's session ends one: `complete` (or `interrupted`) with the
/// driver, then `thinking {isThinking:false}` and the execution workspace snapshot, which it
/// sends once the turn has let go of its driver, so without one.
pub(super) fn from_event<'a>(
    event: &'a SessionEvent,
    driver: Option<&'a str>,
    session_id: &'a str,
) -> Vec<ServerMessage<'a>> {
    match event {
        SessionEvent::TurnStarted(started) => vec![
            ServerMessage::UserMessage {
                content: &started.prompt,
                driver_id: driver,
            },
            ServerMessage::Thinking {
                is_thinking: true,
                driver_id: driver,
            },
        ],
        SessionEvent::TextDelta(d) => vec![ServerMessage::TextDelta {
            delta: &d.delta,
            driver_id: driver,
        }],
        SessionEvent::PermissionRequest(p) => vec![ServerMessage::PermissionRequest {
            event: PermissionEvent {
                id: &p.request_id,
                tool_name: &p.tool,
                tool_args: &p.input,
            },
        }],
        SessionEvent::PermissionResolved(r) => vec![ServerMessage::PromptResolved {
            event: ResolvedEvent { id: &r.request_id },
        }],
        SessionEvent::TurnCompleted(done) => {
            let result = ExecutionResult {
                response: &done.text,
                history: [],
                tool_summaries: [],
                context_state: ContextState::default(),
            };
            let end = if done.aborted {
                ServerMessage::Interrupted {
                    result,
                    driver_id: driver,
                }
            } else {
                ServerMessage::Complete {
                    result,
                    driver_id: driver,
                }
            };
            vec![
                end,
                ServerMessage::Thinking {
                    is_thinking: false,
                    driver_id: None,
                },
                ServerMessage::ExecutionWorkspaceEvent {
                    snapshot: WorkspaceSnapshot::empty(session_id),
                },
            ]
        }
        SessionEvent::Error(e) => vec![ServerMessage::Error {
            message: &e.message,
            driver_id: driver,
        }],
        // The seed system's wire has no message for them (its listener is not handed any).
        SessionEvent::AgentUpdate(_) => Vec::new(),
    }
}

/// One history entry as a conversation message.
pub(super) fn message<'a>(meta: &EntryMeta, entry: &'a HistoryEntry) -> UniversalMessage<'a> {
    let role = match entry.role {
        HistoryRole::User => "user",
        HistoryRole::Assistant => "assistant",
    };
    UniversalMessage {
        id: format!("{}-{role}", entry.turn_id),
        role,
        content: &entry.text,
        timestamp: rfc3339_millis(meta.at_ms),
        state: if meta.interrupted {
            "interrupted"
        } else {
            "complete"
        },
        metadata: entry
            .truncated
            .filter(|&t| t)
            .map(|_| serde_json::json!({ "truncated": true })),
    }
}

/// Milliseconds since the Unix epoch now (the epoch for a clock set before it).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use carrier_protocol::events::{TextDelta, TurnCompleted};

    #[test]
    fn timestamps_read_as_javascript_writes_them() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T12:34:56.789Z, a leap day.
        assert_eq!(
            rfc3339_millis(1_709_210_096_789),
            "2024-02-29T12:34:56.789Z"
        );
        assert_eq!(rfc3339_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn the_carriers_default_driver_is_the_seed_systems_owner() {
        let driver = |id: &str| DriverInfo {
            driver_id: id.into(),
            surface: "carrier".into(),
        };
        assert_eq!(driver_id(&driver("local")).as_deref(), Some("owner"));
        assert_eq!(driver_id(&driver("phone")).as_deref(), Some("phone"));
        assert_eq!(driver_id(&driver("")), None);
    }

    #[test]
    fn messages_carry_their_type_and_camel_case_fields() {
        let json = |m: &ServerMessage<'_>| serde_json::from_slice::<Value>(&m.encode()).unwrap();
        let delta = SessionEvent::TextDelta(TextDelta {
            turn_id: "t1".into(),
            delta: "hi".into(),
        });
        let out = from_event(&delta, Some("d"), "s1");
        assert_eq!(
            json(&out[0]),
            serde_json::json!({"type": "text_delta", "delta": "hi", "driverId": "d"})
        );
        let done = SessionEvent::TurnCompleted(TurnCompleted {
            turn_id: "t1".into(),
            text: "r".into(),
            aborted: true,
            truncated: None,
            stop_reason: None,
        });
        let out = from_event(&done, Some("d"), "s1");
        assert_eq!(
            json(&out[0]),
            serde_json::json!({"type": "interrupted", "driverId": "d", "result": {
                "response": "r", "history": [], "toolSummaries": [],
                "contextState": {"maxTokens": 0, "usedTokens": 0, "usedPercentage": 0,
                                 "remainingPercentage": 0}}})
        );
        assert_eq!(
            json(&out[1]),
            serde_json::json!({"type": "thinking", "isThinking": false})
        );
        assert_eq!(json(&out[2])["snapshot"]["sessionId"], "s1");
        assert_eq!(out.len(), 3);
        assert_eq!(
            json(&ServerMessage::Pending { pending: None }),
            serde_json::json!({"type": "pending", "pending": null})
        );
        assert_eq!(
            json(&ServerMessage::BackgroundTaskControlResult {
                action: "cancel",
                task_id: "x",
                success: false,
                message: "m".into()
            }),
            serde_json::json!({"type": "background_task_control_result", "action": "cancel",
                               "taskId": "x", "success": false, "message": "m"})
        );
    }
}

//! The answers to what the seed system's wire asks of concepts the carrier does not have:
//! background tasks and job groups (reads answer empty, controls fail with a reason) and
//! commands (none is known).

use serde_json::Value;

use super::client::{required, Kind, MAX_ECHO_BYTES};
use super::wire::{EmptyLogPage, ServerMessage};
use carrier_protocol::envelope::truncate;

/// What the carrier answers to a background or command message: the message to send, or the
/// `protocol_error` text for a required field that is missing. `None` for a kind that is not
/// one of these.
pub(super) fn answer(
    kind: Kind,
    message: &Value,
) -> Option<Result<ServerMessage<'_>, &'static str>> {
    let task_id = || {
        required(message, "taskId")
            .map(|id| truncate(id, MAX_ECHO_BYTES))
            .ok_or("taskId is required")
    };
    let group_id = || {
        required(message, "groupId")
            .map(|id| truncate(id, MAX_ECHO_BYTES))
            .ok_or("groupId is required")
    };
    Some(match kind {
        Kind::GetBackgroundTasks => Ok(ServerMessage::BackgroundTasks { tasks: [] }),
        Kind::GetBackgroundJobGroups => Ok(ServerMessage::BackgroundJobGroups { groups: [] }),
        Kind::GetBackgroundTask => task_id().map(|task_id| ServerMessage::BackgroundTask {
            task_id,
            task: None,
        }),
        Kind::GetBackgroundJobGroup | Kind::WaitBackgroundJobGroup => {
            group_id().map(|group_id| ServerMessage::BackgroundJobGroup {
                group_id,
                group: None,
            })
        }
        Kind::ReadBackgroundTaskLog => task_id().map(|task_id| ServerMessage::BackgroundTaskLog {
            task_id,
            page: EmptyLogPage { task_id, lines: [] },
        }),
        Kind::CancelBackgroundTask => task_id().map(|id| control("cancel", id)),
        Kind::CloseBackgroundTask => task_id().map(|id| control("close", id)),
        Kind::SendBackgroundTask => task_id().and_then(|id| {
            // Any value a JavaScript `if (!input)` lets through.
            let input = message.get("input").filter(|v| match v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
                _ => true,
            });
            input
                .map(|_| control("send", id))
                .ok_or("input is required")
        }),
        Kind::Command => required(message, "name")
            .map(|name| {
                let name = truncate(name, MAX_ECHO_BYTES);
                ServerMessage::CommandResult {
                    name,
                    message: format!("Unknown command: {name}"),
                    success: false,
                }
            })
            .ok_or("name is required"),
        _ => return None,
    })
}

/// A background control that cannot succeed: there is no such task.
fn control<'a>(action: &'static str, task_id: &'a str) -> ServerMessage<'a> {
    ServerMessage::BackgroundTaskControlResult {
        action,
        task_id,
        success: false,
        message: format!(
            "Background task not found: {task_id} (the carrier runs no background tasks)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answered(message: Value) -> Result<Value, &'static str> {
        let kind = Kind::parse(message["type"].as_str().unwrap()).unwrap();
        answer(kind, &message)
            .expect("a background or command message")
            .map(|m| serde_json::from_slice(&m.encode()).unwrap())
    }

    #[test]
    fn reads_answer_empty_and_controls_fail() {
        assert_eq!(
            answered(json!({"type": "get-background-task", "taskId": "a"})),
            Ok(json!({"type": "background_task", "taskId": "a", "task": null}))
        );
        assert_eq!(
            answered(json!({"type": "wait-background-job-group", "groupId": "g"})),
            Ok(json!({"type": "background_job_group", "groupId": "g", "group": null}))
        );
        assert_eq!(
            answered(json!({"type": "read-background-task-log", "taskId": "a"})),
            Ok(json!({"type": "background_task_log", "taskId": "a",
                      "page": {"taskId": "a", "lines": []}}))
        );
        let sent = answered(json!({"type": "send-background-task", "taskId": "a",
                                   "input": {"prompt": "x"}}))
        .unwrap();
        assert_eq!(
            (sent["action"].clone(), sent["success"].clone()),
            (json!("send"), json!(false))
        );
    }

    #[test]
    fn missing_fields_are_named_as_the_seed_handler_names_them() {
        for (message, why) in [
            (json!({"type": "get-background-task"}), "taskId is required"),
            (
                json!({"type": "cancel-background-task", "taskId": ""}),
                "taskId is required",
            ),
            (
                json!({"type": "get-background-job-group"}),
                "groupId is required",
            ),
            (
                json!({"type": "send-background-task", "taskId": "a"}),
                "input is required",
            ),
            (
                json!({"type": "send-background-task", "taskId": "a", "input": ""}),
                "input is required",
            ),
            (json!({"type": "command"}), "name is required"),
        ] {
            assert_eq!(answered(message.clone()), Err(why), "{message}");
        }
        assert!(answer(Kind::Submit, &json!({})).is_none());
    }
}

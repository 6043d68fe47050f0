//! What a client of the seed system's wire may send: the message kinds, which of them only a
//! driving connection may send, and reading their fields as that system's handler does (a
//! missing or empty string is "required").

use serde_json::Value;

use carrier_protocol::envelope::truncate;
use carrier_protocol::methods::Decision;

/// The most of a client's string the carrier echoes back in an answer (an unknown `type`, a
/// task or group id, a command name): enough for any real id, and it keeps every answer small
/// whatever the connection's outbound budget.
pub(super) const MAX_ECHO_BYTES: usize = 1024;

/// A message kind the wire defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Submit,
    Command,
    Abort,
    CancelQueue,
    GetMessages,
    GetContext,
    GetExecuting,
    GetPending,
    GetExecutionWorkspace,
    GetBackgroundTasks,
    GetBackgroundTask,
    GetBackgroundJobGroups,
    GetBackgroundJobGroup,
    WaitBackgroundJobGroup,
    ReadBackgroundTaskLog,
    CancelBackgroundTask,
    CloseBackgroundTask,
    SendBackgroundTask,
    PermissionResponse,
    AskResponse,
}

impl Kind {
    /// The kind a `type` names; `None` for one this wire does not define (including the
    /// seed system's usage report and resume messages, which its WebSocket handler does not
    /// route either).
    pub(super) fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "submit" => Kind::Submit,
            "command" => Kind::Command,
            "abort" => Kind::Abort,
            "cancel-queue" => Kind::CancelQueue,
            "get-messages" => Kind::GetMessages,
            "get-context" => Kind::GetContext,
            "get-executing" => Kind::GetExecuting,
            "get-pending" => Kind::GetPending,
            "get-execution-workspace" => Kind::GetExecutionWorkspace,
            "get-background-tasks" => Kind::GetBackgroundTasks,
            "get-background-task" => Kind::GetBackgroundTask,
            "get-background-job-groups" => Kind::GetBackgroundJobGroups,
            "get-background-job-group" => Kind::GetBackgroundJobGroup,
            "wait-background-job-group" => Kind::WaitBackgroundJobGroup,
            "read-background-task-log" => Kind::ReadBackgroundTaskLog,
            "cancel-background-task" => Kind::CancelBackgroundTask,
            "close-background-task" => Kind::CloseBackgroundTask,
            "send-background-task" => Kind::SendBackgroundTask,
            "permission-response" => Kind::PermissionResponse,
            "ask-response" => Kind::AskResponse,
            _ => return None,
        })
    }

    /// Whether the message changes something, so an observing connection may not send it.
    pub(super) fn drives(self) -> bool {
        matches!(
            self,
            Kind::Submit
                | Kind::Command
                | Kind::Abort
                | Kind::CancelQueue
                | Kind::PermissionResponse
                | Kind::AskResponse
                | Kind::CancelBackgroundTask
                | Kind::CloseBackgroundTask
                | Kind::SendBackgroundTask
        )
    }
}

/// The `type` of a message as the answer to an unknown one names it: the string itself (cut
/// to [`MAX_ECHO_BYTES`]), `undefined` when there is none, any other JSON as written.
pub(super) fn type_name(message: &Value) -> String {
    match message.get("type") {
        None => "undefined".to_owned(),
        Some(Value::String(name)) => truncate(name, MAX_ECHO_BYTES).to_owned(),
        Some(other) => truncate(&other.to_string(), MAX_ECHO_BYTES).to_owned(),
    }
}

/// A string field that is present and not empty.
pub(super) fn required<'v>(message: &'v Value, field: &str) -> Option<&'v str> {
    message
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The answer of `permission-response`: `true`, `"allow-session"` and `"allow-project"`
/// allow (the carrier remembers nothing past the request), `false` denies.
pub(super) fn decision(result: Option<&Value>) -> Option<Decision> {
    match result? {
        Value::Bool(true) => Some(Decision::Allow),
        Value::Bool(false) => Some(Decision::Deny),
        Value::String(s) if s == "allow-session" || s == "allow-project" => Some(Decision::Allow),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unknown_type_is_named_as_the_seed_handler_names_it() {
        assert_eq!(type_name(&json!({"type": "nope"})), "nope");
        assert_eq!(type_name(&json!({})), "undefined");
        assert_eq!(type_name(&json!(5)), "undefined");
        assert_eq!(type_name(&json!({"type": 7})), "7");
        let long = format!("a{}", "é".repeat(MAX_ECHO_BYTES));
        assert_eq!(
            type_name(&json!({ "type": long })).len(),
            MAX_ECHO_BYTES - 1,
            "cut on a character boundary"
        );
    }

    #[test]
    fn permission_results_map_to_decisions() {
        assert_eq!(decision(Some(&json!(true))), Some(Decision::Allow));
        assert_eq!(
            decision(Some(&json!("allow-session"))),
            Some(Decision::Allow)
        );
        assert_eq!(
            decision(Some(&json!("allow-project"))),
            Some(Decision::Allow)
        );
        assert_eq!(decision(Some(&json!(false))), Some(Decision::Deny));
        assert_eq!(decision(Some(&json!("deny"))), None);
        assert_eq!(decision(None), None);
    }

    #[test]
    fn required_fields_are_non_empty_strings() {
        let m = json!({"prompt": "", "taskId": "t", "n": 1});
        assert_eq!(required(&m, "prompt"), None);
        assert_eq!(required(&m, "taskId"), Some("t"));
        assert_eq!(required(&m, "n"), None);
        assert_eq!(required(&m, "missing"), None);
        assert_eq!(Kind::parse("submit"), Some(Kind::Submit));
        assert_eq!(Kind::parse("resume"), None);
        assert!(Kind::Submit.drives() && !Kind::GetMessages.drives());
    }
}

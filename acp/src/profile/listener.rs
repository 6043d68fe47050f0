//! [`AcpListener`]: one bound session's events, as one `/acp` connection hears them.
//!
//! - `turn_started` of a turn another client started → `user_message_chunk` (the client that
//!   sent the prompt shows it already);
//! - `text_delta` → `agent_message_chunk`;
//! - `agent_update` → `session/update` with the agent's update as it sent it;
//! - `permission_request` → `session/request_permission` to a driver (never to an observer),
//!   with an ACP agent's own tool call and options, or carrier's `allow` and `deny`;
//! - `permission_resolved` → `$/cancel_request` for the requests the connection was sent and
//!   did not answer (the first answer on any wire decides);
//! - `turn_completed` → the answer to the connection's own `session/prompt`: the ACP agent's
//!   `stopReason` (`end_turn` for other agents), or `cancelled` when the turn was aborted (from
//!   any wire), or the error the turn reported when it ended on one;
//! - `session.error` → kept for that answer; ACP has no update for it.

use std::sync::Arc;

use super::link::{Asked, Link, MAX_ASKED, MAX_ERROR_BYTES};
use super::messages::{
    CancelRequest, ForwardedUpdate, Options, PermissionOption, PromptResult, RequestPermission,
    SessionUpdate, Text, ToolCall, ToolCallField, Update,
};
use crate::rpc::{self, ErrorObject, Id};
use carrier_agent::foreign::EventListener;
use carrier_protocol::envelope::truncate;
use carrier_protocol::events::{PermissionRequest, SessionEvent, TurnCompleted};
use carrier_protocol::Role;
use carrier_server::ConnectionId;

/// The options carrier offers for a prompt of an agent that brings none of its own: the
/// decisions of the agent protocol.
pub(crate) const CARRIER_OPTIONS: [PermissionOption<'static>; 2] = [
    PermissionOption {
        option_id: "allow",
        name: "Allow",
        kind: "allow_once",
    },
    PermissionOption {
        option_id: "deny",
        name: "Deny",
        kind: "reject_once",
    },
];

/// Sends one session's events to one connection as ACP messages.
pub(crate) struct AcpListener {
    link: Arc<Link>,
    session_id: String,
}

impl AcpListener {
    pub(crate) fn new(link: Arc<Link>, session_id: String) -> Self {
        AcpListener { link, session_id }
    }

    fn update(&self, update: Update<'_>) -> bool {
        self.link.notify(
            "session/update",
            &SessionUpdate {
                session_id: &self.session_id,
                update,
            },
        )
    }

    /// Whether the turn is one this connection's own `session/prompt` started.
    fn own_turn(&self, turn_id: &str) -> bool {
        self.link
            .state()
            .prompts
            .iter()
            .any(|p| p.session_id == self.session_id && p.turn_id.as_str() == turn_id)
    }

    fn ask(&self, request: &PermissionRequest) -> bool {
        let mut state = self.link.state();
        if state.asked.len() >= MAX_ASKED {
            tracing::warn!(
                conn = %self.link.conn.id(),
                request = %request.request_id,
                "{MAX_ASKED} permission requests unanswered on this connection: this one is not sent to it"
            );
            return true;
        }
        let id = state.next_request_id();
        // An ACP agent's prompt carries its own tool call (as the prompt's input) and options.
        let agent_options = request.options.as_deref();
        let tool_call = match (&request.input, agent_options) {
            (input @ serde_json::Value::Object(call), Some(_))
                if call.contains_key("toolCallId") =>
            {
                ToolCallField::Agent(input)
            }
            _ => ToolCallField::Carrier(ToolCall {
                tool_call_id: &request.request_id,
                title: &request.tool,
                kind: "other",
                status: "pending",
                raw_input: &request.input,
            }),
        };
        let params = RequestPermission {
            session_id: &self.session_id,
            tool_call,
            options: match agent_options {
                Some(options) => Options::Agent(options),
                None => Options::Carrier(&CARRIER_OPTIONS),
            },
        };
        let frame =
            match rpc::encode_request(&Id::Number(id), "session/request_permission", &params) {
                Ok(frame) => frame,
                Err(e) => {
                    tracing::error!(error = %e, "a permission request failed to encode");
                    return true;
                }
            };
        state.asked.push(Asked {
            id,
            session_id: self.session_id.clone(),
            request_id: request.request_id.clone(),
            agent_options: agent_options.is_some(),
        });
        self.link.send(frame)
    }

    /// Cancels the requests this connection was sent for `request_id` and has not answered.
    fn withdraw(&self, request_id: &str) -> bool {
        let ids = self.link.state().take_asked(&self.session_id, request_id);
        ids.into_iter().all(|request_id| {
            self.link
                .notify("$/cancel_request", &CancelRequest { request_id })
        })
    }

    fn completed(&self, done: &TurnCompleted) -> bool {
        let Some(prompt) = self
            .link
            .state()
            .take_prompt(&self.session_id, &done.turn_id)
        else {
            return true;
        };
        match (done.aborted, &prompt.error) {
            (true, Some(error)) => self.link.fail(Some(&prompt.id), error),
            (true, None) => self.link.reply(
                &prompt.id,
                &PromptResult {
                    stop_reason: "cancelled",
                },
            ),
            (false, _) => self.link.reply(
                &prompt.id,
                &PromptResult {
                    stop_reason: done.stop_reason.as_deref().unwrap_or("end_turn"),
                },
            ),
        }
    }

    fn error(&self, turn_id: &str, code: &str, message: &str) {
        let mut state = self.link.state();
        if let Some(prompt) = state
            .prompts
            .iter_mut()
            .find(|p| p.session_id == self.session_id && p.turn_id.as_str() == turn_id)
        {
            prompt.error = Some(ErrorObject {
                data: Some(serde_json::json!({ "code": truncate(code, MAX_ERROR_BYTES) })),
                ..ErrorObject::internal(truncate(message, MAX_ERROR_BYTES))
            });
        }
    }
}

impl EventListener for AcpListener {
    fn id(&self) -> ConnectionId {
        self.link.conn.id()
    }

    fn drives(&self) -> bool {
        self.link.conn.role() == Role::Drive
    }

    /// ACP carries them: they are what `session/update` is for.
    fn agent_updates(&self) -> bool {
        true
    }

    fn on_event(&self, event: &SessionEvent) -> bool {
        match event {
            SessionEvent::TurnStarted(started) => {
                self.own_turn(&started.turn_id)
                    || self.update(Update::UserMessageChunk {
                        content: Text {
                            text: &started.prompt,
                        },
                    })
            }
            SessionEvent::TextDelta(delta) => self.update(Update::AgentMessageChunk {
                content: Text { text: &delta.delta },
            }),
            SessionEvent::AgentUpdate(agent) => self.link.notify(
                "session/update",
                &ForwardedUpdate {
                    session_id: &self.session_id,
                    update: &agent.update,
                },
            ),
            SessionEvent::PermissionRequest(request) => !self.drives() || self.ask(request),
            SessionEvent::PermissionResolved(resolved) => self.withdraw(&resolved.request_id),
            SessionEvent::TurnCompleted(done) => self.completed(done),
            SessionEvent::Error(error) => {
                if let Some(turn_id) = &error.turn_id {
                    self.error(turn_id, &error.code, &error.message);
                }
                true
            }
        }
    }
}

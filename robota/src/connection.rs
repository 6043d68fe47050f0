//! [`RobotaConnection`]: one connection speaking the seed system's wire. No handshake: on
//! admission it is bound to its session, sent the history and the (empty) execution workspace
//! (and, when it drives, the session's open prompts), and takes channel frames; then each
//! client message is answered as that system's handler answers it, over the same session hub
//! the agent protocol uses. A channel frame the carrier cannot route is answered as that
//! system's server answers it.

use std::sync::Arc;

use serde_json::Value;

use super::background;
use super::client::{decision, required, type_name, Kind};
use super::listener::RobotaListener;
use super::refusal;
use super::wire::{message, ServerMessage, WorkspaceSnapshot};
use carrier_agent::foreign::{
    fit_back, Answer, EntryMeta, EventListener, Quiet, SessionHandle, Sessions, ENVELOPE_BYTES,
};
use carrier_protocol::close::CloseCode;
use carrier_protocol::error::ErrorObject;
use carrier_protocol::methods::{
    HistoryEntry, PermissionRespondParams, SessionState, SubmitParams,
};
use carrier_protocol::Role;
use carrier_server::{CarrierContext, ChannelRefusal, Connection, TextSession};

/// The per-connection side of [`super::RobotaProfile`].
pub(super) struct RobotaConnection {
    conn: Connection,
    ctx: CarrierContext,
    /// The session this connection drives and hears; `None` when the host had none to bind.
    hub: Option<SessionHandle>,
}

impl RobotaConnection {
    /// Binds the connection to the session the host's binder picks for it, sends `messages`
    /// then `execution_workspace_event` (then the hub sends a driving connection each open
    /// prompt's `permission_request`), and opens it to channel frames.
    pub(super) fn open(sessions: &Sessions, conn: Connection, ctx: CarrierContext) -> Self {
        let hub = sessions.initial(&conn);
        let me = RobotaConnection { conn, ctx, hub };
        match &me.hub {
            Some(hub) => {
                let listener: Arc<dyn EventListener> =
                    Arc::new(RobotaListener::new(me.conn.clone(), hub.id().clone()));
                hub.listen(listener, me.budget(), |recorded| {
                    // The listener takes no agent updates, so all it is handed was said.
                    let history: Vec<_> = recorded
                        .into_iter()
                        .filter_map(|(meta, entry)| entry.said().map(|said| (meta, said.clone())))
                        .collect();
                    me.send_messages(&history);
                    me.send_workspace(hub);
                });
            }
            None => {
                me.send(&ServerMessage::Error {
                    message: "the host has no session to bind to",
                    driver_id: None,
                });
                me.conn.close(CloseCode::INTERNAL, "no session");
            }
        }
        // There is no handshake on this wire: the connection is a channel sink from now on.
        me.conn.mark_handshaken();
        me
    }

    /// What an answer built from the session's history may take of the outbound budget.
    fn budget(&self) -> usize {
        self.ctx.limits().queue_bytes.saturating_sub(ENVELOPE_BYTES)
    }

    fn send(&self, message: &ServerMessage<'_>) {
        let _ = self.conn.send_text(message.encode());
    }

    /// `{"type":"protocol_error","message":…}`, counted as a protocol error.
    fn refuse(&self, why: &str) {
        refuse(&self.conn, &self.ctx, why);
    }

    /// The newest messages of the history that fit the outbound budget.
    fn send_messages(&self, history: &[(EntryMeta, HistoryEntry)]) {
        let all = history.iter().map(|(meta, entry)| message(meta, entry));
        let (messages, left_out) = fit_back(all.collect(), self.budget());
        if left_out > 0 {
            tracing::debug!(conn = %self.conn.id(), left_out, "messages fitted to the outbound budget");
        }
        self.send(&ServerMessage::Messages { messages });
    }

    fn send_workspace(&self, hub: &SessionHandle) {
        self.send(&ServerMessage::ExecutionWorkspaceEvent {
            snapshot: WorkspaceSnapshot::empty(hub.id().as_str()),
        });
    }

    /// One parsed client message of a known kind, its role already checked.
    fn handle(&self, hub: &SessionHandle, kind: Kind, msg: &Value) {
        match kind {
            Kind::Submit => match required(msg, "prompt") {
                None => self.refuse("prompt is required"),
                Some(prompt) => {
                    let params = SubmitParams {
                        prompt: prompt.to_owned(),
                        options: None,
                    };
                    let limits = self.ctx.limits();
                    let refusals = Refusals(self);
                    let driver = self.ctx.driver().clone();
                    hub.submit(&refusals, params, driver, limits.max_reply_bytes);
                }
            },
            // No turn running (or another surface's abort won): nothing to do, as in the seed.
            Kind::Abort => hub.abort(&Quiet, None),
            // The carrier queues no prompts and asks no questions.
            Kind::CancelQueue | Kind::AskResponse => {}
            Kind::PermissionResponse => {
                let Some(id) = required(msg, "id") else {
                    return self.refuse("id is required");
                };
                let Some(decision) = decision(msg.get("result")) else {
                    return self.refuse(
                        "result must be true, false, \"allow-session\" or \"allow-project\"",
                    );
                };
                let params = PermissionRespondParams::decide(id, decision);
                // A stale id (answered elsewhere, or its turn ended) is a no-op.
                hub.respond_permission(&Quiet, params);
            }
            Kind::GetMessages => self.send_messages(&hub.history_noted(self.budget())),
            Kind::GetContext => self.send(&ServerMessage::context()),
            Kind::GetExecuting => self.send(&ServerMessage::Executing {
                executing: hub.state() != SessionState::Idle,
            }),
            Kind::GetPending => self.send(&ServerMessage::Pending { pending: None }),
            Kind::GetExecutionWorkspace => self.send_workspace(hub),
            _ => match background::answer(kind, msg) {
                Some(Ok(answer)) => self.send(&answer),
                Some(Err(why)) => self.refuse(why),
                None => tracing::error!(?kind, "a message kind without an answer"),
            },
        }
    }
}

fn refuse(conn: &Connection, ctx: &CarrierContext, why: &str) {
    ctx.count_protocol_error();
    let _ = conn.send_text(ServerMessage::ProtocolError { message: why }.encode());
}

/// The answer to a submit: nothing when the turn starts (its events follow), the reason as a
/// `protocol_error` when it is refused (a turn is already running).
struct Refusals<'a>(&'a RobotaConnection);

impl<R> Answer<R> for Refusals<'_> {
    fn ok(&self, _: &R) {}

    fn err(&self, error: ErrorObject) {
        self.0.refuse(&error.message);
    }
}

impl TextSession for RobotaConnection {
    fn on_text(&mut self, text: &str) {
        let Ok(msg) = serde_json::from_str::<Value>(text) else {
            return self.refuse("Invalid JSON");
        };
        let Some(kind) = msg
            .get("type")
            .and_then(Value::as_str)
            .and_then(Kind::parse)
        else {
            return self.refuse(&format!("Unknown message type: {}", type_name(&msg)));
        };
        if kind.drives() && self.conn.role() < Role::Drive {
            return self.refuse("forbidden: observe role");
        }
        match &self.hub {
            Some(hub) => self.handle(&hub.clone(), kind, &msg),
            None => self.refuse("this connection is not bound to a session"),
        }
    }

    /// `too_large` as this wire's `protocol_error`; the socket stays open.
    fn too_large(&mut self, _message: &[u8], _limit: usize) -> Option<bytes::Bytes> {
        Some(
            ServerMessage::ProtocolError {
                message: "too_large",
            }
            .encode(),
        )
    }

    /// A binary frame the carrier could not route, as the seed system's server answers it.
    fn channel_refused(&mut self, refusal: &ChannelRefusal) -> Option<bytes::Bytes> {
        let message = refusal::message(refusal);
        Some(ServerMessage::ProtocolError { message: &message }.encode())
    }

    fn on_close(&mut self) {
        if let Some(hub) = self.hub.take() {
            hub.unbind(self.conn.id());
        }
    }
}

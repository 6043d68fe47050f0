//! [`AcpConnection`]: one `/acp` connection. Each text frame is one JSON-RPC message, read by
//! [`crate::rpc`] and answered here (the methods themselves are in `methods`):
//!
//! - `initialize` first (anything else before it: `-32600`); then the connection takes
//!   channel frames;
//! - `session/new` starts a carrier session (or joins the one `_carrier/join` named, or, for
//!   an observer, the host's default one), `session/load` binds an existing one after
//!   replaying its history; either way the session's events then reach the connection (see
//!   `listener`);
//! - `session/prompt` starts a turn, answered when it ends; `session/cancel` aborts it;
//! - the answers to carrier's `session/request_permission`s decide the session's prompts.
//!
//! An observer may do everything but prompt, cancel and answer prompts.

mod methods;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::link::Link;
use super::messages::{PermissionAnswer, PermissionOutcome};
use crate::rpc::{self, ErrorObject, Id, Message, Notification, Request, Response};
use carrier_agent::foreign::{Quiet, SessionHandle, Sessions};
use carrier_protocol::envelope::truncate;
use carrier_protocol::events::ProtocolErrorPayload;
use carrier_protocol::methods::{Decision, PermissionRespondParams};
use carrier_protocol::Role;
use carrier_server::{CarrierContext, ChannelRefusal, Connection, ProtocolErrorCode, TextSession};

/// The notification that makes `session/new` join an existing carrier session on this
/// connection instead of starting one (what `carrier acp --session ID` sends first).
pub(crate) const JOIN: &str = "_carrier/join";

/// The notification that answers a binary frame the carrier could not route: the agent
/// protocol's `protocol_error` payload, as an extension notification ACP clients may ignore.
pub(crate) const PROTOCOL_ERROR: &str = "_carrier/protocol_error";

/// The longest request id carrier takes (as JSON text): a prompt's id is held until its turn
/// ends, so it is bounded like everything else a client makes carrier hold.
pub(crate) const MAX_ID_BYTES: usize = 256;

/// The session `session/new` joins, as `_carrier/join` named it.
enum Join {
    Session(SessionHandle),
    /// A session the host does not know (its id cut to 64 bytes, for the answer).
    Unknown(String),
}

/// The per-connection side of [`super::AcpProfile`].
pub(crate) struct AcpConnection {
    sessions: Sessions,
    link: Arc<Link>,
    initialized: bool,
    join: Option<Join>,
    /// The sessions this connection has bound (`session/new`, `session/load`), by id: at most
    /// `limits.max_sessions`.
    bound: HashMap<String, SessionHandle>,
}

impl AcpConnection {
    pub(crate) fn open(sessions: Sessions, conn: Connection, ctx: CarrierContext) -> Self {
        AcpConnection {
            sessions,
            link: Arc::new(Link::new(conn, ctx)),
            initialized: false,
            join: None,
            bound: HashMap::new(),
        }
    }

    fn conn(&self) -> &Connection {
        &self.link.conn
    }

    fn ctx(&self) -> &CarrierContext {
        &self.link.ctx
    }

    fn drives(&self) -> bool {
        self.conn().role() == Role::Drive
    }

    fn request(&mut self, request: Request) {
        let Request { id, method, params } = request;
        if serde_json::to_string(&id).map_or(0, |s| s.len()) > MAX_ID_BYTES {
            let error = ErrorObject::new(
                rpc::INVALID_REQUEST,
                format!("invalid request: the id is over {MAX_ID_BYTES} bytes"),
            );
            self.link.fail(None, &error);
            return;
        }
        if !self.initialized && method != "initialize" {
            let error = ErrorObject::new(
                rpc::INVALID_REQUEST,
                format!(
                    "invalid request: {:?} before initialize",
                    truncate(&method, 64)
                ),
            );
            self.link.fail(Some(&id), &error);
            return;
        }
        let params = params.as_deref();
        let done = match method.as_str() {
            "initialize" => self.initialize(&id, params),
            "session/new" => self.new_session(&id, params),
            "session/load" => self.load_session(&id, params),
            "session/prompt" => self.prompt(&id, params),
            other => Err(ErrorObject::method_not_found(other)),
        };
        if let Err(error) = done {
            self.link.fail(Some(&id), &error);
        }
    }

    fn notification(&mut self, notification: Notification) {
        let params = notification.params.as_deref();
        let done = match notification.method.as_str() {
            JOIN => self.join(params),
            "session/cancel" if self.initialized => self.cancel(params),
            "$/cancel_request" if self.initialized => self.cancel_request(params),
            // Unknown notifications (extensions included) are ignored, as JSON-RPC asks.
            _ => Ok(()),
        };
        if let Err(error) = done {
            tracing::debug!(conn = %self.conn().id(), method = truncate(&notification.method, 64), %error, "notification ignored");
        }
    }

    /// A client's answer to a `session/request_permission`: decides the prompt, unless another
    /// wire did first (then the session ignores it).
    fn response(&mut self, response: Response) {
        let Id::Number(number) = response.id else {
            return tracing::debug!(conn = %self.conn().id(), "a response to no request of carrier's");
        };
        let asked = {
            let mut state = self.link.state();
            let at = state.asked.iter().position(|a| a.id == number);
            at.map(|at| state.asked.swap_remove(at))
        };
        let Some(asked) = asked else {
            // Withdrawn (answered elsewhere, its turn ended) or never sent.
            return;
        };
        let option_id = match response.result::<PermissionAnswer>() {
            Ok(PermissionAnswer {
                outcome: PermissionOutcome::Selected { option_id },
            }) => option_id,
            // The client gives no answer: its turn was cancelled.
            Ok(PermissionAnswer {
                outcome: PermissionOutcome::Cancelled,
            }) => return,
            // It failed, or answered with something else: no answer either.
            Err(error) => {
                return tracing::debug!(conn = %self.conn().id(), %error, "a permission request answered with no decision");
            }
        };
        let answer = if asked.agent_options {
            // The session checks that the agent offered it.
            PermissionRespondParams::choose(asked.request_id, option_id)
        } else {
            let decision = match option_id.as_str() {
                "allow" => Decision::Allow,
                "deny" => Decision::Deny,
                other => {
                    return tracing::debug!(conn = %self.conn().id(), option = truncate(other, 64), "an option carrier did not offer");
                }
            };
            PermissionRespondParams::decide(asked.request_id, decision)
        };
        if let Some(handle) = self.bound.get(&asked.session_id) {
            // Answered elsewhere in the meantime, or an option not offered: the session
            // ignores it.
            handle.respond_permission(&Quiet, answer);
        }
    }
}

/// The id of a message that is not otherwise read (one over the size limit), when it has one
/// carrier would have taken.
fn id_of(message: &[u8]) -> Option<Id> {
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
    }
    // Only an object is a request (serde would read `IdOnly` from an array too).
    let is_object = message.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let raw = is_object
        .then(|| serde_json::from_slice::<IdOnly<'_>>(message).ok())
        .flatten()?
        .id?;
    (raw.get().len() <= MAX_ID_BYTES)
        .then(|| serde_json::from_str(raw.get()).ok())
        .flatten()
}

impl TextSession for AcpConnection {
    fn on_text(&mut self, text: &str) {
        match rpc::parse(text) {
            Err(refused) => {
                self.link.fail(refused.id.as_ref(), &refused.error);
            }
            Ok(Message::Request(request)) => self.request(request),
            Ok(Message::Notification(notification)) => self.notification(notification),
            Ok(Message::Response(response)) => self.response(response),
        }
    }

    /// `-32600` under the request's id when it has one that can be read (the carrier counts
    /// it as a protocol error).
    fn too_large(&mut self, message: &[u8], limit: usize) -> Option<bytes::Bytes> {
        let error = ErrorObject::new(
            rpc::INVALID_REQUEST,
            format!(
                "invalid request: the message is {} bytes, over the {limit}-byte limit",
                message.len()
            ),
        );
        let error = ErrorObject {
            data: Some(
                serde_json::json!({ "code": "too_large", "limit": limit, "size": message.len() }),
            ),
            ..error
        };
        Some(rpc::encode_error(id_of(message).as_ref(), &error))
    }

    /// A binary frame the carrier could not route: the agent protocol's `protocol_error`
    /// payload as the extension notification `_carrier/protocol_error`.
    fn channel_refused(&mut self, refusal: &ChannelRefusal) -> Option<bytes::Bytes> {
        let payload = ProtocolErrorPayload {
            code: refusal.code(),
            message: refusal.message().to_owned(),
            channel: refusal.channel().map(str::to_owned),
            seq: refusal.seq(),
            limit: None,
            size: None,
        };
        rpc::encode_notification(PROTOCOL_ERROR, &payload).ok()
    }

    /// `_carrier/protocol_error` (`handshake_required`); the carrier then closes with 1008.
    fn binary_before_handshake(&mut self) -> Option<bytes::Bytes> {
        let payload = ProtocolErrorPayload {
            code: ProtocolErrorCode::HandshakeRequired,
            message: "a binary frame before initialize".to_owned(),
            channel: None,
            seq: None,
            limit: None,
            size: None,
        };
        rpc::encode_notification(PROTOCOL_ERROR, &payload).ok()
    }

    fn on_close(&mut self) {
        let id = self.conn().id();
        for handle in std::mem::take(&mut self.bound).into_values() {
            handle.unbind(id);
        }
        let mut state = self.link.state();
        state.prompts.clear();
        state.asked.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_message_is_answered_under_its_id_when_it_has_one() {
        assert_eq!(
            id_of(br#" {"jsonrpc":"2.0","id":"r9","method":"x"}"#),
            Some(Id::Str("r9".into()))
        );
        assert_eq!(id_of(br#"{"id":4}"#), Some(Id::Number(4)));
        assert_eq!(id_of(br#"[{"id":4}]"#), None);
        assert_eq!(id_of(br#"{"id":{"a":1}}"#), None);
        assert_eq!(id_of(b"not json"), None);
        let long = format!(r#"{{"id":"{}"}}"#, "a".repeat(MAX_ID_BYTES));
        assert_eq!(id_of(long.as_bytes()), None);
    }
}

//! [`Link`]: what one `/acp` connection and the listeners of its bound sessions share — the
//! connection, its prompts still running (answered with their `stopReason` when their turn
//! ends) and the `session/request_permission`s it was sent and has not answered.
//!
//! Lock order: a session's lock, then the link's. The listeners run under their session's
//! lock; the connection never calls into a session while it holds the link's.

use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use crate::rpc::{self, ErrorObject, Id};
use carrier_protocol::ids::TurnId;
use carrier_server::{CarrierContext, Connection};

/// The most `session/request_permission`s one connection may have unanswered. Past it, a
/// prompt is not sent to that connection (the other wires, and its own answers to the
/// earlier ones, still resolve it): a client that never answers holds at most this many.
pub(crate) const MAX_ASKED: usize = 64;

/// The most `session/prompt`s one connection may have running at once (one per session it
/// has bound, up to this): its in-flight requests.
pub(crate) const MAX_PROMPTS: usize = 16;

/// The most of a turn's error message kept for the answer to its prompt.
pub(crate) const MAX_ERROR_BYTES: usize = 256;

/// A `session/prompt` whose turn runs: answered when the turn ends.
pub(crate) struct PendingPrompt {
    pub(crate) id: Id,
    pub(crate) session_id: String,
    pub(crate) turn_id: TurnId,
    /// The error the turn reported, if any: an aborted turn that reported one is answered
    /// with it rather than `cancelled`.
    pub(crate) error: Option<ErrorObject>,
}

/// A `session/request_permission` sent and not answered.
pub(crate) struct Asked {
    /// Carrier's id of the request.
    pub(crate) id: i64,
    pub(crate) session_id: String,
    /// The session's id of the prompt (`session.permission_request`'s `request_id`).
    pub(crate) request_id: String,
    /// Whether its options are an ACP agent's (answered by `option_id`) rather than carrier's
    /// `allow` and `deny`.
    pub(crate) agent_options: bool,
}

#[derive(Default)]
pub(crate) struct LinkState {
    pub(crate) prompts: Vec<PendingPrompt>,
    pub(crate) asked: Vec<Asked>,
    next_request: i64,
}

impl LinkState {
    /// The next id of a request carrier sends on this connection.
    pub(crate) fn next_request_id(&mut self) -> i64 {
        let id = self.next_request;
        self.next_request += 1;
        id
    }

    /// Takes the prompt whose turn is `turn_id` in `session_id`.
    pub(crate) fn take_prompt(&mut self, session_id: &str, turn_id: &str) -> Option<PendingPrompt> {
        let at = self
            .prompts
            .iter()
            .position(|p| p.session_id == session_id && p.turn_id.as_str() == turn_id)?;
        Some(self.prompts.swap_remove(at))
    }

    /// Takes the requests asked for `request_id` of `session_id`.
    pub(crate) fn take_asked(&mut self, session_id: &str, request_id: &str) -> Vec<i64> {
        let (taken, kept) = std::mem::take(&mut self.asked)
            .into_iter()
            .partition(|a| a.session_id == session_id && a.request_id == request_id);
        self.asked = kept;
        taken.into_iter().map(|a: Asked| a.id).collect()
    }
}

/// One connection, as its own handlers and its sessions' listeners see it.
pub(crate) struct Link {
    pub(crate) conn: Connection,
    pub(crate) ctx: CarrierContext,
    state: Mutex<LinkState>,
}

impl Link {
    pub(crate) fn new(conn: Connection, ctx: CarrierContext) -> Self {
        Link {
            conn,
            ctx,
            state: Mutex::new(LinkState::default()),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, LinkState> {
        // No section can panic half-way (pushes, removals, sends); a poisoned lock is usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues one message; `false` when the connection takes nothing more.
    pub(crate) fn send(&self, frame: bytes::Bytes) -> bool {
        self.conn.send_text(frame).is_ok()
    }

    /// Answers request `id` with `result`.
    pub(crate) fn reply<R: Serialize>(&self, id: &Id, result: &R) -> bool {
        match rpc::encode_result(id, result) {
            Ok(frame) => self.send(frame),
            Err(e) => {
                tracing::error!(error = %e, "a result failed to encode");
                self.fail(
                    Some(id),
                    &ErrorObject::internal("the result failed to encode"),
                )
            }
        }
    }

    /// Answers request `id` (`None`: a message whose id could not be read) with `error`. The
    /// errors of a message that is not the protocol (not JSON-RPC, no such method, bad params)
    /// are counted as protocol errors.
    pub(crate) fn fail(&self, id: Option<&Id>, error: &ErrorObject) -> bool {
        if matches!(
            error.code,
            rpc::PARSE_ERROR | rpc::INVALID_REQUEST | rpc::METHOD_NOT_FOUND | rpc::INVALID_PARAMS
        ) {
            self.ctx.count_protocol_error();
        }
        self.send(rpc::encode_error(id, error))
    }

    /// Sends a notification.
    pub(crate) fn notify<P: Serialize>(&self, method: &str, params: &P) -> bool {
        match rpc::encode_notification(method, params) {
            Ok(frame) => self.send(frame),
            Err(e) => {
                tracing::error!(method, error = %e, "a notification failed to encode");
                true
            }
        }
    }
}

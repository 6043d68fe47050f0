//! [`Reply`]: the one way a request is answered, typed by the method's catalog entry.

use std::borrow::Cow;
use std::marker::PhantomData;

use carrier_protocol::catalog::{Effect, MethodDef};
use carrier_protocol::envelope::{encode_error, encode_result};
use carrier_protocol::error::{EffectState, ErrorCode, ErrorObject};
use carrier_server::{CarrierContext, Connection};

/// Answers one request of method `M` on its connection. The result type comes from the
/// catalog, so a handler cannot answer with the wrong shape. A handler that answers at once
/// answers through what the dispatcher lends it (the connection, the context and the id as the
/// frame's text had it: nothing cloned or allocated for a `system.ping`); one whose answer
/// arrives later (from an agent process) takes a [`Reply::detached`] copy into its task.
pub(crate) struct Reply<'a, M: MethodDef> {
    conn: Cow<'a, Connection>,
    ctx: Cow<'a, CarrierContext>,
    id: Cow<'a, str>,
    method: PhantomData<fn() -> M>,
}

impl<'a, M: MethodDef> Reply<'a, M> {
    pub(crate) fn new(conn: &'a Connection, ctx: &'a CarrierContext, id: &'a str) -> Self {
        Reply {
            conn: Cow::Borrowed(conn),
            ctx: Cow::Borrowed(ctx),
            id: Cow::Borrowed(id),
            method: PhantomData,
        }
    }

    /// The same reply, owning what it needs (a few `Arc` clones and the id), to be sent from a
    /// task.
    pub(crate) fn detached(&self) -> Reply<'static, M> {
        Reply {
            conn: Cow::Owned(self.conn.as_ref().clone()),
            ctx: Cow::Owned(self.ctx.as_ref().clone()),
            id: Cow::Owned(self.id.as_ref().to_owned()),
            method: PhantomData,
        }
    }

    /// Sends a result that came from outside the type system (e.g. an agent process) after
    /// checking it against the method's result type; one that fails is never sent.
    pub(crate) fn ok_json(&self, result: serde_json::Value) {
        match carrier_protocol::catalog::validate_result::<M>(result) {
            Ok(valid) => self.ok_value(&valid),
            Err(e) => {
                tracing::warn!(method = M::METHOD.name(), error = %e, "agent result failed validation");
                self.err(invalid_result());
            }
        }
    }

    fn ok_value(&self, result: &serde_json::Value) {
        match encode_result(&self.id, result) {
            Ok(frame) => self.send_bounded(frame),
            Err(_) => self.err(invalid_result()),
        }
    }

    /// Sends `{id, result}`. A result that cannot be encoded is never sent; the requester gets
    /// `protocol_error` with `effect_state: "unknown"` instead.
    pub(crate) fn ok(&self, result: &M::Result) {
        match encode_result(&self.id, result) {
            Ok(frame) => self.send_bounded(frame),
            Err(e) => {
                tracing::warn!(method = M::METHOD.name(), error = %e, "result failed to encode");
                self.err(invalid_result());
            }
        }
    }

    /// The last guard of "no answer is larger than the connection's outbound budget": the
    /// answers built from host data are fitted before (`super::fit`), so this only catches a
    /// host or agent result that would fail the connection: the requester gets
    /// `limit_exceeded` instead, and the connection lives.
    fn send_bounded(&self, frame: bytes::Bytes) {
        let budget = self.ctx.limits().queue_bytes;
        if frame.len() <= budget {
            let _ = self.conn.send_text(frame);
            return;
        }
        tracing::warn!(
            method = M::METHOD.name(),
            size = frame.len(),
            budget,
            "result larger than the outbound budget; answered limit_exceeded"
        );
        let effect = match M::METHOD.spec().effect {
            Effect::Read => EffectState::None,
            Effect::Mutate => EffectState::Unknown,
        };
        self.err(
            ErrorObject::new(
                ErrorCode::LimitExceeded,
                format!(
                    "the result ({} bytes) is larger than this connection's outbound budget",
                    frame.len()
                ),
            )
            .effect(effect)
            .with_data(serde_json::json!({ "limit": "queue_bytes", "value": budget })),
        );
    }

    /// Sends `{id, error}`. Protocol errors are counted.
    pub(crate) fn err(&self, error: ErrorObject) {
        send_error(&self.conn, &self.ctx, &self.id, &error);
    }
}

/// Where the answer to a session input goes: the requester's response in the agent protocol,
/// or a foreign wire's own answer (the session answers both the same way).
pub trait Answer<R> {
    /// The input was taken; `result` is what the agent protocol answers.
    fn ok(&self, result: &R);
    /// The input was refused.
    fn err(&self, error: ErrorObject);
}

impl<M: MethodDef> Answer<M::Result> for Reply<'_, M> {
    fn ok(&self, result: &M::Result) {
        Reply::ok(self, result);
    }

    fn err(&self, error: ErrorObject) {
        Reply::err(self, error);
    }
}

/// No answer either way: for inputs whose effect (or its absence) shows only in the session's
/// events (the seed system's wire answers abort and permission responses with nothing, and the
/// carrier's own denials of unattended prompts have no requester).
#[derive(Debug, Clone, Copy)]
pub struct Quiet;

impl<R> Answer<R> for Quiet {
    fn ok(&self, _: &R) {}

    fn err(&self, _: ErrorObject) {}
}

/// A result that failed its own schema: never sent; the effect may have happened.
fn invalid_result() -> ErrorObject {
    ErrorObject::new(ErrorCode::ProtocolError, "the result failed validation")
        .effect(EffectState::Unknown)
        .with_data(serde_json::json!({ "reason": "invalid_result" }))
}

/// Sends `{id, error}` for any request, counting protocol errors.
pub(crate) fn send_error(conn: &Connection, ctx: &CarrierContext, id: &str, error: &ErrorObject) {
    if error.code == ErrorCode::ProtocolError {
        ctx.count_protocol_error();
    }
    let _ = conn.send_text(encode_error(id, error));
}

/// `not_found` with `effect_state: "none"`.
pub(crate) fn not_found(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::NotFound, message).effect(EffectState::None)
}

/// `internal` with `effect_state: "unknown"`.
pub(crate) fn internal(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::Internal, message).effect(EffectState::Unknown)
}

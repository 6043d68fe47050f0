//! [`Reply`]: the one way a request is answered, typed by the method's catalog entry.

use std::marker::PhantomData;

use crate::protocol::catalog::MethodDef;
use crate::protocol::envelope::{encode_error, encode_result};
use crate::protocol::error::{EffectState, ErrorCode, ErrorObject};
use crate::server::{CarrierContext, Connection};

/// Answers one request of method `M` on its connection. The result type comes from the
/// catalog, so a handler cannot answer with the wrong shape.
pub(crate) struct Reply<'a, M: MethodDef> {
    conn: &'a Connection,
    ctx: &'a CarrierContext,
    id: &'a str,
    method: PhantomData<M>,
}

impl<'a, M: MethodDef> Reply<'a, M> {
    pub(crate) fn new(conn: &'a Connection, ctx: &'a CarrierContext, id: &'a str) -> Self {
        Reply {
            conn,
            ctx,
            id,
            method: PhantomData,
        }
    }

    /// Sends `{id, result}`. A result that cannot be encoded is never sent; the requester gets
    /// `protocol_error` with `effect_state: "unknown"` instead.
    pub(crate) fn ok(&self, result: &M::Result) {
        send_result::<M>(self.conn, self.ctx, self.id, result);
    }

    /// Sends `{id, error}`. Protocol errors are counted.
    pub(crate) fn err(&self, error: ErrorObject) {
        send_error(self.conn, self.ctx, self.id, &error);
    }

    /// An owned copy, for an answer that arrives later (a read forwarded to an agent process).
    pub(crate) fn detach(&self) -> DetachedReply<M> {
        DetachedReply {
            conn: self.conn.clone(),
            ctx: self.ctx.clone(),
            id: self.id.to_owned(),
            method: PhantomData,
        }
    }
}

/// A [`Reply`] that owns its connection, for answering from another task.
pub(crate) struct DetachedReply<M: MethodDef> {
    conn: Connection,
    ctx: CarrierContext,
    id: String,
    method: PhantomData<fn() -> M>,
}

impl<M: MethodDef> DetachedReply<M> {
    /// As [`Reply::ok`].
    pub(crate) fn ok(&self, result: &M::Result) {
        send_result::<M>(&self.conn, &self.ctx, &self.id, result);
    }

    /// As [`Reply::err`].
    pub(crate) fn err(&self, error: ErrorObject) {
        send_error(&self.conn, &self.ctx, &self.id, &error);
    }
}

fn send_result<M: MethodDef>(
    conn: &Connection,
    ctx: &CarrierContext,
    id: &str,
    result: &M::Result,
) {
    match encode_result(id, result) {
        Ok(frame) => {
            let _ = conn.send_text(frame);
        }
        Err(e) => {
            tracing::warn!(method = M::METHOD.name(), error = %e, "result failed to encode");
            let error = ErrorObject::new(ErrorCode::ProtocolError, "the result failed validation")
                .effect(EffectState::Unknown)
                .with_data(serde_json::json!({ "reason": "invalid_result" }));
            send_error(conn, ctx, id, &error);
        }
    }
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

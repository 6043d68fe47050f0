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
        match encode_result(self.id, result) {
            Ok(frame) => {
                let _ = self.conn.send_text(frame);
            }
            Err(e) => {
                tracing::warn!(method = M::METHOD.name(), error = %e, "result failed to encode");
                self.err(
                    ErrorObject::new(ErrorCode::ProtocolError, "the result failed validation")
                        .effect(EffectState::Unknown)
                        .with_data(serde_json::json!({ "reason": "invalid_result" })),
                );
            }
        }
    }

    /// Sends `{id, error}`. Protocol errors are counted.
    pub(crate) fn err(&self, error: ErrorObject) {
        send_error(self.conn, self.ctx, self.id, &error);
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

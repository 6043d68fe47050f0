//! [`AgentConnection`]: the agent protocol on one connection — the handshake gate, then
//! dispatch of every request through the method catalog.
//!
//! Order of checks for a request (each failure is answered, nothing is dropped):
//! envelope → method known (`method_not_found`) → role (`forbidden`) → the method's feature
//! (`unsupported_feature`) → params (`protocol_error` / `invalid_params`) → the params'
//! feature, e.g. a `usage.report` scope (`unsupported_feature`) → handler.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::answer::{send_error, Reply};
use super::handler_context::{Handler, Io, State};
use super::handlers;
use super::handshake;
use super::host::AgentHost;
use carrier_protocol::catalog::{def, parse_params, Method, MethodDef, Params};
use carrier_protocol::close::CloseCode;
use carrier_protocol::envelope::{self, Frame, Rejection};
use carrier_protocol::error::{
    protocol_error_event, EffectState, ErrorCode, ErrorObject, ProtocolErrorCode,
};
use carrier_server::{CarrierContext, Connection, TextSession};

/// The per-connection side of [`super::AgentProfile`].
pub(crate) struct AgentConnection {
    io: Io,
    state: State,
}

impl AgentConnection {
    pub(crate) fn new(host: Arc<AgentHost>, conn: Connection, ctx: CarrierContext) -> Self {
        AgentConnection {
            io: Io { host, conn, ctx },
            state: State::default(),
        }
    }

    /// Before the handshake only `system.handshake` is accepted; anything else is answered
    /// `handshake_required` (an error response when it had a usable id, else an event) and
    /// the connection is closed with 1008.
    fn before_handshake(&mut self, frame: Result<Frame, Rejection>) {
        let id = match frame {
            Ok(Frame::Request(req)) if req.method == Method::SystemHandshake.name() => {
                return self.request(&req.id, &req.method, req.params);
            }
            Ok(Frame::Request(req)) => Some(req.id),
            Err(rejection) => rejection.id,
            Ok(Frame::Response(_) | Frame::Event(_)) => None,
        };
        let message = "the first frame must be a system.handshake request";
        let io = &self.io;
        io.ctx.count_protocol_error();
        let frame = match id {
            Some(id) => envelope::encode_error(
                &id,
                &ErrorObject::new(ErrorCode::HandshakeRequired, message).effect(EffectState::None),
            )
            .to_vec(),
            None => protocol_error_event(ProtocolErrorCode::HandshakeRequired, message, Map::new()),
        };
        let _ = io.conn.send_text(frame);
        io.conn.close(CloseCode::POLICY, "handshake required");
    }

    fn after_handshake(&mut self, frame: Result<Frame, Rejection>) {
        match frame {
            Ok(Frame::Request(req)) => self.request(&req.id, &req.method, req.params),
            Ok(Frame::Response(_) | Frame::Event(_)) => {
                self.io.ctx.count_protocol_error();
                let _ = self.io.conn.send_text(protocol_error_event(
                    ProtocolErrorCode::InvalidEnvelope,
                    "clients may only send requests: the server sends no requests and \
                     defines no client events",
                    Map::new(),
                ));
            }
            Err(rejection) => self.reject(&rejection),
        }
    }

    fn reject(&self, rejection: &Rejection) {
        self.io.ctx.count_protocol_error();
        let _ = self.io.conn.send_text(rejection.reply());
    }

    fn request(&mut self, id: &str, method: &str, params: Map<String, Value>) {
        let Some(method) = Method::from_name(method) else {
            let message = format!(
                "unknown method {:?}",
                envelope::truncate(method, envelope::MAX_NAME_BYTES)
            );
            let error =
                ErrorObject::new(ErrorCode::MethodNotFound, message).effect(EffectState::None);
            return send_error(&self.io.conn, &self.io.ctx, id, &error);
        };
        let spec = method.spec();
        let role = self.io.conn.role();
        if role < spec.least_role {
            let error = ErrorObject::new(
                ErrorCode::Forbidden,
                format!(
                    "{} needs the {} role; this connection is {role}",
                    spec.name, spec.least_role
                ),
            )
            .effect(EffectState::None)
            .with_data(serde_json::json!({
                "required_role": spec.least_role,
                "role": role,
            }));
            return send_error(&self.io.conn, &self.io.ctx, id, &error);
        }
        if let (Some(feature), Some(peers)) = (spec.feature, self.state.peers) {
            if let Err(error) = peers.preflight(feature) {
                return send_error(&self.io.conn, &self.io.ctx, id, &error);
            }
        }
        let req = Parts { id, params };
        match method {
            Method::SystemHandshake => self.call::<def::SystemHandshake>(req, handshake::handle),
            Method::SystemPing => self.call::<def::SystemPing>(req, handlers::ping),
            Method::SystemStatus => self.call::<def::SystemStatus>(req, handlers::system_status),
            Method::SurfaceRole => self.call::<def::SurfaceRole>(req, handlers::surface_role),
            Method::SessionSubmit => self.call::<def::SessionSubmit>(req, handlers::submit),
            Method::SessionAbort => self.call::<def::SessionAbort>(req, handlers::abort),
            Method::SessionPermissionRespond => {
                self.call::<def::SessionPermissionRespond>(req, handlers::permission_respond)
            }
            Method::SessionHistory => self.call::<def::SessionHistory>(req, handlers::history),
            Method::SessionStatus => self.call::<def::SessionStatus>(req, handlers::session_status),
            Method::SessionsList => self.call::<def::SessionsList>(req, handlers::sessions_list),
            Method::SessionsStart => self.call::<def::SessionsStart>(req, handlers::sessions_start),
            Method::SessionsSwitch => {
                self.call::<def::SessionsSwitch>(req, handlers::sessions_switch)
            }
            Method::ChannelsList => self.call::<def::ChannelsList>(req, handlers::channels_list),
            Method::UsageReport => self.call::<def::UsageReport>(req, handlers::usage_report),
        }
    }

    /// Validates params against the method's type and its params-dependent feature, then runs
    /// the handler.
    fn call<M: MethodDef>(&mut self, req: Parts<'_>, handler: Handler<M>) {
        let Parts { id, params } = req;
        let params = match parse_params::<M>(id, params) {
            Ok(p) => p,
            Err(rejection) => return self.reject(&rejection),
        };
        if let (Some(feature), Some(peers)) = (params.required_feature(), self.state.peers) {
            if let Err(error) = peers.preflight(feature) {
                return send_error(&self.io.conn, &self.io.ctx, id, &error);
            }
        }
        let reply = Reply::new(&self.io.conn, &self.io.ctx, id);
        handler(&self.io, &mut self.state, &reply, params);
    }
}

/// A request's id and params, as [`AgentConnection::call`] takes them: the id borrowed from
/// the frame's text or its parsed envelope.
struct Parts<'a> {
    id: &'a str,
    params: Map<String, Value>,
}

impl TextSession for AgentConnection {
    fn on_text(&mut self, text: &str) {
        // The commonest request is dispatched from slices of the text (nothing allocated for
        // its envelope); every other frame, and every frame before the handshake, is parsed.
        if self.state.peers.is_some() {
            if let Some(req) = envelope::parse_compact(text) {
                return self.request(req.id, req.method, Map::new());
            }
        }
        let frame = envelope::parse(text);
        if self.state.peers.is_none() {
            self.before_handshake(frame);
        } else {
            self.after_handshake(frame);
        }
    }

    fn on_close(&mut self) {
        if let Some(hub) = self.state.bound.take() {
            hub.unbind(self.io.conn.id());
        }
    }
}

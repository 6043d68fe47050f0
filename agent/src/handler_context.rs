//! What a method handler works with: [`Io`], what it may use and never changes, and [`State`],
//! what it may change. [`super::connection`] owns both for one connection and passes them to
//! the handler of each request ([`super::handlers`], [`super::handshake`]).

use std::sync::Arc;

use super::answer::Reply;
use super::host::AgentHost;
use super::hub::{EventScope, SessionHub};
use carrier_protocol::catalog::MethodDef;
use carrier_protocol::features::Peers;
use carrier_server::{CarrierContext, Connection};

/// What a handler may use and never changes: the host, the connection and the carrier.
pub(crate) struct Io {
    pub(crate) host: Arc<AgentHost>,
    pub(crate) conn: Connection,
    pub(crate) ctx: CarrierContext,
}

/// What handlers change: the negotiated versions and the session binding.
#[derive(Default)]
pub(crate) struct State {
    /// Set by a successful handshake.
    pub(crate) peers: Option<Peers>,
    /// The session this connection receives events from.
    pub(crate) bound: Option<Arc<SessionHub>>,
}

impl State {
    /// Which session events this connection is sent (those its protocol has).
    pub(crate) fn scope(&self) -> EventScope {
        self.peers
            .as_ref()
            .map_or(EventScope::WithoutAgentUpdates, EventScope::of)
    }

    /// Stops receiving the current session's events (before binding to another, so no event
    /// of the old session follows the reply that confirms the new one).
    pub(crate) fn unbind(&mut self, io: &Io) {
        if let Some(old) = self.bound.take() {
            old.unbind(io.conn.id());
        }
    }
}

/// A handler of method `M`.
pub(crate) type Handler<M> = fn(&Io, &mut State, &Reply<M>, <M as MethodDef>::Params);

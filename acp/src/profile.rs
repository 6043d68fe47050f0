//! The `/acp` text profile: carrier as the ACP *agent* of every editor or ACP client that
//! connects, over the same sessions as the agent protocol (README.md, "ACP clients and
//! editors", has the mapping).
//!
//! - `connection` — one connection: its JSON-RPC messages read and answered, the sessions it
//!   has bound.
//! - `listener` — a bound session's events as `session/update`s and
//!   `session/request_permission`s, per connection and session.
//! - `link` — what a connection and its listeners share: its prompts still running, the
//!   permission requests it has not answered, and their bounds.
//! - `messages` — ACP's params, results and updates as types.
//!
//! JSON-RPC itself is [`crate::rpc`]'s.
//!
//! Each text frame is one JSON-RPC message; binary frames are the carrier's channel frames,
//! as on every wire.

mod connection;
mod link;
mod listener;
mod messages;

use std::sync::Arc;

use carrier_agent::foreign::Sessions;
use carrier_agent::AgentProfile;
use carrier_server::{Attachment, CarrierContext, Connection, Gauge, TextProfile, TextSession};
use connection::AcpConnection;

/// The path at which a host serves ACP clients beside the agent protocol (`carrier serve`
/// always does).
pub const ACP_PATH: &str = "/acp";

/// ACP's client side over the sessions of an [`AgentProfile`]: each connection is an ACP
/// client, carrier its agent. A host attaches it at [`ACP_PATH`] beside the agent protocol.
///
/// ```
/// use std::sync::Arc;
/// use carrier_acp::{AcpProfile, ACP_PATH};
/// use carrier_agent::{AgentProfile, EmbeddedAgent};
/// use carrier_server::{Attachment, CarrierConfig, WsTransport};
///
/// let agent = AgentProfile::embedded(EmbeddedAgent::default());
/// let acp = AcpProfile::new(&agent);
/// let transport = WsTransport::new(CarrierConfig::default().with_port(0)).unwrap();
/// transport.attach(Attachment::from(agent).with_route(ACP_PATH, Arc::new(acp)));
/// ```
#[derive(Clone, Debug)]
pub struct AcpProfile {
    sessions: Sessions,
}

impl AcpProfile {
    /// ACP's client side over `agent`'s sessions, agents and memory.
    pub fn new(agent: &AgentProfile) -> Self {
        AcpProfile {
            sessions: agent.sessions(),
        }
    }
}

impl TextProfile for AcpProfile {
    fn open(&self, conn: Connection, ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(AcpConnection::open(
            self.sessions.clone(),
            conn,
            ctx.clone(),
        ))
    }

    /// At `/`, this profile stands for the sessions: it shuts them down.
    fn shutdown(&self) {
        self.sessions.shutdown();
    }

    /// The session memory, as under the agent protocol.
    fn gauges(&self) -> Vec<Gauge> {
        self.sessions.memory().gauges()
    }
}

impl From<AcpProfile> for Attachment {
    fn from(profile: AcpProfile) -> Self {
        Attachment::new(Arc::new(profile))
    }
}

//! The seed system's own text wire as a second [`TextProfile`] over the agent protocol's
//! sessions, so that system's clients (its browser session client, its monitor) drive a
//! carrier session unchanged. The wire is `{type, …}` JSON objects, no handshake, the history
//! pushed on connect; README.md, "Serving the seed system's clients", says what it answers.
//!
//! - `connection` — binding on admission, then each client message answered.
//! - `client` — the message kinds a client sends and how their fields are read.
//! - `listener` — the session's events as that wire's messages, per connection.
//! - `background` — answers for what the carrier does not have (background tasks, commands).
//! - `refusal` — a binary frame the carrier could not route, in the seed system's words.
//! - `wire` — the server's messages as types.
//!
//! A [`RobotaProfile`] shares everything with the [`AgentProfile`] it is made from:
//! sessions, agents, history and the session memory budget. A client of either profile bound
//! to one session sees the turns the other starts. It reaches them only through the agent
//! layer's seam for foreign wires, [`carrier_agent::foreign`].

mod background;
mod client;
mod connection;
mod listener;
mod refusal;
mod wire;

use std::sync::Arc;

use connection::RobotaConnection;

use carrier_agent::foreign::Sessions;
use carrier_agent::AgentProfile;
use carrier_server::{Attachment, CarrierContext, Connection, Gauge, TextProfile, TextSession};

/// The path at which a host serves the seed system's wire beside the agent protocol
/// (`carrier serve` always does).
pub const ROBOTA_PATH: &str = "/robota";

/// The seed system's wire over the sessions of an [`AgentProfile`]. A host attaches it beside
/// the agent protocol, at [`ROBOTA_PATH`] (as `carrier serve` does), or at `/` as well (as
/// `carrier serve --profile robota` does); a carrier serves it only where it is attached.
///
/// ```
/// use std::sync::Arc;
/// use carrier_agent::{AgentProfile, EmbeddedAgent};
/// use carrier_robota::{RobotaProfile, ROBOTA_PATH};
/// use carrier_server::{Attachment, CarrierConfig, WsTransport};
///
/// let agent = AgentProfile::embedded(EmbeddedAgent::default());
/// let robota = RobotaProfile::new(&agent);
/// let transport = WsTransport::new(CarrierConfig::default().with_port(0)).unwrap();
/// transport.attach(Attachment::from(agent).with_route(ROBOTA_PATH, Arc::new(robota)));
/// ```
#[derive(Clone, Debug)]
pub struct RobotaProfile {
    sessions: Sessions,
}

impl RobotaProfile {
    /// The seed system's wire over `agent`'s sessions, agents and memory.
    pub fn new(agent: &AgentProfile) -> Self {
        RobotaProfile {
            sessions: agent.sessions(),
        }
    }
}

impl TextProfile for RobotaProfile {
    fn open(&self, conn: Connection, ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(RobotaConnection::open(&self.sessions, conn, ctx.clone()))
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

impl From<RobotaProfile> for Attachment {
    fn from(profile: RobotaProfile) -> Self {
        Attachment::new(Arc::new(profile))
    }
}

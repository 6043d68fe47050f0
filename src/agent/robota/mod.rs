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
//! A [`RobotaProfile`] shares everything with the [`super::AgentProfile`] it comes from:
//! sessions, agents, history and the session memory budget. A client of either profile bound
//! to one session sees the turns the other starts.

mod background;
mod client;
mod connection;
mod listener;
mod refusal;
mod wire;

use std::sync::Arc;

use connection::RobotaConnection;

use super::host::AgentHost;
use crate::server::{Attachment, CarrierContext, Connection, Gauge, TextProfile, TextSession};

/// The path at which every carrier whose attached profile is an [`super::AgentProfile`] (or a
/// [`RobotaProfile`]) speaks the seed system's wire.
pub const ROBOTA_PATH: &str = "/robota";

/// The seed system's wire over the sessions of an [`super::AgentProfile`]: get one with
/// [`super::AgentProfile::robota`]. Attach it to make `/` speak that wire (as
/// `carrier serve --profile robota` does); `/robota` speaks it under either profile.
///
/// ```
/// use carrier::agent::{AgentProfile, EmbeddedAgent};
/// use carrier::server::{CarrierConfig, WsTransport};
///
/// let agent = AgentProfile::embedded(EmbeddedAgent::default());
/// let transport = WsTransport::new(CarrierConfig::default().with_port(0)).unwrap();
/// transport.attach(agent.robota());
/// ```
#[derive(Clone)]
pub struct RobotaProfile {
    host: Arc<AgentHost>,
}

impl std::fmt::Debug for RobotaProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotaProfile")
            .field("memory", &self.host.memory)
            .finish_non_exhaustive()
    }
}

impl RobotaProfile {
    pub(super) fn new(host: Arc<AgentHost>) -> Self {
        RobotaProfile { host }
    }
}

impl TextProfile for RobotaProfile {
    fn open(&self, conn: Connection, ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(RobotaConnection::open(&self.host, conn, ctx.clone()))
    }

    fn shutdown(&self) {
        self.host.shutdown();
    }

    /// The session memory, as under the agent protocol.
    fn gauges(&self) -> Vec<Gauge> {
        self.host.memory.gauges()
    }

    /// `/robota` speaks this wire too.
    fn routes(&self) -> Vec<(&'static str, Arc<dyn TextProfile>)> {
        vec![(ROBOTA_PATH, Arc::new(self.clone()))]
    }
}

impl From<RobotaProfile> for Attachment {
    fn from(profile: RobotaProfile) -> Self {
        Attachment(Arc::new(profile))
    }
}

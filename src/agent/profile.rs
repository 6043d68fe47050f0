//! [`AgentProfile`]: the agent protocol as a [`TextProfile`], and its builder.

use std::sync::Arc;

use super::connection::AgentConnection;
use super::directory::{DefaultBinder, InMemoryDirectory, SessionBinder, SessionDirectory};
use super::embedded::EmbeddedAgent;
use super::history::HistoryConfig;
use super::host::AgentHost;
use super::hub::RingConfig;
use super::usage::{SessionUsage, UsageReporter};
use crate::server::{Attachment, CarrierContext, Connection, TextProfile, TextSession};

/// The agent protocol (SPEC sections 4–6) on the carrier's text frames: handshake, method
/// dispatch, session hubs with `seq` and resume, and fan-out of session events to every bound
/// connection.
///
/// Cheap to clone; clones share sessions. Re-attaching the same profile after `stop()` keeps
/// the sessions and their history (the new epoch still makes every resume a `reset`).
///
/// ```
/// use carrier::agent::{AgentProfile, EmbeddedAgent};
/// use carrier::server::{CarrierConfig, WsTransport};
///
/// let transport = WsTransport::new(CarrierConfig { port: 0, ..Default::default() }).unwrap();
/// transport.attach(AgentProfile::embedded(EmbeddedAgent::default()));
/// ```
#[derive(Clone)]
pub struct AgentProfile {
    pub(crate) host: Arc<AgentHost>,
}

impl std::fmt::Debug for AgentProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentProfile")
            .field("ring", &self.host.ring)
            .finish_non_exhaustive()
    }
}

impl AgentProfile {
    /// The embedded default agent (SPEC section 5) in an in-memory directory, with per-session
    /// usage counters.
    pub fn embedded(agent: EmbeddedAgent) -> Self {
        AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session())).build()
    }

    /// A profile over the host's own session directory.
    pub fn builder(directory: impl SessionDirectory) -> AgentProfileBuilder {
        AgentProfileBuilder {
            directory: Arc::new(directory),
            binder: Arc::new(DefaultBinder),
            usage: Arc::new(SessionUsage::default()),
            ring: RingConfig::default(),
            history: HistoryConfig::default(),
        }
    }
}

/// Builds an [`AgentProfile`]: the directory is required; binder, usage reporter and resume
/// ring and history bounds have defaults ([`DefaultBinder`], [`SessionUsage`], 1024 events /
/// 4 MiB, 1000 entries / 4 MiB).
pub struct AgentProfileBuilder {
    directory: Arc<dyn SessionDirectory>,
    binder: Arc<dyn SessionBinder>,
    usage: Arc<dyn UsageReporter>,
    ring: RingConfig,
    history: HistoryConfig,
}

impl AgentProfileBuilder {
    /// Picks the session each new connection is bound to.
    pub fn binder(mut self, binder: impl SessionBinder) -> Self {
        self.binder = Arc::new(binder);
        self
    }

    /// The usage read model behind `usage.report`.
    pub fn usage(mut self, usage: impl UsageReporter) -> Self {
        self.usage = Arc::new(usage);
        self
    }

    /// Bounds each session's resume ring (whichever is reached first evicts).
    pub fn resume_ring(mut self, max_events: usize, max_bytes: usize) -> Self {
        self.ring = RingConfig {
            max_events,
            max_bytes,
        };
        self
    }

    /// Bounds each session's history (`session.history`): the newest `max_entries` entries
    /// within `max_bytes` of text are kept, the oldest evicted.
    pub fn history(mut self, max_entries: usize, max_bytes: usize) -> Self {
        self.history = HistoryConfig {
            max_entries,
            max_bytes,
        };
        self
    }

    /// The profile.
    pub fn build(self) -> AgentProfile {
        AgentProfile {
            host: Arc::new(AgentHost::new(
                self.directory,
                self.binder,
                self.usage,
                self.ring,
                self.history,
            )),
        }
    }
}

impl TextProfile for AgentProfile {
    fn open(&self, conn: Connection, ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(AgentConnection::new(self.host.clone(), conn, ctx.clone()))
    }

    fn shutdown(&self) {
        self.host.shutdown();
    }
}

impl From<AgentProfile> for Attachment {
    fn from(profile: AgentProfile) -> Self {
        Attachment(Arc::new(profile))
    }
}

//! [`AgentProfile`]: the agent protocol as a [`TextProfile`], and its builder.

use std::sync::Arc;
use std::time::Duration;

use super::connection::AgentConnection;
use super::directory::{DefaultBinder, InMemoryDirectory, SessionBinder, SessionDirectory};
use super::embedded::EmbeddedAgent;
use super::history::HistoryConfig;
use super::host::AgentHost;
use super::hub::DEFAULT_UNATTENDED_PROMPT_TIMEOUT;
use super::memory::SessionMemory;
use super::record::RingConfig;
use super::usage::{NoUsage, SessionUsage, UsageReporter};
use carrier_protocol::version::VersionPair;
use carrier_server::{
    Asset, Attachment, CarrierContext, Connection, Gauge, TextProfile, TextSession,
};

/// The agent protocol (docs/protocol.md, "Envelope" to "Errors") on the carrier's text frames:
/// handshake, method dispatch, session hubs with `seq` and resume, and fan-out of session events to
/// every bound connection.
///
/// Cheap to clone; clones share sessions. Re-attaching the same profile after `stop()` keeps
/// the sessions and their history (the new epoch still makes every resume a `reset`).
///
/// ```
/// use carrier_agent::{AgentProfile, EmbeddedAgent};
/// use carrier_server::{CarrierConfig, WsTransport};
///
/// let transport = WsTransport::new(CarrierConfig::default().with_port(0)).unwrap();
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
            .field("memory", &self.host.memory)
            .field("protocol", &self.host.protocol)
            .finish_non_exhaustive()
    }
}

impl AgentProfile {
    /// The embedded default agent ([`EmbeddedAgent`]) in an in-memory directory, with per-session
    /// usage counters ([`SessionUsage`]: the demo agent's "tokens" are words).
    pub fn embedded(agent: EmbeddedAgent) -> Self {
        AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
            .usage(SessionUsage::default())
            .build()
    }

    /// A profile over the host's own session directory. No usage is reported until the host
    /// wires a [`UsageReporter`] ([`AgentProfileBuilder::usage`]): the handshake and
    /// `system.status` say `usage.*` is unavailable, and `usage.report` is answered
    /// `unsupported_feature`.
    pub fn builder(directory: impl SessionDirectory) -> AgentProfileBuilder {
        AgentProfileBuilder {
            directory: Arc::new(directory),
            binder: Arc::new(DefaultBinder),
            usage: Arc::new(NoUsage),
            ring: RingConfig::default(),
            history: HistoryConfig::default(),
            memory: None,
            protocol: VersionPair::CURRENT,
            unattended_prompt_timeout: DEFAULT_UNATTENDED_PROMPT_TIMEOUT,
        }
    }

    /// The protocol version pair this profile announces and checks clients against.
    pub fn protocol_version(&self) -> VersionPair {
        self.host.protocol
    }

    /// The budget this profile's sessions keep their history and resume rings in, with the
    /// bytes in use now.
    pub fn session_memory(&self) -> &SessionMemory {
        &self.host.memory
    }
}

/// Builds an [`AgentProfile`]: the directory is required; binder, usage reporter, resume ring
/// and history bounds, session memory, protocol version and unattended-prompt timeout have
/// defaults ([`DefaultBinder`], [`NoUsage`], 1024 events / 4 MiB, 1000 entries / 4 MiB,
/// 64 MiB for all sessions together, [`VersionPair::CURRENT`], 30 s).
pub struct AgentProfileBuilder {
    directory: Arc<dyn SessionDirectory>,
    binder: Arc<dyn SessionBinder>,
    usage: Arc<dyn UsageReporter>,
    ring: RingConfig,
    history: HistoryConfig,
    memory: Option<SessionMemory>,
    protocol: VersionPair,
    unattended_prompt_timeout: Duration,
}

impl AgentProfileBuilder {
    /// Picks the session each new connection is bound to.
    pub fn binder(mut self, binder: impl SessionBinder) -> Self {
        self.binder = Arc::new(binder);
        self
    }

    /// The usage read model behind `usage.report`, and what the handshake's `features` and
    /// `system.status` announce as `usage.*` (the scopes it [supports](UsageReporter::supports)).
    /// Without one, no usage feature is available.
    pub fn usage(mut self, usage: impl UsageReporter) -> Self {
        self.usage = Arc::new(usage);
        self
    }

    /// Bounds what all sessions' histories and resume rings hold together: `max_bytes` of
    /// real memory (each entry's bytes plus [`super::ENTRY_OVERHEAD`]). Past it the least
    /// recently used sessions lose their oldest entries first; the session being added to
    /// loses its last, and keeps its newest event and history entry. The per-session bounds
    /// ([`Self::resume_ring`], [`Self::history`]) still apply within it. Default
    /// [`super::DEFAULT_MAX_SESSION_BYTES`] (64 MiB).
    ///
    /// ```
    /// use carrier_agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
    ///
    /// let agent = EmbeddedAgent::default();
    /// let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
    ///     .max_session_bytes(16 << 20)
    ///     .build();
    /// assert_eq!(profile.session_memory().limit(), 16 << 20);
    /// ```
    pub fn max_session_bytes(mut self, max_bytes: usize) -> Self {
        self.memory = Some(SessionMemory::new(max_bytes));
        self
    }

    /// Keeps this profile's sessions in `memory`, a budget other profiles of the process may
    /// share (one figure for all of them); replaces [`Self::max_session_bytes`].
    pub fn session_memory(mut self, memory: SessionMemory) -> Self {
        self.memory = Some(memory);
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

    /// The protocol version pair the carrier announces to its clients (`protocol_version` and
    /// `min_compatible_protocol` in the `system.handshake` result and in `system.status`), and the
    /// pair every client's handshake is checked against by the version rules (docs/protocol.md,
    /// "Versions"). Defaults to [`VersionPair::CURRENT`] (1.2, oldest compatible 1.0), which is
    /// what this build implements. A pair below 1.1 also turns inbound credit on bulk channels off
    /// (no `credit` in the descriptors, no `channel.credit`), as a 1.0 server would; one below
    /// 1.2 sends no client `session.agent_update`, as a 1.1 server would.
    ///
    /// Announcing another pair does not change what the carrier does; it is for hosts that
    /// speak a newer minor on top of this build and for testing clients against a skewed or
    /// incompatible server. It covers only the client side: the handshake with an agent
    /// process (`--agent-cmd`) keeps announcing [`VersionPair::CURRENT`].
    ///
    /// ```
    /// use carrier_agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
    /// use carrier_protocol::version::VersionPair;
    ///
    /// let agent = EmbeddedAgent::default();
    /// let skewed = VersionPair::parse("1.3", "1.0").expect("a consistent pair");
    /// let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
    ///     .protocol_version(skewed)
    ///     .build();
    /// assert_eq!(profile.protocol_version().version.to_string(), "1.3");
    /// ```
    pub fn protocol_version(mut self, pair: VersionPair) -> Self {
        self.protocol = pair;
        self
    }

    /// How long a permission prompt may wait while no drive connection (of any wire) is bound
    /// to its session before the carrier denies it, as a client answering `deny` would: every
    /// connection is sent the resolution and the agent is told `deny`, so a session is never
    /// left blocked by a client that went away. The clock starts when the prompt is asked or
    /// when the last drive connection leaves, whichever is later, and a drive connection that
    /// binds in time is sent the prompt and stops it. Default 30 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use carrier_agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
    ///
    /// let agent = EmbeddedAgent::default();
    /// let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
    ///     .unattended_prompt_timeout(Duration::from_secs(120))
    ///     .build();
    /// ```
    pub fn unattended_prompt_timeout(mut self, timeout: Duration) -> Self {
        self.unattended_prompt_timeout = timeout;
        self
    }

    /// The profile.
    pub fn build(self) -> AgentProfile {
        let host = AgentHost::new(
            self.directory,
            self.binder,
            self.usage,
            self.ring,
            self.history,
            self.memory.unwrap_or_default(),
            self.protocol,
        )
        .with_unattended_prompt_timeout(self.unattended_prompt_timeout);
        AgentProfile {
            host: Arc::new(host),
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

    /// `carrier_session_bytes` and `carrier_session_bytes_limit`.
    fn gauges(&self) -> Vec<Gauge> {
        self.host.memory.gauges()
    }

    /// The web console (`/console`) and the JavaScript client modules it imports
    /// (`/client.js`, …): the agent protocol's web client.
    fn assets(&self) -> Vec<Asset> {
        let console = Asset {
            name: "console",
            content_type: "text/html; charset=utf-8",
            body: carrier_web::CONSOLE_HTML,
        };
        let modules = carrier_web::CLIENT_MODULES
            .iter()
            .map(|(name, body)| Asset {
                name,
                content_type: "text/javascript",
                body,
            });
        std::iter::once(console).chain(modules).collect()
    }
}

impl From<AgentProfile> for Attachment {
    fn from(profile: AgentProfile) -> Self {
        Attachment::new(Arc::new(profile))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_announces_the_current_protocol_1_2_unless_configured() {
        let profile = AgentProfile::embedded(EmbeddedAgent::default());
        assert_eq!(profile.protocol_version(), VersionPair::CURRENT);
        assert_eq!(VersionPair::CURRENT.version.to_string(), "1.2");
        assert_eq!(VersionPair::CURRENT.min_compatible.to_string(), "1.0");

        let skewed = VersionPair::parse("1.3", "1.0").expect("a consistent pair");
        let agent = EmbeddedAgent::default();
        let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
            .protocol_version(skewed)
            .build();
        assert_eq!(profile.protocol_version(), skewed);
    }
}

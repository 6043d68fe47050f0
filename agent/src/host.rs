//! What every connection of one [`super::AgentProfile`] shares: the host's directory, binder
//! and usage reporter, and the carrier's hubs (one per session opened so far).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::directory::{SessionBinder, SessionDirectory, SessionEntry};
use super::history::HistoryConfig;
use super::hub::{SessionHub, DEFAULT_UNATTENDED_PROMPT_TIMEOUT};
use super::memory::SessionMemory;
use super::outlet::{SessionOutlet, SessionOutput};
use super::record::{RingConfig, SessionRecord};
use super::session::HostError;
use super::usage::UsageReporter;
use carrier_protocol::envelope::truncate;
use carrier_protocol::features::{Feature, FeatureSet};
use carrier_protocol::ids::SessionId;
use carrier_protocol::methods::{SessionState, SessionSummary, UsageScope};
use carrier_protocol::version::VersionPair;

pub(crate) struct AgentHost {
    pub(crate) directory: Arc<dyn SessionDirectory>,
    pub(crate) binder: Arc<dyn SessionBinder>,
    pub(crate) usage: Arc<dyn UsageReporter>,
    pub(crate) ring: RingConfig,
    pub(crate) history: HistoryConfig,
    /// The budget every session's ring and history share.
    pub(crate) memory: SessionMemory,
    /// What the handshake and `system.status` announce, and what every client's versions are
    /// checked against ([`VersionPair::CURRENT`] unless the host configured another pair).
    pub(crate) protocol: VersionPair,
    /// How long a prompt waits with no drive connection bound before it is denied.
    pub(crate) unattended_prompt_timeout: Duration,
    hubs: Mutex<HashMap<SessionId, Arc<SessionHub>>>,
    /// Held across `sessions.start`'s count and start.
    starting: Mutex<()>,
}

/// Why `sessions.start` made no session.
#[derive(Debug)]
pub(crate) enum StartError {
    /// The directory already holds `max_sessions`.
    Full,
    /// The host's directory failed.
    Host(HostError),
    /// The host's directory returned a session it cannot open; it was released.
    Invalid,
}

impl AgentHost {
    pub(crate) fn new(
        directory: Arc<dyn SessionDirectory>,
        binder: Arc<dyn SessionBinder>,
        usage: Arc<dyn UsageReporter>,
        ring: RingConfig,
        history: HistoryConfig,
        memory: SessionMemory,
        protocol: VersionPair,
    ) -> Self {
        AgentHost {
            directory,
            binder,
            usage,
            ring,
            history,
            memory,
            protocol,
            unattended_prompt_timeout: DEFAULT_UNATTENDED_PROMPT_TIMEOUT,
            hubs: Mutex::new(HashMap::new()),
            starting: Mutex::new(()),
        }
    }

    /// How long a prompt of any session may wait with no drive connection bound to it before
    /// it is denied (default [`DEFAULT_UNATTENDED_PROMPT_TIMEOUT`]).
    pub(crate) fn with_unattended_prompt_timeout(mut self, timeout: Duration) -> Self {
        self.unattended_prompt_timeout = timeout;
        self
    }

    fn hubs(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Arc<SessionHub>>> {
        self.hubs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hub of `session_id`, opened on first use; `None` when the directory does not know
    /// the session.
    pub(crate) fn hub(&self, session_id: &str) -> Option<Arc<SessionHub>> {
        let mut hubs = self.hubs();
        if let Some(hub) = hubs.get(session_id) {
            return Some(hub.clone());
        }
        let agent = self.directory.open(session_id)?;
        let hub = SessionHub::new(
            SessionId::from(session_id),
            agent,
            self.usage.clone(),
            SessionRecord::new(&self.memory, self.ring, self.history),
            self.unattended_prompt_timeout,
        );
        // Before anyone else can find the hub, so before any turn of it starts.
        let weak: Weak<SessionHub> = Arc::downgrade(&hub);
        let output: Weak<dyn SessionOutput> = weak;
        hub.agent.attached(SessionOutlet::new(output));
        hubs.insert(hub.id().clone(), hub.clone());
        Some(hub)
    }

    /// Drops the hub of a session the directory released.
    pub(crate) fn forget(&self, session_id: &str) {
        self.hubs().remove(session_id);
    }

    /// `sessions.start` within `max_sessions`: the count and the start happen under one
    /// lock, so concurrent starts cannot pass the bound together.
    pub(crate) fn start_session(
        &self,
        title: Option<&str>,
        max_sessions: usize,
    ) -> Result<SessionEntry, StartError> {
        let _one_at_a_time = self.starting.lock().unwrap_or_else(|e| e.into_inner());
        if self.directory.list().len() >= max_sessions {
            return Err(StartError::Full);
        }
        self.directory.start(title).map_err(StartError::Host)
    }

    /// [`AgentHost::start_session`], then the new session's hub. A session the directory
    /// returns but cannot open (an empty id, or one it does not know) is released.
    pub(crate) fn start_and_open(
        &self,
        title: Option<&str>,
        max_sessions: usize,
    ) -> Result<Arc<SessionHub>, StartError> {
        let entry = self.start_session(title, max_sessions)?;
        let hub = (!entry.session_id.is_empty())
            .then(|| self.hub(&entry.session_id))
            .flatten();
        hub.ok_or_else(|| {
            self.directory.release(&entry.session_id);
            self.forget(&entry.session_id);
            StartError::Invalid
        })
    }

    /// `sessions.list`: the directory's sessions with their hubs' states, each title cut to
    /// `max_title_bytes` (a host directory may hold longer ones).
    pub(crate) fn summaries(&self, max_title_bytes: usize) -> Vec<SessionSummary> {
        let entries = self.directory.list();
        let hubs: Vec<Option<Arc<SessionHub>>> = {
            let map = self.hubs();
            entries
                .iter()
                .map(|e| map.get(e.session_id.as_str()).cloned())
                .collect()
        };
        entries
            .into_iter()
            .zip(hubs)
            .map(|(mut e, hub)| SessionSummary {
                session_id: e.session_id,
                title: {
                    let kept = truncate(&e.title, max_title_bytes).len();
                    e.title.truncate(kept);
                    e.title
                },
                state: hub.map_or(SessionState::Idle, |h| h.state()),
            })
            .collect()
    }

    /// The features this host wires (see [`carrier_protocol::features`]).
    pub(crate) fn features(&self) -> FeatureSet {
        let mut set = FeatureSet::empty()
            .with(Feature::Sessions)
            .with(Feature::Resume)
            .with(Feature::Permissions)
            .with(Feature::Channels)
            .with(Feature::BulkCredit)
            .with(Feature::AgentUpdates);
        for scope in [
            UsageScope::Session,
            UsageScope::Personal,
            UsageScope::Stored,
        ] {
            if self.usage.supports(scope) {
                set = set.with(Feature::for_usage_scope(scope));
            }
        }
        set
    }

    /// Ends running turns and shuts every agent down (transport `stop()`).
    pub(crate) fn shutdown(&self) {
        let hubs: Vec<_> = self.hubs().values().cloned().collect();
        for hub in hubs {
            hub.shutdown();
        }
    }
}

//! The host's sessions: [`SessionDirectory`] (`sessions.list` / `sessions.start`), the
//! in-memory default [`InMemoryDirectory`], and [`SessionBinder`], which picks the session a
//! new connection is bound to.
//!
//! The directory only knows sessions and their agents; the carrier keeps each session's event
//! stream (its hub) and which connection is bound where. `sessions.switch` and
//! `sessions.start` move only the connection that asked.

use std::sync::{Arc, Mutex};

use super::session::{HostError, ProtocolSession};
use carrier_protocol::Role;
use carrier_server::ConnectionId;

/// One session as the directory lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEntry {
    /// Its id (non-empty).
    pub session_id: String,
    /// Its title.
    pub title: String,
}

/// The host's session directory.
pub trait SessionDirectory: Send + Sync + 'static {
    /// Every session, the default one first.
    fn list(&self) -> Vec<SessionEntry>;

    /// The agent of a listed session; `None` for an unknown id (`not_found`). Called once per
    /// session per carrier: the carrier keeps what it returns.
    fn open(&self, session_id: &str) -> Option<Arc<dyn ProtocolSession>>;

    /// Creates a session (`sessions.start`).
    fn start(&self, title: Option<&str>) -> Result<SessionEntry, HostError>;

    /// Forgets a session `start` allocated whose result could not be sent (e.g. it failed
    /// validation). The default does nothing.
    fn release(&self, _session_id: &str) {}
}

/// Picks the session a newly handshaken connection is bound to.
pub trait SessionBinder: Send + Sync + 'static {
    /// The session id for connection `conn` with `role`; `None` when there is none to bind
    /// (the handshake then fails with `internal`).
    fn initial_session(
        &self,
        directory: &dyn SessionDirectory,
        conn: ConnectionId,
        role: Role,
    ) -> Option<String>;
}

/// Binds every new connection to the directory's first (default) session.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultBinder;

impl SessionBinder for DefaultBinder {
    fn initial_session(
        &self,
        directory: &dyn SessionDirectory,
        _conn: ConnectionId,
        _role: Role,
    ) -> Option<String> {
        directory.list().into_iter().next().map(|e| e.session_id)
    }
}

/// Makes the agent of a new session.
pub type AgentFactory = Arc<dyn Fn(&str) -> Arc<dyn ProtocolSession> + Send + Sync>;

/// Sessions kept in memory, ids `s1`, `s2`, …; `s1` ("default") exists from the start and is
/// the default session.
pub struct InMemoryDirectory {
    factory: AgentFactory,
    sessions: Mutex<Vec<SessionEntry>>,
    next: Mutex<u64>,
}

impl InMemoryDirectory {
    /// A directory whose sessions get their agent from `factory` (given the session id).
    pub fn new(factory: impl Fn(&str) -> Arc<dyn ProtocolSession> + Send + Sync + 'static) -> Self {
        InMemoryDirectory {
            factory: Arc::new(factory),
            sessions: Mutex::new(vec![SessionEntry {
                session_id: "s1".into(),
                title: "default".into(),
            }]),
            next: Mutex::new(1),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Vec<SessionEntry>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for InMemoryDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryDirectory")
            .field("sessions", &*self.sessions())
            .finish()
    }
}

impl SessionDirectory for InMemoryDirectory {
    fn list(&self) -> Vec<SessionEntry> {
        self.sessions().clone()
    }

    fn open(&self, session_id: &str) -> Option<Arc<dyn ProtocolSession>> {
        let known = self.sessions().iter().any(|s| s.session_id == session_id);
        known.then(|| (self.factory)(session_id))
    }

    fn start(&self, title: Option<&str>) -> Result<SessionEntry, HostError> {
        let n = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            *next
        };
        let entry = SessionEntry {
            session_id: format!("s{n}"),
            title: title.map_or_else(|| format!("session {n}"), str::to_owned),
        };
        self.sessions().push(entry.clone());
        Ok(entry)
    }

    fn release(&self, session_id: &str) {
        self.sessions().retain(|s| s.session_id != session_id);
    }
}

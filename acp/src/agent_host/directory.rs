//! [`AcpDirectory`]: the carrier sessions of one ACP agent — `s1` (made at launch), then one
//! per `sessions.start`, each an ACP session of the same agent process (`session/new` as the
//! carrier session starts, within `max_sessions`).

use std::sync::Arc;

use carrier_agent::{
    HostError, InMemoryDirectory, ProtocolSession, SessionDirectory, SessionEntry,
};

use super::session::Peer;

/// The sessions of an [`super::AcpAgent`] (see the module docs). Ids `s1`, `s2`, …
pub struct AcpDirectory {
    peer: Arc<Peer>,
    sessions: InMemoryDirectory,
}

impl std::fmt::Debug for AcpDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpDirectory")
            .field("sessions", &self.sessions)
            .finish_non_exhaustive()
    }
}

impl AcpDirectory {
    pub(crate) fn new(peer: Arc<Peer>) -> Self {
        let opener = peer.clone();
        let sessions = InMemoryDirectory::new(move |id| {
            let session = opener.session(id);
            // A session started now gets its ACP session now (when the agent runs): its first
            // prompt need not wait for it, and a refusal shows in the log at once.
            if let (Some(link), Ok(runtime)) =
                (opener.running(), tokio::runtime::Handle::try_current())
            {
                let (peer, session) = (opener.clone(), session.clone());
                runtime.spawn(async move {
                    if let Err((_, why)) = session.ensure_acp(&peer, &link).await {
                        tracing::warn!(error = %why, "the ACP agent made no session");
                    }
                });
            }
            session as Arc<dyn ProtocolSession>
        });
        AcpDirectory { peer, sessions }
    }
}

impl SessionDirectory for AcpDirectory {
    fn list(&self) -> Vec<SessionEntry> {
        self.sessions.list()
    }

    fn open(&self, session_id: &str) -> Option<Arc<dyn ProtocolSession>> {
        self.sessions.open(session_id)
    }

    fn start(&self, title: Option<&str>) -> Result<SessionEntry, HostError> {
        self.sessions.start(title)
    }

    fn release(&self, session_id: &str) {
        self.sessions.release(session_id);
        self.peer.forget_session(session_id);
    }
}

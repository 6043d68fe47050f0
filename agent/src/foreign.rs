//! The seam a foreign wire rides: another text protocol on the carrier's sockets (the seed
//! system's, an editor's) over the sessions of an [`AgentProfile`] — the same agents, history,
//! turns and permission prompts, so a client of either wire sees the turns the other starts.
//!
//! A foreign wire is a [`TextProfile`](carrier_server::TextProfile) of its own that holds the
//! profile's [`Sessions`] ([`AgentProfile::sessions`]); a host attaches it at a path of its own
//! beside the agent protocol ([`Attachment::with_route`](carrier_server::Attachment::with_route))
//! or at `/`. Per connection it
//!
//! - binds to a session: the one the host's binder picks ([`Sessions::initial`]), one by id
//!   ([`Sessions::open`]) or a new one ([`Sessions::start`]), as a [`SessionHandle`];
//! - hears it: [`SessionHandle::listen`] hands it the history (each entry with its
//!   [`EntryMeta`]), then every event as the session numbers it, to an [`EventListener`] that
//!   sends them in its own wire — in order, with no gap between the history and the first live
//!   event; a listener that [drives](EventListener::drives) is also handed the open permission
//!   prompts, and answers them; one whose wire carries them
//!   ([`EventListener::agent_updates`]) is also handed the agent's updates
//!   (`session.agent_update`), in the history as [`Recorded::AgentUpdate`] entries;
//! - drives it: [`SessionHandle::submit`], [`SessionHandle::abort`] and
//!   [`SessionHandle::respond_permission`], the agent protocol's turn inputs, each answered
//!   through an [`Answer`] ([`Quiet`] for none);
//! - lets go: [`SessionHandle::unbind`] when the connection closes.
//!
//! Answers built from a session's history are fitted to the connection's outbound budget with
//! [`fit_back`], leaving [`ENVELOPE_BYTES`] for the message around them. `carrier-robota` (the
//! seed system's wire) uses only this module.

use std::sync::Arc;

use super::handlers::start_refusal;
use super::host::AgentHost;
use super::hub::SessionHub;
use super::memory::SessionMemory;
use super::profile::AgentProfile;
use carrier_protocol::error::ErrorObject;
use carrier_protocol::events::DriverInfo;
use carrier_protocol::ids::{SessionId, TurnId};
use carrier_protocol::methods::{
    Empty, HistoryEntry, PermissionRespondParams, SessionState, SubmitParams, TurnIdResult,
};
use carrier_server::{Connection, ConnectionId};

pub use super::answer::{Answer, Quiet};
pub use super::fit::{fit_back, ENVELOPE_BYTES};
pub use super::history::{EntryMeta, Recorded};
pub use super::hub::EventListener;

/// The sessions of an [`AgentProfile`], for a foreign wire: cheap to clone; clones (and the
/// profile) share them.
#[derive(Clone)]
pub struct Sessions {
    host: Arc<AgentHost>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("memory", &self.host.memory)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub(crate) fn new(host: Arc<AgentHost>) -> Self {
        Sessions { host }
    }

    /// The session the host's binder picks for a newly admitted connection (as the agent
    /// protocol binds one at its handshake); `None` when the host has none to bind.
    pub fn initial(&self, conn: &Connection) -> Option<SessionHandle> {
        let id = self.host.binder.initial_session(
            self.host.directory.as_ref(),
            conn.id(),
            conn.role(),
        )?;
        self.open(&id)
    }

    /// The session `session_id`, opened on first use; `None` when the host's directory does
    /// not know it.
    pub fn open(&self, session_id: &str) -> Option<SessionHandle> {
        self.host.hub(session_id).map(|hub| SessionHandle { hub })
    }

    /// Starts a new session, as `sessions.start` does: refused with `limit_exceeded` when the
    /// host's directory already holds `max_sessions`, `internal` when the directory fails.
    /// The title is the host directory's to keep (`sessions.list` cuts it to
    /// `limits.max_title_bytes`).
    pub fn start(
        &self,
        title: Option<&str>,
        max_sessions: usize,
    ) -> Result<SessionHandle, ErrorObject> {
        self.host
            .start_and_open(title, max_sessions)
            .map(|hub| SessionHandle { hub })
            .map_err(|e| start_refusal(e, max_sessions))
    }

    /// The budget the sessions keep their history and resume rings in (its gauges are what
    /// a profile reports at `/metrics`).
    pub fn memory(&self) -> &SessionMemory {
        &self.host.memory
    }

    /// Ends running turns and shuts every agent down: what the profile attached at `/` does
    /// when the carrier stops ([`TextProfile::shutdown`](carrier_server::TextProfile::shutdown)).
    pub fn shutdown(&self) {
        self.host.shutdown();
    }
}

/// One session, as a foreign wire's connection drives and hears it. Cheap to clone.
#[derive(Clone)]
pub struct SessionHandle {
    hub: Arc<SessionHub>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("id", self.hub.id())
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    /// The session id.
    pub fn id(&self) -> &SessionId {
        self.hub.id()
    }

    /// Makes `listener` receive this session's live events. First, under the session's lock,
    /// `greet` gets the history (every entry held — the agent's updates only when the
    /// listener [takes them](EventListener::agent_updates) — up to `budget` bytes of text,
    /// each with its [`EntryMeta`]) to send what the wire sends on binding; then a listener
    /// that drives is handed each open permission prompt's `permission_request` event; then
    /// live events follow, with nothing between them.
    pub fn listen(
        &self,
        listener: Arc<dyn EventListener>,
        budget: usize,
        greet: impl FnOnce(Vec<(EntryMeta, Recorded)>),
    ) {
        self.hub.listen(listener, budget, greet);
    }

    /// The prompts and replies of the history (every one held, up to `budget` bytes of
    /// text), each with its [`EntryMeta`], oldest first.
    pub fn history_noted(&self, budget: usize) -> Vec<(EntryMeta, HistoryEntry)> {
        self.hub.history_noted(budget)
    }

    /// Starts a turn, as `session.submit` does: refused (`busy`) while one runs; otherwise
    /// `answer` gets the turn id, the session emits `turn_started` with `driver` (the host's
    /// identity, never a client's), and the agent starts. The carrier keeps at most
    /// `max_reply_bytes` of the turn's reply.
    pub fn submit(
        &self,
        answer: &impl Answer<TurnIdResult>,
        params: SubmitParams,
        driver: DriverInfo,
        max_reply_bytes: usize,
    ) {
        self.hub.submit(answer, params, driver, max_reply_bytes);
    }

    /// Ends the running turn (`turn_id`, or whichever runs when `None`), as `session.abort`
    /// does; `not_found` when none runs or another does.
    pub fn abort(&self, answer: &impl Answer<TurnIdResult>, turn_id: Option<&TurnId>) {
        self.hub.abort(answer, turn_id);
    }

    /// Answers an open permission prompt, as `session.permission.respond` does; `not_found`
    /// for a request that is not open (answered elsewhere, or its turn ended), `invalid_params`
    /// for an `option_id` it does not offer.
    pub fn respond_permission(&self, answer: &impl Answer<Empty>, params: PermissionRespondParams) {
        self.hub.respond_permission(answer, params);
    }

    /// What the session is doing.
    pub fn state(&self) -> SessionState {
        self.hub.state()
    }

    /// Stops sending this session's events to the connection `id` (its listener included).
    pub fn unbind(&self, id: ConnectionId) {
        self.hub.unbind(id);
    }
}

impl AgentProfile {
    /// This profile's sessions, for a foreign wire over them (see [`crate::foreign`]).
    pub fn sessions(&self) -> Sessions {
        Sessions::new(self.host.clone())
    }
}

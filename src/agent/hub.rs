//! [`SessionHub`]: the carrier's side of one session — `seq`, the resume ring, the bound
//! connections, the running turn and the history.
//!
//! Invariant: every session event is numbered, recorded in the ring and queued on every bound
//! connection while the hub's lock is held, so each connection sees `seq` strictly increasing
//! by one, and a connection that binds (or resumes) under the same lock gets its reply, then
//! its replay, then live events — no gap, no duplicate. Each event is encoded once; every
//! connection queues the same shared `Bytes`. Queueing never blocks, so the lock is short.
//!
//! A failed send is the connection's problem (SPEC section 8): it is dropped from the hub and
//! the operation that produced the event still succeeds.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::protocol::events::SessionEvent;
use crate::protocol::methods::{HistoryResult, ResumeOutcome, SessionState, SessionStatusResult};
use crate::protocol::resume::{Replay, ResumeRing};
use crate::server::{Connection, ConnectionId};

use super::history::{History, HistoryConfig};
use super::reply_text::ReplyText;
use super::session::ProtocolSession;
use super::usage::UsageReporter;

/// Bounds of a session's resume ring (SPEC default: 1024 events or 4 MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Events held.
    pub max_events: usize,
    /// Encoded bytes held.
    pub max_bytes: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            max_events: crate::protocol::resume::DEFAULT_MAX_EVENTS,
            max_bytes: crate::protocol::resume::DEFAULT_MAX_BYTES,
        }
    }
}

/// The running turn, as the carrier records it.
pub(crate) struct RunningTurn {
    pub(crate) id: String,
    pub(crate) prompt: String,
    /// Deltas streamed so far, up to the reply cap: the reply of an aborted turn.
    pub(crate) reply: ReplyText,
    /// Permission requests waiting for an answer.
    pub(crate) pending: Vec<String>,
}

pub(crate) struct HubState {
    pub(crate) last_seq: u64,
    ring: ResumeRing,
    subscribers: Vec<Connection>,
    pub(crate) next_turn: u64,
    pub(crate) turn: Option<RunningTurn>,
    pub(crate) history: History,
}

/// One session: its agent, its event stream and its bound connections.
pub(crate) struct SessionHub {
    id: String,
    pub(crate) agent: Arc<dyn ProtocolSession>,
    pub(crate) usage: Arc<dyn UsageReporter>,
    state: Mutex<HubState>,
}

impl SessionHub {
    pub(crate) fn new(
        id: String,
        agent: Arc<dyn ProtocolSession>,
        usage: Arc<dyn UsageReporter>,
        ring: RingConfig,
        history: HistoryConfig,
    ) -> Arc<Self> {
        Arc::new(SessionHub {
            id,
            agent,
            usage,
            state: Mutex::new(HubState {
                last_seq: 0,
                ring: ResumeRing::new(ring.max_events, ring.max_bytes),
                subscribers: Vec::new(),
                next_turn: 0,
                turn: None,
                history: History::new(history),
            }),
        })
    }

    /// The session id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, HubState> {
        // Every critical section leaves the state consistent before it can panic (sends do
        // not panic), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Numbers `event`, records it in the ring and queues it on every bound connection.
    pub(crate) fn emit(&self, st: &mut HubState, event: SessionEvent) {
        let seq = st.last_seq + 1;
        let frame = match event.encode(seq) {
            Ok(frame) => frame,
            Err(e) => {
                // Not numbered, so no receiver sees a gap.
                tracing::error!(session = %self.id, event = event.name(), error = %e, "event failed to encode");
                return;
            }
        };
        st.last_seq = seq;
        st.ring.push(seq, frame.clone());
        st.subscribers
            .retain(|c| c.send_text(frame.clone()).is_ok());
    }

    /// Binds `conn` to this session. Under the lock: `respond` sends the reply (it gets the
    /// resume outcome), then the replay of every held event after `after_seq` (when given)
    /// is queued, then the connection receives live events. An `after_seq` beyond the last
    /// assigned seq is a `reset`.
    pub(crate) fn bind(
        &self,
        conn: &Connection,
        after_seq: Option<u64>,
        respond: impl FnOnce(ResumeOutcome),
    ) {
        let mut st = self.lock();
        let (outcome, frames) = match after_seq {
            None => (ResumeOutcome::New, Vec::new()),
            // A client cannot have seen a seq this session never assigned: its state is from
            // somewhere else, so it must start over rather than drop live events as duplicates.
            Some(after) if after > st.last_seq => (ResumeOutcome::Reset, Vec::new()),
            Some(after) => match st.ring.replay_after(after, st.last_seq) {
                Replay::Resumed { frames } => (
                    ResumeOutcome::Resumed {
                        replayed: frames.len() as u64,
                    },
                    frames,
                ),
                Replay::Gap { from, to, frames } => (ResumeOutcome::Gap { from, to }, frames),
            },
        };
        respond(outcome);
        for frame in frames {
            if conn.send_text(frame).is_err() {
                return;
            }
        }
        if conn.is_open() {
            st.subscribers.retain(|c| c.id() != conn.id());
            st.subscribers.push(conn.clone());
        }
    }

    /// Stops sending this session's events to `id`.
    pub(crate) fn unbind(&self, id: ConnectionId) {
        self.lock().subscribers.retain(|c| c.id() != id);
    }

    /// What the session is doing.
    pub(crate) fn state(&self) -> SessionState {
        state_of(&self.lock())
    }

    /// `session.status`.
    pub(crate) fn status(&self) -> SessionStatusResult {
        let st = self.lock();
        SessionStatusResult {
            session_id: self.id.clone(),
            state: state_of(&st),
            turn_id: st.turn.as_ref().map(|t| t.id.clone()),
        }
    }

    /// `session.history`: the newest `limit` entries (all held when `None`), oldest first,
    /// as many as fit `budget` bytes of JSON (the history's byte bound counts text, not its
    /// escaped form).
    pub(crate) fn history(&self, limit: Option<u32>, budget: usize) -> HistoryResult {
        let newest = self.lock().history.newest(limit);
        let (entries, left_out) = super::fit::fit_back(newest, budget);
        if left_out > 0 {
            tracing::debug!(session = %self.id, left_out, "history answer fitted to the outbound budget");
        }
        HistoryResult { entries }
    }

    /// Whether `turn_id` is the running turn.
    pub(crate) fn is_current_turn(&self, turn_id: &str) -> bool {
        self.lock().turn.as_ref().is_some_and(|t| t.id == turn_id)
    }

    /// The host is stopping: a running turn ends aborted and the agent is told to shut down.
    pub(crate) fn shutdown(&self) {
        let running = self.lock().turn.as_ref().map(|t| t.id.clone());
        if let Some(turn_id) = running {
            if self.turn_finish(&turn_id, None, true).is_ok() {
                self.agent.abort_turn(&turn_id);
            }
        }
        self.agent.shutdown();
    }
}

pub(crate) fn state_of(st: &HubState) -> SessionState {
    match &st.turn {
        None => SessionState::Idle,
        Some(t) if !t.pending.is_empty() => SessionState::AwaitingPermission,
        Some(_) => SessionState::Running,
    }
}

//! [`SessionHub`]: the carrier's side of one session — `seq`, the bound connections, the
//! running turn, and its record (the resume ring and the history, [`SessionRecord`]).
//!
//! Invariant: every session event is numbered, recorded in the ring and queued on every bound
//! connection while the hub's lock is held, so each connection sees `seq` strictly increasing
//! by one, and a connection that binds (or resumes) under the same lock gets its reply, then
//! its replay, then live events — no gap, no duplicate. Each event is encoded once; every
//! connection queues the same shared `Bytes`. Queueing never blocks, so the lock is short.
//!
//! The record has a lock of its own, taken after the hub's: recording may evict from other
//! sessions' records to keep them all within the process's [`super::memory::SessionMemory`]
//! budget, and it never takes another hub's lock to do so (the lock order is in
//! [`super::memory`]). An eviction from outside only ever removes this session's oldest
//! events, so the ring's oldest held seq still tells a resume where its gap ends.
//!
//! A failed send is the connection's problem (docs/protocol.md, "Delivery and memory"): it is
//! dropped from the hub and the operation that produced the event still succeeds.
//!
//! What a turn input changes and which events it causes is decided by the pure state machine
//! [`Turns`] (`turns`); the hub only locks, answers, emits, and then calls the agent.
//!
//! No prompt outlives its drivers (`prompts`): the hub keeps the running turn's open
//! permission prompts, sends them to each drive connection that binds (of any wire), and denies
//! those that no drive connection is bound to answer for the unattended-prompt timeout.
//!
//! Agent updates (`session.agent_update`, protocol 1.2) are numbered in the session's one `seq`
//! line like every session event, and sent only to the connections whose protocol has
//! `agent_updates` ([`EventScope`]; a listener says so itself). A connection of an older
//! protocol is neither sent them live nor replayed them, so its `seq` skips their numbers: it
//! still only rises, resuming from any `seq` it saw is exact, and a skipped number is never an
//! event of its protocol it lost (docs/protocol.md, "Agent updates").

mod prompts;
#[cfg(test)]
mod tests;
mod turns;

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use carrier_protocol::events::{is_agent_update_frame, DriverInfo, RawObject, SessionEvent};
use carrier_protocol::features::{Feature, Peers};
use carrier_protocol::ids::{RequestId, SessionId, TurnId};
use carrier_protocol::methods::{
    Decision, Empty, HistoryResult, HistoryRole, PermissionRespondParams, ResumeOutcome,
    SessionState, SessionStatusResult, SubmitParams, TurnIdResult,
};
use carrier_protocol::resume::Replay;
use carrier_protocol::Role;
use carrier_server::{Connection, ConnectionId};

use super::answer::{Answer, Quiet};
use super::history::{EntryMeta, Recorded};
use super::outlet::SessionOutput;
use super::record::SessionRecord;
use super::session::{ProtocolSession, TurnStart};
use super::turn_sink::{turn_life, Ask, Ending, PermissionChoice, TurnEnded, TurnOutput, TurnSink};
use super::usage::{TurnRecord, UsageReporter};
pub(crate) use prompts::DEFAULT_UNATTENDED_PROMPT_TIMEOUT;
use prompts::{OpenPrompts, Unattended};
use turns::{Ended, ErrorScope, Step, Turns};

/// Which session events a connection is sent: those its protocol has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventScope {
    /// Every session event (protocol 1.2 and later: `agent_updates`).
    WithAgentUpdates,
    /// All but `session.agent_update` (a connection of an older protocol).
    WithoutAgentUpdates,
}

impl EventScope {
    /// What a connection with these peers is sent.
    pub(crate) fn of(peers: &Peers) -> Self {
        if peers.available(Feature::AgentUpdates) {
            EventScope::WithAgentUpdates
        } else {
            EventScope::WithoutAgentUpdates
        }
    }

    fn sends(self, agent_update: bool) -> bool {
        !agent_update || self == EventScope::WithAgentUpdates
    }
}

/// A connection of the agent protocol bound to the session.
struct Subscriber {
    conn: Connection,
    scope: EventScope,
}

struct HubState {
    last_seq: u64,
    subscribers: Vec<Subscriber>,
    /// Connections that read the events in a wire of their own (another text profile).
    listeners: Vec<Arc<dyn EventListener>>,
    turns: Turns,
    /// What the agent of the running turn awaits; `None` when no turn runs.
    waits: Option<TurnWaits>,
    /// The running turn's unanswered prompts, and whether a driver is bound to answer them.
    prompts: OpenPrompts,
    /// The reply cap of the latest turn (`max_reply_bytes`), which also bounds an agent
    /// update outside any turn.
    reply_cap: usize,
}

/// What the agent of the running turn awaits: the turn's end and its permission answers.
/// Dropping it (when the turn ends) resolves every sink's `cancelled()` and ends every
/// pending permission future with [`TurnEnded`].
struct TurnWaits {
    turn_id: TurnId,
    _life: watch::Sender<()>,
    /// The permission prompts an agent awaits, by request id.
    asked: Vec<(RequestId, oneshot::Sender<PermissionChoice>)>,
    /// How many request ids the carrier has allocated in this turn.
    allocated: u64,
}

impl HubState {
    /// Takes the waits of a turn that is no longer running, to be dropped once the lock is
    /// released (waking the agent's tasks).
    fn ended_waits(&mut self) -> Option<TurnWaits> {
        let turns = &self.turns;
        self.waits.take_if(|w| !turns.is_current(&w.turn_id))
    }

    /// Whether a drive connection of any wire is bound (one that may answer a prompt).
    fn driven(&self) -> bool {
        self.subscribers
            .iter()
            .any(|s| s.conn.role() == Role::Drive)
            || self.listeners.iter().any(|l| l.drives())
    }
}

/// A connection that reads a session's events in a wire of its own rather than the agent
/// protocol's (a foreign wire over the same sessions). The session hands it each event as it
/// numbers it, under its lock, so it sees them in order and, after
/// [`SessionHandle::listen`](super::foreign::SessionHandle::listen), without a gap.
pub trait EventListener: Send + Sync {
    /// The connection it sends to.
    fn id(&self) -> ConnectionId;

    /// Whether the connection may drive the session (answer its prompts).
    fn drives(&self) -> bool;

    /// Whether its wire carries `session.agent_update` (an ACP client's does); a listener
    /// that does not is neither handed them nor their history entries. Default: no.
    fn agent_updates(&self) -> bool {
        false
    }

    /// Sends `event` in the listener's wire; must not block. `false` when the connection can
    /// take nothing more: the hub drops it.
    fn on_event(&self, event: &SessionEvent) -> bool;
}

/// One session: its agent, its event stream and its bound connections.
pub(crate) struct SessionHub {
    id: SessionId,
    pub(crate) agent: Arc<dyn ProtocolSession>,
    pub(crate) usage: Arc<dyn UsageReporter>,
    state: Mutex<HubState>,
    record: Arc<SessionRecord>,
    /// This hub, for the task that times its unattended prompts out.
    me: Weak<SessionHub>,
}

impl SessionHub {
    pub(crate) fn new(
        id: SessionId,
        agent: Arc<dyn ProtocolSession>,
        usage: Arc<dyn UsageReporter>,
        record: Arc<SessionRecord>,
        unattended_prompt_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| SessionHub {
            id,
            agent,
            usage,
            state: Mutex::new(HubState {
                last_seq: 0,
                subscribers: Vec::new(),
                listeners: Vec::new(),
                turns: Turns::new(),
                waits: None,
                prompts: OpenPrompts::new(unattended_prompt_timeout),
                reply_cap: carrier_server::Limits::default().max_reply_bytes,
            }),
            record,
            me: me.clone(),
        })
    }

    /// The session id.
    pub(crate) fn id(&self) -> &SessionId {
        &self.id
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // Every critical section leaves the state consistent before it can panic (sends do
        // not panic), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records what a step adds to the history, then emits its events in order (see
    /// [`SessionHub::emit`]). The reply of a turn the step ended aborted is noted interrupted.
    fn record_and_emit(
        &self,
        st: &mut HubState,
        history: Vec<Recorded>,
        events: Vec<SessionEvent>,
    ) {
        let aborted = events
            .iter()
            .any(|e| matches!(e, SessionEvent::TurnCompleted(done) if done.aborted));
        for entry in history {
            let reply = entry
                .said()
                .is_some_and(|e| e.role == HistoryRole::Assistant);
            self.record.push_history_noted(entry, aborted && reply);
        }
        for event in events {
            self.emit(st, event);
        }
    }

    /// Numbers `event`, records it in the ring and queues it on every bound connection.
    fn emit(&self, st: &mut HubState, event: SessionEvent) {
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
        self.record.push_event(seq, frame.clone());
        let bound = st.subscribers.len() + st.listeners.len();
        let update = matches!(event, SessionEvent::AgentUpdate(_));
        st.subscribers
            .retain(|s| !s.scope.sends(update) || s.conn.send_text(frame.clone()).is_ok());
        st.listeners
            .retain(|l| (update && !l.agent_updates()) || l.on_event(&event));
        let left = st.subscribers.len() + st.listeners.len() < bound;
        let prompted = matches!(event, SessionEvent::PermissionRequest(_));
        if OpenPrompts::follows(&event) {
            st.prompts.follow(seq, event);
        }
        if left || prompted {
            self.membership_changed(st);
        }
    }

    /// Notes a connection binding or leaving, or a prompt asked: the unattended-prompt clock
    /// runs only while a prompt is open and no drive connection is bound.
    fn membership_changed(&self, st: &mut HubState) {
        let driven = st.driven();
        if !st.prompts.attended(driven) {
            return;
        }
        let me: Weak<dyn Unattended> = self.me.clone();
        if prompts::watch(me) {
            st.prompts.watching();
        } else {
            tracing::warn!(session = %self.id, "no runtime to time unattended prompts out on");
        }
    }

    /// Binds `conn` to this session, to be sent the events of `scope`. Under the lock:
    /// `respond` sends the reply (it gets the resume outcome), then the replay of every held
    /// event of the scope after `after_seq` (when given) is queued, then the connection
    /// receives live events. An `after_seq` beyond the last assigned seq is a `reset`.
    ///
    /// A drive connection is also sent each open prompt it would otherwise miss, as the
    /// `permission_request` event it was, under its own `seq`, in `seq` order before the
    /// replay: every open prompt on a new binding (or a reset), those lost in a gap on a
    /// resume, none on a full resume (the replay holds them). The client's `seq` still only
    /// rises.
    pub(crate) fn bind(
        &self,
        conn: &Connection,
        scope: EventScope,
        after_seq: Option<u64>,
        respond: impl FnOnce(ResumeOutcome),
    ) {
        let mut st = self.lock();
        let in_scope = |mut frames: Vec<bytes::Bytes>| {
            frames.retain(|f| scope.sends(is_agent_update_frame(f)));
            frames
        };
        // What the connection has seen, and the first seq the replay holds.
        let everything = (0, u64::MAX);
        let (outcome, frames, (seen, held_from)) = match after_seq {
            None => (ResumeOutcome::New, Vec::new(), everything),
            // A client cannot have seen a seq this session never assigned: its state is from
            // somewhere else, so it must start over rather than drop live events as duplicates.
            Some(after) if after > st.last_seq => (ResumeOutcome::Reset, Vec::new(), everything),
            Some(after) => match self.record.replay_after(after, st.last_seq) {
                Replay::Resumed { frames } => {
                    let frames = in_scope(frames);
                    (
                        ResumeOutcome::Resumed {
                            replayed: frames.len() as u64,
                        },
                        frames,
                        (after, after + 1),
                    )
                }
                Replay::Gap { from, to, frames } => (
                    ResumeOutcome::Gap { from, to },
                    in_scope(frames),
                    (after, to + 1),
                ),
            },
        };
        // A connection bound or resumed to the session uses it.
        self.record.touch();
        respond(outcome);
        let prompts: Vec<_> = if conn.role() == Role::Drive {
            st.prompts
                .missed(seen, held_from)
                .filter_map(|(seq, event)| event.encode(seq).ok())
                .collect()
        } else {
            Vec::new()
        };
        for frame in prompts.into_iter().chain(frames) {
            if conn.send_text(frame).is_err() {
                return;
            }
        }
        if conn.is_open() {
            st.subscribers.retain(|s| s.conn.id() != conn.id());
            st.subscribers.push(Subscriber {
                conn: conn.clone(),
                scope,
            });
            self.membership_changed(&mut st);
        }
    }

    /// Makes `listener` receive this session's live events. Under the lock, `greet` first gets
    /// the history (every entry held — agent updates only when the listener takes them — up
    /// to `budget` bytes of text, with its note) to send what the listener's wire sends on
    /// binding; then a listener that drives is handed each open prompt's `permission_request`
    /// event: no event falls between them and the first live one.
    pub(crate) fn listen(
        &self,
        listener: Arc<dyn EventListener>,
        budget: usize,
        greet: impl FnOnce(Vec<(EntryMeta, Recorded)>),
    ) {
        let mut st = self.lock();
        greet(
            self.record
                .history_recorded(budget, listener.agent_updates()),
        );
        if listener.drives() && !st.prompts.events().all(|event| listener.on_event(event)) {
            return;
        }
        st.listeners.retain(|l| l.id() != listener.id());
        st.listeners.push(listener);
        self.membership_changed(&mut st);
    }

    /// The history with every entry's note (see [`SessionHub::listen`]).
    pub(crate) fn history_noted(
        &self,
        budget: usize,
    ) -> Vec<(EntryMeta, carrier_protocol::methods::HistoryEntry)> {
        self.record.history_noted(budget)
    }

    /// Stops sending this session's events to `id`.
    pub(crate) fn unbind(&self, id: ConnectionId) {
        let mut st = self.lock();
        st.subscribers.retain(|s| s.conn.id() != id);
        st.listeners.retain(|l| l.id() != id);
        self.membership_changed(&mut st);
    }

    /// What the session is doing.
    pub(crate) fn state(&self) -> SessionState {
        self.lock().turns.state()
    }

    /// `session.status`.
    pub(crate) fn status(&self) -> SessionStatusResult {
        let st = self.lock();
        SessionStatusResult {
            session_id: self.id.to_string(),
            state: st.turns.state(),
            turn_id: st.turns.running().map(TurnId::to_string),
        }
    }

    /// `session.history`: the newest `limit` entries (all held when `None`), oldest first,
    /// as many as fit `budget` bytes of JSON (the history's byte bound counts text, not its
    /// escaped form).
    pub(crate) fn history(&self, limit: Option<u32>, budget: usize) -> HistoryResult {
        let newest = self.record.history(limit, budget);
        let (entries, left_out) = super::fit::fit_back(newest, budget);
        if left_out > 0 {
            tracing::debug!(session = %self.id, left_out, "history answer fitted to the outbound budget");
        }
        HistoryResult { entries }
    }

    /// The host is stopping: a running turn ends aborted and the agent is told to shut down.
    pub(crate) fn shutdown(&self) {
        let running = self.lock().turns.running().cloned();
        if let Some(turn_id) = running {
            if self
                .turn_finish(&turn_id, Ending::carrier_aborted())
                .is_ok()
            {
                self.agent.abort_turn(turn_id.as_str());
            }
        }
        self.agent.shutdown();
    }

    // Turns: each input goes through the [`Turns`] machine under the lock; the answer is
    // queued before the events it caused. The agent and the usage reporter are host code and
    // are always called after the lock is released.

    /// `session.submit`: `busy` while a turn runs; otherwise reply `{turn_id}`, emit
    /// `turn_started` with the host's driver identity, and start the agent. The carrier keeps
    /// at most `max_reply_bytes` of the turn's reply.
    pub(crate) fn submit(
        self: &Arc<Self>,
        reply: &impl Answer<TurnIdResult>,
        params: SubmitParams,
        driver: DriverInfo,
        max_reply_bytes: usize,
    ) {
        let (turn_id, life) = {
            let mut st = self.lock();
            st.reply_cap = max_reply_bytes;
            let Step {
                answer,
                history,
                events,
            } = st.turns.submit(&params.prompt, &driver, max_reply_bytes);
            match answer {
                Ok(started) => {
                    reply.ok(&started);
                    self.record_and_emit(&mut st, history, events);
                    let turn_id = TurnId::from(started.turn_id);
                    let (life_tx, life) = turn_life();
                    st.waits = Some(TurnWaits {
                        turn_id: turn_id.clone(),
                        _life: life_tx,
                        asked: Vec::new(),
                        allocated: 0,
                    });
                    (turn_id, life)
                }
                Err(refusal) => return reply.err(refusal),
            }
        };
        let hub: Weak<SessionHub> = Arc::downgrade(self);
        let start = TurnStart {
            turn_id: turn_id.to_string(),
            prompt: params.prompt,
            options: params.options,
            driver,
            sink: TurnSink::new(hub, turn_id.clone(), life),
        };
        if let Err(e) = self.agent.start_turn(start) {
            tracing::warn!(session = %self.id(), turn = %turn_id, error = %e, "agent refused the turn");
            let _ = self.turn_error(&turn_id, "internal", &e.message);
            let _ = self.turn_finish(&turn_id, Ending::carrier_aborted());
        }
    }

    /// `session.abort`: ends the running turn (`not_found` when none runs or `turn_id` names
    /// another), replies `{turn_id}`, emits the aborted `turn_completed`, then tells the agent
    /// (its sinks' `cancelled()` resolve, then [`ProtocolSession::abort_turn`]).
    pub(crate) fn abort(&self, reply: &impl Answer<TurnIdResult>, turn_id: Option<&TurnId>) {
        let (ended, waits) = {
            let mut st = self.lock();
            let Step {
                answer,
                history,
                events,
            } = st.turns.abort(turn_id);
            match answer {
                Ok(ended) => {
                    reply.ok(&TurnIdResult {
                        turn_id: ended.turn_id.to_string(),
                    });
                    self.record_and_emit(&mut st, history, events);
                    (ended, st.ended_waits())
                }
                Err(refusal) => return reply.err(refusal),
            }
        };
        drop(waits);
        self.agent.abort_turn(ended.turn_id.as_str());
        self.record(&ended);
    }

    /// `session.permission.respond`: `not_found` unless `request_id` is pending (and
    /// `invalid_params` unless it gives one of `decision` and an offered `option_id`);
    /// otherwise reply `{}`, emit `permission_resolved`, then tell the agent (the futures
    /// awaiting the prompt resolve, then [`ProtocolSession::permission_decided`]).
    pub(crate) fn respond_permission(
        &self,
        reply: &impl Answer<Empty>,
        params: PermissionRespondParams,
    ) {
        let request_id = RequestId::from(params.request_id.as_str());
        let (turn_id, decision) = {
            let mut st = self.lock();
            let Step {
                answer,
                history,
                events,
            } = st.turns.answer_permission(&params);
            match answer {
                Ok((turn_id, choice)) => {
                    reply.ok(&Empty {});
                    self.record_and_emit(&mut st, history, events);
                    if let Some(waits) = st.waits.as_mut() {
                        let (answered, rest) = std::mem::take(&mut waits.asked)
                            .into_iter()
                            .partition(|(id, _)| *id == request_id);
                        waits.asked = rest;
                        let answered: Vec<(RequestId, oneshot::Sender<PermissionChoice>)> =
                            answered;
                        for (_, waiter) in answered {
                            // An agent that dropped its future no longer waits: nothing to do.
                            let _ = waiter.send(choice.clone());
                        }
                    }
                    (turn_id, choice.decision)
                }
                Err(refusal) => return reply.err(refusal),
            }
        };
        self.agent
            .permission_decided(turn_id.as_str(), request_id.as_str(), decision);
    }

    /// Runs one of the agent's inputs and emits what it caused.
    fn agent_input<A>(
        &self,
        input: impl FnOnce(&mut Turns) -> Step<Result<A, TurnEnded>>,
    ) -> Result<A, TurnEnded> {
        let mut st = self.lock();
        let Step {
            answer,
            history,
            events,
        } = input(&mut st.turns);
        self.record_and_emit(&mut st, history, events);
        let waits = st.ended_waits();
        drop(st);
        // The agent's waiting tasks wake with the lock released.
        drop(waits);
        answer
    }

    fn record(&self, ended: &Ended) {
        self.usage.record_turn(&TurnRecord {
            session_id: self.id.as_str(),
            turn_id: ended.turn_id.as_str(),
            prompt: &ended.prompt,
            reply: &ended.reply,
            aborted: ended.aborted,
        });
    }
}

/// What the task that times unattended prompts out works on (see `prompts`).
impl Unattended for SessionHub {
    fn next_deadline(&self) -> Option<Instant> {
        self.lock().prompts.next_deadline()
    }

    fn deny_due(&self) {
        let due = self.lock().prompts.due(Instant::now());
        for request_id in due {
            tracing::info!(
                session = %self.id,
                request = %request_id,
                "no driver bound for the unattended-prompt timeout: the prompt is denied"
            );
            let answer = PermissionRespondParams::decide(request_id.to_string(), Decision::Deny);
            // Answered in the meantime: nothing to do.
            self.respond_permission(&Quiet, answer);
            // Closed whatever happened, so a prompt the turn machine no longer knows cannot
            // keep the task waking.
            self.lock().prompts.close(request_id.as_str());
        }
    }
}

/// What the agent reports through a turn's [`TurnSink`]: each input goes through the
/// [`Turns`] machine under the lock (see [`SessionHub::agent_input`]).
impl TurnOutput for SessionHub {
    /// See [`Turns::delta`].
    fn turn_delta(&self, turn_id: &TurnId, delta: &str) -> Result<(), TurnEnded> {
        self.agent_input(|turns| turns.delta(turn_id, delta))
    }

    /// See [`Turns::permission_request`]; the answer is routed to the returned receiver
    /// (see [`SessionHub::respond_permission`]).
    fn turn_ask_permission(
        &self,
        turn_id: &TurnId,
        ask: Ask<'_>,
    ) -> Result<(RequestId, oneshot::Receiver<PermissionChoice>), TurnEnded> {
        let mut st = self.lock();
        let st = &mut *st;
        let Some(waits) = st.waits.as_mut().filter(|w| w.turn_id == *turn_id) else {
            return Err(TurnEnded);
        };
        let request_id = match ask.request_id {
            Some(id) => RequestId::from(id),
            // `t1.p1`, `t1.p2`, …: unique in the session, since turn ids are.
            None => {
                waits.allocated += 1;
                RequestId::from(format!("{turn_id}.p{}", waits.allocated))
            }
        };
        let Step {
            answer,
            history,
            events,
        } = st.turns.permission_request(turn_id, &request_id, ask);
        answer?;
        let (tx, rx) = oneshot::channel();
        waits.asked.push((request_id.clone(), tx));
        self.record_and_emit(st, history, events);
        Ok((request_id, rx))
    }

    /// See [`Turns::agent_update`].
    fn turn_agent_update(&self, turn_id: &TurnId, update: RawObject) -> Result<(), TurnEnded> {
        self.agent_input(|turns| turns.agent_update(turn_id, update))
    }

    /// `session.error` of the running turn `turn_id`.
    fn turn_error(&self, turn_id: &TurnId, code: &str, message: &str) -> Result<(), TurnEnded> {
        self.agent_input(|turns| turns.error(turn_id, ErrorScope::Turn, code, message))
    }

    /// `session.error` without a `turn_id`, while `turn_id` runs.
    fn session_error(&self, turn_id: &TurnId, code: &str, message: &str) -> Result<(), TurnEnded> {
        self.agent_input(|turns| turns.error(turn_id, ErrorScope::Session, code, message))
    }

    /// Ends `turn_id`.
    fn turn_finish(&self, turn_id: &TurnId, ending: Ending<'_>) -> Result<(), TurnEnded> {
        let ended = self.agent_input(|turns| turns.finish(turn_id, ending))?;
        self.record(&ended);
        Ok(())
    }

    fn is_current_turn(&self, turn_id: &TurnId) -> bool {
        self.lock().turns.is_current(turn_id)
    }
}

/// What the agent reports outside its turns, through its [`super::SessionOutlet`].
impl SessionOutput for SessionHub {
    /// An update of no turn: its `agent_update` (or the `session.error` of one too long),
    /// recorded and sent like a turn's.
    fn session_agent_update(&self, update: RawObject) {
        let mut st = self.lock();
        let Step {
            history, events, ..
        } = turns::agent_update(None, update, st.reply_cap);
        self.record_and_emit(&mut st, history, events);
    }
}

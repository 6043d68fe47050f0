//! [`AgentPeer`]: the ACP agent process as carrier's peer across its restarts — starting it and
//! `initialize`, the requests carrier awaits (each within the request timeout, at most
//! [`MAX_REQUESTS_IN_FLIGHT`]), the line dispatcher (responses to their requests, `session/update`
//! to its session, `session/request_permission` to its session's turn, anything else `-32601`),
//! and what the agent's exit does. The child, its line reader, the request table and the
//! restart budget are `carrier_agent::process`'s, as for `--agent-cmd`.
//!
//! Lock order: a session's lock may be held while taking the peer's, never the other way
//! round; neither is held while calling into a session hub (a `TurnSink`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::oneshot;

use carrier_agent::process::{
    answer_within, ChildLines, ChildLink, Outcome, Requests, RestartBudget, SendLineError,
};
use carrier_protocol::envelope::truncate;

use super::config::AcpAgentConfig;
use super::error::AcpAgentError;
use super::wire::{self, Implementation, Initialized, NewSessionResult};
use crate::rpc::{self, ErrorObject, Id, Message};

/// Requests awaiting the agent's answer at once (prompts, `session/new`s): past it a request
/// fails at once instead of piling up.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 256;

/// The agent's `session/request_permission`s awaiting a client's answer at once; past it the
/// agent is answered `-32603` at once.
pub const MAX_OPEN_PERMISSIONS: usize = 64;

/// What a request to the agent became.
pub(crate) type Answered = Outcome<rpc::Response>;

/// Why a request was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    #[error("the ACP agent is not running")]
    Closed,
    #[error("the ACP agent is not reading its input")]
    Full,
    #[error("{0}")]
    InFlight(String),
}

/// What the dispatcher hands a carrier session: the peer knows its sessions only through this,
/// so the session module (which sends through the peer) sits above this one.
pub(crate) trait PeerSession: Send + Sync + Sized + 'static {
    /// The session `id`, sending through `peer`.
    fn new(peer: Weak<AgentPeer<Self>>, id: &str) -> Arc<Self>;
    /// The agent made ACP session `id` for it, in the child's run `generation`.
    fn adopt(&self, generation: u64, id: &str);
    /// One of the agent's `session/update`s for it (the update object as the agent sent it).
    fn on_update(&self, update: Box<serde_json::value::RawValue>);
    /// The agent's `session/request_permission`, for the session it names.
    fn on_permission_request(
        peer: &Arc<AgentPeer<Self>>,
        link: &Arc<ChildLink>,
        request: rpc::Request,
    );
    /// The child of run `generation` is gone (`message` says how).
    fn child_exited(&self, generation: u64, message: &str);
}

pub(crate) struct AgentPeer<S> {
    pub(crate) config: AcpAgentConfig,
    state: Mutex<PeerState<S>>,
    /// Held while a child starts, so two turns never start two children.
    starting: tokio::sync::Mutex<()>,
}

struct PeerState<S> {
    /// The running child, `initialize`d.
    link: Option<Arc<ChildLink>>,
    generation: u64,
    requests: Requests<rpc::Response>,
    /// `session/new` requests in flight: their number → the session they are for. The
    /// dispatcher routes the new ACP session as it reads the answer, before the agent's next
    /// line (often an update of that session).
    creating: HashMap<u64, (u64, Weak<S>)>,
    /// ACP session id → the carrier session it serves, for the run of the child that made it.
    routes: HashMap<String, (u64, Weak<S>)>,
    /// Every carrier session, by id (at most `max_sessions`).
    pub(crate) sessions: HashMap<String, Arc<S>>,
    restarts: RestartBudget,
    stopped: bool,
    agent: Option<Implementation>,
    /// Children carrier stopped itself and not yet seen to exit; `stop` waits for them.
    killed: HashMap<u64, Arc<ChildLink>>,
    open_permissions: usize,
    /// The agent's `authMethods` as `initialize` named them, for the error when it refuses
    /// `session/new`.
    auth_methods: String,
}

impl<S: PeerSession> AgentPeer<S> {
    pub(crate) fn new(config: AcpAgentConfig) -> Arc<Self> {
        let restarts = RestartBudget::new(config.process().restarts_per_minute());
        Arc::new(AgentPeer {
            config,
            state: Mutex::new(PeerState {
                link: None,
                generation: 0,
                requests: Requests::new(MAX_REQUESTS_IN_FLIGHT),
                creating: HashMap::new(),
                routes: HashMap::new(),
                sessions: HashMap::new(),
                restarts,
                stopped: false,
                agent: None,
                killed: HashMap::new(),
                open_permissions: 0,
                auth_methods: String::new(),
            }),
            starting: tokio::sync::Mutex::new(()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PeerState<S>> {
        // Critical sections leave the state consistent; a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.config.process().timeout()
    }

    pub(crate) fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout().as_millis()).unwrap_or(u64::MAX)
    }

    /// The running child, if any.
    pub(crate) fn running(&self) -> Option<Arc<ChildLink>> {
        self.lock().link.clone().filter(|l| l.is_running())
    }

    /// The agent's `agentInfo`.
    pub(crate) fn agent_info(&self) -> Option<Implementation> {
        self.lock().agent.clone()
    }

    /// The session `id`, made on first use.
    pub(crate) fn session(self: &Arc<Self>, id: &str) -> Arc<S> {
        let mut st = self.lock();
        st.sessions
            .entry(id.to_owned())
            .or_insert_with(|| S::new(Arc::downgrade(self), id))
            .clone()
    }

    /// Forgets the session `id` (its start was undone).
    pub(crate) fn forget_session(&self, id: &str) {
        self.lock().sessions.remove(id);
    }

    /// Starts a child and `initialize`s it; `Err` when it cannot start or answers wrong.
    pub(crate) async fn launch(self: &Arc<Self>) -> Result<Arc<ChildLink>, AcpAgentError> {
        let generation = {
            let mut st = self.lock();
            if st.stopped {
                return Err(AcpAgentError::Stopped);
            }
            st.generation += 1;
            st.generation
        };
        let (link, lines) =
            ChildLink::spawn(self.config.process(), generation).map_err(|source| {
                AcpAgentError::Spawn {
                    program: self.config.process().program().to_owned(),
                    source,
                }
            })?;
        let link = Arc::new(link);
        tokio::spawn(self.clone().dispatch(link.clone(), lines));
        let result = self.initialize(&link).await;
        let failure = {
            let mut st = self.lock();
            match result {
                Ok(info) if !st.stopped => {
                    tracing::info!(pid = link.pid(), agent = %info.name, version = %info.version, "ACP agent ready");
                    st.agent = Some(info);
                    st.link = Some(link.clone());
                    return Ok(link);
                }
                other => {
                    st.killed.insert(generation, link.clone());
                    link.kill();
                    other.err().unwrap_or(AcpAgentError::Stopped)
                }
            }
        };
        link.wait_exit(self.config.process().grace() + Duration::from_secs(5))
            .await;
        Err(failure)
    }

    /// `initialize`: ACP version 1, carrier's name, no `fs` or `terminal`.
    async fn initialize(&self, link: &ChildLink) -> Result<Implementation, AcpAgentError> {
        let method = "initialize";
        let refused = |reason: String| AcpAgentError::Refused { method, reason };
        let (id, rx) = self
            .request(link, method, &wire::Initialize::carrier())
            .map_err(|e| refused(e.to_string()))?;
        let answer = match self.answer(id, rx).await {
            Outcome::Answered(answer) => answer,
            Outcome::Gone => return Err(AcpAgentError::Exited(link.exit_description().await)),
            Outcome::TimedOut => {
                return Err(AcpAgentError::Timeout {
                    method,
                    ms: self.timeout_ms(),
                })
            }
        };
        let init: Initialized = answer.result().map_err(|e| refused(e.to_string()))?;
        if init.protocol_version != wire::ACP_VERSION {
            return Err(AcpAgentError::Version(init.protocol_version));
        }
        self.lock().agent = init.agent_info.clone();
        let info = init.agent_info.unwrap_or_default();
        self.note_auth_methods(init.auth_methods);
        Ok(info)
    }

    /// The running child, or a restarted one within the restart budget. The `Err` is the
    /// message of the `agent_exited` error.
    pub(crate) async fn ensure_running(self: &Arc<Self>) -> Result<Arc<ChildLink>, String> {
        let _one_at_a_time = self.starting.lock().await;
        {
            let mut st = self.lock();
            if st.stopped {
                return Err("the ACP agent was stopped".into());
            }
            if let Some(link) = st.link.clone().filter(|l| l.is_running()) {
                return Ok(link);
            }
            st.restarts.take(Instant::now())?;
        }
        tracing::info!("restarting the ACP agent");
        self.launch().await.map_err(|e| {
            tracing::warn!(error = %e, "the ACP agent could not be restarted");
            format!("the ACP agent is not running and could not be restarted: {e}")
        })
    }

    /// Writes a request to `link`; its answer arrives on the receiver.
    pub(crate) fn request<P: Serialize>(
        &self,
        link: &ChildLink,
        method: &str,
        params: &P,
    ) -> Result<(u64, oneshot::Receiver<rpc::Response>), SendError> {
        let mut st = self.lock();
        let (n, rx) = st
            .requests
            .open(link.generation())
            .map_err(|e| SendError::InFlight(e.to_string()))?;
        let id = Id::Number(i64::try_from(n).unwrap_or(i64::MAX));
        let sent = match rpc::encode_request(&id, method, params) {
            Ok(message) => send(link, message),
            Err(e) => {
                tracing::error!(method, error = %e, "request to the ACP agent failed to encode");
                Err(SendError::Closed)
            }
        };
        match sent {
            Ok(()) => Ok((n, rx)),
            Err(e) => {
                st.requests.forget(n);
                Err(e)
            }
        }
    }

    /// [`AgentPeer::request`] of `session/new` for `session`, routed as its answer is read.
    pub(crate) fn request_new_session(
        &self,
        link: &ChildLink,
        session: &Arc<S>,
    ) -> Result<(u64, oneshot::Receiver<rpc::Response>), SendError> {
        let cwd = self.config.cwd().to_string_lossy();
        let params = wire::NewSession {
            cwd: &cwd,
            mcp_servers: [],
        };
        let (n, rx) = self.request(link, "session/new", &params)?;
        self.lock()
            .creating
            .insert(n, (link.generation(), Arc::downgrade(session)));
        Ok((n, rx))
    }

    /// Waits for the answer to request `n` within the request timeout.
    pub(crate) async fn answer(&self, n: u64, rx: oneshot::Receiver<rpc::Response>) -> Answered {
        let outcome = answer_within(rx, self.timeout()).await;
        if matches!(outcome, Outcome::TimedOut) {
            let mut st = self.lock();
            st.requests.forget(n);
            st.creating.remove(&n);
        }
        outcome
    }

    /// Forgets request `n` (its waiter gave up).
    pub(crate) fn forget(&self, n: u64) {
        self.lock().requests.forget(n);
    }

    /// Writes a notification to `link` (nothing comes back).
    pub(crate) fn notify<P: Serialize>(&self, link: &ChildLink, method: &str, params: &P) {
        let sent = rpc::encode_notification(method, params)
            .map_err(|_| SendError::Closed)
            .and_then(|message| send(link, message));
        if let Err(e) = sent {
            tracing::warn!(method, error = %e, "notification to the ACP agent not sent");
        }
    }

    /// Answers the agent's request `id`.
    pub(crate) fn respond<R: Serialize>(&self, link: &ChildLink, id: &Id, result: &R) {
        let message = rpc::encode_result(id, result)
            .unwrap_or_else(|_| rpc::encode_error(Some(id), &ErrorObject::internal("no result")));
        if let Err(e) = send(link, message) {
            tracing::debug!(error = %e, "answer to the ACP agent not sent");
        }
    }

    fn refuse(&self, link: &ChildLink, id: Option<&Id>, error: &ErrorObject) {
        if let Err(e) = send(link, rpc::encode_error(id, error)) {
            tracing::debug!(error = %e, "error answer to the ACP agent not sent");
        }
    }

    /// Reads the child's stdout lines until it is gone, then reports the exit.
    async fn dispatch(self: Arc<Self>, link: Arc<ChildLink>, lines: ChildLines) {
        let description = link
            .read_until_exit(lines, |line| self.on_line(&link, line))
            .await;
        self.on_exit(link.generation(), &description);
    }

    fn on_line(self: &Arc<Self>, link: &Arc<ChildLink>, line: &str) {
        match rpc::parse(line) {
            Ok(Message::Response(response)) => self.on_response(response),
            Ok(Message::Notification(note)) if note.method == "session/update" => {
                match note.params::<wire::SessionUpdate>() {
                    Ok(update) => self.on_update(link.generation(), update),
                    Err(e) => tracing::warn!(error = %e, "ACP agent's session/update dropped"),
                }
            }
            Ok(Message::Notification(note)) => {
                tracing::debug!(method = %truncate(&note.method, 64), "ACP agent notification ignored");
            }
            Ok(Message::Request(request)) if request.method == "session/request_permission" => {
                S::on_permission_request(self, link, request);
            }
            Ok(Message::Request(request)) => {
                // fs/*, terminal/*, elicitation/*, …: carrier offers none of them.
                let error = ErrorObject::method_not_found(&request.method);
                self.refuse(link, Some(&request.id), &error);
            }
            Err(refused) => {
                tracing::warn!(pid = link.pid(), error = %refused.error, line = %truncate(line, 200), "ACP agent line dropped");
                if refused.id.is_some() {
                    self.refuse(link, refused.id.as_ref(), &refused.error);
                }
            }
        }
    }

    fn on_response(&self, response: rpc::Response) {
        let Id::Number(n) = response.id else {
            tracing::debug!(id = %response.id, "ACP agent answered no request of carrier's");
            return;
        };
        let Ok(n) = u64::try_from(n) else { return };
        let creating = self.lock().creating.remove(&n);
        if let Some((generation, session)) = creating {
            let created = response.result::<NewSessionResult>().ok();
            if let (Some(session), Some(created)) = (session.upgrade(), created) {
                session.adopt(generation, &created.session_id);
                self.lock()
                    .routes
                    .insert(created.session_id, (generation, Arc::downgrade(&session)));
            }
        }
        if !self.lock().requests.answer(n, response) {
            tracing::debug!(id = n, "ACP agent answered a request no one awaits");
        }
    }

    /// The session the ACP session `id` serves, for the child's run `generation`.
    pub(crate) fn routed(&self, generation: u64, id: &str) -> Option<Arc<S>> {
        let st = self.lock();
        st.routes
            .get(id)
            .filter(|(g, _)| *g == generation)
            .and_then(|(_, s)| s.upgrade())
    }

    fn on_update(&self, generation: u64, update: wire::SessionUpdate) {
        match self.routed(generation, &update.session_id) {
            Some(session) => session.on_update(update.update),
            None => tracing::debug!(
                session = %truncate(&update.session_id, 64),
                "ACP agent update of no session of carrier's dropped"
            ),
        }
    }

    /// Takes one of the open permission slots; `false` when all are taken.
    pub(crate) fn open_permission(&self) -> bool {
        let mut st = self.lock();
        if st.open_permissions >= MAX_OPEN_PERMISSIONS {
            return false;
        }
        st.open_permissions += 1;
        true
    }

    /// Gives a permission slot back.
    pub(crate) fn close_permission(&self) {
        let mut st = self.lock();
        st.open_permissions = st.open_permissions.saturating_sub(1);
    }

    /// The answer to a request the carrier takes no part in, for `refuse`.
    pub(crate) fn refuse_request(&self, link: &ChildLink, id: &Id, error: &ErrorObject) {
        self.refuse(link, Some(id), error);
    }

    fn on_exit(&self, generation: u64, description: &str) {
        let (sessions, expected) = {
            let mut st = self.lock();
            if st
                .link
                .as_ref()
                .is_some_and(|l| l.generation() == generation)
            {
                st.link = None;
            }
            st.requests.forget_generation(generation);
            st.routes.retain(|_, (g, _)| *g != generation);
            let sessions: Vec<Arc<S>> = st.sessions.values().cloned().collect();
            (sessions, st.killed.remove(&generation).is_some())
        };
        if expected {
            tracing::info!(generation, status = %description, "ACP agent stopped");
        } else {
            tracing::warn!(generation, status = %description, "ACP agent exited");
        }
        let message = format!("the ACP agent exited mid-turn ({description})");
        for session in sessions {
            session.child_exited(generation, &message);
        }
    }

    /// Stops the running child (the next turn may start another). Never blocks.
    pub(crate) fn kill_current(&self) {
        let mut st = self.lock();
        if let Some(link) = st.link.take() {
            link.kill();
            st.killed.insert(link.generation(), link);
        }
    }

    /// Stops for good: kills the child, waits until every child it stopped is reaped, and
    /// refuses restarts.
    pub(crate) async fn stop(&self) {
        self.lock().stopped = true;
        self.kill_current();
        // A start in flight sees `stopped` and kills its own child before releasing this.
        let _no_start_in_flight = self.starting.lock().await;
        let stopping: Vec<Arc<ChildLink>> = self.lock().killed.values().cloned().collect();
        let bound = self.config.process().grace() + Duration::from_secs(5);
        for link in stopping {
            link.wait_exit(bound).await;
        }
    }

    /// Remembers the agent's `authMethods`, to name them if `session/new` is refused.
    fn note_auth_methods(&self, methods: Vec<wire::AuthMethod>) {
        let named = methods
            .iter()
            .take(8)
            .map(|m| match &m.name {
                Some(name) => format!("{} ({})", truncate(&m.id, 64), truncate(name, 64)),
                None => truncate(&m.id, 64).to_owned(),
            })
            .collect::<Vec<_>>()
            .join(", ");
        self.lock().auth_methods = named;
    }

    /// The agent's `authMethods` (empty when it named none).
    pub(crate) fn auth_methods(&self) -> String {
        self.lock().auth_methods.clone()
    }
}

/// Queues `message` as one line of the child's stdin.
fn send(link: &ChildLink, message: Bytes) -> Result<(), SendError> {
    link.send_line(rpc::line(message)).map_err(|e| match e {
        SendLineError::Full => SendError::Full,
        SendLineError::Closed => SendError::Closed,
    })
}

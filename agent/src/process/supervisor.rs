//! [`Supervisor`]: the carrier's side of one agent process across its restarts — starting it
//! and its handshake, the restart budget, requests and their answers (each with the timeout),
//! the line dispatcher (a session event goes to the running turn, [`super::turns::deliver`]),
//! and what happens when the child exits. Starting a turn is built on this (`submit.rs`).
//!
//! Lock order: the supervisor's lock is never held while calling into a session hub (a
//! [`TurnSink`](crate::TurnSink)); hubs call the agent only after releasing theirs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::oneshot;

use super::child::{ChildLines, ChildLink, SendLineError};
use super::codec::{self, Answer, ChildFrame};
use super::config::AgentProcessConfig;
use super::error::AgentProcessError;
use super::requests::{self, Requests, TooManyRequests};
use super::restarts::RestartBudget;
use super::turns::{self, ActiveTurn};
use carrier_protocol::envelope::truncate;
use carrier_protocol::error::{EffectState, ErrorCode, ErrorObject};
use carrier_protocol::events::SessionEvent;
use carrier_protocol::ids::TurnId;
use carrier_protocol::methods::AppInfo;

/// Requests awaiting the child's answer at once (each is a line the child has to answer
/// within the request timeout): past it a request fails at once instead of piling up.
pub(crate) const MAX_REQUESTS_IN_FLIGHT: usize = 256;

pub(crate) struct Supervisor {
    pub(crate) config: AgentProcessConfig,
    state: Mutex<State>,
    /// Held while a child starts, so two submits never start two children.
    starting: tokio::sync::Mutex<()>,
}

pub(crate) struct State {
    /// The running, handshaken child.
    pub(crate) link: Option<Arc<ChildLink>>,
    generation: u64,
    requests: Requests<Answer>,
    pub(crate) turn: Option<ActiveTurn>,
    restarts: RestartBudget,
    stopped: bool,
    agent: Option<AppInfo>,
    /// Children the carrier stopped itself and not yet seen to exit; `stop` waits for them.
    killed: HashMap<u64, Arc<ChildLink>>,
}

/// What became of a request to the child.
pub(crate) type Outcome = requests::Outcome<Answer>;

/// A request was not sent to the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    /// Its line could not be queued.
    #[error(transparent)]
    Line(#[from] SendLineError),
    /// Too many requests already await an answer.
    #[error(transparent)]
    InFlight(#[from] TooManyRequests),
}

impl Supervisor {
    pub(crate) fn new(config: AgentProcessConfig) -> Arc<Self> {
        let restarts = RestartBudget::new(config.max_restarts_per_minute);
        Arc::new(Supervisor {
            config,
            state: Mutex::new(State {
                link: None,
                generation: 0,
                requests: Requests::new(MAX_REQUESTS_IN_FLIGHT),
                turn: None,
                restarts,
                stopped: false,
                agent: None,
                killed: HashMap::new(),
            }),
            starting: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Critical sections leave the state consistent; a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running child, if any.
    pub(crate) fn running(&self) -> Option<Arc<ChildLink>> {
        self.lock().link.clone().filter(|l| l.is_running())
    }

    /// The child's `server` from its last handshake.
    pub(crate) fn agent_info(&self) -> Option<AppInfo> {
        self.lock().agent.clone()
    }

    /// The request timeout in milliseconds, for messages.
    pub(crate) fn timeout_ms(&self) -> u128 {
        self.config.request_timeout.as_millis()
    }

    /// Starts a child and completes its handshake (the version rules of docs/protocol.md,
    /// "Versions").
    pub(crate) async fn launch(self: &Arc<Self>) -> Result<Arc<ChildLink>, AgentProcessError> {
        let generation = {
            let mut st = self.lock();
            if st.stopped {
                return Err(AgentProcessError::Stopped);
            }
            st.generation += 1;
            st.generation
        };
        let (link, lines) = ChildLink::spawn(&self.config, generation).map_err(|source| {
            AgentProcessError::Spawn {
                program: self.config.program().to_owned(),
                source,
            }
        })?;
        let link = Arc::new(link);
        tokio::spawn(self.clone().dispatch(link.clone(), lines));
        let hello = super::hello::hello();
        let result = match self.send(&link, "system.handshake", &hello) {
            Ok((id, rx)) => match self.await_answer(id, rx).await {
                Outcome::Answered(Ok(value)) => super::hello::check_hello(value),
                Outcome::Answered(Err(e)) => Err(AgentProcessError::Handshake(format!(
                    "{}: {}",
                    codec::error_code(&e),
                    codec::error_message(&e)
                ))),
                Outcome::Gone => Err(AgentProcessError::Exited(link.exit_description().await)),
                Outcome::TimedOut => Err(AgentProcessError::Timeout(self.timeout_ms() as u64)),
            },
            Err(_) => Err(AgentProcessError::Exited(link.exit_description().await)),
        };
        let failure = {
            let mut st = self.lock();
            match result {
                Ok(info) if !st.stopped => {
                    tracing::info!(pid = link.pid, agent = %info.name, version = %info.version, "agent process ready");
                    st.agent = Some(info);
                    st.link = Some(link.clone());
                    return Ok(link);
                }
                other => {
                    st.killed.insert(generation, link.clone());
                    link.kill();
                    other.err().unwrap_or(AgentProcessError::Stopped)
                }
            }
        };
        // A child that failed its start is gone (reaped) before the failure is reported.
        link.wait_exit(self.config.stop_grace + Duration::from_secs(5))
            .await;
        Err(failure)
    }

    /// The running child, or a restarted one within the restart budget. The `Err` is the
    /// message of the `agent_exited` error.
    pub(crate) async fn ensure_running(self: &Arc<Self>) -> Result<Arc<ChildLink>, String> {
        let _one_at_a_time = self.starting.lock().await;
        {
            let mut st = self.lock();
            if st.stopped {
                return Err("the agent process was stopped".into());
            }
            if let Some(link) = st.link.clone().filter(|l| l.is_running()) {
                return Ok(link);
            }
            st.restarts.take(Instant::now())?;
        }
        tracing::info!("restarting the agent process");
        self.launch().await.map_err(|e| {
            tracing::warn!(error = %e, "the agent process could not be restarted");
            format!("the agent process is not running and could not be restarted: {e}")
        })
    }

    /// Writes a request to `link`; its answer arrives on the receiver.
    pub(crate) fn send<P: Serialize>(
        &self,
        link: &ChildLink,
        method: &str,
        params: &P,
    ) -> Result<(u64, oneshot::Receiver<Answer>), SendError> {
        send_locked(&mut self.lock(), link, method, params)
    }

    /// Waits for the answer to request `id` within the request timeout.
    pub(crate) async fn await_answer(&self, id: u64, rx: oneshot::Receiver<Answer>) -> Outcome {
        let outcome = requests::answer_within(rx, self.config.request_timeout).await;
        if matches!(outcome, Outcome::TimedOut) {
            self.lock().requests.forget(id);
        }
        outcome
    }

    /// Sends a request whose answer only matters when it fails: the answer (or its timeout)
    /// is awaited on a task, and `on_failure` runs with the failure's description.
    pub(crate) fn send_detached<P: Serialize>(
        self: &Arc<Self>,
        link: &ChildLink,
        method: &'static str,
        params: &P,
        on_failure: impl FnOnce(&Arc<Self>, Outcome) + Send + 'static,
    ) {
        match self.send(link, method, params) {
            Ok((id, rx)) => {
                let sup = self.clone();
                tokio::spawn(async move {
                    match sup.await_answer(id, rx).await {
                        Outcome::Answered(Ok(_)) => {}
                        failed => on_failure(&sup, failed),
                    }
                });
            }
            Err(e) => tracing::warn!(method, error = %e, "request to the agent process not sent"),
        }
    }

    /// Reads the child's stdout lines until it is gone, then reports the exit.
    async fn dispatch(self: Arc<Self>, link: Arc<ChildLink>, lines: ChildLines) {
        let description = link
            .read_until_exit(lines, |line| self.on_line(&link, line))
            .await;
        self.on_exit(link.generation, &description);
    }

    fn on_line(self: &Arc<Self>, link: &ChildLink, line: &str) {
        match codec::classify(line) {
            ChildFrame::Response { id, answer } => {
                let ours = request_number(&id);
                if !ours.is_some_and(|n| self.lock().requests.answer(n, answer)) {
                    tracing::debug!(id = %truncate(&id, 64), "agent process answered an unknown request")
                }
            }
            ChildFrame::Event(event) => self.route_event(link.generation, event),
            ChildFrame::Request { id, method } => {
                let error = ErrorObject::new(
                    ErrorCode::MethodNotFound,
                    format!("the carrier serves no requests ({})", truncate(&method, 64)),
                )
                .effect(EffectState::None);
                let _ = link.send_line(codec::encode_error_line(&id, &error));
            }
            ChildFrame::Invalid(why) => {
                tracing::warn!(pid = link.pid, reason = %why, line = %truncate(line, 200), "agent process line dropped");
            }
        }
    }

    /// Forgets the running turn if it is `turn_id`; returns it.
    pub(crate) fn take_turn(&self, turn_id: &TurnId) -> Option<ActiveTurn> {
        self.lock().turn.take_if(|t| t.turn_id == *turn_id)
    }

    /// A validated session event from child `generation`, for the turn that child works on.
    fn route_event(self: &Arc<Self>, generation: u64, event: SessionEvent) {
        let current = {
            let st = self.lock();
            st.turn
                .as_ref()
                .filter(|t| t.generation == Some(generation))
                .map(|t| (t.turn_id.clone(), t.sink.clone()))
        };
        let Some((turn_id, sink)) = current else {
            tracing::info!(
                event = event.name(),
                "agent process event dropped: no turn is running"
            );
            return;
        };
        let asked = turns::deliver(&turn_id, &sink, event, || {
            self.take_turn(&turn_id);
        });
        if let Some(pending) = asked {
            self.forward_decision(turn_id, pending);
        }
    }

    fn on_exit(&self, generation: u64, description: &str) {
        let (turn, expected) = {
            let mut st = self.lock();
            if st.link.as_ref().is_some_and(|l| l.generation == generation) {
                st.link = None;
            }
            st.requests.forget_generation(generation);
            let turn = st.turn.take_if(|t| t.generation == Some(generation));
            (turn, st.killed.remove(&generation).is_some())
        };
        if expected {
            tracing::info!(generation, status = %description, "agent process stopped");
        } else {
            tracing::warn!(generation, status = %description, "agent process exited");
        }
        if let Some(turn) = turn {
            let message = format!("the agent process exited mid-turn ({description})");
            let _ = turn.sink.fail("agent_exited", &message);
        }
    }

    /// Stops the running child (the next submit may start another). Never blocks.
    pub(crate) fn kill_current(&self) {
        let mut st = self.lock();
        st.turn = None;
        if let Some(link) = st.link.take() {
            link.kill();
            st.killed.insert(link.generation, link);
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
        let bound = self.config.stop_grace + Duration::from_secs(5);
        for link in stopping {
            link.wait_exit(bound).await;
        }
    }
}

/// [`Supervisor::send`] with the lock already held. The request's wire id is `c` and its
/// number.
pub(crate) fn send_locked<P: Serialize>(
    st: &mut State,
    link: &ChildLink,
    method: &str,
    params: &P,
) -> Result<(u64, oneshot::Receiver<Answer>), SendError> {
    let (n, rx) = st.requests.open(link.generation)?;
    let sent = codec::encode_request(&format!("c{n}"), method, params)
        .map_err(|e| {
            tracing::error!(method, error = %e, "request to the agent process failed to encode");
            SendLineError::Closed
        })
        .and_then(|line| link.send_line(line));
    if let Err(e) = sent {
        st.requests.forget(n);
        return Err(e.into());
    }
    Ok((n, rx))
}

/// The number of the request a child's answer names (`c7` → 7).
fn request_number(id: &str) -> Option<u64> {
    id.strip_prefix('c')?.parse().ok()
}

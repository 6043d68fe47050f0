//! [`Supervisor`]: the carrier's side of one agent process across its restarts — starting it
//! and its handshake, the restart budget, requests and their answers (each with the timeout),
//! the line dispatcher (a session event goes to the running turn, [`super::turns::deliver`]),
//! and what happens when the child exits. Starting a turn is built on this (`submit.rs`).
//!
//! Lock order: the supervisor's lock is never held while calling into a session hub (a
//! [`TurnSink`](crate::TurnSink)); hubs call the agent only after releasing theirs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::child::{self, ChildLink, SendLineError};
use super::codec::{self, Answer, ChildFrame};
use super::config::AgentProcessConfig;
use super::error::AgentProcessError;
use super::turns::{self, ActiveTurn};
use carrier_protocol::envelope::truncate;
use carrier_protocol::error::{EffectState, ErrorCode, ErrorObject};
use carrier_protocol::events::SessionEvent;
use carrier_protocol::ids::TurnId;
use carrier_protocol::methods::AppInfo;

/// The window of the restart budget.
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// After the child exits, how long its last stdout lines may still be read.
const EXIT_DRAIN: Duration = Duration::from_millis(500);

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
    next_request: u64,
    pending: HashMap<String, Pending>,
    pub(crate) turn: Option<ActiveTurn>,
    restarts: VecDeque<Instant>,
    exhausted: bool,
    stopped: bool,
    agent: Option<AppInfo>,
    /// Children the carrier stopped itself and not yet seen to exit; `stop` waits for them.
    killed: HashMap<u64, Arc<ChildLink>>,
}

struct Pending {
    generation: u64,
    answer: oneshot::Sender<Answer>,
}

/// What became of a request to the child.
pub(crate) enum Outcome {
    /// The child answered.
    Answered(Answer),
    /// The child exited before answering.
    Gone,
    /// No answer within the request timeout.
    TimedOut,
}

/// A request could not be written to the child.
pub(crate) type SendError = SendLineError;

impl Supervisor {
    pub(crate) fn new(config: AgentProcessConfig) -> Arc<Self> {
        Arc::new(Supervisor {
            config,
            state: Mutex::new(State {
                link: None,
                generation: 0,
                next_request: 0,
                pending: HashMap::new(),
                turn: None,
                restarts: VecDeque::new(),
                exhausted: false,
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
        let (link, lines) =
            child::spawn(&self.config, generation).map_err(|source| AgentProcessError::Spawn {
                program: self.config.program().to_owned(),
                source,
            })?;
        let link = Arc::new(link);
        tokio::spawn(self.clone().dispatch(link.clone(), lines));
        let hello = super::hello::hello();
        let result = match self.send(&link, "system.handshake", &hello) {
            Ok((id, rx)) => match self.await_answer(&id, rx).await {
                Outcome::Answered(Ok(value)) => super::hello::check_hello(value),
                Outcome::Answered(Err(e)) => Err(AgentProcessError::Handshake(format!(
                    "{}: {}",
                    codec::error_code(&e),
                    codec::error_message(&e)
                ))),
                Outcome::Gone => Err(AgentProcessError::Exited(exit_of(&link).await)),
                Outcome::TimedOut => Err(AgentProcessError::Timeout(self.timeout_ms() as u64)),
            },
            Err(_) => Err(AgentProcessError::Exited(exit_of(&link).await)),
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
            let now = Instant::now();
            while st
                .restarts
                .front()
                .is_some_and(|t| now.duration_since(*t) >= RESTART_WINDOW)
            {
                st.restarts.pop_front();
            }
            if st.exhausted || st.restarts.len() >= self.config.max_restarts_per_minute {
                st.exhausted = true;
                return Err(format!(
                    "the agent process exited and has been restarted {} times within a minute; \
                     it is not restarted again until the carrier restarts",
                    self.config.max_restarts_per_minute
                ));
            }
            st.restarts.push_back(now);
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
    ) -> Result<(String, oneshot::Receiver<Answer>), SendError> {
        send_locked(&mut self.lock(), link, method, params)
    }

    /// Waits for the answer to `id` within the request timeout.
    pub(crate) async fn await_answer(&self, id: &str, rx: oneshot::Receiver<Answer>) -> Outcome {
        match tokio::time::timeout(self.config.request_timeout, rx).await {
            Ok(Ok(answer)) => Outcome::Answered(answer),
            Ok(Err(_)) => Outcome::Gone,
            Err(_) => {
                self.lock().pending.remove(id);
                Outcome::TimedOut
            }
        }
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
                    match sup.await_answer(&id, rx).await {
                        Outcome::Answered(Ok(_)) => {}
                        failed => on_failure(&sup, failed),
                    }
                });
            }
            Err(e) => tracing::warn!(method, error = %e, "request to the agent process not sent"),
        }
    }

    /// Reads the child's stdout lines until EOF (or shortly after it exits), then reports the
    /// exit. The loop ends with the child's output.
    async fn dispatch(self: Arc<Self>, link: Arc<ChildLink>, mut lines: mpsc::Receiver<String>) {
        let mut exited = link.exit_watch();
        let drain = tokio::time::sleep(Duration::MAX);
        tokio::pin!(drain);
        let mut exit_seen = false;
        loop {
            tokio::select! {
                line = lines.recv() => match line {
                    Some(line) => self.on_line(&link, &line),
                    None => break,
                },
                changed = exited.changed(), if !exit_seen => {
                    exit_seen = true;
                    // A grandchild may hold stdout open: read what is left, briefly.
                    drain.as_mut().reset(tokio::time::Instant::now() + EXIT_DRAIN);
                    let _ = changed;
                }
                _ = &mut drain, if exit_seen => break,
            }
        }
        // EOF with the child alive means it can no longer talk: stop it.
        link.kill();
        let description = exit_of(&link).await;
        self.on_exit(link.generation, &description);
    }

    fn on_line(self: &Arc<Self>, link: &ChildLink, line: &str) {
        match codec::classify(line) {
            ChildFrame::Response { id, answer } => match self.lock().pending.remove(&id) {
                Some(pending) => {
                    let _ = pending.answer.send(answer);
                }
                None => {
                    tracing::debug!(id = %truncate(&id, 64), "agent process answered an unknown request")
                }
            },
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
            st.pending.retain(|_, p| p.generation != generation);
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

/// [`Supervisor::send`] with the lock already held.
pub(crate) fn send_locked<P: Serialize>(
    st: &mut State,
    link: &ChildLink,
    method: &str,
    params: &P,
) -> Result<(String, oneshot::Receiver<Answer>), SendError> {
    st.next_request += 1;
    let id = format!("c{}", st.next_request);
    let line = codec::encode_request(&id, method, params).map_err(|e| {
        tracing::error!(method, error = %e, "request to the agent process failed to encode");
        SendLineError::Closed
    })?;
    link.send_line(line)?;
    let (tx, rx) = oneshot::channel();
    st.pending.insert(
        id.clone(),
        Pending {
            generation: link.generation,
            answer: tx,
        },
    );
    Ok((id, rx))
}

/// The child's exit description, waiting briefly for it (the child is being killed or has
/// closed its output).
async fn exit_of(link: &ChildLink) -> String {
    link.wait_exit(Duration::from_secs(5)).await;
    link.exit_watch()
        .borrow()
        .clone()
        .unwrap_or_else(|| "it closed its output".into())
}

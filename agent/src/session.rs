//! [`ProtocolSession`]: the agent behind one session, as the carrier drives it.
//!
//! One method is required, [`ProtocolSession::start_turn`]: the agent gets the prompt and the
//! turn's [`TurnSink`], on which it streams output, awaits permission decisions
//! ([`TurnSink::ask_permission`]) and awaits the turn's cancellation
//! ([`TurnSink::cancelled`]), so an agent is one async task per turn with no bookkeeping of
//! request or turn ids. The other callbacks have defaults. Everything else is the carrier's
//! job, not the agent's: choosing `turn_id`s and request ids, numbering events (`seq`), the
//! resume ring, fan-out to connections, history, `busy` and `not_found` answers, emitting
//! `session.permission_resolved`, and the driver identity.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

use super::outlet::SessionOutlet;
#[cfg(doc)]
use super::turn_sink::PendingPermission;
use super::turn_sink::TurnSink;
use carrier_protocol::events::DriverInfo;
use carrier_protocol::methods::Decision;

/// A failure of the host or its agent. Reaches clients as `internal` with
/// `effect_state: "unknown"`, or as a `session.error` event during a turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    /// What went wrong, for the client and the log.
    pub message: String,
}

impl HostError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        HostError {
            message: message.into(),
        }
    }
}

/// Everything an agent needs to run one turn (destructure it with `..`: fields may be added).
#[derive(Debug)]
#[non_exhaustive]
pub struct TurnStart {
    /// Chosen by the carrier, unique within the session.
    pub turn_id: String,
    /// The user prompt.
    pub prompt: String,
    /// The client's `options`, passed through untouched.
    pub options: Option<Map<String, Value>>,
    /// The host-configured identity of the listener the prompt came through.
    pub driver: DriverInfo,
    /// Where the turn's output goes.
    pub sink: TurnSink,
}

/// Why an agent could not answer a read it chose to serve itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentCallError {
    /// The agent does not implement the method after all (an agent process answered
    /// `method_not_found`): the carrier answers from its own record.
    #[error("the agent does not implement this method")]
    MethodNotFound,
    /// The agent failed or did not answer in time: the client gets `internal` with
    /// `effect_state: "unknown"`.
    #[error("{0}")]
    Failed(String),
}

/// The future answer of an agent to a forwarded read: the raw JSON result, which the carrier
/// checks against the method's result type before sending it (a result that fails is never
/// sent; the client gets `protocol_error` with `effect_state: "unknown"`).
pub type AgentAnswer = Pin<Box<dyn Future<Output = Result<Value, AgentCallError>> + Send>>;

/// The agent of one session.
///
/// Calls come from connection tasks and must not block: an agent spawns its work (or forwards
/// it to a process) and returns. The carrier never calls `start_turn` while a turn of the same
/// session is running.
///
/// ```no_run
/// use carrier_agent::{HostError, ProtocolSession, TurnStart};
///
/// /// Streams the prompt back, word by word.
/// struct Echo;
///
/// impl ProtocolSession for Echo {
///     fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
///         let TurnStart { prompt, sink, .. } = turn;
///         tokio::spawn(async move {
///             let work = async {
///                 for word in prompt.split_inclusive(' ') {
///                     sink.delta(word)?;
///                 }
///                 sink.complete(&prompt)
///             };
///             // An abort (or the host stopping) ends the turn: stop working on it.
///             tokio::select! {
///                 _ = work => {}
///                 () = sink.cancelled() => {}
///             }
///         });
///         Ok(())
///     }
/// }
/// ```
pub trait ProtocolSession: Send + Sync + 'static {
    /// Starts a turn. Output, permission prompts and the end of the turn go through
    /// `turn.sink`; the turn runs until [`TurnSink::complete`] or [`TurnSink::finish`] (or
    /// until the carrier ends it on abort, which resolves [`TurnSink::cancelled`]). An `Err`
    /// ends the turn at once with `session.error` and an aborted `session.turn_completed`.
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError>;

    /// The carrier has ended `turn_id` because a client aborted it or the host is stopping
    /// (the aborted `turn_completed` is already sent and the turn's
    /// [`TurnSink::cancelled`] has resolved). Called before any later turn starts, so an agent
    /// that forwards turns elsewhere can pass the abort on in order. Default: nothing (an
    /// agent awaiting `cancelled()` needs nothing more).
    fn abort_turn(&self, _turn_id: &str) {}

    /// A client answered the permission prompt `request_id` of `turn_id` (the carrier has
    /// already emitted `session.permission_resolved` and resolved the prompt's
    /// [`PendingPermission`]). Default: nothing (an agent awaiting the prompt needs nothing
    /// more).
    fn permission_decided(&self, _turn_id: &str, _request_id: &str, _decision: Decision) {}

    /// Serves `session.history {limit}` itself (e.g. forwarded to an agent process). The
    /// default, `None`, lets the carrier answer from its own record of prompts and replies.
    fn history(&self, _limit: Option<u32>) -> Option<AgentAnswer> {
        None
    }

    /// Serves `session.status` itself. The default, `None`, lets the carrier answer from the
    /// turn state it owns.
    fn status(&self) -> Option<AgentAnswer> {
        None
    }

    /// The carrier opened this agent's session: `outlet` reports what the agent says outside
    /// its turns (see [`SessionOutlet`]). Called once, before any turn, under the lock of the
    /// carrier's session table: keep the outlet and return (no blocking, no call into the
    /// carrier). Default: nothing.
    fn attached(&self, _outlet: SessionOutlet) {}

    /// The host is stopping: release tasks and processes. Called at most once per stop.
    fn shutdown(&self) {}
}

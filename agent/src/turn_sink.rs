//! [`TurnSink`]: how an agent reports the output of one turn to the carrier, awaits its
//! permission prompts ([`PendingPermission`]) and its cancellation; and [`TurnOutput`], what
//! the sink reports into (the session hub implements it, so the sink knows nothing of hubs).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::sync::{oneshot, watch};

use carrier_protocol::events::{PermissionOption, RawObject};
use carrier_protocol::ids::{RequestId, TurnId};
use carrier_protocol::methods::Decision;

/// The turn this sink belongs to has ended (completed, aborted by a client, or the session is
/// gone): the output was not recorded and the agent should stop working on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the turn has ended")]
pub struct TurnEnded;

/// The reply an agent ends its turn with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completion<'a> {
    /// The whole reply, as the agent has it (the carrier cuts it to the cap).
    pub(crate) text: &'a str,
    /// The agent already cut it.
    pub(crate) truncated: bool,
}

/// How a turn ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ending<'a> {
    /// The reply; `None`: what was streamed.
    pub(crate) text: Option<Completion<'a>>,
    pub(crate) aborted: bool,
    /// Why the agent ended it, in its own words (an ACP agent's `stopReason`).
    pub(crate) stop_reason: Option<&'a str>,
}

impl Ending<'_> {
    /// The carrier ends the turn aborted with what was streamed (an abort, a failure).
    pub(crate) fn carrier_aborted() -> Self {
        Ending {
            text: None,
            aborted: true,
            stop_reason: None,
        }
    }
}

/// A client's answer to a permission prompt, in full: the decision, and the option it named
/// when it answered an ACP agent's prompt with one of its `options` (`option_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionChoice {
    /// `allow` or `deny` (for a named option, what its kind means).
    pub decision: Decision,
    /// The `optionId` the client named, if it named one.
    pub option_id: Option<String>,
}

/// A permission prompt as the agent asks it.
#[derive(Debug)]
pub(crate) struct Ask<'a> {
    /// The agent's own id for it; `None`: the session allocates one.
    pub(crate) request_id: Option<&'a str>,
    pub(crate) tool: &'a str,
    pub(crate) input: Value,
    /// The choices an ACP agent offers.
    pub(crate) options: Option<Vec<PermissionOption>>,
}

/// What a [`TurnSink`] reports into: the session that runs the turn. Each call names the
/// turn, and is refused with [`TurnEnded`] unless that turn is the session's running one.
pub(crate) trait TurnOutput: Send + Sync {
    /// The next piece of the reply.
    fn turn_delta(&self, turn_id: &TurnId, delta: &str) -> Result<(), TurnEnded>;

    /// A permission prompt of the turn, under the agent's request id or (when `None`) under
    /// an id the session allocates; the answer arrives on the receiver, which closes when the
    /// turn ends first.
    fn turn_ask_permission(
        &self,
        turn_id: &TurnId,
        ask: Ask<'_>,
    ) -> Result<(RequestId, oneshot::Receiver<PermissionChoice>), TurnEnded>;

    /// `session.agent_update` of the turn.
    fn turn_agent_update(&self, turn_id: &TurnId, update: RawObject) -> Result<(), TurnEnded>;

    /// `session.error` of the turn.
    fn turn_error(&self, turn_id: &TurnId, code: &str, message: &str) -> Result<(), TurnEnded>;

    /// `session.error` without a `turn_id`, while the turn runs.
    fn session_error(&self, turn_id: &TurnId, code: &str, message: &str) -> Result<(), TurnEnded>;

    /// Ends the turn.
    fn turn_finish(&self, turn_id: &TurnId, ending: Ending<'_>) -> Result<(), TurnEnded>;

    /// Whether the turn is the session's running one.
    fn is_current_turn(&self, turn_id: &TurnId) -> bool;
}

/// The turn's end, as its sinks watch it: the session holds the sender while the turn runs
/// and drops it when the turn ends; nothing is ever sent on it.
pub(crate) type TurnLife = watch::Receiver<()>;

/// The turn's end, as the session holds it (see [`TurnLife`]).
pub(crate) fn turn_life() -> (watch::Sender<()>, TurnLife) {
    watch::channel(())
}

/// The output side of one turn, and what an agent awaits during it. Cheap to clone (each
/// clone of a turn's sink is the same turn).
///
/// Every call is checked against the session's current turn, so output of a turn the carrier
/// already ended (e.g. on abort) is refused with [`TurnEnded`] instead of leaking into a later
/// turn. An agent written as one async task needs no bookkeeping of its own:
///
/// ```no_run
/// use carrier_agent::{Decision, TurnEnded, TurnSink};
///
/// async fn turn(sink: TurnSink, prompt: String) -> Result<(), TurnEnded> {
///     if prompt.contains("rm") {
///         let input = serde_json::json!({ "command": prompt });
///         if sink.ask_permission("shell", input).await? == Decision::Deny {
///             return sink.complete("denied");
///         }
///     }
///     sink.delta(&prompt)?;
///     sink.complete(&prompt)
/// }
///
/// // Run it until it finishes or a client aborts the turn (the carrier has then already
/// // sent the aborted `turn_completed`):
/// async fn run(sink: TurnSink, prompt: String) {
///     tokio::select! {
///         _ = turn(sink.clone(), prompt) => {}
///         () = sink.cancelled() => {}
///     }
/// }
/// ```
#[derive(Clone)]
pub struct TurnSink {
    /// Weak, so a sink an agent keeps does not keep its session alive.
    output: Weak<dyn TurnOutput>,
    /// Shared, so a clone allocates nothing.
    turn_id: Arc<TurnId>,
    /// Closes when the turn ends.
    life: TurnLife,
}

impl std::fmt::Debug for TurnSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnSink")
            .field("turn_id", &self.turn_id.as_str())
            .finish()
    }
}

impl TurnSink {
    pub(crate) fn new(output: Weak<dyn TurnOutput>, turn_id: TurnId, life: TurnLife) -> Self {
        TurnSink {
            output,
            turn_id: Arc::new(turn_id),
            life,
        }
    }

    /// The turn.
    pub fn turn_id(&self) -> &str {
        self.turn_id.as_str()
    }

    fn output(&self) -> Result<Arc<dyn TurnOutput>, TurnEnded> {
        self.output.upgrade().ok_or(TurnEnded)
    }

    /// Streams the next piece of the reply (`session.text_delta`; a delta longer than
    /// `max_reply_bytes` is sent as several, split at character boundaries).
    pub fn delta(&self, delta: &str) -> Result<(), TurnEnded> {
        self.output()?.turn_delta(&self.turn_id, delta)
    }

    /// Asks the user to allow `tool` with `input`: the carrier picks the request id, sends
    /// `session.permission_request` at once (so it keeps its place among the turn's output)
    /// and routes the client's answer to the returned future, which yields the [`Decision`],
    /// or [`TurnEnded`] when the turn ends first (aborted, or the host stopping).
    pub fn ask_permission(&self, tool: &str, input: Value) -> PendingPermission {
        self.ask(Ask {
            request_id: None,
            tool,
            input,
            options: None,
        })
    }

    /// [`TurnSink::ask_permission`] under the agent's own `request_id` (an agent that forwards
    /// prompts from elsewhere keeps its ids). Asking twice under one pending id is one prompt
    /// for the client; one answer resolves both futures.
    pub fn ask_permission_as(
        &self,
        request_id: &str,
        tool: &str,
        input: Value,
    ) -> PendingPermission {
        self.ask(Ask {
            request_id: Some(request_id),
            tool,
            input,
            options: None,
        })
    }

    /// [`TurnSink::ask_permission`] offering `options` (an ACP agent's choices; protocol
    /// 1.2), under the agent's own `request_id` when given. The event carries them; a client
    /// answers with one of their ids or with `allow`/`deny`
    /// ([`PendingPermission::choice`] tells which).
    pub fn ask_permission_offering(
        &self,
        request_id: Option<&str>,
        tool: &str,
        input: Value,
        options: Vec<PermissionOption>,
    ) -> PendingPermission {
        self.ask(Ask {
            request_id,
            tool,
            input,
            options: Some(options),
        })
    }

    fn ask(&self, ask: Ask<'_>) -> PendingPermission {
        let asked = self
            .output()
            .and_then(|o| o.turn_ask_permission(&self.turn_id, ask));
        match asked {
            Ok((request_id, answer)) => PendingPermission {
                request_id: Some(request_id),
                answer: Some(answer),
            },
            Err(TurnEnded) => PendingPermission {
                request_id: None,
                answer: None,
            },
        }
    }

    /// Resolves when the turn is over for the agent: a client aborted it, the host is
    /// stopping, the session is gone, or the turn ended otherwise (completed). After that the
    /// sink refuses output with [`TurnEnded`]. Race the turn's work against it (e.g. in
    /// `tokio::select!`) to stop working on an aborted turn.
    pub async fn cancelled(&self) {
        let mut life = self.life.clone();
        // Nothing is ever sent: the only change is the session dropping the sender.
        let _ = life.changed().await;
    }

    /// Reports what the agent does beside its text — an ACP agent's tool call, plan, … — as
    /// `session.agent_update {turn_id, update}` (protocol 1.2), `update` carried byte for byte.
    /// Connections whose protocol predates `agent_updates` are not sent it; the session's
    /// history keeps it for foreign wires that replay one (an ACP client's `session/load`).
    pub fn agent_update(&self, update: RawObject) -> Result<(), TurnEnded> {
        self.output()?.turn_agent_update(&self.turn_id, update)
    }

    /// Reports an error without ending the turn (`session.error`).
    pub fn error(&self, code: &str, message: &str) -> Result<(), TurnEnded> {
        self.output()?.turn_error(&self.turn_id, code, message)
    }

    /// Reports an error of the session that belongs to no turn (`session.error` without
    /// `turn_id`). Accepted only while this turn runs.
    pub fn session_error(&self, code: &str, message: &str) -> Result<(), TurnEnded> {
        self.output()?.session_error(&self.turn_id, code, message)
    }

    /// Ends the turn normally with the full reply (`session.turn_completed`, `aborted: false`);
    /// the carrier keeps at most `max_reply_bytes` of it.
    pub fn complete(&self, text: &str) -> Result<(), TurnEnded> {
        self.finish(text, false)
    }

    /// Ends the turn with the given reply, aborted or not. The carrier keeps at most
    /// `max_reply_bytes` of it (the rest is cut and the turn marked `truncated`).
    pub fn finish(&self, text: &str, aborted: bool) -> Result<(), TurnEnded> {
        self.end(text, aborted, false)
    }

    /// Like [`TurnSink::finish`], for a reply the agent itself had to cut (e.g. to fit a
    /// line): the turn is marked `truncated` whatever its length.
    pub fn finish_truncated(&self, text: &str, aborted: bool) -> Result<(), TurnEnded> {
        self.end(text, aborted, true)
    }

    fn end(&self, text: &str, aborted: bool, truncated: bool) -> Result<(), TurnEnded> {
        let ending = Ending {
            text: Some(Completion { text, truncated }),
            aborted,
            stop_reason: None,
        };
        self.output()?.turn_finish(&self.turn_id, ending)
    }

    /// Ends the turn with what was streamed as its reply, noting why the agent stopped
    /// (`turn_completed.stop_reason`; an ACP agent's `stopReason`).
    pub fn finish_streamed(&self, stop_reason: &str, aborted: bool) -> Result<(), TurnEnded> {
        let ending = Ending {
            text: None,
            aborted,
            stop_reason: Some(stop_reason),
        };
        self.output()?.turn_finish(&self.turn_id, ending)
    }

    /// Ends the turn on a failure: `session.error {code, message}`, then an aborted
    /// `session.turn_completed` with what was streamed so far.
    pub fn fail(&self, code: &str, message: &str) -> Result<(), TurnEnded> {
        let output = self.output()?;
        output.turn_error(&self.turn_id, code, message)?;
        output.turn_finish(&self.turn_id, Ending::carrier_aborted())
    }

    /// Whether the turn is still the session's running turn.
    pub fn is_current(&self) -> bool {
        self.output()
            .is_ok_and(|o| o.is_current_turn(&self.turn_id))
    }
}

/// A permission prompt the carrier has sent, waiting for the client's answer (see
/// [`TurnSink::ask_permission`]). Resolves to the [`Decision`], or to [`TurnEnded`] when the
/// turn ends before an answer comes (or had ended when asked). Dropping it withdraws nothing:
/// the prompt stays pending for clients until answered or the turn ends.
#[derive(Debug)]
#[must_use = "the decision arrives by awaiting this"]
pub struct PendingPermission {
    /// `None` when the prompt was never sent.
    request_id: Option<RequestId>,
    answer: Option<oneshot::Receiver<PermissionChoice>>,
}

impl PendingPermission {
    /// The prompt's `request_id` as clients see it; `None` when the turn had already ended
    /// and nothing was sent.
    pub fn request_id(&self) -> Option<&str> {
        self.request_id.as_ref().map(RequestId::as_str)
    }

    /// The answer in full: the decision, and the option the client named, if any (see
    /// [`TurnSink::ask_permission_offering`]).
    pub async fn choice(self) -> Result<PermissionChoice, TurnEnded> {
        match self.answer {
            None => Err(TurnEnded),
            Some(answer) => answer.await.map_err(|_| TurnEnded),
        }
    }
}

impl Future for PendingPermission {
    type Output = Result<Decision, TurnEnded>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.answer.as_mut() {
            None => Poll::Ready(Err(TurnEnded)),
            Some(answer) => Pin::new(answer)
                .poll(cx)
                .map(|r| r.map(|choice| choice.decision).map_err(|_| TurnEnded)),
        }
    }
}

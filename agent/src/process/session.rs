//! [`ProcessSession`]: the [`ProtocolSession`] of an agent process — each call of the hub
//! becomes a request on the child's stdin.
//!
//! - `start_turn` → `session.submit {prompt, turn_id, driver, options?}` (restarting the child
//!   first when it is not running);
//! - `abort_turn` → `session.abort {turn_id}` (this callback rather than the sink's
//!   `cancelled()`, so the abort reaches the child before any later submit does); a child's
//!   permission prompt is asked on the turn's sink under the child's id, and its answer →
//!   `session.permission.respond {request_id, decision}`
//!   ([`Supervisor::forward_decision`]; not once the child was told to abort the turn). The
//!   hub has already answered the client and emitted the events these cause, so only a
//!   failure matters: a child that does not answer a permission answer in time ends the turn
//!   with `agent_timeout`;
//! - `history` / `status` are forwarded reads: the child's answer (the carrier validates it
//!   against the method's result type), or the carrier's own record when the child answers
//!   `method_not_found`, exits first, or is not running, or `internal`
//!   (`effect_state: "unknown"`) when it does not answer in time or answers another error.
//!   The child cannot know which id the host gave its session, so the carrier puts its own
//!   `session_id` into a `session.status` answer.

use std::sync::Arc;

use serde_json::Value;

use super::codec::{self, AbortToChild, HistoryToChild, PermissionToChild};
use super::supervisor::{Outcome, Supervisor};
use crate::session::{AgentAnswer, AgentCallError, HostError, ProtocolSession, TurnStart};
use crate::turn_sink::PendingPermission;
use carrier_protocol::ids::{RequestId, SessionId, TurnId};
use carrier_protocol::methods::Empty;

/// The session of an agent process (see the module docs).
pub(crate) struct ProcessSession {
    pub(crate) sup: Arc<Supervisor>,
    /// The id the host gave this session, for `session.status` answers.
    pub(crate) session_id: SessionId,
}

impl ProtocolSession for ProcessSession {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(HostError::new("the agent process needs a tokio runtime"));
        }
        self.sup.start_turn(turn);
        Ok(())
    }

    fn abort_turn(&self, turn_id: &str) {
        let Some(turn) = self.sup.take_turn(&TurnId::from(turn_id)) else {
            return;
        };
        let Some(link) = self.sup.running() else {
            return;
        };
        // A turn still waiting for its child to start was never seen by it.
        if turn.generation != Some(link.generation) {
            return;
        }
        let params = AbortToChild {
            turn_id: &turn.turn_id,
        };
        self.sup
            .send_detached(&link, "session.abort", &params, |sup, outcome| {
                if matches!(outcome, Outcome::TimedOut) {
                    tracing::warn!(
                        timeout_ms = sup.timeout_ms() as u64,
                        "the agent process did not answer session.abort"
                    );
                }
            });
    }

    fn history(&self, limit: Option<u32>) -> Option<AgentAnswer> {
        Some(read(
            &self.sup,
            "session.history",
            HistoryToChild { limit },
            |v| v,
        ))
    }

    fn status(&self) -> Option<AgentAnswer> {
        let session_id = Value::from(self.session_id.as_str());
        Some(read(&self.sup, "session.status", Empty {}, move |mut v| {
            if let Some(status) = v.as_object_mut() {
                status.insert("session_id".into(), session_id);
            }
            v
        }))
    }

    fn shutdown(&self) {
        self.sup.kill_current();
    }
}

impl Supervisor {
    /// Passes the client's answer to the child's permission prompt `pending` (of `turn_id`)
    /// back to the child, on a task that ends with the answer or the turn.
    pub(crate) fn forward_decision(self: &Arc<Self>, turn_id: TurnId, pending: PendingPermission) {
        let sup = self.clone();
        tokio::spawn(async move {
            let request_id = pending.request_id().map(RequestId::from);
            let (Some(request_id), Ok(choice)) = (request_id, pending.choice().await) else {
                return;
            };
            // A turn the child was already told to abort (a client that answered, then aborted
            // at once) needs no answer.
            if sup
                .lock()
                .turn
                .as_ref()
                .is_none_or(|t| t.turn_id != turn_id)
            {
                return;
            }
            let Some(link) = sup.running() else {
                return;
            };
            let params = PermissionToChild {
                request_id: &request_id,
                decision: choice.decision,
                option_id: choice.option_id.as_deref(),
            };
            sup.send_detached(
                &link,
                "session.permission.respond",
                &params,
                move |sup, outcome| match outcome {
                    Outcome::TimedOut => {
                        if let Some(turn) = sup.take_turn(&turn_id) {
                            let message = format!(
                                "the agent process did not answer session.permission.respond \
                                 within {} ms",
                                sup.timeout_ms()
                            );
                            let _ = turn.sink.fail("agent_timeout", &message);
                        }
                    }
                    Outcome::Answered(Err(e)) => tracing::warn!(
                        code = codec::error_code(&e),
                        message = codec::error_message(&e),
                        "the agent process refused a permission answer"
                    ),
                    Outcome::Answered(Ok(_)) | Outcome::Gone => {}
                },
            );
        });
    }
}

/// Forwards a read; `adjust` touches up the child's result before the carrier validates it.
fn read<P>(
    sup: &Arc<Supervisor>,
    method: &'static str,
    params: P,
    adjust: impl FnOnce(Value) -> Value + Send + 'static,
) -> AgentAnswer
where
    P: serde::Serialize + Send + 'static,
{
    let sup = sup.clone();
    Box::pin(async move {
        let Some(link) = sup.running() else {
            return Err(AgentCallError::MethodNotFound);
        };
        let (id, rx) = match sup.send(&link, method, &params) {
            Ok(sent) => sent,
            Err(super::supervisor::SendError::Line(super::child::SendLineError::Closed)) => {
                return Err(AgentCallError::MethodNotFound)
            }
            Err(e) => return Err(AgentCallError::Failed(e.to_string())),
        };
        match sup.await_answer(id, rx).await {
            Outcome::Answered(Ok(value)) => Ok(adjust(value)),
            Outcome::Answered(Err(e)) if codec::error_code(&e) == "method_not_found" => {
                Err(AgentCallError::MethodNotFound)
            }
            Outcome::Answered(Err(e)) => Err(AgentCallError::Failed(format!(
                "the agent process answered {method} with {}: {}",
                carrier_protocol::envelope::truncate(codec::error_code(&e), 64),
                carrier_protocol::envelope::truncate(codec::error_message(&e), 512)
            ))),
            // It exited before answering: its record went with it; the carrier's remains.
            Outcome::Gone => Err(AgentCallError::MethodNotFound),
            Outcome::TimedOut => Err(AgentCallError::Failed(format!(
                "the agent process did not answer {method} within {} ms",
                sup.timeout_ms()
            ))),
        }
    })
}

//! The running turn as the agent process sees it: sending `session.submit`, the submit's
//! timeout, and routing the child's session events to the turn's [`TurnSink`].
//!
//! The hub already emitted `turn_started` (with the host's driver) and answered `{turn_id}`
//! before the submit reaches the child; it emits `permission_resolved` itself. A child's own
//! `turn_started` or `permission_resolved` is therefore dropped, as is any event of a turn
//! that is not the running one.

use std::sync::Arc;

use super::child::SendLineError;
use super::codec::{AbortToChild, SubmitToChild};
use super::supervisor::{send_locked, Outcome, Supervisor};
use crate::agent::session::TurnStart;
use crate::agent::turn::TurnSink;
use crate::protocol::events::SessionEvent;

/// The turn the child works on.
pub(crate) struct ActiveTurn {
    pub(crate) turn_id: String,
    pub(crate) sink: TurnSink,
    /// The child generation the submit was sent to; `None` while a child is (re)starting.
    pub(crate) generation: Option<u64>,
}

/// What became of an attempt to send a submit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Submit {
    /// Sent, or settled (the turn was aborted meanwhile, or failed).
    Sent,
    /// No child to send it to: start one.
    ChildGone,
}

impl Supervisor {
    /// Sends the submit to the running child, or (re)starts one on a task and sends it then.
    pub(crate) fn start_turn(self: &Arc<Self>, turn: TurnStart) {
        let sup = self.clone();
        let TurnStart {
            turn_id,
            prompt,
            options,
            driver,
            sink,
        } = turn;
        self.lock().turn = Some(ActiveTurn {
            turn_id: turn_id.clone(),
            sink: sink.clone(),
            generation: None,
        });
        let submit = move |sup: &Arc<Supervisor>| {
            let params = SubmitToChild {
                prompt: &prompt,
                turn_id: &turn_id,
                driver: &driver,
                options: options.as_ref(),
            };
            sup.send_submit(&turn_id, &params)
        };
        // A child seen running may still turn out to be gone when the line is written (it
        // exited while idle): then it is restarted as if it had been seen gone.
        if self.running().is_some() && submit(&sup) == Submit::Sent {
            return;
        }
        tokio::spawn(async move {
            let failure = match sup.ensure_running().await {
                Ok(_) if submit(&sup) == Submit::Sent => return,
                Ok(_) => "the agent process exited as it started".to_owned(),
                Err(message) => message,
            };
            if sup.take_turn(sink.turn_id()).is_some() {
                let _ = sink.fail("agent_exited", &failure);
            }
        });
    }

    /// Under the lock, so an abort cannot slip between the check and the send: sends the
    /// submit if the turn is still running, then watches for its answer.
    fn send_submit(self: &Arc<Self>, turn_id: &str, params: &SubmitToChild<'_>) -> Submit {
        let sent = {
            let mut st = self.lock();
            let Some(link) = st.link.clone().filter(|l| l.is_running()) else {
                return Submit::ChildGone;
            };
            let Some(turn) = st.turn.as_ref().filter(|t| t.turn_id == turn_id) else {
                // Aborted meanwhile: the child never hears of it.
                return Submit::Sent;
            };
            let sink = turn.sink.clone();
            match send_locked(&mut st, &link, "session.submit", params) {
                Ok(sent) => {
                    if let Some(t) = st.turn.as_mut() {
                        t.generation = Some(link.generation);
                    }
                    Ok(sent)
                }
                Err(SendLineError::Closed) => return Submit::ChildGone,
                Err(e @ SendLineError::Full) => Err((sink, e.to_string())),
            }
        };
        let (id, rx) = match sent {
            Ok(sent) => sent,
            Err((sink, message)) => {
                self.take_turn(turn_id);
                let _ = sink.fail("agent_timeout", &message);
                return Submit::Sent;
            }
        };
        let sup = self.clone();
        let turn_id = turn_id.to_owned();
        tokio::spawn(async move {
            let failure = match sup.await_answer(&id, rx).await {
                Outcome::Answered(Ok(_)) | Outcome::Gone => return,
                Outcome::Answered(Err(e)) => {
                    let code = super::codec::error_code(&e);
                    let code = if code.is_empty() { "agent_error" } else { code };
                    (
                        code.to_owned(),
                        super::codec::error_message(&e).to_owned(),
                        false,
                    )
                }
                Outcome::TimedOut => (
                    "agent_timeout".to_owned(),
                    format!(
                        "the agent process did not answer session.submit within {} ms",
                        sup.timeout_ms()
                    ),
                    true,
                ),
            };
            let (code, message, tell_child) = failure;
            let Some(turn) = sup.take_turn(&turn_id) else {
                return;
            };
            let _ = turn.sink.fail(&code, &message);
            if let (true, Some(link)) = (tell_child, sup.running()) {
                let params = AbortToChild { turn_id: &turn_id };
                sup.send_detached(&link, "session.abort", &params, |_, _| {});
            }
        });
        Submit::Sent
    }

    /// Forgets the running turn if it is `turn_id`; returns it.
    pub(crate) fn take_turn(&self, turn_id: &str) -> Option<ActiveTurn> {
        self.lock().turn.take_if(|t| t.turn_id == turn_id)
    }

    /// A validated session event from child `generation`.
    pub(crate) fn route_event(&self, generation: u64, event: SessionEvent) {
        let current = {
            let st = self.lock();
            st.turn
                .as_ref()
                .filter(|t| t.generation == Some(generation))
                .map(|t| (t.turn_id.clone(), t.sink.clone()))
        };
        let name = event.name();
        let Some((turn_id, sink)) = current else {
            tracing::info!(
                event = name,
                "agent process event dropped: no turn is running"
            );
            return;
        };
        let ours = |id: &str| id == turn_id;
        let delivered = match event {
            SessionEvent::TurnStarted(_) | SessionEvent::PermissionResolved(_) => {
                tracing::debug!(
                    event = name,
                    "agent process event dropped: the carrier emits it"
                );
                return;
            }
            SessionEvent::TextDelta(e) if ours(&e.turn_id) => sink.delta(&e.delta),
            SessionEvent::PermissionRequest(e) if ours(&e.turn_id) => {
                sink.permission_request(&e.request_id, &e.tool, e.input)
            }
            SessionEvent::Error(e) => match e.turn_id.as_deref() {
                Some(id) if ours(id) => sink.error(&e.code, &e.message),
                None => sink.session_error(&e.code, &e.message),
                Some(_) => return drop_other_turn(name),
            },
            SessionEvent::TurnCompleted(e) if ours(&e.turn_id) => {
                self.take_turn(&turn_id);
                match e.truncated {
                    Some(true) => sink.finish_truncated(&e.text, e.aborted),
                    _ => sink.finish(&e.text, e.aborted),
                }
            }
            _ => return drop_other_turn(name),
        };
        if delivered.is_err() {
            tracing::debug!(
                event = name,
                "agent process event dropped: the turn has ended"
            );
        }
    }
}

fn drop_other_turn(name: &str) {
    tracing::info!(
        event = name,
        "agent process event dropped: not the running turn"
    );
}

//! Starting a turn on the agent process: `session.submit` to the running child (or to one
//! started for it), and the submit's answer within the request timeout. What the child then
//! streams reaches the turn through the supervisor's dispatcher ([`super::turns::deliver`]).

use std::sync::Arc;

use super::child::SendLineError;
use super::codec::{AbortToChild, SubmitToChild};
use super::supervisor::{send_locked, Outcome, SendError, Supervisor};
use super::turns::ActiveTurn;
use crate::session::TurnStart;
use carrier_protocol::ids::TurnId;

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
        let turn_id = TurnId::from(turn_id);
        self.lock().turn = Some(ActiveTurn {
            turn_id: turn_id.clone(),
            sink: sink.clone(),
            generation: None,
        });
        let submitted = turn_id.clone();
        let submit = move |sup: &Arc<Supervisor>| {
            let params = SubmitToChild {
                prompt: &prompt,
                turn_id: &submitted,
                driver: &driver,
                options: options.as_ref(),
            };
            sup.send_submit(&submitted, &params)
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
            if sup.take_turn(&turn_id).is_some() {
                let _ = sink.fail("agent_exited", &failure);
            }
        });
    }

    /// Under the lock, so an abort cannot slip between the check and the send: sends the
    /// submit if the turn is still running, then watches for its answer.
    fn send_submit(self: &Arc<Self>, turn_id: &TurnId, params: &SubmitToChild<'_>) -> Submit {
        let sent = {
            let mut st = self.lock();
            let Some(link) = st.link.clone().filter(|l| l.is_running()) else {
                return Submit::ChildGone;
            };
            let Some(turn) = st.turn.as_ref().filter(|t| t.turn_id == *turn_id) else {
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
                Err(SendError::Line(SendLineError::Closed)) => return Submit::ChildGone,
                Err(e) => Err((sink, e.to_string())),
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
        let turn_id = turn_id.clone();
        tokio::spawn(async move {
            let failure = match sup.await_answer(id, rx).await {
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
}

//! [`Turns`]: the turn state machine of a session, as a pure type — no lock, no socket, no
//! runtime, no agent. Each input is one method: a client's submit, abort or permission answer,
//! or the agent's delta, permission request, error or end of turn. It changes the state and
//! returns a [`Step`]: the answer to whoever gave the input, the history entries to record and
//! the session events the input caused, in the order they are numbered. The hub
//! ([`super::hub::SessionHub`]) calls it under its lock, sends the answer, records the entries,
//! then emits the events, so a requester's reply is queued before the events it causes; it
//! calls the agent and the usage reporter after the lock is released.
//!
//! The carrier owns the turn: it picks the `turn_id`, answers `busy` and `not_found`, emits
//! `turn_started`, `permission_resolved` (also, `deny`, for every prompt still pending when the
//! turn ends) and (on abort) `turn_completed` itself, and refuses
//! output of a turn that is no longer running ([`TurnEnded`]) instead of letting it leak into
//! a later turn.

use crate::answer::not_found;
use crate::history::Recorded;
use crate::turn_sink::{Ask, Ending, PermissionChoice, TurnEnded};
use carrier_protocol::error::{EffectState, ErrorCode, ErrorObject};
use carrier_protocol::events::*;
use carrier_protocol::ids::{RequestId, TurnId};
use carrier_protocol::methods::{
    Decision, HistoryEntry, HistoryRole, PermissionRespondParams, SessionState, TurnIdResult,
};
use reply_text::{cut, pieces, ReplyText};

mod reply_text;
#[cfg(test)]
mod tests;

/// What one input did.
#[must_use = "the answer goes to the requester and the events to every bound connection"]
#[derive(Debug)]
pub(crate) struct Step<A> {
    /// The answer to whoever gave the input; sent before the events.
    pub(crate) answer: A,
    /// What the input adds to the session's history (a prompt, a reply, an agent update),
    /// recorded before the events. Empty when the input was refused.
    pub(crate) history: Vec<Recorded>,
    /// The events the input caused, in order. Empty when the input was refused.
    pub(crate) events: Vec<SessionEvent>,
}

impl<A> Step<A> {
    /// This step, then `more`'s history and events.
    pub(crate) fn with(mut self, more: Step<()>) -> Self {
        self.history.extend(more.history);
        self.events.extend(more.events);
        self
    }

    fn quiet(answer: A) -> Self {
        Step {
            answer,
            history: Vec::new(),
            events: Vec::new(),
        }
    }

    /// An answer and the events it caused, with nothing for the history.
    fn emits(answer: A, events: Vec<SessionEvent>) -> Self {
        Step {
            answer,
            history: Vec::new(),
            events,
        }
    }

    fn map<B>(self, f: impl FnOnce(A) -> B) -> Step<B> {
        Step {
            answer: f(self.answer),
            history: self.history,
            events: self.events,
        }
    }
}

/// The longest `stop_reason` kept: ACP's reasons are a word; an agent's own is cut there.
const MAX_STOP_REASON_BYTES: usize = 64;

/// An agent update of `turn_id` (or of none): its `agent_update` event and history entry, or,
/// when it is longer than `cap`, a `session.error` saying it was not sent.
pub(crate) fn agent_update(turn_id: Option<&TurnId>, update: RawObject, cap: usize) -> Step<()> {
    let turn_id = turn_id.map(TurnId::to_string);
    if update.len() > cap {
        let error = SessionErrorEvent {
            turn_id,
            code: "agent_update_too_large".into(),
            message: format!(
                "an agent update of {} bytes was not sent: it is over the {cap}-byte \
                 max_reply_bytes",
                update.len()
            ),
        };
        return Step::emits((), vec![SessionEvent::Error(error)]);
    }
    let update = AgentUpdate { turn_id, update };
    Step {
        answer: (),
        history: vec![Recorded::AgentUpdate(update.clone())],
        events: vec![SessionEvent::AgentUpdate(update)],
    }
}

/// Whom a `session.error` of the agent is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorScope {
    /// The running turn (`session.error` with its `turn_id`).
    Turn,
    /// The session, outside any turn (`session.error` without `turn_id`).
    Session,
}

/// A turn that has just ended: what the usage reporter records and the agent is told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) turn_id: TurnId,
    pub(crate) prompt: String,
    /// The reply as the carrier kept it (cut to the cap).
    pub(crate) reply: String,
    pub(crate) aborted: bool,
}

/// The running turn, as the carrier records it.
#[derive(Debug)]
struct RunningTurn {
    id: TurnId,
    prompt: String,
    /// Deltas streamed so far, up to the reply cap: the reply of an aborted turn.
    reply: ReplyText,
    /// Permission requests waiting for an answer.
    pending: Vec<Prompt>,
}

/// A permission request waiting for an answer.
#[derive(Debug)]
struct Prompt {
    id: RequestId,
    /// The choices an ACP agent offered, which an answer may name.
    options: Option<Vec<PermissionOption>>,
}

/// `protocol_error` / `invalid_params`, nothing done.
fn invalid_params(message: String) -> ErrorObject {
    ErrorObject::new(ErrorCode::ProtocolError, message)
        .effect(EffectState::None)
        .with_data(serde_json::json!({ "reason": "invalid_params" }))
}

/// The turns of one session: at most one running, and the counter that names the next.
#[derive(Default)]
pub(crate) struct Turns {
    started: u64,
    running: Option<RunningTurn>,
}

impl Turns {
    /// No turn yet.
    pub(crate) fn new() -> Self {
        Turns::default()
    }

    /// The running turn's id.
    pub(crate) fn running(&self) -> Option<&TurnId> {
        self.running.as_ref().map(|t| &t.id)
    }

    /// Whether `turn_id` is the running turn.
    pub(crate) fn is_current(&self, turn_id: &TurnId) -> bool {
        self.running() == Some(turn_id)
    }

    /// What the session is doing.
    pub(crate) fn state(&self) -> SessionState {
        match &self.running {
            None => SessionState::Idle,
            Some(t) if !t.pending.is_empty() => SessionState::AwaitingPermission,
            Some(_) => SessionState::Running,
        }
    }

    /// `session.submit`: `busy` while a turn runs; otherwise the new turn's id and
    /// `turn_started`. The carrier keeps at most `max_reply_bytes` of the turn's reply.
    pub(crate) fn submit(
        &mut self,
        prompt: &str,
        driver: &DriverInfo,
        max_reply_bytes: usize,
    ) -> Step<Result<TurnIdResult, ErrorObject>> {
        if let Some(running) = &self.running {
            return Step::quiet(Err(ErrorObject::new(
                ErrorCode::Busy,
                format!("turn {} is still running", running.id),
            )
            .effect(EffectState::None)
            .with_data(serde_json::json!({ "turn_id": running.id }))));
        }
        self.started += 1;
        let turn_id = TurnId::from(format!("t{}", self.started));
        let asked = Recorded::Said(HistoryEntry {
            role: HistoryRole::User,
            text: prompt.to_owned(),
            turn_id: turn_id.to_string(),
            truncated: None,
        });
        self.running = Some(RunningTurn {
            id: turn_id.clone(),
            prompt: prompt.to_owned(),
            reply: ReplyText::new(max_reply_bytes),
            pending: Vec::new(),
        });
        let started = TurnStarted {
            turn_id: turn_id.to_string(),
            driver: driver.clone(),
            prompt: prompt.to_owned(),
        };
        Step {
            answer: Ok(TurnIdResult {
                turn_id: turn_id.into_string(),
            }),
            history: vec![asked],
            events: vec![SessionEvent::TurnStarted(started)],
        }
    }

    /// `session.abort`: `not_found` when no turn runs or `turn_id` names another; otherwise
    /// the turn ends aborted with what was streamed (its `turn_completed`).
    pub(crate) fn abort(&mut self, turn_id: Option<&TurnId>) -> Step<Result<Ended, ErrorObject>> {
        match self
            .running
            .take_if(|t| turn_id.is_none_or(|asked| *asked == t.id))
        {
            Some(turn) => Self::end(turn, Ending::carrier_aborted()).map(Ok),
            None => Step::quiet(Err(match (&self.running, turn_id) {
                (Some(t), Some(asked)) => not_found(format!(
                    "turn {:?} is not running (the running turn is {})",
                    asked.as_str(),
                    t.id
                )),
                _ => not_found("no turn is running"),
            })),
        }
    }

    /// `session.permission.respond`: `invalid_params` unless it gives exactly one of
    /// `decision` and `option_id`; `not_found` unless `request_id` is pending;
    /// `invalid_params` for an `option_id` the prompt does not offer. Otherwise the id of the
    /// turn that asked, the choice (a named option decides what its kind means), and
    /// `permission_resolved`.
    pub(crate) fn answer_permission(
        &mut self,
        answer: &PermissionRespondParams,
    ) -> Step<Result<(TurnId, PermissionChoice), ErrorObject>> {
        use carrier_protocol::envelope::truncate;
        if answer.decision.is_some() == answer.option_id.is_some() {
            return Step::quiet(Err(invalid_params(
                "invalid params for session.permission.respond: give exactly one of decision \
                 and option_id"
                    .into(),
            )));
        }
        let request_id = answer.request_id.as_str();
        let Some(turn) = self
            .running
            .as_mut()
            .filter(|t| t.pending.iter().any(|p| p.id == request_id))
        else {
            return Step::quiet(Err(not_found(format!(
                "no pending permission request {:?}",
                truncate(request_id, 64)
            ))));
        };
        let choice = match (&answer.option_id, answer.decision) {
            (Some(option_id), _) => {
                let offered = turn
                    .pending
                    .iter()
                    .find(|p| p.id == request_id)
                    .and_then(|p| p.options.as_deref())
                    .and_then(|options| options.iter().find(|o| o.option_id == *option_id));
                let Some(option) = offered else {
                    return Step::quiet(Err(invalid_params(format!(
                        "invalid params for session.permission.respond: permission request \
                         {:?} offers no option {:?}",
                        truncate(request_id, 64),
                        truncate(option_id, 64)
                    ))));
                };
                PermissionChoice {
                    decision: option.kind.decision(),
                    option_id: Some(option_id.clone()),
                }
            }
            (None, decision) => PermissionChoice {
                decision: decision.unwrap_or(Decision::Deny),
                option_id: None,
            },
        };
        turn.pending.retain(|p| p.id != request_id);
        let resolved = PermissionResolved {
            request_id: request_id.to_owned(),
            decision: choice.decision,
        };
        Step::emits(
            Ok((turn.id.clone(), choice)),
            vec![SessionEvent::PermissionResolved(resolved)],
        )
    }

    /// The agent streams `delta`: what fits is kept in the turn's reply, all of it is sent,
    /// split into `text_delta`s of at most the reply cap (a delta is never cut).
    pub(crate) fn delta(&mut self, turn_id: &TurnId, delta: &str) -> Step<Result<(), TurnEnded>> {
        let Some(turn) = self.current(turn_id) else {
            return Step::quiet(Err(TurnEnded));
        };
        turn.reply.push(delta);
        let events = pieces(delta, turn.reply.cap())
            .map(|piece| {
                SessionEvent::TextDelta(TextDelta {
                    turn_id: turn_id.to_string(),
                    delta: piece.to_owned(),
                })
            })
            .collect();
        Step::emits(Ok(()), events)
    }

    /// The agent asks to use a tool: `request_id` is pending until answered (asking twice
    /// under one id is one pending request, with the options asked last), and
    /// `permission_request` is sent.
    pub(crate) fn permission_request(
        &mut self,
        turn_id: &TurnId,
        request_id: &RequestId,
        ask: Ask<'_>,
    ) -> Step<Result<(), TurnEnded>> {
        let Some(turn) = self.current(turn_id) else {
            return Step::quiet(Err(TurnEnded));
        };
        turn.pending.retain(|p| p.id != *request_id);
        turn.pending.push(Prompt {
            id: request_id.clone(),
            options: ask.options.clone(),
        });
        let request = PermissionRequest {
            turn_id: turn_id.to_string(),
            request_id: request_id.to_string(),
            tool: ask.tool.to_owned(),
            input: ask.input,
            options: ask.options,
        };
        Step::emits(Ok(()), vec![SessionEvent::PermissionRequest(request)])
    }

    /// The agent reports an update beside its text: `agent_update`, recorded in the history.
    /// One longer than the reply cap (no event is larger than the cap and its envelope) is not
    /// sent; a `session.error` (`agent_update_too_large`) says so instead.
    pub(crate) fn agent_update(
        &mut self,
        turn_id: &TurnId,
        update: RawObject,
    ) -> Step<Result<(), TurnEnded>> {
        let Some(turn) = self.current(turn_id) else {
            return Step::quiet(Err(TurnEnded));
        };
        let cap = turn.reply.cap();
        Step::emits(Ok(()), Vec::new()).with(agent_update(Some(turn_id), update, cap))
    }

    /// The agent reports an error while `turn_id` runs; the turn goes on.
    pub(crate) fn error(
        &mut self,
        turn_id: &TurnId,
        scope: ErrorScope,
        code: &str,
        message: &str,
    ) -> Step<Result<(), TurnEnded>> {
        if self.current(turn_id).is_none() {
            return Step::quiet(Err(TurnEnded));
        }
        let error = SessionErrorEvent {
            turn_id: match scope {
                ErrorScope::Turn => Some(turn_id.to_string()),
                ErrorScope::Session => None,
            },
            code: code.to_owned(),
            message: message.to_owned(),
        };
        Step::emits(Ok(()), vec![SessionEvent::Error(error)])
    }

    /// The agent (or the carrier, on a failure) ends `turn_id` with its text, or with what
    /// was streamed when it gives none: its `turn_completed`, and the reply in the history.
    pub(crate) fn finish(
        &mut self,
        turn_id: &TurnId,
        ending: Ending<'_>,
    ) -> Step<Result<Ended, TurnEnded>> {
        match self.running.take_if(|t| t.id == *turn_id) {
            Some(turn) => Self::end(turn, ending).map(Ok),
            None => Step::quiet(Err(TurnEnded)),
        }
    }

    fn current(&mut self, turn_id: &TurnId) -> Option<&mut RunningTurn> {
        self.running.as_mut().filter(|t| t.id == *turn_id)
    }

    /// Ends `turn`: a `permission_resolved` (`deny`) for each prompt still pending, since no
    /// prompt outlives its turn, then its `turn_completed`; and the reply for the history, both
    /// cut to the reply cap.
    fn end(turn: RunningTurn, ending: Ending<'_>) -> Step<Ended> {
        let Ending {
            text,
            aborted,
            stop_reason,
        } = ending;
        let cap = turn.reply.cap();
        let (reply, truncated) = match text {
            None => turn.reply.into_parts(),
            Some(done) => {
                let (kept, cut) = cut(done.text, cap);
                (kept.to_owned(), cut || done.truncated)
            }
        };
        let truncated = truncated.then_some(true);
        let replied = Recorded::Said(HistoryEntry {
            role: HistoryRole::Assistant,
            text: reply.clone(),
            turn_id: turn.id.to_string(),
            truncated,
        });
        let completed = TurnCompleted {
            turn_id: turn.id.to_string(),
            text: reply.clone(),
            aborted,
            truncated,
            stop_reason: stop_reason.map(|r| cut(r, MAX_STOP_REASON_BYTES).0.to_owned()),
        };
        let mut events: Vec<SessionEvent> = turn
            .pending
            .iter()
            .map(|prompt| {
                SessionEvent::PermissionResolved(PermissionResolved {
                    request_id: prompt.id.to_string(),
                    decision: Decision::Deny,
                })
            })
            .collect();
        events.push(SessionEvent::TurnCompleted(completed));
        Step {
            answer: Ended {
                turn_id: turn.id,
                prompt: turn.prompt,
                reply,
                aborted,
            },
            history: vec![replied],
            events,
        }
    }
}

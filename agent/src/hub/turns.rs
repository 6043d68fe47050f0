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

#[cfg(test)]
mod tests {
    //! Every transition of [`Turns`], driven by plain calls: no socket, no runtime, no agent.

    use serde_json::json;

    use super::*;

    const CAP: usize = 1 << 20;

    fn driver() -> DriverInfo {
        DriverInfo {
            driver_id: "local".into(),
            surface: "test".into(),
        }
    }

    fn turn(id: &str) -> TurnId {
        TurnId::from(id)
    }

    fn request(id: &str) -> RequestId {
        RequestId::from(id)
    }

    fn turns() -> Turns {
        Turns::new()
    }

    /// A machine with turn `t1` running (its `turn_started` already taken), replies kept to `cap`.
    fn running(cap: usize) -> Turns {
        let mut t = turns();
        let step = t.submit("hello", &driver(), cap);
        assert_eq!(step.answer.map(|r| r.turn_id), Ok("t1".to_owned()));
        t
    }

    fn completed(step: &[SessionEvent]) -> &TurnCompleted {
        match step {
            [SessionEvent::TurnCompleted(c)] => c,
            other => panic!("expected one turn_completed, got {other:?}"),
        }
    }

    fn error_code<T: std::fmt::Debug>(answer: Result<T, ErrorObject>) -> (ErrorCode, ErrorObject) {
        let e = answer.expect_err("refused");
        (e.code, e)
    }

    /// What a step adds to the history (prompts and replies).
    fn history(entries: &[Recorded]) -> Vec<(HistoryRole, String, String, Option<bool>)> {
        entries
            .iter()
            .filter_map(Recorded::said)
            .map(|e| (e.role, e.turn_id.clone(), e.text.clone(), e.truncated))
            .collect()
    }

    /// The inputs as most tests give them: a reply or none, no stop reason; a prompt without
    /// options; an answer by decision.
    impl Turns {
        fn finish_with(
            &mut self,
            turn_id: &TurnId,
            text: Option<crate::turn_sink::Completion<'_>>,
            aborted: bool,
        ) -> Step<Result<Ended, TurnEnded>> {
            let ending = Ending {
                text,
                aborted,
                stop_reason: None,
            };
            self.finish(turn_id, ending)
        }

        fn ask(
            &mut self,
            turn_id: &TurnId,
            request_id: &RequestId,
            tool: &str,
            input: serde_json::Value,
        ) -> Step<Result<(), TurnEnded>> {
            let ask = Ask {
                request_id: None,
                tool,
                input,
                options: None,
            };
            self.permission_request(turn_id, request_id, ask)
        }

        fn answer(
            &mut self,
            request_id: &RequestId,
            decision: Decision,
        ) -> Step<Result<TurnId, ErrorObject>> {
            let params = PermissionRespondParams::decide(request_id.as_str(), decision);
            self.answer_permission(&params)
                .map(|answer| answer.map(|(turn_id, _)| turn_id))
        }
    }

    // submit

    #[test]
    fn submit_on_an_idle_session_starts_t1_and_emits_turn_started() {
        let mut t = turns();
        assert_eq!(t.state(), SessionState::Idle);
        let step = t.submit("hello", &driver(), CAP);
        assert_eq!(
            step.answer,
            Ok(TurnIdResult {
                turn_id: "t1".into()
            })
        );
        assert_eq!(
            step.events,
            vec![SessionEvent::TurnStarted(TurnStarted {
                turn_id: "t1".into(),
                driver: driver(),
                prompt: "hello".into(),
            })]
        );
        assert_eq!(t.state(), SessionState::Running);
        assert_eq!(t.running().map(TurnId::as_str), Some("t1"));
        assert!(t.is_current(&turn("t1")));
        assert_eq!(
            history(&step.history),
            vec![(HistoryRole::User, "t1".into(), "hello".into(), None)]
        );
    }

    #[test]
    fn submit_while_a_turn_runs_is_busy_and_changes_nothing() {
        let mut t = running(CAP);
        let step = t.submit("again", &driver(), CAP);
        assert!(step.events.is_empty());
        let (code, e) = error_code(step.answer);
        assert_eq!(code, ErrorCode::Busy);
        assert_eq!(e.effect_state, Some(EffectState::None));
        assert_eq!(e.data, Some(json!({ "turn_id": "t1" })));
        assert!(e.message.contains("t1"), "{}", e.message);
        assert_eq!(t.running().map(TurnId::as_str), Some("t1"));
        assert!(
            step.history.is_empty(),
            "the refused prompt is not recorded"
        );
    }

    #[test]
    fn turn_ids_count_up_across_turns() {
        let mut t = running(CAP);
        assert!(t.finish_with(&turn("t1"), None, false).answer.is_ok());
        let step = t.submit("second", &driver(), CAP);
        assert_eq!(step.answer.map(|r| r.turn_id), Ok("t2".to_owned()));
        assert!(!t.is_current(&turn("t1")));
        assert!(t.is_current(&turn("t2")));
    }

    // text deltas

    #[test]
    fn a_delta_of_the_running_turn_is_emitted_and_kept() {
        let mut t = running(CAP);
        let step = t.delta(&turn("t1"), "Hel");
        assert_eq!(step.answer, Ok(()));
        assert_eq!(
            step.events,
            vec![SessionEvent::TextDelta(TextDelta {
                turn_id: "t1".into(),
                delta: "Hel".into(),
            })]
        );
        assert!(t.delta(&turn("t1"), "lo").answer.is_ok());
        // What was streamed is the reply of a turn ended without text.
        let step = t.finish_with(&turn("t1"), None, false);
        assert_eq!(completed(&step.events).text, "Hello");
        assert_eq!(step.answer.map(|e| e.reply), Ok("Hello".to_owned()));
    }

    #[test]
    fn an_empty_delta_is_still_one_event() {
        let mut t = running(CAP);
        let step = t.delta(&turn("t1"), "");
        assert_eq!(step.events.len(), 1);
    }

    #[test]
    fn a_delta_longer_than_the_cap_is_split_never_cut_and_the_reply_is_kept_to_the_cap() {
        let mut t = running(4);
        let step = t.delta(&turn("t1"), "abcdefghij");
        let sent: Vec<&str> = step
            .events
            .iter()
            .map(|e| match e {
                SessionEvent::TextDelta(d) => d.delta.as_str(),
                other => panic!("expected text_delta, got {other:?}"),
            })
            .collect();
        assert_eq!(sent, ["abcd", "efgh", "ij"]);
        let step = t.finish_with(&turn("t1"), None, false);
        let done = completed(&step.events);
        assert_eq!((done.text.as_str(), done.truncated), ("abcd", Some(true)));
        assert_eq!(
            history(&step.history)[0],
            (
                HistoryRole::Assistant,
                "t1".into(),
                "abcd".into(),
                Some(true)
            )
        );
    }

    #[test]
    fn a_delta_of_another_turn_or_when_idle_is_refused_without_an_event() {
        let mut idle = turns();
        let step = idle.delta(&turn("t1"), "x");
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
        let mut t = running(CAP);
        let step = t.delta(&turn("t9"), "x");
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
        // Nothing of the refused delta leaks into the running turn's reply.
        assert_eq!(
            completed(&t.finish_with(&turn("t1"), None, false).events).text,
            ""
        );
    }

    // permission request and answer

    #[test]
    fn a_permission_request_is_emitted_and_the_session_awaits_permission() {
        let mut t = running(CAP);
        let step = t.ask(&turn("t1"), &request("r1"), "shell", json!({ "cmd": "ls" }));
        assert_eq!(step.answer, Ok(()));
        assert_eq!(
            step.events,
            vec![SessionEvent::PermissionRequest(PermissionRequest {
                turn_id: "t1".into(),
                request_id: "r1".into(),
                tool: "shell".into(),
                input: json!({ "cmd": "ls" }),
                options: None,
            })]
        );
        assert_eq!(t.state(), SessionState::AwaitingPermission);
    }

    #[test]
    fn a_permission_request_of_another_turn_is_refused_and_nothing_is_pending() {
        let mut t = running(CAP);
        let step = t.ask(&turn("t0"), &request("r1"), "shell", json!({}));
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
        assert_eq!(t.state(), SessionState::Running);
    }

    #[test]
    fn answering_a_pending_request_resolves_it_and_names_the_turn() {
        let mut t = running(CAP);
        let _ = t.ask(&turn("t1"), &request("r1"), "shell", json!({}));
        let step = t.answer(&request("r1"), Decision::Allow);
        assert_eq!(step.answer, Ok(turn("t1")));
        assert_eq!(
            step.events,
            vec![SessionEvent::PermissionResolved(PermissionResolved {
                request_id: "r1".into(),
                decision: Decision::Allow,
            })]
        );
        assert_eq!(t.state(), SessionState::Running);
    }

    #[test]
    fn a_request_asked_twice_under_one_id_is_answered_once() {
        let mut t = running(CAP);
        let _ = t.ask(&turn("t1"), &request("r1"), "shell", json!({}));
        let again = t.ask(&turn("t1"), &request("r1"), "shell", json!({}));
        assert_eq!(again.events.len(), 1, "the repeated request is still sent");
        assert!(t.answer(&request("r1"), Decision::Deny).answer.is_ok());
        assert_eq!(t.state(), SessionState::Running);
        let (code, _) = error_code(t.answer(&request("r1"), Decision::Deny).answer);
        assert_eq!(code, ErrorCode::NotFound);
    }

    #[test]
    fn the_session_awaits_permission_until_every_request_is_answered() {
        let mut t = running(CAP);
        let _ = t.ask(&turn("t1"), &request("r1"), "a", json!({}));
        let _ = t.ask(&turn("t1"), &request("r2"), "b", json!({}));
        let _ = t.answer(&request("r2"), Decision::Allow);
        assert_eq!(t.state(), SessionState::AwaitingPermission);
        let _ = t.answer(&request("r1"), Decision::Allow);
        assert_eq!(t.state(), SessionState::Running);
    }

    #[test]
    fn an_answer_for_an_unknown_request_is_not_found_without_an_event() {
        for mut t in [turns(), running(CAP)] {
            let step = t.answer(&request("nope"), Decision::Allow);
            assert!(step.events.is_empty());
            let (code, e) = error_code(step.answer);
            assert_eq!(code, ErrorCode::NotFound);
            assert_eq!(e.effect_state, Some(EffectState::None));
            assert!(e.message.contains("\"nope\""), "{}", e.message);
        }
    }

    #[test]
    fn an_unknown_request_id_is_quoted_at_most_64_bytes_long() {
        let mut t = running(CAP);
        let long = "x".repeat(10_000);
        let (_, e) = error_code(t.answer(&request(&long), Decision::Allow).answer);
        assert!(e.message.len() < 200, "{} bytes", e.message.len());
    }

    #[test]
    fn a_request_of_an_ended_turn_cannot_be_answered() {
        let mut t = running(CAP);
        let _ = t.ask(&turn("t1"), &request("r1"), "shell", json!({}));
        let _ = t.abort(None);
        let (code, _) = error_code(t.answer(&request("r1"), Decision::Allow).answer);
        assert_eq!(code, ErrorCode::NotFound);
    }

    #[test]
    fn ending_a_turn_resolves_each_pending_prompt_denied_before_its_turn_completed() {
        let resolved = |id: &str| {
            SessionEvent::PermissionResolved(PermissionResolved {
                request_id: id.into(),
                decision: Decision::Deny,
            })
        };
        type End = fn(&mut Turns) -> Vec<SessionEvent>;
        let ends: [(&str, End); 3] = [
            ("abort", |t| t.abort(None).events),
            ("complete", |t| {
                let done = crate::turn_sink::Completion {
                    text: "done",
                    truncated: false,
                };
                t.finish_with(&turn("t1"), Some(done), false).events
            }),
            ("failure", |t| t.finish_with(&turn("t1"), None, true).events),
        ];
        for (how, end) in ends {
            let mut t = running(CAP);
            let _ = t.ask(&turn("t1"), &request("r1"), "a", json!({}));
            let _ = t.ask(&turn("t1"), &request("r2"), "b", json!({}));
            let _ = t.ask(&turn("t1"), &request("r3"), "c", json!({}));
            let _ = t.answer(&request("r2"), Decision::Allow);
            let events = end(&mut t);
            assert_eq!(events.len(), 3, "{how}: {events:?}");
            assert_eq!(events[..2], [resolved("r1"), resolved("r3")], "{how}");
            assert!(matches!(events[2], SessionEvent::TurnCompleted(_)), "{how}");
            assert_eq!(t.state(), SessionState::Idle, "{how}");
            // Nothing is left to answer.
            let (code, _) = error_code(t.answer(&request("r1"), Decision::Allow).answer);
            assert_eq!(code, ErrorCode::NotFound, "{how}");
        }
    }

    // abort

    #[test]
    fn abort_ends_the_running_turn_aborted_with_what_was_streamed() {
        let mut t = running(CAP);
        let _ = t.delta(&turn("t1"), "partial");
        let step = t.abort(None);
        assert_eq!(
            step.answer,
            Ok(Ended {
                turn_id: "t1".into(),
                prompt: "hello".into(),
                reply: "partial".into(),
                aborted: true,
            })
        );
        assert_eq!(
            completed(&step.events),
            &TurnCompleted {
                turn_id: "t1".into(),
                text: "partial".into(),
                aborted: true,
                truncated: None,
                stop_reason: None,
            }
        );
        assert_eq!(t.state(), SessionState::Idle);
        assert_eq!(
            history(&step.history)[0],
            (HistoryRole::Assistant, "t1".into(), "partial".into(), None)
        );
    }

    #[test]
    fn abort_naming_the_running_turn_ends_it() {
        let mut t = running(CAP);
        assert!(t.abort(Some(&turn("t1"))).answer.is_ok());
        assert_eq!(t.running(), None);
    }

    #[test]
    fn abort_when_idle_is_not_found() {
        let mut t = turns();
        let step = t.abort(None);
        assert!(step.events.is_empty());
        let (code, e) = error_code(step.answer);
        assert_eq!(code, ErrorCode::NotFound);
        assert_eq!(e.effect_state, Some(EffectState::None));
        assert_eq!(e.message, "no turn is running");
    }

    #[test]
    fn abort_naming_another_turn_is_not_found_and_the_turn_runs_on() {
        let mut t = running(CAP);
        let step = t.abort(Some(&turn("t7")));
        assert!(step.events.is_empty());
        let (code, e) = error_code(step.answer);
        assert_eq!(code, ErrorCode::NotFound);
        assert!(
            e.message.contains("\"t7\"") && e.message.contains("t1"),
            "{}",
            e.message
        );
        assert_eq!(t.running().map(TurnId::as_str), Some("t1"));
    }

    #[test]
    fn output_of_an_aborted_turn_is_refused() {
        let mut t = running(CAP);
        let _ = t.abort(None);
        assert_eq!(t.delta(&turn("t1"), "late").answer, Err(TurnEnded));
        assert_eq!(
            t.ask(&turn("t1"), &request("r"), "x", json!({})).answer,
            Err(TurnEnded)
        );
        assert_eq!(
            t.error(&turn("t1"), ErrorScope::Turn, "e", "m").answer,
            Err(TurnEnded)
        );
        let step = t.finish_with(
            &turn("t1"),
            Some(crate::turn_sink::Completion {
                text: "late",
                truncated: false,
            }),
            false,
        );
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
        assert!(step.history.is_empty(), "the late reply is not recorded");
    }

    // complete

    #[test]
    fn complete_ends_the_turn_with_the_agents_reply() {
        let mut t = running(CAP);
        let _ = t.delta(&turn("t1"), "streamed");
        let step = t.finish_with(
            &turn("t1"),
            Some(crate::turn_sink::Completion {
                text: "final",
                truncated: false,
            }),
            false,
        );
        assert_eq!(
            completed(&step.events),
            &TurnCompleted {
                turn_id: "t1".into(),
                text: "final".into(),
                aborted: false,
                truncated: None,
                stop_reason: None,
            }
        );
        let ended = step.answer.expect("ended");
        assert_eq!((ended.reply.as_str(), ended.aborted), ("final", false));
        assert_eq!(t.state(), SessionState::Idle);
        assert_eq!(
            history(&step.history),
            vec![(HistoryRole::Assistant, "t1".into(), "final".into(), None)]
        );
    }

    #[test]
    fn a_reply_longer_than_the_cap_is_cut_at_a_character_and_marked_truncated() {
        let mut t = running(5);
        // "é" is two bytes: the cut falls before the one that would straddle the cap.
        let step = t.finish_with(
            &turn("t1"),
            Some(crate::turn_sink::Completion {
                text: "abcdé",
                truncated: false,
            }),
            false,
        );
        let done = completed(&step.events);
        assert_eq!((done.text.as_str(), done.truncated), ("abcd", Some(true)));
        assert_eq!(step.answer.map(|e| e.reply), Ok("abcd".to_owned()));
    }

    #[test]
    fn a_reply_the_agent_cut_is_marked_truncated_whatever_its_length() {
        let mut t = running(CAP);
        let step = t.finish_with(
            &turn("t1"),
            Some(crate::turn_sink::Completion {
                text: "short",
                truncated: true,
            }),
            true,
        );
        let done = completed(&step.events);
        assert_eq!((done.truncated, done.aborted), (Some(true), true));
    }

    #[test]
    fn a_turn_completes_once() {
        let mut t = running(CAP);
        assert!(t.finish_with(&turn("t1"), None, false).answer.is_ok());
        let step = t.finish_with(&turn("t1"), None, false);
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
    }

    #[test]
    fn completing_another_turn_is_refused_and_the_running_one_goes_on() {
        let mut t = running(CAP);
        let step = t.finish_with(&turn("t2"), None, false);
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
        assert_eq!(t.running().map(TurnId::as_str), Some("t1"));
    }

    // error

    #[test]
    fn a_turn_error_names_the_turn_and_the_turn_goes_on() {
        let mut t = running(CAP);
        let step = t.error(&turn("t1"), ErrorScope::Turn, "tool_failed", "it broke");
        assert_eq!(step.answer, Ok(()));
        assert_eq!(
            step.events,
            vec![SessionEvent::Error(SessionErrorEvent {
                turn_id: Some("t1".into()),
                code: "tool_failed".into(),
                message: "it broke".into(),
            })]
        );
        assert_eq!(t.running().map(TurnId::as_str), Some("t1"));
    }

    #[test]
    fn a_session_error_names_no_turn() {
        let mut t = running(CAP);
        let step = t.error(&turn("t1"), ErrorScope::Session, "degraded", "slow");
        assert_eq!(
            step.events,
            vec![SessionEvent::Error(SessionErrorEvent {
                turn_id: None,
                code: "degraded".into(),
                message: "slow".into(),
            })]
        );
    }

    #[test]
    fn an_error_while_no_turn_or_another_runs_is_refused() {
        let mut idle = turns();
        let step = idle.error(&turn("t1"), ErrorScope::Session, "c", "m");
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
        let mut t = running(CAP);
        let step = t.error(&turn("t2"), ErrorScope::Turn, "c", "m");
        assert_eq!((step.answer, step.events.len()), (Err(TurnEnded), 0));
    }

    #[test]
    fn a_failure_is_an_error_then_an_aborted_completion_with_what_was_streamed() {
        // What `TurnSink::fail` and a refused start do: two inputs, in this order.
        let mut t = running(CAP);
        let _ = t.delta(&turn("t1"), "so far");
        let error = t.error(&turn("t1"), ErrorScope::Turn, "internal", "agent died");
        assert!(matches!(error.events[..], [SessionEvent::Error(_)]));
        let step = t.finish_with(&turn("t1"), None, true);
        let done = completed(&step.events);
        assert_eq!((done.text.as_str(), done.aborted), ("so far", true));
    }
}

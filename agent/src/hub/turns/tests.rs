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

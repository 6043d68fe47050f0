//! The hub's rule that no prompt outlives its drivers, on a paused clock: an agent that asks
//! once per turn, connections that are outbound queues with no socket, and time advanced by
//! hand. What each connection is sent is read back from its queue. Then agent updates: who is
//! sent them, how `seq` reads for a connection that is not, and what the history keeps.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use super::*;
use crate::answer::Quiet;
use crate::history::HistoryConfig;
use crate::memory::SessionMemory;
use crate::record::RingConfig;
use crate::session::HostError;
use crate::usage::SessionUsage;
use carrier_protocol::error::ErrorObject;
use carrier_server::{DetachedConnection, OutboundFrame};

const TIMEOUT: Duration = Duration::from_secs(30);

/// What the agent saw: the answer its `ask_permission` future yielded, and the decisions it
/// was told of.
#[derive(Default)]
struct Seen {
    answers: Vec<Result<Decision, TurnEnded>>,
    decided: Vec<Decision>,
}

/// Asks for `demo.tool` once per turn, then completes with what it was answered.
#[derive(Default)]
struct Asker {
    seen: Arc<Mutex<Seen>>,
}

impl ProtocolSession for Asker {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let seen = self.seen.clone();
        tokio::spawn(async move {
            let answer = turn.sink.ask_permission("demo.tool", json!({})).await;
            seen.lock().unwrap().answers.push(answer);
            let _ = turn.sink.complete(&format!("{answer:?}"));
        });
        Ok(())
    }

    fn permission_decided(&self, _turn_id: &str, _request_id: &str, decision: Decision) {
        self.seen.lock().unwrap().decided.push(decision);
    }
}

fn hub(agent: impl ProtocolSession) -> Arc<SessionHub> {
    let memory = SessionMemory::default();
    SessionHub::new(
        SessionId::from("s1"),
        Arc::new(agent),
        Arc::new(SessionUsage::default()),
        SessionRecord::new(&memory, RingConfig::default(), HistoryConfig::default()),
        TIMEOUT,
    )
}

fn connection(role: Role) -> (Connection, DetachedConnection) {
    let detached = DetachedConnection::new(role, 1 << 20);
    (detached.connection().clone(), detached)
}

/// Every text frame queued on `out` so far, parsed.
fn sent(out: &mut DetachedConnection) -> Vec<Value> {
    let mut frames = Vec::new();
    while let Some(frame) = out.try_next_frame() {
        if let OutboundFrame::Text(text) = frame {
            frames.push(serde_json::from_slice(&text).expect("JSON"));
        }
    }
    frames
}

fn submit(hub: &Arc<SessionHub>) {
    let params = SubmitParams {
        prompt: "/tool x".into(),
        options: None,
    };
    let driver = DriverInfo {
        driver_id: "local".into(),
        surface: "test".into(),
    };
    hub.submit(&Quiet, params, driver, 1 << 20);
}

/// Lets the spawned tasks (the agent, the deadline watcher) run without moving the clock.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

async fn asked(hub: &Arc<SessionHub>) {
    submit(hub);
    settle().await;
    assert_eq!(hub.state(), SessionState::AwaitingPermission);
}

#[tokio::test(start_paused = true)]
async fn a_prompt_with_no_driver_bound_is_denied_at_the_timeout_and_not_before() {
    let agent = Asker::default();
    let seen = agent.seen.clone();
    let hub = hub(agent);
    let (observer, mut out) = connection(Role::Observe);
    hub.bind(&observer, EventScope::WithAgentUpdates, None, |_| {});
    asked(&hub).await;
    tokio::time::advance(TIMEOUT - Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(hub.state(), SessionState::AwaitingPermission);
    tokio::time::advance(Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(hub.state(), SessionState::Idle);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.answers, [Ok(Decision::Deny)]);
    assert_eq!(seen.decided, [Decision::Deny], "the agent is told deny");
    // Every connection is told, as for a client's answer.
    let events: Vec<Value> = sent(&mut out);
    let resolved = events
        .iter()
        .find(|e| e["event"] == "session.permission_resolved")
        .expect("permission_resolved");
    assert_eq!(resolved["payload"]["decision"], "deny");
}

#[tokio::test(start_paused = true)]
async fn a_bound_driver_keeps_a_prompt_open_and_the_clock_starts_when_it_leaves() {
    let agent = Asker::default();
    let seen = agent.seen.clone();
    let hub = hub(agent);
    let (driver, _out) = connection(Role::Drive);
    hub.bind(&driver, EventScope::WithAgentUpdates, None, |_| {});
    asked(&hub).await;
    tokio::time::advance(3 * TIMEOUT).await;
    settle().await;
    assert_eq!(hub.state(), SessionState::AwaitingPermission);
    hub.unbind(driver.id());
    tokio::time::advance(TIMEOUT - Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(hub.state(), SessionState::AwaitingPermission);
    tokio::time::advance(Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(seen.lock().unwrap().answers, [Ok(Decision::Deny)]);
}

#[tokio::test(start_paused = true)]
async fn a_driver_binding_in_time_is_sent_the_prompt_after_its_reply_and_can_answer_it() {
    let agent = Asker::default();
    let seen = agent.seen.clone();
    let hub = hub(agent);
    asked(&hub).await;
    tokio::time::advance(TIMEOUT / 2).await;
    let (driver, mut out) = connection(Role::Drive);
    hub.bind(&driver, EventScope::WithAgentUpdates, None, |_| {
        let _ = driver.send_text(Bytes::from_static(b"{\"reply\":1}"));
    });
    let (observer, mut observer_out) = connection(Role::Observe);
    hub.bind(&observer, EventScope::WithAgentUpdates, None, |_| {});
    let frames = sent(&mut out);
    assert_eq!(frames[0], json!({"reply": 1}));
    assert_eq!(frames[1]["event"], "session.permission_request");
    // Its own seq: the one the session gave it.
    assert_eq!(frames[1]["seq"], 2, "after turn_started: {frames:?}");
    assert_eq!(frames.len(), 2);
    assert!(
        sent(&mut observer_out).is_empty(),
        "an observer cannot answer"
    );
    // Bound, the driver stops the clock.
    tokio::time::advance(2 * TIMEOUT).await;
    settle().await;
    assert_eq!(hub.state(), SessionState::AwaitingPermission);
    let request_id = frames[1]["payload"]["request_id"].as_str().unwrap();
    let answer = PermissionRespondParams::decide(request_id, Decision::Allow);
    hub.respond_permission(&Quiet, answer);
    settle().await;
    assert_eq!(seen.lock().unwrap().answers, [Ok(Decision::Allow)]);
}

#[tokio::test(start_paused = true)]
async fn a_resume_is_sent_only_the_prompts_its_replay_lacks() {
    let hub = hub(Asker::default());
    asked(&hub).await;
    // Seen up to the prompt (seq 2): nothing is sent again.
    let (seen_all, mut out) = connection(Role::Drive);
    hub.bind(&seen_all, EventScope::WithAgentUpdates, Some(2), |_| {});
    assert!(sent(&mut out).is_empty());
    // Seen up to turn_started: the replay holds the prompt, once.
    let (seen_one, mut out) = connection(Role::Drive);
    hub.bind(&seen_one, EventScope::WithAgentUpdates, Some(1), |_| {});
    let frames = sent(&mut out);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(
        (frames[0]["event"].clone(), frames[0]["seq"].clone()),
        (json!("session.permission_request"), json!(2))
    );
}

#[tokio::test(start_paused = true)]
async fn an_abort_resolves_the_open_prompt_denied_and_the_agent_sees_the_turn_end() {
    let agent = Asker::default();
    let seen = agent.seen.clone();
    let hub = hub(agent);
    let (driver, mut out) = connection(Role::Drive);
    hub.bind(&driver, EventScope::WithAgentUpdates, None, |_| {});
    asked(&hub).await;
    hub.abort(&Quiet, None);
    settle().await;
    let names: Vec<Value> = sent(&mut out)
        .into_iter()
        .map(|e| e["event"].clone())
        .collect();
    assert_eq!(
        names,
        [
            "session.turn_started",
            "session.permission_request",
            "session.permission_resolved",
            "session.turn_completed"
        ]
    );
    // The agent's future ends with the turn (cancelled); it is not told a decision.
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.answers, [Err(TurnEnded)]);
        assert!(seen.decided.is_empty());
    }
    // Nothing is left to time out.
    hub.unbind(driver.id());
    tokio::time::advance(2 * TIMEOUT).await;
    settle().await;
    assert_eq!(hub.state(), SessionState::Idle);
}

/// An agent update as an ACP agent might write one (spacing and key order its own).
const UPDATE: &str = r#"{"sessionUpdate": "tool_call","toolCallId":"c1" ,"title":"Read"}"#;

fn raw(text: &str) -> RawObject {
    let raw = serde_json::from_str::<Box<serde_json::value::RawValue>>(text).unwrap();
    RawObject::new(raw).unwrap()
}

/// Reports a tool call, streams a word, and stops as an ACP agent does.
struct Updater;

impl ProtocolSession for Updater {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let _ = turn.sink.agent_update(raw(UPDATE));
        let _ = turn.sink.delta("hi");
        let _ = turn.sink.finish_streamed("end_turn", false);
        Ok(())
    }
}

fn names_and_seqs(frames: &[Value]) -> Vec<(String, u64)> {
    frames
        .iter()
        .map(|f| {
            let name = f["event"].as_str().unwrap_or_default().to_owned();
            (name, f["seq"].as_u64().unwrap_or(0))
        })
        .collect()
}

#[tokio::test]
async fn agent_updates_reach_only_the_connections_whose_protocol_has_them() {
    let hub = hub(Updater);
    let (new, mut new_out) = connection(Role::Observe);
    let (old, mut old_out) = connection(Role::Observe);
    hub.bind(&new, EventScope::WithAgentUpdates, None, |_| {});
    hub.bind(&old, EventScope::WithoutAgentUpdates, None, |_| {});
    submit(&hub);

    let heard = sent(&mut new_out);
    let named = |list: &[(&str, u64)]| -> Vec<(String, u64)> {
        list.iter().map(|&(n, s)| (n.to_owned(), s)).collect()
    };
    assert_eq!(
        names_and_seqs(&heard),
        named(&[
            ("session.turn_started", 1),
            ("session.agent_update", 2),
            ("session.text_delta", 3),
            ("session.turn_completed", 4),
        ])
    );
    assert_eq!(heard[1]["payload"]["turn_id"], "t1");
    assert_eq!(heard[3]["payload"]["stop_reason"], "end_turn");
    // The older connection's seq skips the update's number and still only rises.
    assert_eq!(
        names_and_seqs(&sent(&mut old_out)),
        named(&[
            ("session.turn_started", 1),
            ("session.text_delta", 3),
            ("session.turn_completed", 4),
        ])
    );

    // A resume replays what the connection's protocol has, and counts what it replays.
    for (scope, expected) in [
        (EventScope::WithAgentUpdates, 3),
        (EventScope::WithoutAgentUpdates, 2),
    ] {
        let (again, mut out) = connection(Role::Observe);
        let mut outcome = None;
        hub.bind(&again, scope, Some(1), |o| outcome = Some(o));
        assert_eq!(outcome, Some(ResumeOutcome::Resumed { replayed: expected }));
        assert_eq!(sent(&mut out).len() as u64, expected, "{scope:?}");
    }
}

#[tokio::test]
async fn an_agent_update_is_sent_as_the_agent_wrote_it_and_kept_in_the_history() {
    let hub = hub(Updater);
    let (conn, mut out) = connection(Role::Observe);
    hub.bind(&conn, EventScope::WithAgentUpdates, None, |_| {});
    submit(&hub);
    let mut frames = Vec::new();
    while let Some(OutboundFrame::Text(text)) = out.try_next_frame() {
        frames.push(text);
    }
    let expected = format!(
        r#"{{"event":"session.agent_update","seq":2,"payload":{{"turn_id":"t1","update":{UPDATE}}}}}"#
    );
    assert_eq!(frames[1], Bytes::from(expected));

    // The history keeps it between the prompt and the reply; session.history does not list it.
    let recorded = hub.record.history_recorded(usize::MAX, true);
    let kinds: Vec<&str> = recorded
        .iter()
        .map(|(_, r)| match r {
            Recorded::Said(e) if e.role == HistoryRole::User => "user",
            Recorded::Said(_) => "assistant",
            Recorded::AgentUpdate(_) => "update",
        })
        .collect();
    assert_eq!(kinds, ["user", "update", "assistant"]);
    assert_eq!(hub.record.history_recorded(usize::MAX, false).len(), 2);
    assert_eq!(hub.history(None, usize::MAX).entries.len(), 2);

    // Outside any turn an update goes out without a turn id (through the agent's outlet).
    hub.session_agent_update(raw(r#"{"sessionUpdate":"available_commands_update"}"#));
    let last = sent(&mut out).pop().expect("the update");
    assert_eq!(
        (
            last["event"].clone(),
            last["seq"].clone(),
            last["payload"].get("turn_id")
        ),
        (json!("session.agent_update"), json!(5), None)
    );
}

#[tokio::test]
async fn an_agent_update_over_the_reply_cap_is_reported_not_sent() {
    let hub = hub(Updater);
    let (conn, mut out) = connection(Role::Observe);
    hub.bind(&conn, EventScope::WithAgentUpdates, None, |_| {});
    let params = SubmitParams {
        prompt: "x".into(),
        options: None,
    };
    let driver = DriverInfo {
        driver_id: "local".into(),
        surface: "test".into(),
    };
    // A cap one byte under the update's length.
    hub.submit(&Quiet, params, driver, UPDATE.len() - 1);
    let frames = sent(&mut out);
    assert_eq!(frames[1]["event"], "session.error", "{frames:?}");
    assert_eq!(frames[1]["payload"]["code"], "agent_update_too_large");
    assert!(frames.iter().all(|f| f["event"] != "session.agent_update"));
}

/// Asks offering an ACP agent's options and keeps the choice it is answered.
#[derive(Default)]
struct Chooser {
    choices: Arc<Mutex<Vec<Result<PermissionChoice, TurnEnded>>>>,
}

impl ProtocolSession for Chooser {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let choices = self.choices.clone();
        let options = serde_json::from_value(json!([
            {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"},
        ]))
        .unwrap();
        let pending = turn
            .sink
            .ask_permission_offering(Some("p"), "Write", json!({}), options);
        tokio::spawn(async move {
            let choice = pending.choice().await;
            choices.lock().unwrap().push(choice);
        });
        Ok(())
    }
}

/// Records what `respond_permission` answered.
#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<Vec<Result<(), ErrorObject>>>>);

impl Answer<Empty> for Recorder {
    fn ok(&self, _: &Empty) {
        self.0.lock().unwrap().push(Ok(()));
    }

    fn err(&self, error: ErrorObject) {
        self.0.lock().unwrap().push(Err(error));
    }
}

#[tokio::test]
async fn an_answer_may_name_one_of_the_offered_options() {
    let agent = Chooser::default();
    let choices = agent.choices.clone();
    let hub = hub(agent);
    let (driver, mut out) = connection(Role::Drive);
    hub.bind(&driver, EventScope::WithAgentUpdates, None, |_| {});
    submit(&hub);
    let asked = sent(&mut out).pop().expect("the prompt");
    assert_eq!(asked["payload"]["options"][1]["optionId"], "always");

    let answers = Recorder::default();
    let refused = [
        PermissionRespondParams::choose("p", "maybe"),
        PermissionRespondParams {
            request_id: "p".into(),
            decision: Some(Decision::Allow),
            option_id: Some("yes".into()),
        },
        PermissionRespondParams {
            request_id: "p".into(),
            decision: None,
            option_id: None,
        },
    ];
    for params in refused {
        hub.respond_permission(&answers, params);
    }
    hub.respond_permission(&answers, PermissionRespondParams::choose("p", "always"));
    settle().await;
    let answers = answers.0.lock().unwrap();
    for refusal in &answers[..3] {
        let data = refusal
            .as_ref()
            .unwrap_err()
            .data
            .clone()
            .unwrap_or_default();
        assert_eq!(data["reason"], "invalid_params", "{refusal:?}");
    }
    assert_eq!(answers[3], Ok(()));
    let resolved = sent(&mut out).pop().expect("resolved");
    assert_eq!(resolved["payload"]["decision"], "allow");
    assert_eq!(
        *choices.lock().unwrap(),
        [Ok(PermissionChoice {
            decision: Decision::Allow,
            option_id: Some("always".into())
        })]
    );
}

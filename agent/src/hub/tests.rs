//! The hub's rule that no prompt outlives its drivers, on a paused clock: an agent that asks
//! once per turn, connections that are outbound queues with no socket, and time advanced by
//! hand. What each connection is sent is read back from its queue.

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

fn hub(agent: Asker) -> Arc<SessionHub> {
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
    hub.bind(&observer, None, |_| {});
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
    hub.bind(&driver, None, |_| {});
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
    hub.bind(&driver, None, |_| {
        let _ = driver.send_text(Bytes::from_static(b"{\"reply\":1}"));
    });
    let (observer, mut observer_out) = connection(Role::Observe);
    hub.bind(&observer, None, |_| {});
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
    let answer = PermissionRespondParams {
        request_id: request_id.into(),
        decision: Decision::Allow,
    };
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
    hub.bind(&seen_all, Some(2), |_| {});
    assert!(sent(&mut out).is_empty());
    // Seen up to turn_started: the replay holds the prompt, once.
    let (seen_one, mut out) = connection(Role::Drive);
    hub.bind(&seen_one, Some(1), |_| {});
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
    hub.bind(&driver, None, |_| {});
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

//! The agent API a host writes against: a turn's sink yields permission decisions and the
//! turn's cancellation as futures, so the agent keeps no ids of its own.

use carrier_test_support as support;

use std::sync::{Arc, Mutex};

use carrier_agent::{
    AgentProfile, HostError, InMemoryDirectory, NoUsage, ProtocolSession, TurnStart,
};
use serde_json::json;
use support::*;
use tokio::sync::mpsc;

/// What the agent saw, reported to the test as it happens.
type Log = mpsc::UnboundedSender<String>;

/// - `wait`: awaits only the turn's cancellation, then reports it;
/// - `twice`: asks twice under one id of its own, reports both answers;
/// - `late`: completes, then asks (the turn has ended).
struct Probe {
    log: Log,
}

impl ProtocolSession for Probe {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let TurnStart { prompt, sink, .. } = turn;
        let log = self.log.clone();
        tokio::spawn(async move {
            match prompt.as_str() {
                "wait" => {
                    sink.cancelled().await;
                    let _ = log.send(format!("cancelled; delta {:?}", sink.delta("x")));
                }
                "twice" => {
                    let a = sink.ask_permission_as("mine", "tool", json!({}));
                    let b = sink.ask_permission_as("mine", "tool", json!({}));
                    assert_eq!(a.request_id(), Some("mine"));
                    let (a, b) = (a.await, b.await);
                    let _ = log.send(format!("{a:?} {b:?}"));
                    let _ = sink.complete("done");
                }
                _ => {
                    let _ = sink.complete("early");
                    let late = sink.ask_permission("tool", json!({}));
                    let id = late.request_id().map(str::to_owned);
                    let _ = log.send(format!("{id:?} {:?}", late.await));
                    // The end of a completed turn counts as its cancellation too.
                    sink.cancelled().await;
                    let _ = log.send("ended".into());
                }
            }
        });
        Ok(())
    }
}

fn probe() -> (AgentProfile, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let tx = Arc::new(Mutex::new(tx));
    let directory = InMemoryDirectory::new(move |_| {
        let log = tx.lock().expect("lock").clone();
        Arc::new(Probe { log }) as Arc<dyn ProtocolSession>
    });
    (AgentProfile::builder(directory).usage(NoUsage).build(), rx)
}

async fn next(log: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(WAIT, log.recv())
        .await
        .expect("the agent reports in time")
        .expect("the agent reports")
}

#[tokio::test]
async fn an_abort_resolves_the_turns_cancellation() {
    let (profile, mut log) = probe();
    let server = Server::with(config(), profile).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("wait").await;
    c.ok("session.abort", json!({ "turn_id": turn })).await;
    assert_eq!(next(&mut log).await, "cancelled; delta Err(TurnEnded)");
}

#[tokio::test]
async fn stopping_the_host_resolves_the_turns_cancellation() {
    let (profile, mut log) = probe();
    let server = Server::with(config(), profile).await;
    let (mut c, _) = server.drive().await;
    c.submit("wait").await;
    // The turn is running once its turn_started is out.
    c.event("session.turn_started").await;
    server.transport.stop().await;
    assert_eq!(next(&mut log).await, "cancelled; delta Err(TurnEnded)");
}

#[tokio::test]
async fn one_answer_resolves_every_wait_on_the_same_id() {
    let (profile, mut log) = probe();
    let server = Server::with(config(), profile).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("twice").await;
    let ask = c.event("session.permission_request").await;
    assert_eq!(ask["payload"]["request_id"], "mine");
    c.ok(
        "session.permission.respond",
        json!({"request_id": "mine", "decision": "deny"}),
    )
    .await;
    assert_eq!(next(&mut log).await, "Ok(Deny) Ok(Deny)");
    let events = c.turn_events(&turn).await;
    let asks = events
        .iter()
        .filter(|e| e["event"] == "session.permission_request")
        .count();
    // Asked twice under one id: the second prompt is on the wire too, but one answer
    // settled both.
    assert_eq!(asks, 1, "{events:?}");
}

#[tokio::test]
async fn asking_after_the_turn_ended_sends_nothing_and_yields_turn_ended() {
    let (profile, mut log) = probe();
    let server = Server::with(config(), profile).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("late").await;
    let events = c.turn_events(&turn).await;
    assert_eq!(next(&mut log).await, "None Err(TurnEnded)");
    assert_eq!(next(&mut log).await, "ended");
    assert!(events
        .iter()
        .all(|e| e["event"] != "session.permission_request"));
    let status = c.ok("session.status", json!({})).await;
    assert_eq!(status["state"], "idle");
}

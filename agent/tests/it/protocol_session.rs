//! A host's own `ProtocolSession`: the carrier owns seq, turn state and answers; the agent's
//! forwarded reads are validated before they are sent.

use carrier_test_support as support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use carrier_agent::{
    AgentAnswer, AgentCallError, AgentProfile, HostError, InMemoryDirectory, NoUsage,
    ProtocolSession, TurnStart,
};
use carrier_protocol::methods::Decision;
use serde_json::json;
use support::*;

/// Answers synchronously from `start_turn`, and serves `session.history` in a different way on
/// each call: valid, invalid, "method not found", failed.
#[derive(Default)]
struct Scripted {
    history_calls: AtomicUsize,
}

impl ProtocolSession for Scripted {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        match turn.prompt.as_str() {
            "refuse" => Err(HostError::new("no capacity")),
            "crash" => {
                let _ = turn.sink.delta("partial");
                let _ = turn.sink.fail("agent_exited", "the agent went away");
                Ok(())
            }
            _ => {
                let _ = turn.sink.delta("sync ");
                let _ = turn.sink.delta("reply");
                let _ = turn.sink.complete("sync reply");
                // Output after the end is refused, never leaked into the next turn.
                assert!(turn.sink.delta("late").is_err());
                Ok(())
            }
        }
    }

    fn abort_turn(&self, _turn_id: &str) {}

    fn permission_decided(&self, _turn_id: &str, _request_id: &str, _decision: Decision) {}

    fn history(&self, _limit: Option<u32>) -> Option<AgentAnswer> {
        let answer = match self.history_calls.fetch_add(1, Ordering::SeqCst) {
            0 => Ok(json!({"entries": [{"role": "user", "text": "from agent", "turn_id": "x"}]})),
            1 => Ok(json!({"entries": "not a list"})),
            2 => Err(AgentCallError::MethodNotFound),
            _ => Err(AgentCallError::Failed("timed out".into())),
        };
        Some(Box::pin(async move { answer }))
    }
}

fn scripted() -> AgentProfile {
    AgentProfile::builder(InMemoryDirectory::new(|_| {
        Arc::new(Scripted::default()) as Arc<dyn ProtocolSession>
    }))
    .usage(NoUsage)
    .build()
}

#[tokio::test]
async fn an_agent_may_emit_synchronously_and_the_carrier_keeps_order() {
    let server = Server::with(config(), scripted()).await;
    let (mut c, hs) = server.drive().await;
    assert_eq!(hs["features"]["usage.session"], false);
    let turn = c.submit("hello").await;
    let events = c.turn_events(&turn).await;
    assert_eq!(
        names(&events),
        [
            "session.turn_started",
            "session.text_delta",
            "session.text_delta",
            "session.turn_completed"
        ]
    );
    assert_consecutive(&events);
    assert_eq!(events[3]["payload"]["text"], "sync reply");
}

#[tokio::test]
async fn a_refused_or_crashed_turn_ends_with_session_error_and_aborted() {
    let server = Server::with(config(), scripted()).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("refuse").await;
    let events = c.turn_events(&turn).await;
    assert_eq!(
        names(&events),
        [
            "session.turn_started",
            "session.error",
            "session.turn_completed"
        ]
    );
    assert_eq!(events[1]["payload"]["code"], "internal");
    assert_eq!(events[2]["payload"]["aborted"], true);

    let turn = c.submit("crash").await;
    let events = c.turn_events(&turn).await;
    assert_eq!(events[2]["payload"]["code"], "agent_exited");
    assert_eq!(
        events[3]["payload"],
        json!({"turn_id": turn, "text": "partial", "aborted": true})
    );
    // The session is idle again.
    assert_eq!(c.ok("session.status", json!({})).await["state"], "idle");
}

#[tokio::test]
async fn forwarded_reads_are_validated_or_served_from_the_carriers_record() {
    let server = Server::with(config(), scripted()).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("hello").await;
    c.turn_events(&turn).await;

    let from_agent = c.ok("session.history", json!({})).await;
    assert_eq!(from_agent["entries"][0]["text"], "from agent");

    let invalid = c.err("session.history", json!({})).await;
    assert_eq!(invalid["code"], "protocol_error");
    assert_eq!(invalid["effect_state"], "unknown");

    let local = c.ok("session.history", json!({})).await;
    assert_eq!(
        local["entries"],
        json!([
            {"role": "user", "text": "hello", "turn_id": "t1"},
            {"role": "assistant", "text": "sync reply", "turn_id": "t1"},
        ])
    );

    let failed = c.err("session.history", json!({})).await;
    assert_eq!(failed["code"], "internal");
    assert_eq!(failed["effect_state"], "unknown");

    let e = c.err("usage.report", json!({})).await;
    assert_eq!(e["code"], "unsupported_feature");
    assert_eq!(e["data"]["feature"], "usage.session");
}

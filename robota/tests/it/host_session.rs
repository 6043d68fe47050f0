//! The seed system's wire over a host's own `ProtocolSession`: the same flow as with the
//! embedded agent — a turn, a permission prompt allowed and denied, an agent error, abort
//! mid-turn and the history — over real sockets at `/robota`.

use carrier_test_support as support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use carrier_agent::{
    AgentProfile, HostError, InMemoryDirectory, ProtocolSession, TurnSink, TurnStart,
};
use carrier_protocol::methods::Decision;
use serde_json::json;
use support::robota::{deltas, types, RobotaClient};
use support::*;

/// A host agent: streams the prompt's words upper-cased (20 ms apart), asks for `host.tool`
/// on `/tool NAME`, and reports an error on `oops`.
#[derive(Default)]
struct Shouter {
    waiting: Mutex<HashMap<String, TurnSink>>,
}

impl ProtocolSession for Shouter {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let sink = turn.sink;
        if let Some(name) = turn.prompt.strip_prefix("/tool ") {
            // The answer comes back through `permission_decided` below; the future is not needed.
            drop(sink.ask_permission_as("perm-1", "host.tool", json!({ "name": name })));
            self.waiting.lock().unwrap().insert(turn.turn_id, sink);
            return Ok(());
        }
        if turn.prompt == "oops" {
            let _ = sink.error("host_failure", "the host tripped");
            let _ = sink.complete("recovered");
            return Ok(());
        }
        let words: Vec<String> = turn.prompt.split(' ').map(str::to_uppercase).collect();
        tokio::spawn(async move {
            let mut reply = String::new();
            for (i, word) in words.iter().enumerate() {
                let piece = if i == 0 {
                    word.clone()
                } else {
                    format!(" {word}")
                };
                if sink.delta(&piece).is_err() {
                    return;
                }
                reply.push_str(&piece);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = sink.complete(&reply);
        });
        Ok(())
    }

    fn abort_turn(&self, turn_id: &str) {
        self.waiting.lock().unwrap().remove(turn_id);
    }

    fn permission_decided(&self, turn_id: &str, _request_id: &str, decision: Decision) {
        let Some(sink) = self.waiting.lock().unwrap().remove(turn_id) else {
            return;
        };
        let text = match decision {
            Decision::Allow => "host ran it",
            Decision::Deny => "host refused",
        };
        let _ = sink.delta(text);
        let _ = sink.complete(text);
    }
}

async fn server() -> Server {
    let profile = AgentProfile::builder(InMemoryDirectory::new(|_| {
        Arc::new(Shouter::default()) as Arc<dyn ProtocolSession>
    }))
    .build();
    Server::with(config(), profile).await
}

#[tokio::test]
async fn a_host_session_drives_the_seed_systems_wire_like_the_embedded_agent() {
    let server = server().await;
    let (mut c, messages, _) = RobotaClient::connect_greeted(&server.robota_url("")).await;
    assert_eq!(messages["messages"], json!([]));

    c.send(json!({"type": "submit", "prompt": "quiet words"}))
        .await;
    let turn = c.until_turn_settles().await;
    assert_eq!(
        types(&turn),
        [
            "user_message",
            "thinking",
            "text_delta",
            "text_delta",
            "complete",
            "thinking",
            "execution_workspace_event"
        ]
    );
    assert_eq!(deltas(&turn), "QUIET WORDS");
    assert_eq!(turn[4]["result"]["response"], "QUIET WORDS");
    assert_eq!(turn[4]["driverId"], "host-driver");

    for (result, reply) in [(json!(true), "host ran it"), (json!(false), "host refused")] {
        c.send(json!({"type": "submit", "prompt": "/tool grep"}))
            .await;
        let asked = c.until("permission_request").await.pop().unwrap();
        assert_eq!(
            asked["event"],
            json!({"id": "perm-1", "toolName": "host.tool", "toolArgs": {"name": "grep"}})
        );
        c.send(json!({"type": "permission-response", "id": "perm-1", "result": result}))
            .await;
        let rest = c.until_turn_ends().await;
        assert_eq!(
            rest[0],
            json!({"type": "prompt_resolved", "event": {"id": "perm-1"}})
        );
        assert_eq!(deltas(&rest), reply);
        assert_eq!(rest.last().unwrap()["type"], "complete");
    }

    // An agent error reaches the client as `error`; the turn still completes.
    c.send(json!({"type": "submit", "prompt": "oops"})).await;
    let turn = c.until_turn_ends().await;
    assert_eq!(
        turn[2],
        json!({"type": "error", "message": "the host tripped", "driverId": "host-driver"})
    );
    assert_eq!(turn.last().unwrap()["result"]["response"], "recovered");

    // Abort mid-turn.
    let prompt = vec!["w"; 100].join(" ");
    let seen = c.submit_and_abort(&prompt).await;
    let end = seen.last().unwrap();
    assert_eq!(end["type"], "interrupted");
    assert_eq!(end["result"]["response"], deltas(&seen));

    let history = c.ask("get-messages", json!({})).await;
    let list = history["messages"].as_array().unwrap();
    assert_eq!(list.len(), 10, "five turns, a prompt and a reply each");
    assert_eq!(list[1]["content"], "QUIET WORDS");
    assert_eq!(list[9]["state"], "interrupted");
    assert_eq!(list[8]["state"], "complete");
}

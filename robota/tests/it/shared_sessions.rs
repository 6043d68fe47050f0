//! Both wires on one session, over real sockets: a client of the agent protocol and a client
//! of the seed system's wire (the Robota profile) see each other's turns live, and a Robota
//! connection that binds mid-turn gets the prompt in its history and then the rest of the turn,
//! with no gap and no duplicate.

use carrier_test_support as support;

use std::time::Duration;

use carrier_agent::{AgentProfile, EmbeddedAgent};
use carrier_server::WsTransport;
use serde_json::json;
use support::robota::{deltas, types, RobotaClient};
use support::*;

#[tokio::test]
async fn a_carrier_client_and_a_robota_client_see_each_others_turns_live() {
    let server = Server::start().await;
    let (mut carrier, hs) = server.drive().await;
    assert_eq!(hs["session_id"], "s1");
    let (mut robota, _, _) = RobotaClient::connect_greeted(&server.robota_url("")).await;

    // The carrier client drives; the Robota client sees it live.
    let turn = carrier.submit("from carrier").await;
    let events = carrier.turn_events(&turn).await;
    let seen = robota.until_turn_ends().await;
    assert_eq!(seen[0]["content"], "from carrier");
    assert_eq!(deltas(&seen), "echo: from carrier");
    assert_eq!(
        seen.last().unwrap()["result"]["response"],
        events.last().unwrap()["payload"]["text"]
    );

    // The Robota client drives; the carrier client sees it with seq going on.
    robota
        .send(json!({"type": "submit", "prompt": "/tool z"}))
        .await;
    let asked = carrier.event("session.permission_request").await;
    let robota_asked = robota.until("permission_request").await.pop().unwrap();
    assert_eq!(robota_asked["event"]["id"], asked["payload"]["request_id"]);
    // The carrier client answers the prompt the Robota client also sees.
    carrier
        .ok(
            "session.permission.respond",
            json!({"request_id": asked["payload"]["request_id"], "decision": "allow"}),
        )
        .await;
    let rest = robota.until_turn_ends().await;
    assert_eq!(types(&rest)[0], "prompt_resolved");
    assert_eq!(deltas(&rest), "tool ran: z");
    let turn = asked["payload"]["turn_id"].as_str().unwrap().to_owned();
    let events = carrier.turn_events(&turn).await;
    assert_eq!(events.last().unwrap()["payload"]["text"], "tool ran: z");
    let history = carrier.ok("session.history", json!({})).await;
    assert_eq!(history["entries"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn a_connection_that_joins_mid_turn_gets_the_prompt_then_the_rest_without_a_gap() {
    let transport = WsTransport::new(config()).expect("config");
    let agent = EmbeddedAgent::default().with_demo_delay(Duration::from_millis(20));
    transport.attach(with_robota(AgentProfile::embedded(agent)));
    transport.start().await.expect("start");
    let port = transport.bound_port().unwrap();
    let mut carrier = Client::connect(&format!("ws://127.0.0.1:{port}/?token=test-token")).await;
    carrier.handshake(json!({})).await;
    // Distinct words: a delta lost in between would leave no suffix of the reply.
    let prompt: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
    let prompt = prompt.join(" ");
    let turn = carrier.submit(&prompt).await;
    carrier.event("session.text_delta").await;

    let url = format!("ws://127.0.0.1:{port}/robota?token=test-token");
    let (mut late, messages, _) = RobotaClient::connect_greeted(&url).await;
    let list = messages["messages"].as_array().unwrap();
    assert_eq!(list.len(), 1, "the running turn's prompt: {messages}");
    assert_eq!(
        (list[0]["role"].clone(), list[0]["content"].clone()),
        (json!("user"), json!(prompt))
    );
    let rest = late.until_turn_ends().await;
    assert!(types(&rest).iter().all(|t| t != "user_message"));
    let reply = rest.last().unwrap()["result"]["response"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(reply, format!("echo: {prompt}"));
    let tail = deltas(&rest);
    assert!(
        !tail.is_empty() && reply.ends_with(&tail),
        "a suffix: {tail:?}"
    );
    let events = carrier.turn_events(&turn).await;
    let streamed = concat_deltas(&events);
    assert!(
        streamed.ends_with(&tail),
        "the same deltas as the carrier client's"
    );
    transport.stop().await;
}

/// A prompt belongs to the session, not to the wire of the client that saw it: one asked while
/// a carrier client drove reaches a Robota driver that connects after it left, and the other
/// way round.
#[tokio::test]
async fn a_prompt_left_on_one_wire_is_sent_to_a_driver_of_the_other() {
    let server = Server::start().await;
    let (mut carrier, _) = server.drive().await;
    let turn = carrier.submit("/tool a").await;
    let asked = carrier.event("session.permission_request").await;
    carrier.close().await;
    let (mut robota, _, _) = RobotaClient::connect_greeted(&server.robota_url("")).await;
    assert_eq!(
        robota.next().await,
        json!({"type": "permission_request", "event": {
            "id": asked["payload"]["request_id"], "toolName": "demo.tool",
            "toolArgs": {"command": "a"}}})
    );
    robota
        .send(json!({"type": "permission-response", "id": asked["payload"]["request_id"], "result": false}))
        .await;
    assert_eq!(deltas(&robota.until_turn_ends().await), "tool denied");

    robota
        .send(json!({"type": "submit", "prompt": "/tool b"}))
        .await;
    let asked = robota.until("permission_request").await.pop().unwrap();
    let _ = robota.ws.close(None).await;
    let (mut carrier, _) = server.drive().await;
    let resent = carrier.next().await;
    assert_eq!(resent["event"], "session.permission_request");
    assert_eq!(resent["payload"]["request_id"], asked["event"]["id"]);
    assert_ne!(resent["payload"]["turn_id"], turn.as_str());
    carrier
        .ok(
            "session.permission.respond",
            json!({"request_id": asked["event"]["id"], "decision": "allow"}),
        )
        .await;
    let done = carrier.event("session.turn_completed").await;
    assert_eq!(done["payload"]["text"], "tool ran: b");
}

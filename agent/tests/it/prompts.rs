//! Permission prompts never outlive their turn or their drivers, on the agent protocol's wire
//! and across wires, over real sockets: an abort resolves every open prompt on every
//! connection; a drive connection that binds while a prompt is open (handshake, resume,
//! `sessions.switch`) is sent it under its own `seq`, so `seq` still only rises; a prompt no
//! driver is bound to answer is denied after the unattended-prompt timeout.

use carrier_test_support as support;

use std::time::Duration;

use carrier_agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
use serde_json::{json, Value};
use support::robota::{types, RobotaClient};
use support::*;

/// Submits `/tool x` and returns the turn id and its `permission_request` event.
async fn ask(c: &mut Client) -> (String, Value) {
    let turn = c.submit("/tool x").await;
    let asked = c.event("session.permission_request").await;
    (turn, asked)
}

#[tokio::test]
async fn an_abort_resolves_the_open_prompt_denied_on_every_connection_before_the_turn_ends() {
    let server = Server::start().await;
    let (mut driver, _) = server.drive().await;
    let (mut observer, _) = server.observe().await;
    let (mut robota, _, _) = RobotaClient::connect_greeted(&server.robota_url("")).await;
    let (turn, asked) = ask(&mut driver).await;
    let request_id = asked["payload"]["request_id"].clone();
    assert_eq!(
        driver.ok("session.abort", json!({"turn_id": turn})).await,
        json!({"turn_id": turn})
    );
    // The driver read the prompt already; the observer reads the whole turn.
    for (c, whole) in [(&mut driver, false), (&mut observer, true)] {
        let events = c.turn_events(&turn).await;
        let tail = &events[events.len() - 2..];
        assert_eq!(
            names(tail),
            ["session.permission_resolved", "session.turn_completed"]
        );
        assert_eq!(
            tail[0]["payload"],
            json!({"request_id": request_id, "decision": "deny"})
        );
        assert_eq!(tail[1]["payload"]["aborted"], true);
        if whole {
            assert_eq!(
                names(&events),
                [
                    "session.turn_started",
                    "session.permission_request",
                    "session.permission_resolved",
                    "session.turn_completed"
                ]
            );
            assert_consecutive(&events);
        }
    }
    let end = robota.until_turn_ends().await;
    assert_eq!(
        types(&end[end.len() - 2..]),
        ["prompt_resolved", "interrupted"]
    );
    // Nothing is left to answer.
    let late = driver
        .err(
            "session.permission.respond",
            json!({"request_id": request_id, "decision": "allow"}),
        )
        .await;
    assert_eq!(late["code"], "not_found");
}

#[tokio::test]
async fn a_driver_that_handshakes_while_a_prompt_is_open_is_sent_it_right_after_the_result() {
    let server = Server::start().await;
    let (mut first, _) = server.drive().await;
    let (_, asked) = ask(&mut first).await;
    first.close().await;

    // An observer is not sent it: it cannot answer.
    let (mut observer, _) = server.observe().await;
    assert_eq!(observer.ok("system.ping", json!({})).await, json!({}));
    assert!(observer.stashed().is_empty(), "{:?}", observer.stashed());

    let mut next = server.connect("").await;
    next.send_request("system.handshake", handshake_params(json!({})))
        .await;
    assert!(next.next().await["result"]["session_id"] == "s1");
    // The very event the first driver saw, under its own seq, right after the result.
    assert_eq!(next.next().await, asked);
    next.ok(
        "session.permission.respond",
        json!({"request_id": asked["payload"]["request_id"], "decision": "allow"}),
    )
    .await;
    let resolved = next.event("session.permission_resolved").await;
    assert_eq!(resolved["seq"], asked["seq"].as_u64().unwrap() + 1);
    let done = next.event("session.turn_completed").await;
    assert_eq!(done["payload"]["text"], "tool ran: x");
}

#[tokio::test]
async fn a_resume_replays_an_open_prompt_once_and_never_again() {
    let server = Server::start().await;
    let (mut first, hs) = server.drive().await;
    let (_, asked) = ask(&mut first).await;
    first.close().await;
    let seq = asked["seq"].as_u64().unwrap();
    let resume = |after_seq: u64| json!({"resume": {"session_id": "s1", "epoch": hs["epoch"], "after_seq": after_seq}});

    // It saw the prompt: it is not sent again.
    let mut seen = server.connect("").await;
    let result = seen.handshake(resume(seq)).await;
    assert_eq!(
        result["resume"],
        json!({"outcome": "resumed", "replayed": 0})
    );
    assert_eq!(seen.ok("system.ping", json!({})).await, json!({}));
    assert!(seen.stashed().is_empty(), "{:?}", seen.stashed());

    // It saw the turn start only: the replay holds the prompt, once.
    let mut behind = server.connect("").await;
    let result = behind.handshake(resume(seq - 1)).await;
    assert_eq!(
        result["resume"],
        json!({"outcome": "resumed", "replayed": 1})
    );
    assert_eq!(behind.next().await, asked);
    assert_eq!(behind.ok("system.ping", json!({})).await, json!({}));
    assert!(behind.stashed().is_empty(), "{:?}", behind.stashed());
}

#[tokio::test]
async fn switching_to_a_session_with_an_open_prompt_sends_it_after_the_reply() {
    let server = Server::start().await;
    let (mut first, _) = server.drive().await;
    let (_, asked) = ask(&mut first).await;

    let (mut other, _) = server.drive().await;
    // Bound to s1 by its handshake, it was sent the prompt then.
    assert_eq!(other.event("session.permission_request").await, asked);
    assert_eq!(
        other.ok("sessions.start", json!({})).await["session_id"],
        "s2"
    );
    let id = other
        .send_request("sessions.switch", json!({"session_id": "s1"}))
        .await;
    let reply = other.next().await;
    assert_eq!(
        (reply["id"].clone(), reply["result"].clone()),
        (json!(id), json!({"session_id": "s1"}))
    );
    assert_eq!(other.next().await, asked);
}

#[tokio::test]
async fn a_prompt_left_with_no_driver_is_denied_after_the_timeout_and_the_session_goes_on() {
    let profile = AgentProfile::builder(InMemoryDirectory::new(|_| {
        EmbeddedAgent::default().with_demo_delay(DELAY).session()
    }))
    .unattended_prompt_timeout(Duration::from_millis(300))
    .build();
    let server = Server::with(config(), profile).await;
    let (mut observer, _) = server.observe().await;
    let (mut driver, _) = server.drive().await;
    let (turn, asked) = ask(&mut driver).await;
    driver.close().await;

    let events = observer.turn_events(&turn).await;
    assert_consecutive(&events);
    let resolved = events
        .iter()
        .find(|e| e["event"] == "session.permission_resolved")
        .expect("resolved");
    assert_eq!(
        resolved["payload"],
        json!({"request_id": asked["payload"]["request_id"], "decision": "deny"})
    );
    // The agent was told deny and finished its turn itself.
    assert_eq!(concat_deltas(&events), "tool denied");
    assert_eq!(events.last().unwrap()["payload"]["aborted"], false);
    let (mut next, _) = server.drive().await;
    let turn = next.submit("again").await;
    assert_eq!(concat_deltas(&next.turn_events(&turn).await), "echo: again");
}

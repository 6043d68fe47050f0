//! Resume (docs/protocol.md, "Sessions and resume"): missed events replayed in order before live
//! ones, evicted ranges reported as a gap, a restarted server reported as a reset.

use carrier_test_support as support;

use std::time::Duration;

use carrier_agent::{AgentProfile, EmbeddedAgent};
use serde_json::{json, Value};
use support::*;

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[tokio::test]
async fn reconnecting_mid_turn_replays_exactly_the_missed_events_then_live_ones() {
    let server = Server::with(config(), embedded(Duration::from_millis(60))).await;
    // The observer sees the whole stream: the reference.
    let (mut reference, _) = server.observe().await;
    let (mut c, hs) = server.drive().await;
    let prompt = "one two three four five six seven eight nine ten eleven twelve";
    let turn = c.submit(prompt).await;
    // Read up to seq 3, then drop the socket mid-turn.
    let mut before = Vec::new();
    while before.len() < 3 {
        before.push(c.wait_for(|f| f.get("seq").is_some()).await);
    }
    assert_eq!(seqs(&before), [1, 2, 3]);
    drop(c);

    let mut again = server.connect("").await;
    let r = again
        .handshake(json!({"resume": {"session_id": hs["session_id"], "epoch": hs["epoch"], "after_seq": 3}}))
        .await;
    assert!(
        again.stashed().is_empty(),
        "nothing may precede the handshake result"
    );
    assert_eq!(r["resume"]["outcome"], "resumed");
    assert_eq!(r["session_id"], hs["session_id"]);
    let replayed = r["resume"]["replayed"].as_u64().unwrap();
    let after = again.turn_events(&turn).await;
    assert_eq!(
        after[0]["seq"], 4,
        "the replay starts right after after_seq"
    );
    assert_consecutive(&after);
    assert!(after.len() as u64 >= replayed);

    let full = reference.turn_events(&turn).await;
    let mut resumed_view = before.clone();
    resumed_view.extend(after);
    assert_eq!(resumed_view, full, "no gap, no duplicate, same bytes");
    assert_eq!(concat_deltas(&full), format!("echo: {prompt}"));
}

#[tokio::test]
async fn resuming_at_the_latest_seq_replays_nothing() {
    let server = Server::start().await;
    let (mut c, hs) = server.drive().await;
    let turn = c.submit("a b").await;
    let events = c.turn_events(&turn).await;
    let last = events.last().unwrap()["seq"].as_u64().unwrap();
    let mut again = server.connect("").await;
    let r = again
        .handshake(json!({"resume": {"session_id": "s1", "epoch": hs["epoch"], "after_seq": last}}))
        .await;
    assert_eq!(r["resume"], json!({"outcome": "resumed", "replayed": 0}));
    // Live events continue from last + 1.
    let turn = again.submit("c").await;
    let events = again.turn_events(&turn).await;
    assert_eq!(events[0]["seq"].as_u64().unwrap(), last + 1);
}

#[tokio::test]
async fn an_evicted_range_is_reported_as_a_gap() {
    let agent = EmbeddedAgent::default().with_demo_delay(DELAY);
    let profile = AgentProfile::builder(carrier_agent::InMemoryDirectory::new(move |_| {
        agent.session()
    }))
    .resume_ring(4, 1 << 20)
    .build();
    let server = Server::with(config(), profile).await;
    let (mut c, hs) = server.drive().await;
    assert_eq!(hs["limits"]["resume_max_events"], 4);
    let turn = c.submit("w1 w2 w3 w4 w5 w6 w7 w8").await;
    let events = c.turn_events(&turn).await;
    let last = events.last().unwrap()["seq"].as_u64().unwrap();
    assert_eq!(last, 11, "turn_started + 9 deltas + turn_completed");

    let mut again = server.connect("").await;
    let r = again
        .handshake(json!({"resume": {"session_id": "s1", "epoch": hs["epoch"], "after_seq": 2}}))
        .await;
    assert_eq!(
        r["resume"],
        json!({"outcome": "gap", "from": 3, "to": last - 4})
    );
    // The events still held are replayed after the result, in order.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(again.next().await);
    }
    assert_eq!(seqs(&held), [8, 9, 10, 11]);
    assert_eq!(held, events[7..]);
}

#[tokio::test]
async fn a_restarted_transport_resets_the_resume() {
    let mut server = Server::start().await;
    let (mut c, hs) = server.drive().await;
    let turn = c.submit("before restart").await;
    c.turn_events(&turn).await;
    c.close().await;
    server.transport.stop().await;
    server.transport.attach(embedded(DELAY));
    server.transport.start().await.unwrap();
    server.port = server.transport.bound_port().unwrap();

    let mut again = server.connect("").await;
    let r = again
        .handshake(json!({"resume": {"session_id": hs["session_id"], "epoch": hs["epoch"], "after_seq": 1}}))
        .await;
    assert_eq!(r["resume"], json!({"outcome": "reset"}));
    assert_ne!(r["epoch"], hs["epoch"]);
    assert_eq!(r["session_id"], "s1");
    // Nothing is replayed after a reset: the next frame is the answer to a ping.
    let id = again.send_request("system.ping", json!({})).await;
    let next = again.next().await;
    assert_eq!(next["id"], id.as_str());
    assert_eq!(next["result"], json!({}));
}

#[tokio::test]
async fn an_unknown_session_in_the_current_epoch_is_a_reset() {
    let server = Server::start().await;
    let (_c, hs) = server.drive().await;
    let mut again = server.connect("").await;
    let r = again
        .handshake(json!({"resume": {"session_id": "s404", "epoch": hs["epoch"], "after_seq": 0}}))
        .await;
    assert_eq!(r["resume"], json!({"outcome": "reset"}));
    assert_eq!(r["session_id"], "s1");
}

#[tokio::test]
async fn a_seq_from_the_future_is_a_reset() {
    let server = Server::start().await;
    let (_c, hs) = server.drive().await;
    let mut again = server.connect("").await;
    let r = again
        .handshake(json!({"resume": {"session_id": "s1", "epoch": hs["epoch"], "after_seq": 99}}))
        .await;
    assert_eq!(r["resume"], json!({"outcome": "reset"}));
}

//! The embedded default agent to the byte (docs/protocol.md, "Events", the demo agent).

use carrier_test_support as support;

use std::time::Duration;

use serde_json::json;
use support::*;

#[tokio::test]
async fn submit_streams_echo_word_by_word_then_completes() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let prompt = "hello  wide\tworld ";
    let turn = c.submit(prompt).await;
    let events = c.turn_events(&turn).await;
    let expected_text = format!("echo: {prompt}");
    // Each word with the whitespace before it; trailing whitespace stays with the last word.
    let expected_deltas = ["echo:", " hello", "  wide", "\tworld "];

    let mut expected_names = vec!["session.turn_started".to_owned()];
    expected_names.extend(
        expected_deltas
            .iter()
            .map(|_| "session.text_delta".to_owned()),
    );
    expected_names.push("session.turn_completed".to_owned());
    assert_eq!(names(&events), expected_names);
    assert_consecutive(&events);
    assert_eq!(events[0]["seq"], 1);

    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| e["payload"]["delta"].as_str())
        .collect();
    assert_eq!(deltas, expected_deltas);
    assert_eq!(concat_deltas(&events), expected_text);
    let done = events.last().unwrap();
    assert_eq!(
        done["payload"],
        json!({"turn_id": turn, "text": expected_text, "aborted": false})
    );
}

#[tokio::test]
async fn an_empty_prompt_echoes_the_prefix() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("").await;
    let events = c.turn_events(&turn).await;
    assert_eq!(concat_deltas(&events), "echo: ");
    assert_eq!(events.last().unwrap()["payload"]["text"], "echo: ");
}

#[tokio::test]
async fn tool_prompt_allowed_runs_the_tool() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("/tool ls -la /tmp").await;
    let req = c.event("session.permission_request").await;
    assert_eq!(req["payload"]["turn_id"], turn.as_str());
    assert_eq!(req["payload"]["tool"], "demo.tool");
    assert_eq!(req["payload"]["input"], json!({"command": "ls -la /tmp"}));
    let status = c.ok("session.status", json!({})).await;
    assert_eq!(status["state"], "awaiting_permission");
    assert_eq!(status["turn_id"], turn.as_str());

    let request_id = req["payload"]["request_id"].as_str().unwrap().to_owned();
    let r = c
        .ok(
            "session.permission.respond",
            json!({"request_id": request_id, "decision": "allow"}),
        )
        .await;
    assert_eq!(r, json!({}));
    let resolved = c.event("session.permission_resolved").await;
    assert_eq!(
        resolved["payload"],
        json!({"request_id": request_id, "decision": "allow"})
    );
    assert_eq!(
        resolved["seq"].as_u64().unwrap(),
        req["seq"].as_u64().unwrap() + 1
    );
    let events = c.turn_events(&turn).await;
    assert_eq!(concat_deltas(&events), "tool ran: ls -la /tmp");
    assert_eq!(
        events.last().unwrap()["payload"]["text"],
        "tool ran: ls -la /tmp"
    );
}

#[tokio::test]
async fn tool_prompt_denied_says_so() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("/tool rm -rf /").await;
    let req = c.event("session.permission_request").await;
    let request_id = req["payload"]["request_id"].as_str().unwrap().to_owned();
    c.ok(
        "session.permission.respond",
        json!({"request_id": request_id, "decision": "deny"}),
    )
    .await;
    let events = c.turn_events(&turn).await;
    assert_eq!(concat_deltas(&events), "tool denied");
    assert_eq!(events.last().unwrap()["payload"]["aborted"], false);
    // Answering twice: the request is no longer pending.
    let e = c
        .err(
            "session.permission.respond",
            json!({"request_id": request_id, "decision": "allow"}),
        )
        .await;
    assert_eq!(e["code"], "not_found");
}

#[tokio::test]
async fn a_second_submit_while_running_is_busy() {
    let server = Server::with(config(), embedded(Duration::from_millis(200))).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("one two three").await;
    let e = c.err("session.submit", json!({"prompt": "again"})).await;
    assert_eq!(e["code"], "busy");
    assert_eq!(e["effect_state"], "none");
    c.ok("session.abort", json!({"turn_id": turn})).await;
    // Idle again: a submit works.
    c.submit("after").await;
}

#[tokio::test]
async fn abort_ends_the_turn_with_aborted_true() {
    let server = Server::with(config(), embedded(Duration::from_millis(300))).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("a b c d e f").await;
    // Wait for the first delta so the abort lands mid-turn.
    c.event("session.text_delta").await;
    let r = c.ok("session.abort", json!({})).await;
    assert_eq!(r, json!({"turn_id": turn}));
    let done = c.event("session.turn_completed").await;
    assert_eq!(done["payload"]["aborted"], true);
    assert_eq!(done["payload"]["text"], "echo:");
    let status = c.ok("session.status", json!({})).await;
    assert_eq!(status, json!({"session_id": "s1", "state": "idle"}));
    // No delta of the aborted turn follows: the next frame after a ping is its response.
    let ping = c.request("system.ping", json!({})).await;
    assert_eq!(ping["result"], json!({}));
    assert!(c
        .stashed()
        .iter()
        .all(|f| f["event"] != "session.text_delta"));
}

#[tokio::test]
async fn abort_while_awaiting_permission_ends_the_turn() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("/tool x").await;
    let req = c.event("session.permission_request").await;
    c.ok("session.abort", json!({"turn_id": turn})).await;
    let done = c.event("session.turn_completed").await;
    assert_eq!(
        done["payload"],
        json!({"turn_id": turn, "text": "", "aborted": true})
    );
    let e = c
        .err(
            "session.permission.respond",
            json!({"request_id": req["payload"]["request_id"], "decision": "allow"}),
        )
        .await;
    assert_eq!(e["code"], "not_found");
}

#[tokio::test]
async fn history_records_prompts_and_replies_oldest_first() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    for prompt in ["first", "second"] {
        let turn = c.submit(prompt).await;
        c.turn_events(&turn).await;
    }
    let h = c.ok("session.history", json!({})).await;
    assert_eq!(
        h["entries"],
        json!([
            {"role": "user", "text": "first", "turn_id": "t1"},
            {"role": "assistant", "text": "echo: first", "turn_id": "t1"},
            {"role": "user", "text": "second", "turn_id": "t2"},
            {"role": "assistant", "text": "echo: second", "turn_id": "t2"},
        ])
    );
    let h = c.ok("session.history", json!({"limit": 1})).await;
    assert_eq!(
        h["entries"],
        json!([{"role": "assistant", "text": "echo: second", "turn_id": "t2"}])
    );
}

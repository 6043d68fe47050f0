//! An ACP agent hosted by carrier (`--agent-acp`; carrier is its ACP client over stdio),
//! against agents written on the ACP SDKs (`fixtures/agents/`: Node's
//! `@agentclientprotocol/sdk`, PyPI's `agent-client-protocol`), driven by carrier clients over
//! real sockets on 127.0.0.1: text streamed as deltas, tool calls as `session.agent_update`,
//! permission requests with the agent's options answered as the option each decision picks,
//! aborts as `session/cancel`, exits mid-turn as `agent_exited`, one agent process serving
//! several sessions, requests carrier does not offer answered `-32601`, bad lines dropped.

mod hosted;

use std::time::Duration;

use carrier_acp::agent_host::{AcpAgent, AcpAgentError};
use carrier_test_support::{concat_deltas, names, Client};
use hosted::{node_agent, python_agent, updates, Hosted};
use serde_json::{json, Value};

/// Runs `prompt` as a turn and returns its events.
async fn turn(c: &mut Client, prompt: &str) -> Vec<Value> {
    let turn = c.submit(prompt).await;
    c.turn_events(&turn).await
}

fn completed(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["event"] == "session.turn_completed")
        .map(|e| &e["payload"])
        .expect("turn_completed")
}

#[tokio::test]
async fn a_prompt_streams_the_agents_text_and_its_other_updates_arrive_as_agent_updates() {
    let h = Hosted::start(|record| node_agent(record, &[])).await;
    let mut c = h.drive().await;
    let events = turn(&mut c, "hello there friend").await;
    assert_eq!(concat_deltas(&events), "hi there friend");
    // (The agent's announcement after session/new may land in the first turn: left out.)
    let plan: Vec<Value> = updates(&events)
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "available_commands_update")
        .collect();
    assert_eq!(plan.len(), 1, "{events:?}");
    assert_eq!(plan[0]["sessionUpdate"], "plan");
    assert_eq!(plan[0]["entries"][0]["content"], "greet");
    let done = completed(&events);
    assert_eq!(
        (
            done["text"].clone(),
            done["aborted"].clone(),
            done["stop_reason"].clone()
        ),
        (json!("hi there friend"), json!(false), json!("end_turn"))
    );

    // What carrier said to the agent: initialize, session/new, the prompt as one text block.
    let received = h.received();
    assert_eq!(
        h.received_methods()[..3],
        ["initialize", "session/new", "session/prompt"]
    );
    assert_eq!(received[0]["params"]["protocolVersion"], 1);
    assert_eq!(
        received[0]["params"]["clientCapabilities"],
        json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false})
    );
    assert_eq!(received[0]["params"]["clientInfo"]["name"], "carrier");
    assert_eq!(received[1]["params"]["mcpServers"], json!([]));
    let cwd = received[1]["params"]["cwd"].as_str().expect("cwd");
    assert!(std::path::Path::new(cwd).is_absolute(), "{cwd}");
    assert_eq!(
        received[2]["params"]["prompt"],
        json!([{"type": "text", "text": "hello there friend"}])
    );
    h.stop().await;
}

#[tokio::test]
async fn a_tool_call_asks_with_the_agents_options_and_each_answer_reaches_it_as_an_option() {
    let h = Hosted::start(|record| node_agent(record, &[])).await;
    let mut c = h.drive().await;
    for (answer, selected) in [
        (json!({"decision": "allow"}), "allow"),
        (json!({"decision": "deny"}), "reject"),
        (json!({"option_id": "always"}), "always"),
    ] {
        let turn_id = c.submit("tool").await;
        let asked = c.event("session.permission_request").await;
        let prompt = &asked["payload"];
        assert_eq!(prompt["turn_id"], turn_id.as_str());
        assert_eq!(prompt["tool"], "Write notes.txt");
        assert_eq!(prompt["input"]["toolCallId"], "call-1");
        assert_eq!(
            prompt["options"],
            json!([
                {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ])
        );
        let mut params = answer.clone();
        params["request_id"] = prompt["request_id"].clone();
        c.ok("session.permission.respond", params).await;
        let events = c.turn_events(&turn_id).await;
        assert_eq!(
            concat_deltas(&events),
            format!("selected {selected}"),
            "{answer}"
        );
        // The tool call and its completion, as the agent reported them.
        let kinds: Vec<Value> = updates(&events)
            .iter()
            .map(|u| u["sessionUpdate"].clone())
            .filter(|kind| kind != "available_commands_update")
            .collect();
        assert_eq!(
            kinds,
            [json!("tool_call"), json!("tool_call_update")],
            "{events:?}"
        );
        let resolved = events
            .iter()
            .find(|e| e["event"] == "session.permission_resolved")
            .expect("resolved");
        let decision = if selected == "reject" {
            "deny"
        } else {
            "allow"
        };
        assert_eq!(resolved["payload"]["decision"], decision);
    }
    // Each answer reached the agent as the outcome ACP defines.
    let answers: Vec<Value> = h
        .received()
        .into_iter()
        .filter(|m| m["result"]["outcome"].is_object())
        .map(|m| m["result"]["outcome"].clone())
        .collect();
    assert_eq!(
        answers,
        [
            json!({"outcome": "selected", "optionId": "allow"}),
            json!({"outcome": "selected", "optionId": "reject"}),
            json!({"outcome": "selected", "optionId": "always"}),
        ]
    );
    h.stop().await;
}

#[tokio::test]
async fn an_abort_sends_session_cancel_and_the_turn_ends_aborted() {
    let h = Hosted::start(|record| node_agent(record, &[])).await;
    let mut c = h.drive().await;
    let turn_id = c.submit("wait").await;
    let first = c.event("session.text_delta").await;
    assert_eq!(first["payload"]["delta"], "waiting");
    c.ok("session.abort", json!({"turn_id": turn_id})).await;
    let events = c.turn_events(&turn_id).await;
    assert_eq!(completed(&events)["aborted"], true);
    h.until_received(|m| m["method"] == "session/cancel").await;

    // An abort while the agent waits for permission: its request is answered `cancelled`.
    let turn_id = c.submit("tool").await;
    c.event("session.permission_request").await;
    c.ok("session.abort", json!({"turn_id": turn_id})).await;
    let events = c.turn_events(&turn_id).await;
    assert_eq!(completed(&events)["aborted"], true);
    h.until_received(|m| m["result"]["outcome"] == json!({"outcome": "cancelled"}))
        .await;

    // The session goes on: the next prompt follows the agent's answer to the cancelled one.
    let events = turn(&mut c, "hello again").await;
    assert_eq!(concat_deltas(&events), "hi again");
    h.stop().await;
}

#[tokio::test]
async fn the_agents_exit_mid_turn_ends_the_turn_and_the_next_turn_restarts_it() {
    let h = Hosted::start(|record| node_agent(record, &[])).await;
    let first_pid = h.agent.pid().expect("running");
    let mut c = h.drive().await;
    let events = turn(&mut c, "exit").await;
    // (The agent's announcement after session/new may land in the first turn: left out.)
    let events: Vec<Value> = events
        .into_iter()
        .filter(|e| e["event"] != "session.agent_update")
        .collect();
    assert_eq!(
        names(&events),
        [
            "session.turn_started",
            "session.text_delta",
            "session.error",
            "session.turn_completed"
        ]
    );
    assert_eq!(events[2]["payload"]["code"], "agent_exited");
    assert_eq!(completed(&events)["aborted"], true);
    assert_eq!(completed(&events)["text"], "bye");

    // Restarted: a new process, initialized, with a new ACP session for the carrier session.
    let events = turn(&mut c, "hello back").await;
    assert_eq!(concat_deltas(&events), "hi back");
    assert_ne!(h.agent.pid(), Some(first_pid));
    let methods = h.received_methods();
    assert_eq!(
        methods.iter().filter(|m| *m == "initialize").count(),
        2,
        "{methods:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn requests_carrier_does_not_offer_are_answered_method_not_found_and_junk_is_dropped() {
    let h = Hosted::start(|record| node_agent(record, &[])).await;
    let mut c = h.drive().await;
    let events = turn(&mut c, "fs").await;
    assert_eq!(concat_deltas(&events), "-32601 -32601");
    let events = turn(&mut c, "junk").await;
    assert_eq!(concat_deltas(&events), "after junk");
    assert_eq!(completed(&events)["aborted"], false);
    // The agent's two requests, and of its junk the invalid response with an id, were
    // answered as JSON-RPC says; nothing else was. The answer to the junk may reach the
    // agent's record after the turn's end, so read the record until it holds three errors.
    let expected = [
        (json!(0), json!(-32601)),
        (json!(1), json!(-32601)),
        (json!("j1"), json!(-32600)),
    ];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let errors = loop {
        let errors: Vec<(Value, Value)> = h
            .received()
            .into_iter()
            .filter(|m| m.get("error").is_some())
            .map(|m| (m["id"].clone(), m["error"]["code"].clone()))
            .collect();
        if errors.len() >= expected.len() || tokio::time::Instant::now() > deadline {
            break errors;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(errors, expected);
    h.stop().await;
}

#[tokio::test]
async fn one_agent_process_serves_every_session_each_as_its_own_acp_session() {
    let h = Hosted::start(|record| node_agent(record, &[])).await;
    let pid = h.agent.pid();
    let mut a = h.drive().await;
    let mut b = h.drive().await;
    let started = b.ok("sessions.start", json!({"title": "second"})).await;
    assert_eq!(started["session_id"], "s2");
    // The agent's announcement right after session/new, outside any turn.
    let announced = b.wait_for(|f| f["event"] == "session.agent_update").await;
    assert!(announced["payload"].get("turn_id").is_none(), "{announced}");
    assert_eq!(
        announced["payload"]["update"]["sessionUpdate"],
        "available_commands_update"
    );

    let (one, two) = tokio::join!(turn(&mut a, "hello one"), turn(&mut b, "hello two"));
    assert_eq!(concat_deltas(&one), "hi one");
    assert_eq!(concat_deltas(&two), "hi two");
    assert_eq!(h.agent.pid(), pid, "the same process");
    let sessions: Vec<Value> = h
        .received()
        .into_iter()
        .filter(|m| m["method"] == "session/prompt")
        .map(|m| m["params"]["sessionId"].clone())
        .collect();
    assert_eq!(sessions.len(), 2);
    assert_ne!(sessions[0], sessions[1], "two ACP sessions");
    h.stop().await;
}

#[tokio::test]
async fn an_agent_that_requires_authentication_stops_the_launch_naming_its_methods() {
    let dir = tempfile::tempdir().expect("temp dir");
    let record = dir.path().join("received.jsonl");
    let started = AcpAgent::start(node_agent(&record, &[("ACP_AUTH", "1")])).await;
    let err = started.expect_err("refused");
    assert!(matches!(err, AcpAgentError::AuthRequired { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("login (Log in with a browser)"),
        "{message}"
    );
}

#[tokio::test]
async fn the_python_sdk_agent_streams_asks_is_cancelled_and_exits_the_same_way() {
    let h = Hosted::start(python_agent).await;
    let mut c = h.drive().await;
    let events = turn(&mut c, "hello from rust").await;
    assert_eq!(concat_deltas(&events), "hi from rust");
    assert_eq!(completed(&events)["stop_reason"], "end_turn");

    for (decision, selected) in [("allow", "allow"), ("deny", "reject")] {
        let turn_id = c.submit("tool").await;
        let asked = c.event("session.permission_request").await;
        assert_eq!(asked["payload"]["options"][2]["kind"], "reject_once");
        let request_id = asked["payload"]["request_id"].clone();
        c.ok(
            "session.permission.respond",
            json!({"request_id": request_id, "decision": decision}),
        )
        .await;
        let events = c.turn_events(&turn_id).await;
        assert_eq!(concat_deltas(&events), format!("selected {selected}"));
        assert_eq!(updates(&events)[0]["sessionUpdate"], "tool_call");
    }

    let turn_id = c.submit("wait").await;
    c.event("session.text_delta").await;
    c.ok("session.abort", json!({"turn_id": turn_id})).await;
    assert_eq!(completed(&c.turn_events(&turn_id).await)["aborted"], true);
    h.until_received(|m| m["method"] == "session/cancel").await;

    let events = turn(&mut c, "exit").await;
    let error = events
        .iter()
        .find(|e| e["event"] == "session.error")
        .expect("error");
    assert_eq!(error["payload"]["code"], "agent_exited");
    tokio::time::timeout(Duration::from_secs(30), turn(&mut c, "hello again"))
        .await
        .expect("the restarted agent answers");
    h.stop().await;
}

#[tokio::test]
async fn the_agents_permission_requests_are_bounded_at_the_limits_and_one_past_them() {
    use carrier_acp::agent_host::{MAX_OPEN_PERMISSIONS, MAX_OPTIONS};
    let h = Hosted::start(|record| node_agent(record, &[])).await;
    let mut c = h.drive().await;

    // At most MAX_OPTIONS options: the last of them can be chosen; one more is -32602.
    let turn_id = c.submit(&format!("options {MAX_OPTIONS}")).await;
    let asked = c.event("session.permission_request").await;
    let offered = asked["payload"]["options"]
        .as_array()
        .expect("options")
        .len();
    assert_eq!(offered, MAX_OPTIONS);
    let last = format!("o{}", MAX_OPTIONS - 1);
    c.ok(
        "session.permission.respond",
        json!({"request_id": asked["payload"]["request_id"], "option_id": last}),
    )
    .await;
    assert_eq!(
        concat_deltas(&c.turn_events(&turn_id).await),
        format!("selected {last}")
    );
    let events = turn(&mut c, &format!("options {}", MAX_OPTIONS + 1)).await;
    assert_eq!(concat_deltas(&events), "refused -32602");
    assert!(events
        .iter()
        .all(|e| e["event"] != "session.permission_request"));

    // At most MAX_OPEN_PERMISSIONS wait for an answer at once; one more is -32603 at once.
    let turn_id = c
        .submit(&format!("flood {}", MAX_OPEN_PERMISSIONS + 1))
        .await;
    let refused = c.event("session.text_delta").await;
    assert_eq!(refused["payload"]["delta"], "refused -32603");
    c.ok("session.abort", json!({"turn_id": turn_id})).await;
    let events = c.turn_events(&turn_id).await;
    let asked = events
        .iter()
        .filter(|e| e["event"] == "session.permission_request")
        .count();
    assert_eq!(asked, MAX_OPEN_PERMISSIONS);
    // The turn's end answered them all `cancelled` and gave their places back.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while h
        .received()
        .iter()
        .filter(|m| m["result"]["outcome"] == json!({"outcome": "cancelled"}))
        .count()
        < MAX_OPEN_PERMISSIONS
    {
        assert!(tokio::time::Instant::now() < deadline, "not all cancelled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let turn_id = c.submit("options 1").await;
    let asked = c.event("session.permission_request").await;
    c.ok(
        "session.permission.respond",
        json!({"request_id": asked["payload"]["request_id"], "decision": "allow"}),
    )
    .await;
    assert_eq!(concat_deltas(&c.turn_events(&turn_id).await), "selected o0");
    h.stop().await;
}

//! `/acp` as an ACP client sees it (README.md, "ACP clients and editors"): `initialize`,
//! sessions made and loaded, prompt turns streamed as `session/update`s and answered with
//! their `stopReason`, permission prompts as `session/request_permission`, cancel, observers,
//! and one session shared with the agent protocol's and the seed system's clients.
//!
//! A real carrier on 127.0.0.1 with the embedded agent, and clients over real sockets: the
//! `tokio-tungstenite` ACP client of the test support crate (JSON-RPC written from ACP's
//! schema), the agent-protocol client and the seed system's client.

use carrier_test_support as support;

use carrier_agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
use serde_json::{json, Value};
use support::acp::{chunks, update_kinds, AcpClient};
use support::robota::RobotaClient;
use support::Server;

/// The events of the next turn the agent-protocol client hears, from its `turn_started`.
async fn carrier_turn(carrier: &mut support::Client) -> Vec<Value> {
    let started = carrier.event("session.turn_started").await;
    let turn_id = started["payload"]["turn_id"].as_str().unwrap().to_owned();
    carrier.turn_events(&turn_id).await
}

async fn server() -> Server {
    Server::start().await
}

/// Runs `prompt` in `session` and returns every message up to its answer, and the answer.
async fn turn(c: &mut AcpClient, session: &str, prompt: &str) -> (Vec<Value>, Value) {
    let id = c.prompt(session, prompt).await;
    let mut seen = c.until_response(id).await;
    let answer = seen.pop().expect("the answer");
    (seen, answer)
}

#[tokio::test]
async fn initialize_answers_carrier_as_an_agent_that_loads_sessions_and_needs_no_auth() {
    let s = server().await;
    let (_c, result) = AcpClient::initialized(&s.acp_url("")).await;
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"],
        json!({"image": false, "audio": false, "embeddedContext": false})
    );
    assert_eq!(result["authMethods"], json!([]));
    assert_eq!(result["agentInfo"]["name"], "carrier");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn initialize_answers_version_1_to_a_client_that_asks_for_another() {
    let s = server().await;
    let mut c = AcpClient::connect(&s.acp_url("")).await;
    for asked in [2, 0, 65535] {
        let r = c.ok("initialize", json!({"protocolVersion": asked})).await;
        assert_eq!(r["protocolVersion"], 1, "asked for {asked}");
    }
}

#[tokio::test]
async fn a_prompt_turn_streams_the_reply_and_ends_with_end_turn() {
    let s = server().await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let session = c.new_session().await;
    let (seen, answer) = turn(&mut c, &session, "hello acp world").await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        chunks(&seen, "agent_message_chunk"),
        "echo: hello acp world"
    );
    // The client showed its own prompt already: no user_message_chunk for it.
    assert!(
        update_kinds(&seen)
            .iter()
            .all(|k| k == "agent_message_chunk"),
        "{seen:?}"
    );
    for m in &seen {
        assert_eq!(m["params"]["sessionId"], session, "{m}");
    }
}

#[tokio::test]
async fn session_new_starts_a_carrier_session_that_the_agent_protocol_lists() {
    let s = server().await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let a = c.new_session().await;
    let b = c.new_session().await;
    assert_ne!(a, b);
    let (mut carrier, _) = s.drive().await;
    let list = carrier.ok("sessions.list", json!({})).await;
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&a.as_str()) && ids.contains(&b.as_str()),
        "{list}"
    );
    let titled = &list["sessions"][1];
    assert_eq!(titled["title"], "acp: /tmp", "{list}");
    // One connection, two sessions: each turn is answered in its own.
    let (seen, answer) = turn(&mut c, &b, "in b").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(seen.iter().all(|m| m["params"]["sessionId"] == b.as_str()));
}

#[tokio::test]
async fn a_permission_prompt_is_a_request_permission_and_the_answer_runs_the_tool() {
    let s = server().await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let session = c.new_session().await;
    let id = c.prompt(&session, "/tool ls -la").await;
    let ask = c.wait_method("session/request_permission").await;
    let params = &ask["params"];
    assert_eq!(params["sessionId"], session);
    assert_eq!(params["toolCall"]["title"], "demo.tool");
    assert_eq!(params["toolCall"]["status"], "pending");
    assert!(params["toolCall"]["toolCallId"].is_string(), "{ask}");
    assert_eq!(
        params["options"],
        json!([
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "deny", "name": "Deny", "kind": "reject_once"},
        ])
    );
    assert!(ask["id"].is_u64(), "carrier's own integer ids: {ask}");
    c.choose(&ask, "allow").await;
    let seen = c.until_response(id).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn");
    assert_eq!(chunks(&seen, "agent_message_chunk"), "tool ran: ls -la");

    let id = c.prompt(&session, "/tool rm").await;
    let ask = c.wait_method("session/request_permission").await;
    c.choose(&ask, "deny").await;
    let seen = c.until_response(id).await;
    assert_eq!(chunks(&seen, "agent_message_chunk"), "tool denied");
}

#[tokio::test]
async fn cancel_ends_the_turn_with_cancelled() {
    let s = Server::with(
        support::config(),
        support::embedded(std::time::Duration::from_millis(50)),
    )
    .await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let session = c.new_session().await;
    let id = c
        .prompt(&session, "one two three four five six seven eight")
        .await;
    let first = c.wait_method("session/update").await;
    assert_eq!(
        first["params"]["update"]["sessionUpdate"],
        "agent_message_chunk"
    );
    c.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let answer = c.response(id).await;
    assert_eq!(answer["result"], json!({"stopReason": "cancelled"}));
    // The session is free for the next turn.
    let (_, answer) = turn(&mut c, &session, "again").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn cancel_while_a_permission_is_asked_withdraws_the_request() {
    let s = server().await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let session = c.new_session().await;
    let id = c.prompt(&session, "/tool x").await;
    let ask = c.wait_method("session/request_permission").await;
    c.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let withdrawn = c.wait_method("$/cancel_request").await;
    assert_eq!(withdrawn["params"], json!({"requestId": ask["id"]}));
    let answer = c.response(id).await;
    assert_eq!(answer["result"], json!({"stopReason": "cancelled"}));
    // As ACP asks of a client, it answers the withdrawn request; carrier ignores it.
    c.send(
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "cancelled"}}}),
    )
    .await;
    let (_, answer) = turn(&mut c, &session, "after").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn an_abort_from_another_wire_answers_the_acp_prompt_cancelled() {
    let s = Server::with(
        support::config(),
        support::embedded(std::time::Duration::from_millis(50)),
    )
    .await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let _ = c.load_session("s1").await;
    let id = c.prompt("s1", "a b c d e f g h").await;
    let _ = c.wait_method("session/update").await;
    let (mut carrier, _) = s.drive().await;
    carrier.ok("session.abort", json!({})).await;
    assert_eq!(c.response(id).await["result"]["stopReason"], "cancelled");
}

#[tokio::test]
async fn session_load_replays_a_turn_another_client_ran() {
    let s = server().await;
    let (mut carrier, _) = s.drive().await;
    let turn_id = carrier.submit("from the browser").await;
    carrier.turn_events(&turn_id).await;

    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let replayed = c.load_session("s1").await;
    assert_eq!(
        update_kinds(&replayed),
        ["user_message_chunk", "agent_message_chunk"]
    );
    assert_eq!(chunks(&replayed, "user_message_chunk"), "from the browser");
    assert_eq!(
        chunks(&replayed, "agent_message_chunk"),
        "echo: from the browser"
    );
    // And the session goes on here: the next turn is this client's.
    let (seen, answer) = turn(&mut c, "s1", "and from the editor").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(
        chunks(&seen, "agent_message_chunk"),
        "echo: and from the editor"
    );
}

#[tokio::test]
async fn an_unknown_session_is_resource_not_found() {
    let s = server().await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let r = c
        .call(
            "session/load",
            json!({"sessionId": "nope", "cwd": "/", "mcpServers": []}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32002, "{r}");
    // A session that exists but this connection has not bound is not its to prompt.
    let id = c.prompt("s1", "hi").await;
    let r = c.response(id).await;
    assert_eq!(r["error"]["code"], -32002, "{r}");
}

#[tokio::test]
async fn an_observer_is_refused_a_prompt_with_nothing_run() {
    let s = server().await;
    let (mut o, _) = AcpClient::initialized(&s.acp_url("&role=observe")).await;
    let replayed = o.load_session("s1").await;
    assert!(replayed.is_empty());
    let id = o.prompt("s1", "not allowed").await;
    let r = o.response(id).await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["message"], "forbidden: observe role");
    o.notify("session/cancel", json!({"sessionId": "s1"})).await;
    // Nothing ran: the session is idle with no history.
    let (mut carrier, _) = s.drive().await;
    assert_eq!(
        carrier.ok("session.status", json!({})).await["state"],
        "idle"
    );
    assert_eq!(
        carrier.ok("session.history", json!({})).await["entries"],
        json!([])
    );
    // It still hears the session, and is never asked to decide a prompt.
    let turn_id = carrier.submit("/tool watched").await;
    let update = o.wait_method("session/update").await;
    assert_eq!(
        update["params"]["update"]["sessionUpdate"],
        "user_message_chunk"
    );
    let request = carrier.event("session.permission_request").await;
    carrier
        .ok(
            "session.permission.respond",
            json!({"request_id": request["payload"]["request_id"], "decision": "allow"}),
        )
        .await;
    carrier.turn_events(&turn_id).await;
    let (mut probe, _) = s.drive().await;
    let _ = probe.ok("system.ping", json!({})).await;
    // Everything the observer heard up to the reply's end: no request among it.
    let mut heard = Vec::new();
    while chunks(&heard, "agent_message_chunk") != "tool ran: watched" {
        heard.push(o.next().await);
    }
    assert!(
        heard.iter().all(|m| m["method"] == "session/update"),
        "{heard:?}"
    );
}

#[tokio::test]
async fn an_observer_s_session_new_binds_the_host_s_default_session() {
    let s = server().await;
    let (mut o, _) = AcpClient::initialized(&s.acp_url("&role=observe")).await;
    assert_eq!(o.new_session().await, "s1");
    let (mut carrier, _) = s.drive().await;
    let list = carrier.ok("sessions.list", json!({})).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn join_makes_session_new_bind_an_existing_carrier_session() {
    let s = server().await;
    let mut c = AcpClient::connect(&s.acp_url("")).await;
    c.notify("_carrier/join", json!({"sessionId": "s1"})).await;
    c.initialize().await;
    assert_eq!(c.new_session().await, "s1");
    let mut bad = AcpClient::connect(&s.acp_url("")).await;
    bad.notify("_carrier/join", json!({"sessionId": "s404"}))
        .await;
    bad.initialize().await;
    let r = bad
        .call("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert_eq!(r["error"]["code"], -32002, "{r}");
}

#[tokio::test]
async fn the_first_answer_on_any_wire_decides_and_the_other_requests_are_withdrawn() {
    let s = server().await;
    let (mut a, _) = AcpClient::initialized(&s.acp_url("")).await;
    let (mut b, _) = AcpClient::initialized(&s.acp_url("")).await;
    let _ = a.load_session("s1").await;
    let _ = b.load_session("s1").await;
    let (mut carrier, _) = s.drive().await;
    let id = a.prompt("s1", "/tool both").await;
    let ask_a = a.wait_method("session/request_permission").await;
    let ask_b = b.wait_method("session/request_permission").await;
    let request = carrier.event("session.permission_request").await;
    assert_eq!(
        ask_a["params"]["toolCall"]["toolCallId"],
        request["payload"]["request_id"]
    );
    b.choose(&ask_b, "deny").await;
    let withdrawn = a.wait_method("$/cancel_request").await;
    assert_eq!(withdrawn["params"]["requestId"], ask_a["id"]);
    // A late answer is ignored: the decision stays b's.
    a.choose(&ask_a, "allow").await;
    let seen = a.until_response(id).await;
    assert_eq!(chunks(&seen, "agent_message_chunk"), "tool denied");
    let resolved = carrier.event("session.permission_resolved").await;
    assert_eq!(resolved["payload"]["decision"], "deny");
}

#[tokio::test]
async fn a_prompt_while_another_wire_s_turn_runs_is_refused_naming_it() {
    let s = Server::with(
        support::config(),
        support::embedded(std::time::Duration::from_millis(50)),
    )
    .await;
    let (mut carrier, _) = s.drive().await;
    let turn_id = carrier.submit("a b c d e f g h").await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let _ = c.load_session("s1").await;
    let id = c.prompt("s1", "me too").await;
    let r = c.response(id).await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["code"], "busy");
    assert_eq!(r["error"]["data"]["turn_id"], turn_id.as_str());
    assert!(
        r["error"]["message"].as_str().unwrap().contains(&turn_id),
        "{r}"
    );
}

#[tokio::test]
async fn each_wire_sees_the_turns_the_others_run() {
    let s = server().await;
    let (mut carrier, _) = s.drive().await;
    let (mut robota, _, _) = RobotaClient::connect_greeted(&s.robota_url("")).await;
    let (mut acp, _) = AcpClient::initialized(&s.acp_url("")).await;
    let _ = acp.load_session("s1").await;

    // The agent protocol's turn, on the other two wires.
    let turn_id = carrier.submit("from carrier").await;
    carrier.turn_events(&turn_id).await;
    let seen = robota.until_turn_ends().await;
    assert_eq!(support::robota::deltas(&seen), "echo: from carrier");
    let mut heard = Vec::new();
    while chunks(&heard, "agent_message_chunk") != "echo: from carrier" {
        heard.push(acp.next().await);
    }
    assert_eq!(chunks(&heard, "user_message_chunk"), "from carrier");

    // ACP's turn, on the other two.
    let (_, answer) = turn(&mut acp, "s1", "from acp").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let events = carrier_turn(&mut carrier).await;
    assert_eq!(support::concat_deltas(&events), "echo: from acp");
    let seen = robota.until_turn_ends().await;
    assert_eq!(
        seen[0],
        json!({"type": "user_message", "content": "from acp", "driverId": "host-driver"})
    );
    assert_eq!(support::robota::deltas(&seen), "echo: from acp");

    // The seed system's turn, on the other two.
    robota
        .send(json!({"type": "submit", "prompt": "from robota"}))
        .await;
    let events = carrier_turn(&mut carrier).await;
    assert_eq!(support::concat_deltas(&events), "echo: from robota");
    let mut heard = Vec::new();
    while chunks(&heard, "agent_message_chunk") != "echo: from robota" {
        heard.push(acp.next().await);
    }
    assert_eq!(chunks(&heard, "user_message_chunk"), "from robota");
}

#[tokio::test]
async fn a_full_host_refuses_a_new_session_with_limit_exceeded() {
    let agent = EmbeddedAgent::default();
    let directory = InMemoryDirectory::new(move |_| agent.session());
    let profile = AgentProfile::builder(directory).build();
    let mut config = support::config();
    config.limits.max_sessions = 2;
    let s = Server::with(config, profile).await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let _ = c.new_session().await; // s2; s1 is the default
    let r = c
        .call("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["code"], "limit_exceeded");
    assert_eq!(r["error"]["data"]["limit"], "max_sessions");
}

#[tokio::test]
async fn cancel_request_of_a_running_prompt_cancels_its_turn_and_an_observer_s_cancels_nothing() {
    let s = Server::with(
        support::config(),
        support::embedded(std::time::Duration::from_millis(30)),
    )
    .await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let (mut o, _) = AcpClient::initialized(&s.acp_url("&role=observe")).await;
    let _ = c.load_session("s1").await;
    let _ = o.load_session("s1").await;
    let id = c.prompt("s1", "a b c d e f g h i j").await;
    c.wait_method("session/update").await;
    // The observer's cancel and its $/cancel_request change nothing.
    o.notify("session/cancel", json!({"sessionId": "s1"})).await;
    o.notify("$/cancel_request", json!({"requestId": id})).await;
    // Once the observer's next request is answered, its notifications were read: the turn
    // still runs.
    o.initialize().await;
    let (mut carrier, _) = s.drive().await;
    assert_eq!(
        carrier.ok("session.status", json!({})).await["state"],
        "running"
    );
    // The driver's own $/cancel_request of its prompt does.
    c.notify("$/cancel_request", json!({"requestId": id})).await;
    let seen = c.until_response(id).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "cancelled");
    // A $/cancel_request for nothing running is nothing.
    c.notify("$/cancel_request", json!({"requestId": id})).await;
    let (_, answer) = turn(&mut c, "s1", "next").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
}

/// An ACP agent's updates, options and stop reason (protocol 1.2's `agent_update`, `options`,
/// `option_id`, `stop_reason`), as the test agent's `/updates` reports them.
#[tokio::test]
async fn an_acp_agent_s_updates_options_and_stop_reason_reach_acp_clients_as_it_sent_them() {
    use support::acp::{test_agent, ACP_UPDATES};
    let s = Server::with(support::config(), test_agent(std::time::Duration::ZERO)).await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    c.record();
    let _ = c.load_session("s1").await;
    let id = c.prompt("s1", "/updates").await;
    let ask = c.wait_method("session/request_permission").await;
    let tool_call: Value = serde_json::from_str(ACP_UPDATES[0]).unwrap();
    assert_eq!(
        ask["params"]["toolCall"], tool_call,
        "the agent's own tool call"
    );
    let kinds: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    c.choose(&ask, "opt-allow_always").await;
    let seen = c.until_response(id).await;
    assert_eq!(
        seen.last().unwrap()["result"],
        json!({"stopReason": "max_tokens"})
    );
    assert_eq!(
        chunks(&seen, "agent_message_chunk"),
        "chose opt-allow_always"
    );
    // Each update arrived byte for byte, in its own session/update, in order.
    let texts: Vec<&str> = c
        .recording()
        .iter()
        .filter(|r| r.direction == "in")
        .map(|r| r.text.as_str())
        .collect();
    let mut at = 0;
    for update in ACP_UPDATES {
        let frame = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{update}}}}}"#
        );
        let found = texts[at..]
            .iter()
            .position(|t| *t == frame)
            .unwrap_or_else(|| panic!("{frame} not sent as it came: {texts:?}"));
        at += found + 1;
    }

    // Another client loading the session has them replayed, among the prompt and reply.
    let (mut other, _) = AcpClient::initialized(&s.acp_url("")).await;
    let replayed = other.load_session("s1").await;
    let kinds = update_kinds(&replayed);
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("user_message_chunk")
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("agent_message_chunk")
    );
    for update in ACP_UPDATES {
        let update: Value = serde_json::from_str(update).unwrap();
        assert!(
            replayed.iter().any(|m| m["params"]["update"] == update),
            "{update} not replayed: {replayed:?}"
        );
    }
    // An option the agent did not offer decides nothing: the prompt stays open for the other
    // wires (here the agent protocol's client, naming one of the agent's options).
    let (mut carrier, _) = s.drive().await;
    let id = c.prompt("s1", "/updates").await;
    let ask = c.wait_method("session/request_permission").await;
    c.choose(&ask, "opt-made-up").await;
    let request = carrier.event("session.permission_request").await;
    // Once `c`'s next request is answered, its made-up answer was read.
    c.initialize().await;
    carrier
        .ok(
            "session.permission.respond",
            json!({"request_id": request["payload"]["request_id"], "option_id": "opt-reject_once"}),
        )
        .await;
    let seen = c.until_response(id).await;
    assert_eq!(
        chunks(&seen, "agent_message_chunk"),
        "chose opt-reject_once"
    );
}

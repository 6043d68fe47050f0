//! The seed system's own wire (the Robota profile) over real sockets, with a client written
//! from that system's public message types: what is pushed on connect, a turn, permission
//! prompts, abort, the reads, the error strings, roles, the soft text limit and the memory
//! figure. The embedded agent answers.

use carrier_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use carrier_agent::{AgentProfile, EmbeddedAgent};
use carrier_robota::{RobotaProfile, ROBOTA_PATH};
use carrier_server::{Attachment, WsTransport};
use serde_json::{json, Value};
use support::robota::{deltas, types, RobotaClient};
use support::*;

/// The embedded agent at [`DELAY`], served at `/robota` beside the agent protocol.
async fn server() -> Server {
    Server::start().await
}

/// A carrier whose `/` speaks the seed system's wire (the library's option behind
/// `carrier serve --profile robota`).
async fn robota_at_root(config: carrier_server::CarrierConfig) -> Server {
    let transport = WsTransport::new(config).expect("valid config");
    let robota = Arc::new(RobotaProfile::new(&embedded(DELAY)));
    transport.attach(Attachment::new(robota.clone()).with_route(ROBOTA_PATH, robota));
    transport.start().await.expect("start");
    let port = transport.bound_port().expect("port");
    let token = transport.resolved_token().unwrap_or_default().to_owned();
    Server {
        transport,
        port,
        token,
        stats: Default::default(),
    }
}

#[tokio::test]
async fn a_host_that_attaches_only_the_agent_protocol_serves_no_robota_path() {
    let transport = WsTransport::new(config()).expect("config");
    transport.attach(embedded(DELAY));
    transport.start().await.expect("start");
    let port = transport.bound_port().expect("port");
    let refused = connect_with(
        &format!("ws://127.0.0.1:{port}/robota?token=test-token"),
        &[],
    )
    .await;
    assert_eq!(
        refused.err(),
        Some(404),
        "/robota is served only when attached"
    );
    // `/` speaks the agent protocol as ever.
    let mut client = Client::connect(&format!("ws://127.0.0.1:{port}/?token=test-token")).await;
    client.handshake(json!({})).await;
    transport.stop().await;
}

async fn greeted(server: &Server, query: &str) -> RobotaClient {
    RobotaClient::connect_greeted(&server.robota_url(query))
        .await
        .0
}

/// A `protocol_error` with exactly `{type, message}`.
fn assert_protocol_error(m: &Value, message: &str) {
    assert_eq!(
        m,
        &json!({"type": "protocol_error", "message": message}),
        "expected protocol_error {message:?}"
    );
}

#[tokio::test]
async fn on_connect_the_history_then_the_empty_workspace_arrive_with_no_handshake() {
    let server = server().await;
    let (_c, messages, workspace) = RobotaClient::connect_greeted(&server.robota_url("")).await;
    assert_eq!(messages, json!({"type": "messages", "messages": []}));
    let snapshot = &workspace["snapshot"];
    assert_eq!(snapshot["sessionId"], "s1");
    assert_eq!(snapshot["entries"], json!([]));
    let updated = snapshot["updatedAt"].as_str().expect("updatedAt");
    assert!(
        updated.len() == 24 && updated.ends_with('Z'),
        "an ISO time: {updated}"
    );
}

/// The order is the seed system's session's: the end of a turn is `complete`, then `thinking`
/// off, then the workspace snapshot.
#[tokio::test]
async fn a_submit_streams_the_embedded_reply_and_completes_with_it() {
    let server = server().await;
    let mut c = greeted(&server, "").await;
    c.send(json!({"type": "submit", "prompt": "hello  big world"}))
        .await;
    let turn = c.until_turn_settles().await;
    let kinds = types(&turn);
    assert_eq!(kinds[..2], ["user_message", "thinking"]);
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["complete", "thinking", "execution_workspace_event"]
    );
    assert!(kinds[2..kinds.len() - 3].iter().all(|k| k == "text_delta"));
    assert_eq!(kinds.len(), 5 + 4, "one delta per word of the reply");
    assert_eq!(
        turn[0],
        json!({"type": "user_message", "content": "hello  big world", "driverId": "host-driver"})
    );
    assert_eq!(
        turn[1],
        json!({"type": "thinking", "isThinking": true, "driverId": "host-driver"})
    );
    let reply = "echo: hello  big world";
    assert_eq!(deltas(&turn), reply);
    assert_eq!(turn[2]["driverId"], "host-driver");
    assert_eq!(
        turn[turn.len() - 3],
        json!({"type": "complete", "driverId": "host-driver", "result": {
            "response": reply, "history": [], "toolSummaries": [],
            "contextState": {"maxTokens": 0, "usedTokens": 0, "usedPercentage": 0,
                             "remainingPercentage": 0}}})
    );
    // The turn has let go of its driver: no `driverId` from here on.
    assert_eq!(
        turn[turn.len() - 2],
        json!({"type": "thinking", "isThinking": false})
    );
    let snapshot = &turn[turn.len() - 1]["snapshot"];
    assert_eq!(
        (snapshot["sessionId"].clone(), snapshot["entries"].clone()),
        (json!("s1"), json!([]))
    );
    assert!(snapshot["updatedAt"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));

    // The history, as the conversation's messages.
    let messages = c.ask("get-messages", json!({})).await;
    let list = messages["messages"].as_array().expect("messages");
    assert_eq!(list.len(), 2, "{messages}");
    for (m, (role, content)) in list
        .iter()
        .zip([("user", "hello  big world"), ("assistant", reply)])
    {
        assert_eq!(m["role"], role);
        assert_eq!(m["content"], content);
        assert_eq!(m["state"], "complete");
        assert!(m["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert!(m["id"].as_str().is_some_and(|id| !id.is_empty()));
    }
    assert_ne!(list[0]["id"], list[1]["id"]);

    // A new connection gets the same history on connect.
    let (_, pushed, _) = RobotaClient::connect_greeted(&server.robota_url("")).await;
    assert_eq!(pushed, messages);
}

#[tokio::test]
async fn a_permission_prompt_is_answered_allow_or_deny_and_resolved() {
    let server = server().await;
    let mut c = greeted(&server, "").await;
    for (result, reply) in [
        (json!(true), "tool ran: x"),
        (json!("allow-session"), "tool ran: x"),
        (json!("allow-project"), "tool ran: x"),
        (json!(false), "tool denied"),
    ] {
        c.send(json!({"type": "submit", "prompt": "/tool x"})).await;
        let asked = c.until("permission_request").await.pop().unwrap();
        let id = asked["event"]["id"].as_str().expect("id").to_owned();
        assert_eq!(
            asked,
            json!({"type": "permission_request", "event": {
                "id": id, "toolName": "demo.tool", "toolArgs": {"command": "x"}}})
        );
        let executing = c.ask("get-executing", json!({})).await;
        assert_eq!(executing, json!({"type": "executing", "executing": true}));
        c.send(json!({"type": "permission-response", "id": id, "result": result}))
            .await;
        let resolved = c.wait_for("prompt_resolved").await;
        assert_eq!(
            resolved,
            json!({"type": "prompt_resolved", "event": {"id": id}})
        );
        let rest = c.until_turn_ends().await;
        assert_eq!(deltas(&rest), reply, "{result}");
        assert_eq!(rest.last().unwrap()["result"]["response"], reply);
        // A stale id is a no-op: nothing is answered.
        c.send(json!({"type": "permission-response", "id": id, "result": true}))
            .await;
        let next = c.ask("get-executing", json!({})).await;
        assert_eq!(next, json!({"type": "executing", "executing": false}));
    }
}

#[tokio::test]
async fn abort_mid_turn_ends_it_interrupted_with_what_was_streamed() {
    let transport_config = config();
    let transport = WsTransport::new(transport_config).expect("config");
    // Slow enough that the abort lands mid-turn: 100 words at 20 ms.
    let agent = EmbeddedAgent::default().with_demo_delay(Duration::from_millis(20));
    transport.attach(with_robota(AgentProfile::embedded(agent)));
    transport.start().await.expect("start");
    let port = transport.bound_port().unwrap();
    let url = format!("ws://127.0.0.1:{port}/robota?token=test-token");
    let (mut c, _, _) = RobotaClient::connect_greeted(&url).await;
    let prompt = vec!["w"; 100].join(" ");
    let rest = c.submit_and_abort(&prompt).await;
    let end = rest.last().unwrap();
    assert_eq!(end["type"], "interrupted");
    assert_eq!(end["driverId"], "host-driver");
    let streamed = deltas(&rest);
    assert_eq!(end["result"]["response"], streamed);
    assert!(streamed.len() < "echo: ".len() + prompt.len());
    // The interrupted reply is kept as such.
    let messages = c.ask("get-messages", json!({})).await;
    assert_eq!(messages["messages"][1]["state"], "interrupted");
    assert_eq!(messages["messages"][1]["content"], streamed);
    // With no turn running, abort does nothing and is not answered.
    c.send(json!({"type": "abort"})).await;
    let executing = c.ask("get-executing", json!({})).await;
    assert_eq!(executing["executing"], false);
    transport.stop().await;
}

#[tokio::test]
async fn every_read_answers_as_the_seed_system_expects() {
    let server = server().await;
    let mut c = greeted(&server, "").await;
    let zeros = json!({"maxTokens": 0, "usedTokens": 0, "usedPercentage": 0,
                       "remainingPercentage": 0});
    let expected = [
        (
            "get-context",
            json!({}),
            json!({"type": "context", "state": zeros}),
        ),
        (
            "get-executing",
            json!({}),
            json!({"type": "executing", "executing": false}),
        ),
        (
            "get-pending",
            json!({}),
            json!({"type": "pending", "pending": null}),
        ),
        (
            "command",
            json!({"name": "compact", "args": "now"}),
            json!({"type": "command_result", "name": "compact",
                   "message": "Unknown command: compact", "success": false}),
        ),
        (
            "get-background-tasks",
            json!({}),
            json!({"type": "background_tasks", "tasks": []}),
        ),
        (
            "get-background-task",
            json!({"taskId": "bg1"}),
            json!({"type": "background_task", "taskId": "bg1", "task": null}),
        ),
        (
            "get-background-job-groups",
            json!({}),
            json!({"type": "background_job_groups", "groups": []}),
        ),
        (
            "get-background-job-group",
            json!({"groupId": "g1"}),
            json!({"type": "background_job_group", "groupId": "g1", "group": null}),
        ),
    ];
    for (kind, fields, answer) in expected {
        assert_eq!(c.ask(kind, fields).await, answer, "{kind}");
    }
    let workspace = c.ask("get-execution-workspace", json!({})).await;
    assert_eq!(workspace["type"], "execution_workspace_event");
    assert_eq!(workspace["snapshot"]["sessionId"], "s1");
    assert_eq!(workspace["snapshot"]["entries"], json!([]));
    for (kind, action, fields) in [
        (
            "cancel-background-task",
            "cancel",
            json!({"taskId": "bg1", "reason": "x"}),
        ),
        ("close-background-task", "close", json!({"taskId": "bg1"})),
        (
            "send-background-task",
            "send",
            json!({"taskId": "bg1", "input": {"prompt": "p"}}),
        ),
    ] {
        let answer = c.ask(kind, fields).await;
        assert_eq!(answer["type"], "background_task_control_result", "{kind}");
        assert_eq!(answer["action"], action);
        assert_eq!(answer["taskId"], "bg1");
        assert_eq!(answer["success"], false);
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // Nothing for these: the carrier queues no prompts and asks no questions.
    c.send(json!({"type": "cancel-queue"})).await;
    c.send(json!({"type": "ask-response", "id": "a1", "response": {}}))
        .await;
    let pending = c.ask("get-pending", json!({})).await;
    assert_eq!(pending["type"], "pending", "nothing answered before it");
}

#[tokio::test]
async fn bad_messages_get_the_seed_handlers_exact_errors_and_the_socket_stays() {
    let server = server().await;
    let mut c = greeted(&server, "").await;
    c.send_raw("{not json").await;
    assert_protocol_error(&c.next().await, "Invalid JSON");
    c.send(json!({"type": "nope"})).await;
    assert_protocol_error(&c.next().await, "Unknown message type: nope");
    c.send(json!({"prompt": "typeless"})).await;
    assert_protocol_error(&c.next().await, "Unknown message type: undefined");
    c.send(json!({"type": "submit"})).await;
    assert_protocol_error(&c.next().await, "prompt is required");
    c.send(json!({"type": "submit", "prompt": ""})).await;
    assert_protocol_error(&c.next().await, "prompt is required");
    c.send(json!({"type": "get-background-task"})).await;
    assert_protocol_error(&c.next().await, "taskId is required");
    c.send(json!({"type": "cancel-background-task"})).await;
    assert_protocol_error(&c.next().await, "taskId is required");
    c.send(json!({"type": "get-background-job-group", "groupId": ""}))
        .await;
    assert_protocol_error(&c.next().await, "groupId is required");
    c.send(json!({"type": "permission-response", "id": "p", "result": "maybe"}))
        .await;
    let m = c.next().await;
    assert_eq!(
        m["type"], "protocol_error",
        "an unknown permission result: {m}"
    );

    // A second submit while a turn runs is refused; the first turn goes on.
    c.send(json!({"type": "submit", "prompt": "/tool y"})).await;
    let asked = c.wait_for("permission_request").await;
    c.send(json!({"type": "submit", "prompt": "again"})).await;
    let busy = c.wait_for("protocol_error").await;
    assert_eq!(busy.as_object().unwrap().len(), 2, "{busy}");
    assert!(
        busy["message"].as_str().unwrap().contains("running"),
        "{busy}"
    );
    c.send(json!({"type": "permission-response", "id": asked["event"]["id"], "result": false}))
        .await;
    let rest = c.until_turn_ends().await;
    assert_eq!(deltas(&rest), "tool denied");
    assert_eq!(server.transport.metrics().protocol_errors(), 10);
}

#[tokio::test]
async fn an_observer_is_refused_every_control_and_nothing_runs_but_it_sees_turns() {
    let server = server().await;
    let mut observer = greeted(&server, "&role=observe").await;
    for control in [
        json!({"type": "submit", "prompt": "hi"}),
        json!({"type": "abort"}),
        json!({"type": "cancel-queue"}),
        json!({"type": "permission-response", "id": "p", "result": true}),
        json!({"type": "ask-response", "id": "a", "response": {}}),
        json!({"type": "command", "name": "x"}),
        json!({"type": "cancel-background-task", "taskId": "t"}),
        json!({"type": "close-background-task", "taskId": "t"}),
        json!({"type": "send-background-task", "taskId": "t", "input": {}}),
    ] {
        observer.send(control.clone()).await;
        assert_protocol_error(&observer.next().await, "forbidden: observe role");
    }
    // Nothing ran: no turn message came before this answer, and the history is empty.
    assert_eq!(
        observer.ask("get-executing", json!({})).await,
        json!({"type": "executing", "executing": false})
    );
    assert_eq!(
        observer.ask("get-messages", json!({})).await,
        json!({"type": "messages", "messages": []})
    );
    // Reads work, and a driver's turn reaches the observer.
    let mut driver = greeted(&server, "").await;
    driver
        .send(json!({"type": "submit", "prompt": "seen"}))
        .await;
    let seen = observer.until_turn_ends().await;
    assert_eq!(seen[0]["content"], "seen");
    assert_eq!(deltas(&seen), "echo: seen");
    assert_eq!(driver.until_turn_ends().await.len(), seen.len());
}

#[tokio::test]
async fn the_routes_pick_the_profile_and_slash_speaks_robota_when_attached() {
    // Under the agent protocol, `/` wants a handshake and `/robota` greets.
    let server = server().await;
    let mut agent = server.connect("").await;
    agent
        .send_raw(&json!({"type": "submit", "prompt": "x"}).to_string())
        .await;
    assert_eq!(agent.ended().await, Ended::Close(1008));
    greeted(&server, "").await;
    let (status, _) = Raw::upgrade(server.port, "/elsewhere?token=test-token", &[]).await;
    assert_eq!(status, 404);

    // Attached itself, the Robota profile speaks at `/` and still at `/robota`.
    let server = robota_at_root(config()).await;
    let root = format!("ws://127.0.0.1:{}/?token=test-token", server.port);
    let (mut c, _, _) = RobotaClient::connect_greeted(&root).await;
    c.send(json!({"type": "submit", "prompt": "root"})).await;
    assert_eq!(deltas(&c.until_turn_ends().await), "echo: root");
    let mut other = greeted(&server, "").await;
    let pushed = other.ask("get-messages", json!({})).await;
    assert_eq!(pushed["messages"].as_array().unwrap().len(), 2);
    // A wrong token is refused as on `/`.
    let refused = connect_with(
        &format!("ws://127.0.0.1:{}/robota?token=wrong", server.port),
        &[],
    )
    .await;
    match refused {
        Ok((mut ws, _)) => expect_close(&mut ws, 1008).await,
        Err(status) => assert!(status >= 400, "{status}"),
    }
}

#[tokio::test]
async fn the_soft_text_limit_is_answered_too_large_at_one_byte_past_and_the_socket_stays() {
    let mut config = config();
    config.limits.max_text_bytes = 64;
    let server = robota_at_root(config).await;
    let mut c = greeted(&server, "").await;
    // A valid message padded with spaces to `len` bytes.
    let padded = |len: usize| {
        let base = r#"{"type":"get-pending"}"#;
        format!(
            "{}{}}}",
            &base[..base.len() - 1],
            " ".repeat(len - base.len())
        )
    };
    // Exactly at the limit: served.
    assert_eq!(padded(64).len(), 64);
    c.send_raw(&padded(64)).await;
    assert_eq!(c.next().await["type"], "pending");
    // One byte past: too_large, and the connection goes on.
    c.send_raw(&padded(65)).await;
    assert_protocol_error(&c.next().await, "too_large");
    assert_eq!(c.ask("get-pending", json!({})).await["type"], "pending");
}

#[tokio::test]
async fn the_session_memory_figure_is_reported_when_robota_is_attached() {
    let server = robota_at_root(config()).await;
    let metrics = server.transport.metrics().render();
    assert!(metrics.contains("carrier_session_bytes_limit"), "{metrics}");
    let mut c = greeted(&server, "").await;
    c.send(json!({"type": "submit", "prompt": "remember me"}))
        .await;
    c.until_turn_ends().await;
    let metrics = server.transport.metrics().render();
    let used: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("carrier_session_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .expect("carrier_session_bytes");
    assert!(used > 0, "{metrics}");
}

/// As the seed system's session does on abort: every open prompt is resolved (`prompt_resolved`
/// on every connection, the prompt denied), then the turn ends `interrupted`.
#[tokio::test]
async fn an_abort_resolves_the_open_prompt_on_every_connection_before_the_turn_ends() {
    let server = server().await;
    let mut driver = greeted(&server, "").await;
    let mut observer = greeted(&server, "&role=observe").await;
    driver
        .send(json!({"type": "submit", "prompt": "/tool x"}))
        .await;
    let asked = driver.until("permission_request").await.pop().unwrap();
    let id = asked["event"]["id"].clone();
    assert_eq!(
        observer.until("permission_request").await.pop().unwrap(),
        asked
    );
    driver.send(json!({"type": "abort"})).await;
    for c in [&mut driver, &mut observer] {
        let end = c.until_turn_ends().await;
        assert_eq!(types(&end), ["prompt_resolved", "interrupted"]);
        assert_eq!(
            end[0],
            json!({"type": "prompt_resolved", "event": {"id": id}})
        );
        assert_eq!(end[1]["result"]["response"], "");
    }
    // Answering it now is a stale id: nothing happens, and the session is idle.
    driver
        .send(json!({"type": "permission-response", "id": id, "result": true}))
        .await;
    assert_eq!(
        driver.ask("get-executing", json!({})).await,
        json!({"type": "executing", "executing": false})
    );
    driver
        .send(json!({"type": "submit", "prompt": "after"}))
        .await;
    assert_eq!(deltas(&driver.until_turn_ends().await), "echo: after");
}

/// The seed server's own payload-channel test sends a frame for a channel never registered and
/// expects `{type: "protocol_error", message}` naming it; every refusal of a binary frame on
/// this wire is that message with the seed server's strings, and the socket stays open.
#[tokio::test]
async fn an_unroutable_binary_frame_is_answered_in_the_seed_servers_words() {
    use bytes::Bytes;
    use carrier_protocol::channel_frame::{encode_binary, encode_event_frame};
    use carrier_server::{Binary, ChannelDescriptor};

    let server = server().await;
    let _file = server
        .transport
        .register_channel(ChannelDescriptor::new(
            "file",
            &["manifest"],
            Binary::Accepted,
        ))
        .expect("file");
    let _notes = server
        .transport
        .register_channel(ChannelDescriptor::new(
            "notes",
            &["manifest"],
            Binary::Refused,
        ))
        .expect("notes");
    let mut c = greeted(&server, "").await;
    let binary = |channel: &str| {
        encode_binary(channel, 0, Bytes::from_static(&[1, 2, 3]))
            .expect("frame")
            .to_vec()
    };
    // An event frame on `file` with `body` as its body, as sent (not encoded by us).
    let event_body = |body: &[u8]| {
        let mut frame = b"RBF\x01\x02\x04file\x00\x00\x00\x00".to_vec();
        frame.extend_from_slice(body);
        frame
    };
    let refusals: Vec<(Vec<u8>, &str)> = vec![
        (
            binary("never-registered"),
            "No channel registered for \"never-registered\"",
        ),
        (
            binary("notes"),
            "Channel \"notes\" did not declare binary payload support",
        ),
        (
            encode_event_frame("file", 0, "other", &json!({}))
                .expect("frame")
                .to_vec(),
            "Channel \"file\" did not declare event \"other\"",
        ),
        (
            b"hello".to_vec(),
            "channel frame: bad magic (not a channel frame)",
        ),
        (b"RBF\x01".to_vec(), "channel frame: truncated header"),
        (
            b"RBF\x07\x01\x01x\x00\x00\x00\x00".to_vec(),
            "channel frame: unsupported version 7",
        ),
        (
            b"RBF\x01\x09\x01x\x00\x00\x00\x00".to_vec(),
            "channel frame: unknown kind 9",
        ),
        (
            b"RBF\x01\x01\x00\x00\x00\x00\x00".to_vec(),
            "channel frame: empty channel name",
        ),
        (
            b"RBF\x01\x01\x09file".to_vec(),
            "channel frame: truncated (header longer than the frame)",
        ),
        (
            event_body(b"{not json"),
            "channel frame: malformed JSON body",
        ),
        (
            event_body(b"[1]"),
            "channel frame: event body must be a JSON object",
        ),
        (
            event_body(br#"{"payload":1}"#),
            "channel frame: event body is missing a non-empty `event` name",
        ),
    ];
    let count = refusals.len() as u64;
    for (frame, message) in refusals {
        c.send_binary(frame).await;
        assert_protocol_error(&c.next().await, message);
    }
    // The socket stays open, and every refusal counts as a protocol error.
    assert_eq!(c.ask("get-pending", json!({})).await["type"], "pending");
    assert_eq!(server.transport.metrics().protocol_errors(), count);
    // An observer may not send channel frames: the wire's words for it.
    let mut observer = greeted(&server, "&role=observe").await;
    observer.send_binary(binary("file")).await;
    assert_protocol_error(&observer.next().await, "forbidden: observe role");
}

/// A prompt does not go with the client that saw it: the next driver to connect is sent it
/// right after the greeting, and its answer decides.
#[tokio::test]
async fn a_prompt_whose_driver_left_is_sent_to_the_next_driver_after_the_greeting() {
    let server = server().await;
    let mut first = greeted(&server, "").await;
    first
        .send(json!({"type": "submit", "prompt": "/tool x"}))
        .await;
    let asked = first.until("permission_request").await.pop().unwrap();
    let _ = first.ws.close(None).await;
    drop(first);

    // An observer cannot answer it, so is not sent it.
    let mut observer = greeted(&server, "&role=observe").await;
    assert_eq!(
        observer.ask("get-executing", json!({})).await,
        json!({"type": "executing", "executing": true})
    );
    let (mut next, messages, _) = RobotaClient::connect_greeted(&server.robota_url("")).await;
    assert_eq!(messages["messages"][0]["content"], "/tool x");
    assert_eq!(next.next().await, asked, "right after the greeting");
    next.send(json!({"type": "permission-response", "id": asked["event"]["id"], "result": true}))
        .await;
    let rest = next.until_turn_ends().await;
    assert_eq!(
        rest[0],
        json!({"type": "prompt_resolved", "event": {"id": asked["event"]["id"]}})
    );
    assert_eq!(deltas(&rest), "tool ran: x");
    let seen = observer.until_turn_ends().await;
    assert_eq!(types(&seen)[0], "prompt_resolved");
}

/// A prompt no driver is connected to answer is denied after the unattended-prompt timeout
/// (30 s by default; short here), as the seed system's session denies a prompt whose last
/// surface left: `prompt_resolved`, the agent goes on denied, and the next submit runs.
#[tokio::test]
async fn a_prompt_left_with_no_driver_is_denied_after_the_timeout_and_the_session_goes_on() {
    let profile = AgentProfile::builder(carrier_agent::InMemoryDirectory::new(|_| {
        EmbeddedAgent::default().with_demo_delay(DELAY).session()
    }))
    .unattended_prompt_timeout(Duration::from_millis(300))
    .build();
    let server = Server::with(config(), profile).await;
    let mut observer = greeted(&server, "&role=observe").await;
    let mut driver = greeted(&server, "").await;
    driver
        .send(json!({"type": "submit", "prompt": "/tool x"}))
        .await;
    let asked = driver.until("permission_request").await.pop().unwrap();
    let _ = driver.ws.close(None).await;
    drop(driver);

    let rest = observer.until_turn_ends().await;
    let rest: Vec<Value> = rest
        .into_iter()
        .skip_while(|m| m["type"] != "prompt_resolved")
        .collect();
    assert_eq!(
        rest[0],
        json!({"type": "prompt_resolved", "event": {"id": asked["event"]["id"]}})
    );
    assert_eq!(deltas(&rest), "tool denied", "the agent was told deny");
    assert_eq!(rest.last().unwrap()["type"], "complete");
    let mut next = greeted(&server, "").await;
    next.send(json!({"type": "submit", "prompt": "again"}))
        .await;
    assert_eq!(deltas(&next.until_turn_ends().await), "echo: again");
}

/// The carrier's default driver (`local`) is the seed system's owner on this wire, so its GUI
/// labels the turn as the local operator's; a host-configured driver stays itself.
#[tokio::test]
async fn the_default_driver_is_the_seed_systems_owner() {
    let server = Server::with(config().with_driver_id("local".into()), embedded(DELAY)).await;
    let mut c = greeted(&server, "").await;
    c.send(json!({"type": "submit", "prompt": "mine"})).await;
    let turn = c.until_turn_ends().await;
    assert_eq!(
        types(&turn),
        [
            "user_message",
            "thinking",
            "text_delta",
            "text_delta",
            "complete"
        ]
    );
    assert!(turn.iter().all(|m| m["driverId"] == "owner"), "{turn:?}");
}

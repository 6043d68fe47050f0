//! Every JSON-RPC message carrier sends on `/acp` validates against ACP v1's own JSON Schema
//! (`schema/v1/schema.json` of the npm SDK package, checked with ajv by
//! `acp/tests/fixtures/validate.mjs`): a recorded session that exercises every method carrier
//! answers, every update kind, request and notification it sends, and each error it answers
//! with. (What `carrier acp` writes on stdout: the CLI's `acp_bridge` tests.)

use carrier_test_support as support;

use std::path::PathBuf;
use std::time::Duration;

use futures_util::SinkExt;
use serde_json::{json, Value};
use support::acp::{test_agent, validate_recordings, write_recording, AcpClient};
use support::Server;

/// The recordings of what carrier sends to an ACP agent it hosts (`--agent-acp`, carrier as the
/// ACP client), checked the same way with `--carrier-is client`. The agent side lands
/// separately: record what carrier writes to its test agents' stdin and list the files here.
fn hosted_agent_recordings() -> Vec<PathBuf> {
    Vec::new()
}

/// A bound carrier's `/acp` with a one-channel registry (for a refused channel frame) and a
/// small session limit (for `limit_exceeded`).
async fn server() -> Server {
    let mut config = support::config();
    config.limits.max_sessions = 3;
    config.limits.max_text_bytes = 64 << 10;
    Server::with(config, test_agent(Duration::from_millis(20))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_carrier_sends_on_acp_validates_against_acp_v1_s_schema() {
    let s = server().await;
    let dir = tempfile::tempdir().unwrap();

    // A turn another client ran, for session/load to replay.
    let (mut carrier, _) = s.drive().await;
    let turn_id = carrier.submit("an earlier turn").await;
    carrier.turn_events(&turn_id).await;

    let mut a = AcpClient::connect(&s.acp_url("")).await;
    a.record();
    let mut b = AcpClient::connect(&s.acp_url("")).await;
    b.record();
    let mut o = AcpClient::connect(&s.acp_url("&role=observe")).await;
    o.record();

    // Bad input, before and after initialize.
    a.send_raw("not json").await;
    let r = a.wait_for(|m| m["id"].is_null()).await;
    assert_eq!(r["error"]["code"], -32700, "{r}");
    a.send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#)
        .await;
    let r = a.wait_for(|m| m["id"].is_null()).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let r = a
        .call("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert_eq!(r["error"]["code"], -32600, "before initialize: {r}");
    a.initialize().await;
    a.ok("initialize", json!({"protocolVersion": 7})).await;
    let r = a.call("session/list", json!({})).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = a.call("session/new", json!({"cwd": 5})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let big = "x".repeat(70 << 10);
    a.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"initialize","params":{{"pad":"{big}"}}}}"#
    ))
    .await;
    let r = a.wait_for(|m| m["id"] == "big").await;
    assert_eq!(r["error"]["data"]["code"], "too_large", "{r}");

    // session/load of a turn another client ran: user and agent chunks, then `{}`.
    let replayed = a.load_session("s1").await;
    assert_eq!(replayed.len(), 2);
    // session/new, a turn, a permission allowed and one denied.
    let session = a.new_session().await;
    let id = a.prompt(&session, "hello schema").await;
    a.until_response(id).await;
    for (prompt, option) in [("/tool yes", "allow"), ("/tool no", "deny")] {
        let id = a.prompt(&session, prompt).await;
        let ask = a.wait_method("session/request_permission").await;
        a.choose(&ask, option).await;
        a.until_response(id).await;
    }
    // An ACP agent's turn: its updates forwarded, its options, its stop reason.
    let id = a.prompt(&session, "/updates").await;
    let ask = a.wait_method("session/request_permission").await;
    a.choose(&ask, "opt-allow_once").await;
    assert_eq!(
        a.until_response(id).await.last().unwrap()["result"]["stopReason"],
        "max_tokens"
    );
    // A prompt carrier refuses: not text; an unknown session.
    let r = a
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "image", "data": "", "mimeType": "image/png"}]}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = a
        .call("session/prompt", json!({"sessionId": "nope", "prompt": []}))
        .await;
    assert_eq!(r["error"]["code"], -32002, "{r}");
    // A turn that ends on the agent's error answers the prompt with it.
    let id = a.prompt(&session, "/fail").await;
    let r = a.response(id).await;
    assert_eq!(r["error"]["data"]["code"], "agent_exited", "{r}");
    // Cancelled while streaming, and while a permission is asked (the request withdrawn).
    let id = a.prompt(&session, "a b c d e f g h i j").await;
    a.wait_method("session/update").await;
    a.notify("session/cancel", json!({"sessionId": session}))
        .await;
    assert_eq!(a.response(id).await["result"]["stopReason"], "cancelled");
    let id = a.prompt(&session, "/tool held").await;
    a.wait_method("session/request_permission").await;
    a.notify("session/cancel", json!({"sessionId": session}))
        .await;
    a.wait_method("$/cancel_request").await;
    a.response(id).await;

    // Two drivers of s1: b's turn reaches a as a user chunk; b answers first, a's request is
    // withdrawn; a prompt while b's turn runs is refused.
    b.initialize().await;
    b.load_session("s1").await;
    let id = b.prompt("s1", "/tool shared").await;
    let ask_b = b.wait_method("session/request_permission").await;
    a.wait_method("session/request_permission").await;
    let busy = a
        .call(
            "session/prompt",
            json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "me too"}]}),
        )
        .await;
    assert_eq!(busy["error"]["data"]["code"], "busy", "{busy}");
    b.choose(&ask_b, "allow").await;
    a.wait_method("$/cancel_request").await;
    b.until_response(id).await;

    // An observer: session/new binds the default session, its prompt is refused.
    o.initialize().await;
    assert_eq!(o.new_session().await, "s1");
    let id = o.prompt("s1", "no").await;
    assert_eq!(
        o.response(id).await["error"]["message"],
        "forbidden: observe role"
    );

    // The host full: limit_exceeded. A refused channel frame: `_carrier/protocol_error`.
    let mut full = None;
    for _ in 0..3 {
        let r = b
            .call("session/new", json!({"cwd": "/", "mcpServers": []}))
            .await;
        if r.get("error").is_some() {
            full = Some(r);
            break;
        }
    }
    let full = full.expect("the host fills up");
    assert_eq!(full["error"]["data"]["code"], "limit_exceeded", "{full}");
    let frame =
        carrier_protocol::channel_frame::encode_binary("nowhere", 0, bytes::Bytes::new()).unwrap();
    b.ws.send(tokio_tungstenite::tungstenite::Message::binary(
        frame.to_vec(),
    ))
    .await
    .unwrap();
    let refused = b.wait_method("_carrier/protocol_error").await;
    assert_eq!(refused["params"]["code"], "unknown_channel", "{refused}");

    let mut files = Vec::new();
    for (name, client) in [("a", &a), ("b", &b), ("observer", &o)] {
        let path = dir.path().join(format!("acp-{name}.jsonl"));
        write_recording(&path, client.recording());
        files.push(path);
    }
    let summary = validate_recordings("agent", &files);
    assert_covers(&summary);

    let hosted = hosted_agent_recordings();
    if !hosted.is_empty() {
        validate_recordings("client", &hosted);
    }
}

/// The recording holds every kind of message carrier sends on `/acp`.
fn assert_covers(summary: &Value) {
    for method in [
        "initialize (result)",
        "session/new (result)",
        "session/load (result)",
        "session/prompt (result)",
        "session/update",
        "session/request_permission",
        "$/cancel_request",
        "_carrier/protocol_error",
    ] {
        assert!(
            summary["methods"][method].as_u64() > Some(0),
            "the recording has no {method}: {summary}"
        );
    }
    for kind in [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "agent_thought_chunk",
        "available_commands_update",
        "current_mode_update",
        "usage_update",
    ] {
        assert!(
            summary["updates"][kind].as_u64() > Some(0),
            "the recording has no {kind}: {summary}"
        );
    }
    for code in ["-32700", "-32600", "-32601", "-32602", "-32603", "-32002"] {
        assert!(
            summary["errors"][code].as_u64() > Some(0),
            "the recording has no error {code}: {summary}"
        );
    }
}

/// The check itself: messages ACP does not allow are caught, each for its own reason.
#[test]
fn the_schema_check_refuses_what_acp_v1_does_not_allow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let lines = [
        json!({"from": "peer", "text": r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}"#}),
        // A stop reason ACP does not have.
        json!({"from": "carrier", "text": r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"done"}}"#}),
        // An update without its session.
        json!({"from": "carrier", "text": r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}"#}),
        // A method ACP does not send to clients.
        json!({"from": "carrier", "text": r#"{"jsonrpc":"2.0","method":"session/prompt","params":{}}"#}),
        // Two lines.
        json!({"from": "carrier", "text": "{\"jsonrpc\":\"2.0\",\n\"method\":\"_x\",\"params\":{}}"}),
        // A result for nothing the peer asked.
        json!({"from": "carrier", "text": r#"{"jsonrpc":"2.0","id":9,"result":{}}"#}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    let fixtures = support::node::acp_fixtures();
    let mut node = std::process::Command::new("node");
    node.args(["validate.mjs", "--carrier-is", "agent"])
        .arg(&path)
        .current_dir(&fixtures);
    let out = support::node::run(node, "node validate.mjs (bad)");
    assert!(!out.success, "{}", out.report());
    let summary: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let lines: Vec<u64> = summary["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["line"].as_u64().unwrap())
        .collect();
    for line in [2, 3, 4, 5, 6] {
        assert!(lines.contains(&line), "line {line} passed: {summary}");
    }
}

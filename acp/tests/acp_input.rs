//! What `/acp` does with bad input and at its bounds (README.md, "ACP clients and editors"):
//! each message that is not one it takes gets the JSON-RPC error code for it, the socket stays
//! open and the next message is answered; what one connection can make carrier hold (running
//! prompts, unanswered permission requests, bound sessions) is bounded, each bound tested at
//! the limit and one past it.
//!
//! A real carrier on 127.0.0.1 and the `tokio-tungstenite` ACP client of the test support
//! crate.

use carrier_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use carrier_agent::{
    AgentProfile, EmbeddedAgent, HostError, ProtocolSession, SessionDirectory, SessionEntry,
};
use carrier_protocol::channel::{Binary, ChannelDescriptor};
use carrier_protocol::channel_frame::encode_binary;
use carrier_server::InboundBody;
use futures_util::SinkExt;
use serde_json::{json, Value};
use support::acp::{test_agent, AcpClient};
use support::Server;
use tokio_tungstenite::tungstenite::Message;

async fn server() -> Server {
    let mut config = support::config();
    config.limits.max_text_bytes = 64 << 10;
    Server::with(config, test_agent(Duration::from_millis(2))).await
}

/// Sends `text` and returns the answer, which has a `null` id (the message had none carrier
/// could read).
async fn refused(c: &mut AcpClient, text: &str) -> Value {
    c.send_raw(text).await;
    let r = c.wait_for(|m| m["id"].is_null()).await;
    assert!(r.get("error").is_some(), "{text}: {r}");
    r
}

#[tokio::test]
async fn each_bad_message_gets_its_json_rpc_error_and_the_socket_stays_open() {
    let s = server().await;
    let mut c = AcpClient::connect(&s.acp_url("")).await;

    // Before initialize: every request is refused, notifications are ignored.
    let r = c
        .call("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let r = c
        .call("session/prompt", json!({"sessionId": "s1", "prompt": []}))
        .await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    c.notify("session/cancel", json!({"sessionId": "s1"})).await;

    for (text, code) in [
        ("not json", -32700),
        ("{\"jsonrpc\":\"2.0\",", -32700),
        ("[]", -32600),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}]"#,
            -32600,
        ),
        ("42", -32600),
        (r#"{"jsonrpc":"1.0","method":"initialize"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":{},"method":"initialize"}"#, -32600),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"method":"initialize"}"#,
            -32600,
        ),
        (r#"{"jsonrpc":"2.0","result":{}}"#, -32600),
    ] {
        let r = refused(&mut c, text).await;
        assert_eq!(r["error"]["code"], code, "{text}: {r}");
    }
    // An id longer than carrier keeps: refused under `null`.
    let long = "i".repeat(300);
    let r = refused(
        &mut c,
        &json!({"jsonrpc": "2.0", "id": long, "method": "initialize", "params": {"protocolVersion": 1}}).to_string(),
    )
    .await;
    assert_eq!(r["error"]["code"], -32600, "{r}");

    c.initialize().await;
    // After it: unknown methods, bad params, unknown sessions, non-text prompts.
    for (method, params, code) in [
        ("session/list", json!({}), -32601),
        ("authenticate", json!({"methodId": "x"}), -32601),
        ("fs/read_text_file", json!({}), -32601),
        ("session/new", json!({}), -32602),
        ("session/new", json!({"cwd": "/"}), -32602),
        (
            "session/load",
            json!({"sessionId": 3, "cwd": "/", "mcpServers": []}),
            -32602,
        ),
        ("session/prompt", json!({"sessionId": "s1"}), -32602),
        ("initialize", json!({"protocolVersion": "one"}), -32602),
        (
            "session/load",
            json!({"sessionId": "s404", "cwd": "/", "mcpServers": []}),
            -32002,
        ),
        (
            "session/prompt",
            json!({"sessionId": "s404", "prompt": []}),
            -32002,
        ),
    ] {
        let r = c.call(method, params.clone()).await;
        assert_eq!(r["error"]["code"], code, "{method} {params}: {r}");
    }
    let session = c.new_session().await;
    let r = c
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "a"},
                {"type": "resource_link", "uri": "file:///x", "name": "x"},
            ]}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // Nothing ran for it.
    let (mut carrier, _) = s.drive().await;
    carrier
        .ok("sessions.switch", json!({"session_id": session}))
        .await;
    assert_eq!(
        carrier.ok("session.history", json!({})).await["entries"],
        json!([])
    );
    // A response to nothing carrier asked, a notification it does not know: no answer. The
    // next request is answered, and is the next message.
    c.send(json!({"jsonrpc": "2.0", "id": 99, "result": {}}))
        .await;
    c.notify("_unknown/extension", json!({})).await;
    c.notify("session/cancel", json!({"sessionId": "s404"}))
        .await;
    let id = c
        .send_request("initialize", json!({"protocolVersion": 1}))
        .await;
    let next = c.next().await;
    assert_eq!(next["id"], id, "{next}");
}

#[tokio::test]
async fn a_message_over_the_text_limit_is_answered_under_its_id_and_the_socket_stays_open() {
    let s = server().await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let limit = 64 << 10;
    // At the limit: taken (a request carrier reads, whatever its padding).
    let at = |pad: usize| {
        json!({"jsonrpc": "2.0", "id": "big", "method": "initialize", "params": {"protocolVersion": 1, "pad": "x".repeat(pad)}})
            .to_string()
    };
    let base = at(0).len();
    let text = at(limit - base);
    assert_eq!(text.len(), limit);
    c.send_raw(&text).await;
    let r = c.wait_for(|m| m["id"] == "big").await;
    assert_eq!(r["result"]["protocolVersion"], 1, "at the limit: {r}");
    // One byte past it: refused under its id, with the sizes.
    let text = at(limit - base + 1);
    c.send_raw(&text).await;
    let r = c.wait_for(|m| m["id"] == "big").await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"code": "too_large", "limit": limit, "size": limit + 1})
    );
    // Without an id it can read: under `null`.
    c.send_raw(&format!("[{}]", "1,".repeat(40 << 10))).await;
    let r = c.wait_for(|m| m["id"].is_null()).await;
    assert_eq!(r["error"]["data"]["code"], "too_large", "{r}");
    c.initialize().await;
}

#[tokio::test]
async fn a_connection_is_sent_at_most_64_unanswered_permission_requests() {
    let s = server().await;
    for asks in [64, 65] {
        let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
        let session = c.new_session().await;
        let (mut carrier, _) = s.drive().await;
        carrier
            .ok("sessions.switch", json!({"session_id": session}))
            .await;
        let id = c.prompt(&session, &format!("/asks {asks}")).await;
        // The agent protocol's client hears every prompt; this connection at most 64 of them.
        for _ in 0..asks {
            carrier.event("session.permission_request").await;
        }
        let mut requests = 0;
        let mut seen = Vec::new();
        while requests < asks.min(64) {
            let m = c.next().await;
            if m["method"] == "session/request_permission" {
                requests += 1;
            }
            seen.push(m);
        }
        // Nothing more arrives before the cancel's own messages.
        c.notify("session/cancel", json!({"sessionId": session}))
            .await;
        let rest = c.until_response(id).await;
        assert_eq!(rest.last().unwrap()["result"]["stopReason"], "cancelled");
        let more = rest
            .iter()
            .filter(|m| m["method"] == "session/request_permission")
            .count();
        assert_eq!(more, 0, "{asks} asked: a request past the bound was sent");
        // Each request sent is withdrawn with the turn.
        let withdrawn = rest
            .iter()
            .filter(|m| m["method"] == "$/cancel_request")
            .count();
        assert_eq!(withdrawn, 64, "{asks} asked");
        let _ = seen;
    }
}

#[tokio::test]
async fn a_connection_runs_at_most_16_prompts_at_once() {
    let mut config = support::config();
    config.limits.max_sessions = 20;
    let s = Server::with(config, test_agent(Duration::from_millis(2))).await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    let mut ids = Vec::new();
    let mut sessions = Vec::new();
    for _ in 0..17 {
        sessions.push(c.new_session().await);
    }
    // Sixteen turns that hold (each waits on a permission nobody answers).
    for session in &sessions[..16] {
        let id = c.prompt(session, "/asks 1").await;
        c.wait_method("session/request_permission").await;
        ids.push(id);
    }
    let id = c.prompt(&sessions[16], "one more").await;
    let r = c.response(id).await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"code": "limit_exceeded", "limit": "prompts", "value": 16})
    );
    // Nothing ran in that session; once one prompt ends, the next is taken.
    c.notify("session/cancel", json!({"sessionId": sessions[0]}))
        .await;
    assert_eq!(
        c.response(ids[0]).await["result"]["stopReason"],
        "cancelled"
    );
    let id = c.prompt(&sessions[16], "now").await;
    let seen = c.until_response(id).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn");
    assert_eq!(
        support::acp::chunks(&seen, "agent_message_chunk"),
        "echo: now"
    );
}

/// A host directory listing more sessions than `limits.max_sessions` (the in-memory one never
/// does): a connection still binds at most that many.
struct ManySessions(EmbeddedAgent);

impl SessionDirectory for ManySessions {
    fn list(&self) -> Vec<SessionEntry> {
        (1..=5)
            .map(|n| SessionEntry {
                session_id: format!("m{n}"),
                title: String::new(),
            })
            .collect()
    }

    fn open(&self, session_id: &str) -> Option<Arc<dyn ProtocolSession>> {
        session_id.starts_with('m').then(|| self.0.session())
    }

    fn start(&self, _title: Option<&str>) -> Result<SessionEntry, HostError> {
        Err(HostError::new("this directory starts none"))
    }
}

#[tokio::test]
async fn a_connection_binds_at_most_max_sessions_sessions() {
    let mut config = support::config();
    config.limits.max_sessions = 3;
    let profile = AgentProfile::builder(ManySessions(EmbeddedAgent::default())).build();
    let s = Server::with(config, profile).await;
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    for session in ["m1", "m2", "m3"] {
        c.load_session(session).await;
    }
    // Loading one it has bound again is no new binding.
    c.load_session("m2").await;
    let r = c
        .call(
            "session/load",
            json!({"sessionId": "m4", "cwd": "/", "mcpServers": []}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert_eq!(r["error"]["data"]["code"], "limit_exceeded", "{r}");
}

#[tokio::test]
async fn channel_frames_flow_after_initialize_and_a_binary_frame_before_it_closes() {
    let s = server().await;
    let channel = s
        .transport
        .register_channel(ChannelDescriptor::new("mic", &[], Binary::Accepted))
        .expect("a channel");
    let mut inbound = channel.inbound(8);
    let (mut c, _) = AcpClient::initialized(&s.acp_url("")).await;
    // Out: the host's frame reaches the ACP client as a binary frame.
    channel
        .send_binary(bytes::Bytes::from_static(b"pcm"))
        .unwrap();
    let frame = c.binary().await;
    assert!(frame.ends_with(b"pcm"), "{frame:?}");
    // In: the client's frame reaches the host.
    let frame = encode_binary("mic", 0, bytes::Bytes::from_static(b"up")).unwrap();
    c.ws.send(Message::binary(frame.to_vec())).await.unwrap();
    let got = tokio::time::timeout(support::WAIT, inbound.recv())
        .await
        .unwrap()
        .unwrap();
    match got.body {
        InboundBody::Binary(body) => assert_eq!(&body[..], b"up"),
        other => panic!("expected the client's bytes, got {other:?}"),
    }
    // A frame carrier cannot route is refused in JSON-RPC's shape.
    let frame = encode_binary("nowhere", 3, bytes::Bytes::new()).unwrap();
    c.ws.send(Message::binary(frame.to_vec())).await.unwrap();
    let r = c.wait_method("_carrier/protocol_error").await;
    assert_eq!(r["params"]["code"], "unknown_channel", "{r}");
    assert_eq!(
        (r["params"]["channel"].clone(), r["params"]["seq"].clone()),
        (json!("nowhere"), json!(3))
    );
    // Before initialize, as on every wire, a binary frame closes the socket (1008), answered
    // in JSON-RPC's shape first.
    let mut early = AcpClient::connect(&s.acp_url("")).await;
    early.ws.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    assert_eq!(early.ended().await, support::Ended::Close(1008));
    let said = early.wait_method("_carrier/protocol_error").await;
    assert_eq!(said["params"]["code"], "handshake_required", "{said}");
}

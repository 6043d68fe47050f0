//! Protocol 1.2, feature `agent_updates` (docs/protocol.md, "Agent updates"), over real sockets
//! on 127.0.0.1: a host agent that reports tool calls beside its text, heard byte for byte by a
//! 1.2 client (an independent tokio-tungstenite one, and the project's Rust client, typed),
//! left out for a 1.1 client whose `seq` still only rises, live and on resume; an ACP-style
//! prompt answered by `option_id`, which a 1.1 client is refused.

use carrier_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use carrier::agent::{AgentProfile, HostError, InMemoryDirectory, ProtocolSession, TurnStart};
use carrier::client::{
    Client, ClientEvent, EventStream, ReceivedSessionEventKind, Transport, WsClientTransport,
    WsOptions,
};
use carrier::protocol::events::{PermissionOption, RawObject};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::*;
use tokio_tungstenite::tungstenite::Message;

/// A tool call as an ACP agent might write it: its own spacing, key order and escapes.
const TOOL_CALL: &str = r#"{"sessionUpdate":"tool_call", "toolCallId":"c1","title":"Read \u00e9","rawInput":{"z":1,"a":[2.50]}}"#;

fn raw(text: &str) -> RawObject {
    let raw = serde_json::from_str::<Box<serde_json::value::RawValue>>(text).expect("JSON");
    RawObject::new(raw).expect("an object")
}

/// `update …`: reports the tool call, streams a word, stops with `end_turn`. `ask …`: asks with
/// an ACP agent's three options and streams the option id it is answered with.
struct Reporter;

impl ProtocolSession for Reporter {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let sink = turn.sink;
        if turn.prompt.starts_with("ask") {
            let options: Vec<PermissionOption> = serde_json::from_value(json!([
                {"optionId": "once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "always", "name": "Always", "kind": "allow_always"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
            ]))
            .expect("options");
            let pending = sink.ask_permission_offering(None, "Write", json!({}), options);
            tokio::spawn(async move {
                if let Ok(choice) = pending.choice().await {
                    let chosen = choice.option_id.unwrap_or_else(|| "none".into());
                    let _ = sink.delta(&chosen);
                    let _ = sink.finish_streamed("end_turn", false);
                }
            });
            return Ok(());
        }
        let _ = sink.agent_update(raw(TOOL_CALL));
        let _ = sink.delta("read");
        let _ = sink.finish_streamed("end_turn", false);
        Ok(())
    }
}

fn reporter() -> AgentProfile {
    AgentProfile::builder(InMemoryDirectory::new(|_| {
        Arc::new(Reporter) as Arc<dyn ProtocolSession>
    }))
    .build()
}

/// An independent client that keeps every frame's text: handshakes with `version`.
async fn raw_client(server: &Server, version: &str, resume: Option<Value>) -> (Ws, Value) {
    let mut ws = connect(&server.url("")).await;
    let mut params = handshake_params(json!({ "protocol_version": version }));
    if let Some(resume) = resume {
        params["resume"] = resume;
    }
    let hs = json!({"id": "h", "method": "system.handshake", "params": params});
    ws.send(Message::text(hs.to_string())).await.expect("send");
    let reply: Value = serde_json::from_str(&next_text(&mut ws).await).expect("JSON");
    (ws, reply["result"].clone())
}

/// Text frames up to and including the next `turn_completed`.
async fn through_turn(ws: &mut Ws) -> Vec<String> {
    let mut frames = Vec::new();
    loop {
        let text = next_text(ws).await;
        let done = text.starts_with(r#"{"event":"session.turn_completed""#);
        frames.push(text);
        if done {
            return frames;
        }
    }
}

fn event_and_seq(frames: &[String]) -> Vec<(String, u64)> {
    frames
        .iter()
        .map(|t| {
            let v: Value = serde_json::from_str(t).expect("JSON");
            let name = v["event"].as_str().unwrap_or_default().to_owned();
            (name, v["seq"].as_u64().unwrap_or(0))
        })
        .collect()
}

#[tokio::test]
async fn a_1_2_client_hears_the_update_byte_for_byte_and_a_1_1_client_a_rising_seq_without_it() {
    let server = Server::with(config(), reporter()).await;
    let (mut new, hs_new) = raw_client(&server, "1.2", None).await;
    let (mut old, hs_old) = raw_client(&server, "1.1", None).await;
    assert_eq!(hs_new["features"]["agent_updates"], true, "{hs_new}");
    assert_eq!(hs_old["features"]["agent_updates"], false, "{hs_old}");
    assert_eq!(hs_old["version_skew"], true);

    let (mut driver, _) = server.drive().await;
    driver.submit("update").await;

    let heard = through_turn(&mut new).await;
    let name = |n: &str| n.to_owned();
    assert_eq!(
        event_and_seq(&heard),
        [
            (name("session.turn_started"), 1),
            (name("session.agent_update"), 2),
            (name("session.text_delta"), 3),
            (name("session.turn_completed"), 4),
        ]
    );
    assert_eq!(
        heard[1],
        format!(
            r#"{{"event":"session.agent_update","seq":2,"payload":{{"turn_id":"t1","update":{TOOL_CALL}}}}}"#
        ),
        "the agent's bytes, unchanged"
    );
    let completed: Value = serde_json::from_str(&heard[3]).expect("JSON");
    assert_eq!(completed["payload"]["stop_reason"], "end_turn");

    let older = through_turn(&mut old).await;
    assert_eq!(
        event_and_seq(&older),
        [
            (name("session.turn_started"), 1),
            (name("session.text_delta"), 3),
            (name("session.turn_completed"), 4),
        ],
        "no agent update, and seq still only rises"
    );

    // Resuming from the turn's start: each is replayed what its protocol has, and told how many.
    let resume =
        json!({"session_id": hs_new["session_id"], "epoch": hs_new["epoch"], "after_seq": 1});
    for (version, replayed) in [("1.2", 3), ("1.1", 2)] {
        let (mut again, hs) = raw_client(&server, version, Some(resume.clone())).await;
        assert_eq!(
            hs["resume"],
            json!({"outcome": "resumed", "replayed": replayed}),
            "{version}"
        );
        let frames = through_turn(&mut again).await;
        assert_eq!(frames.len(), replayed, "{version}: {frames:?}");
        if version == "1.2" {
            assert_eq!(frames[0], heard[1], "replayed with the same bytes");
        }
    }
}

#[tokio::test]
async fn a_prompt_with_options_is_answered_by_option_id_which_a_1_1_client_cannot_send() {
    let server = Server::with(config(), reporter()).await;
    let (mut c, _) = server.drive().await;
    let turn = c.submit("ask").await;
    let asked = c.event("session.permission_request").await;
    let request_id = asked["payload"]["request_id"].clone();
    assert_eq!(asked["payload"]["options"][1]["optionId"], "always");
    assert_eq!(asked["payload"]["options"][1]["kind"], "allow_always");

    let mut old = server.connect("").await;
    old.handshake(json!({"protocol_version": "1.1"})).await;
    let refused = old
        .err(
            "session.permission.respond",
            json!({"request_id": request_id, "option_id": "always"}),
        )
        .await;
    assert_eq!(refused["code"], "unsupported_feature", "{refused}");
    assert_eq!(refused["data"]["component"], "client");
    assert_eq!(refused["data"]["feature"], "agent_updates");

    for bad in [
        json!({"request_id": request_id, "option_id": "sometimes"}),
        json!({"request_id": request_id, "option_id": "once", "decision": "allow"}),
        json!({"request_id": request_id}),
    ] {
        let e = c.err("session.permission.respond", bad.clone()).await;
        assert_eq!(
            (e["code"].clone(), e["data"]["reason"].clone()),
            (json!("protocol_error"), json!("invalid_params")),
            "{bad}"
        );
    }
    c.ok(
        "session.permission.respond",
        json!({"request_id": request_id, "option_id": "always"}),
    )
    .await;
    let events = c.turn_events(&turn).await;
    let resolved = events
        .iter()
        .find(|e| e["event"] == "session.permission_resolved")
        .expect("resolved");
    assert_eq!(resolved["payload"]["decision"], "allow");
    assert_eq!(concat_deltas(&events), "always");

    // A prompt without options takes no option_id.
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    c.submit("/tool x").await;
    let asked = c.event("session.permission_request").await;
    assert!(asked["payload"].get("options").is_none(), "{asked}");
    let e = c
        .err(
            "session.permission.respond",
            json!({"request_id": asked["payload"]["request_id"], "option_id": "allow"}),
        )
        .await;
    assert_eq!(e["data"]["reason"], "invalid_params", "{e}");
}

async fn next_session_event(events: &mut EventStream) -> ReceivedSessionEventKind {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("an event in time")
            .expect("the client is alive");
        if let ClientEvent::Session(event) = event {
            return event.kind;
        }
    }
}

#[tokio::test]
async fn the_rust_client_reads_agent_updates_typed_and_answers_with_an_option() {
    let server = Server::with(config(), reporter()).await;
    let url = format!("ws://127.0.0.1:{}/", server.port);
    let transport = WsClientTransport::new(WsOptions::new(url).token(&server.token));
    let client = Client::new(Arc::new(transport) as Arc<dyn Transport>);
    let mut events = client.events();
    let hs = client.connect().await.expect("connected");
    assert_eq!(hs.protocol_version.to_string(), "1.2");

    client.submit("update").await.expect("submit");
    let mut kinds = Vec::new();
    loop {
        let kind = next_session_event(&mut events).await;
        let done = matches!(kind, ReceivedSessionEventKind::TurnCompleted { .. });
        kinds.push(kind);
        if done {
            break;
        }
    }
    let update = kinds
        .iter()
        .find_map(|k| match k {
            ReceivedSessionEventKind::AgentUpdate { turn_id, update } => Some((turn_id, update)),
            _ => None,
        })
        .expect("the agent update, typed");
    assert_eq!(update.0.as_deref(), Some("t1"));
    assert_eq!(update.1["title"], "Read é");
    assert!(matches!(
        kinds.last(),
        Some(ReceivedSessionEventKind::TurnCompleted { stop_reason: Some(r), .. }) if r == "end_turn"
    ));

    client.submit("ask").await.expect("submit");
    let request_id = loop {
        if let ReceivedSessionEventKind::PermissionRequest {
            request_id,
            options: Some(options),
            ..
        } = next_session_event(&mut events).await
        {
            assert_eq!(options.len(), 3);
            break request_id;
        }
    };
    client
        .respond_option(request_id, "no")
        .await
        .expect("answered by option");
    loop {
        match next_session_event(&mut events).await {
            ReceivedSessionEventKind::PermissionResolved { decision, .. } => {
                assert_eq!(decision.as_str(), "deny", "a reject option denies");
            }
            ReceivedSessionEventKind::TurnCompleted { text, .. } => {
                assert_eq!(text, "no");
                break;
            }
            _ => {}
        }
    }
}

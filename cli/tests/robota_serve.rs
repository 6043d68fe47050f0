//! `carrier serve` speaking the seed system's own wire (the Robota profile): `--profile robota`
//! at `/`, `/robota` without it, a bad `--profile`, an `--agent-cmd` child behind the wire, and
//! channel frames on a Robota connection from admission on, with no handshake. The real binary,
//! over real sockets.

use carrier_test_support as support;

use bytes::Bytes;
use carrier::protocol::channel_frame::{self, FrameBody};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use support::robota::{deltas, types, RobotaClient};
use support::serve_process::*;
use support::*;
use tokio_tungstenite::tungstenite::Message;

fn url(serve: &Serve, path: &str) -> String {
    format!("ws://127.0.0.1:{}{path}?token={TOKEN}", serve.port)
}

/// One turn of `prompt`: its messages, checked to end `complete` with the streamed reply.
async fn turn(c: &mut RobotaClient, prompt: &str) -> String {
    c.send(json!({"type": "submit", "prompt": prompt})).await;
    let turn = c.until_turn_ends().await;
    let end = turn.last().unwrap();
    assert_eq!(end["type"], "complete", "{turn:?}");
    assert_eq!(end["result"]["response"], deltas(&turn));
    deltas(&turn)
}

#[tokio::test]
async fn with_profile_robota_slash_speaks_the_seed_systems_wire() {
    let serve = Serve::start(&["--profile", "robota", "--demo-delay-ms", "1"])
        .await
        .expect("serve");
    let (mut c, messages, workspace) = RobotaClient::connect_greeted(&url(&serve, "/")).await;
    assert_eq!(messages["messages"], json!([]));
    assert_eq!(workspace["snapshot"]["sessionId"], "s1");
    assert_eq!(turn(&mut c, "at the root").await, "echo: at the root");
    // `/robota` speaks it too, on the same session.
    let (_, messages, _) = RobotaClient::connect_greeted(&url(&serve, "/robota")).await;
    assert_eq!(messages["messages"].as_array().unwrap().len(), 2);
    serve.finish().await;
}

#[tokio::test]
async fn without_the_flag_slash_is_the_agent_protocol_and_robota_is_at_its_path() {
    let serve = Serve::start(&["--demo-delay-ms", "1"])
        .await
        .expect("serve");
    let (mut carrier, hs) = serve.client().await;
    assert_eq!(hs["session_id"], "s1");
    let (mut robota, _, _) = RobotaClient::connect_greeted(&url(&serve, "/robota")).await;
    assert_eq!(turn(&mut robota, "by path").await, "echo: by path");
    let history = carrier.ok("session.history", json!({})).await;
    assert_eq!(history["entries"][1]["text"], "echo: by path");
    serve.finish().await;
}

#[tokio::test]
async fn a_bad_profile_exits_2_with_one_line() {
    for bad in ["nope", "", "Robota"] {
        let refused = match Serve::start(&["--profile", bad]).await {
            Ok(_) => panic!("--profile {bad:?} was accepted"),
            Err(refused) => refused,
        };
        assert_eq!(refused.status.code(), Some(2), "--profile {bad:?}");
        let lines: Vec<&str> = refused.stderr.trim_end().lines().collect();
        assert_eq!(lines.len(), 1, "one line: {:?}", refused.stderr);
        assert!(lines[0].contains("profile"), "{}", lines[0]);
    }
}

#[tokio::test]
async fn an_agent_process_drives_the_seed_systems_wire_like_the_embedded_agent() {
    let serve = Serve::with_agent(&python_agent("echo_clone.py", "20"), &[]).await;
    let (mut c, _, _) = RobotaClient::connect_greeted(&url(&serve, "/robota")).await;
    c.send(json!({"type": "submit", "prompt": "from a child"}))
        .await;
    let first = c.until_turn_ends().await;
    assert_eq!(types(&first)[..2], ["user_message", "thinking"]);
    // `carrier serve`'s default driver is the seed system's owner on its wire.
    assert_eq!(first[0]["driverId"], "owner");
    assert_eq!(deltas(&first), "child: from a child");
    assert_eq!(
        first.last().unwrap()["result"]["response"],
        "child: from a child"
    );

    for (result, reply) in [(json!(true), "tool ran: ls"), (json!(false), "tool denied")] {
        c.send(json!({"type": "submit", "prompt": "/tool ls"}))
            .await;
        let asked = c.until("permission_request").await.pop().unwrap();
        assert_eq!(asked["event"]["toolName"], "demo.tool");
        assert_eq!(asked["event"]["toolArgs"], json!({"command": "ls"}));
        let id = asked["event"]["id"].clone();
        c.send(json!({"type": "permission-response", "id": id, "result": result}))
            .await;
        let rest = c.until_turn_ends().await;
        assert_eq!(
            rest[0],
            json!({"type": "prompt_resolved", "event": {"id": id}})
        );
        assert_eq!(deltas(&rest), reply);
    }

    let prompt = vec!["w"; 100].join(" ");
    let seen = c.submit_and_abort(&prompt).await;
    let end = seen.last().unwrap();
    assert_eq!(end["type"], "interrupted");
    assert_eq!(end["result"]["response"], deltas(&seen));

    // The child's prompt outlives neither its driver nor its turn: a driver that connects
    // after the first one left is sent it, and an abort resolves it.
    c.send(json!({"type": "submit", "prompt": "/tool rm"}))
        .await;
    let asked = c.until("permission_request").await.pop().unwrap();
    let _ = c.ws.close(None).await;
    let (mut c, _, _) = RobotaClient::connect_greeted(&url(&serve, "/robota")).await;
    assert_eq!(c.next().await, asked);
    c.send(json!({"type": "abort"})).await;
    let end = c.until_turn_ends().await;
    assert_eq!(types(&end), ["prompt_resolved", "interrupted"]);
    assert_eq!(end[0]["event"]["id"], asked["event"]["id"]);

    let history = c.ask("get-messages", json!({})).await;
    let list = history["messages"].as_array().unwrap();
    assert_eq!(list.len(), 10, "five turns: {history}");
    assert_eq!(
        (list[0]["role"].clone(), list[0]["content"].clone()),
        (json!("user"), json!("from a child"))
    );
    assert_eq!(list[1]["content"], "child: from a child");
    assert_eq!(list[7]["state"], "interrupted");
    assert_eq!(list[9]["state"], "interrupted");
    serve.finish().await;
}

fn frame(channel: &str, seq: u32, body: &'static [u8]) -> Vec<u8> {
    channel_frame::encode_binary(channel, seq, Bytes::from_static(body))
        .expect("encode")
        .to_vec()
}

fn body(data: Bytes) -> (String, Vec<u8>) {
    let frame = channel_frame::decode(data).expect("a channel frame");
    match frame.body {
        FrameBody::Binary(b) => (frame.channel, b.to_vec()),
        other => panic!("expected a binary body, got {other:?}"),
    }
}

/// The next binary frame on an agent-protocol client's socket, skipping text.
async fn carrier_binary(c: &mut Client) -> Bytes {
    loop {
        let msg = tokio::time::timeout(WAIT, c.ws.next())
            .await
            .expect("timed out waiting for a binary frame");
        match msg {
            Some(Ok(Message::Binary(b))) => return b,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => panic!("ended: {msg:?}"),
            Some(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn channel_frames_work_on_a_robota_connection_from_admission_on() {
    let serve = Serve::start(&["--channel", "back:echo", "--channel", "hub:relay"])
        .await
        .expect("serve");
    // The very first frame is a channel frame: no handshake, no text before it.
    let mut robota = RobotaClient::connect(&url(&serve, "/robota")).await;
    robota.send_binary(frame("back", 0, b"first")).await;
    assert_eq!(
        body(robota.binary().await),
        ("back".into(), b"first".to_vec())
    );
    assert_eq!(robota.next().await["type"], "messages");
    assert_eq!(robota.next().await["type"], "execution_workspace_event");

    // A relay between the two profiles, both ways.
    let (mut carrier, _) = serve.client().await;
    carrier
        .ws
        .send(Message::binary(frame("hub", 0, b"to robota")))
        .await
        .expect("send");
    assert_eq!(
        body(robota.binary().await),
        ("hub".into(), b"to robota".to_vec())
    );
    robota.send_binary(frame("hub", 1, b"to carrier")).await;
    assert_eq!(
        body(carrier_binary(&mut carrier).await),
        ("hub".into(), b"to carrier".to_vec())
    );

    // An unroutable frame is answered in the seed server's words on this wire, in the
    // carrier's on the agent protocol's.
    robota.send_binary(frame("never-registered", 0, b"x")).await;
    assert_eq!(
        robota.next().await,
        json!({"type": "protocol_error",
               "message": "No channel registered for \"never-registered\""})
    );
    carrier
        .ws
        .send(Message::binary(frame("never-registered", 0, b"x")))
        .await
        .expect("send");
    let refused = carrier.event("protocol_error").await;
    assert_eq!(refused["payload"]["code"], "unknown_channel");
    serve.finish().await;
}

//! Channel frames on a connection of the seed system's wire, from admission on, with no
//! handshake: an echo, a relay between the two wires both ways, and an unroutable frame
//! answered in each wire's own words. Real sockets, in-process carrier with the reference
//! channels `carrier serve --channel` mounts.

use carrier_test_support as support;

use bytes::Bytes;
use carrier_protocol::channel_frame::{self, FrameBody};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use support::robota::RobotaClient;
use support::{Client, Server, WAIT};
use tokio_tungstenite::tungstenite::Message;

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
    let serve = Server::start().await;
    for spec in ["back:echo", "hub:relay"] {
        let spec = spec.parse().expect("channel spec");
        carrier_channels::mount(&serve.transport, &spec).expect("mount");
    }
    // The very first frame is a channel frame: no handshake, no text before it.
    let mut robota = RobotaClient::connect(&serve.robota_url("")).await;
    robota.send_binary(frame("back", 0, b"first")).await;
    assert_eq!(
        body(robota.binary().await),
        ("back".into(), b"first".to_vec())
    );
    assert_eq!(robota.next().await["type"], "messages");
    assert_eq!(robota.next().await["type"], "execution_workspace_event");

    // A relay between the two profiles, both ways.
    let (mut carrier, _) = serve.drive().await;
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
    serve.transport.stop().await;
}

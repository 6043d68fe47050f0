//! The typed Rust client against the real carrier on 127.0.0.1: calls typed by the catalog
//! (`call::<M>`), a turn whose permission prompt is answered with `respond`, session events as
//! a stream, and a channel whose frames the client numbers itself (the host's handler sees the
//! client's `seq`) and whose echoes arrive on the channel's stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier_client::{
    ChannelMessage, Client, ClientEvent, Decision, EventStream, ReceivedSessionEventKind,
    Transport, WsClientTransport, WsOptions,
};
use carrier_protocol::catalog::def;
use carrier_protocol::channel_frame::FrameBody;
use carrier_protocol::methods::{Empty, HistoryParams};
use carrier_server::{Binary, ChannelDescriptor, InboundBody};
use carrier_test_support::Server;
use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);

async fn connected(server: &Server) -> Client {
    let url = format!("ws://127.0.0.1:{}/", server.port);
    let transport = WsClientTransport::new(WsOptions::new(url).token(&server.token));
    let client = Client::new(Arc::new(transport) as Arc<dyn Transport>);
    tokio::time::timeout(WAIT, client.connect())
        .await
        .expect("connect settles")
        .expect("connected");
    client
}

async fn next_session_event(events: &mut EventStream) -> ReceivedSessionEventKind {
    loop {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the client is alive");
        if let ClientEvent::Session(event) = event {
            return event.kind;
        }
    }
}

#[tokio::test]
async fn typed_calls_and_a_turn_whose_permission_prompt_is_answered_with_respond() {
    let server = Server::start().await;
    let client = connected(&server).await;

    client
        .call::<def::SystemPing>(Empty {})
        .await
        .expect("ping");
    let role = client
        .call::<def::SurfaceRole>(Empty {})
        .await
        .expect("role");
    assert_eq!(role.role.as_str(), "drive");

    let mut events = client.events();
    let turn = client.submit("/tool ls -l").await.expect("submitted");
    let mut text = String::new();
    loop {
        match next_session_event(&mut events).await {
            ReceivedSessionEventKind::PermissionRequest {
                turn_id,
                request_id,
                tool,
                ..
            } => {
                assert_eq!(
                    (turn_id.as_str(), tool.as_str()),
                    (turn.as_str(), "demo.tool")
                );
                client
                    .respond(request_id, Decision::Allow)
                    .await
                    .expect("answered");
            }
            ReceivedSessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => {
                text.push_str(&delta)
            }
            ReceivedSessionEventKind::TurnCompleted {
                turn_id, aborted, ..
            } if turn_id == turn => {
                assert!(!aborted);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(text, "tool ran: ls -l");

    let history = client
        .call::<def::SessionHistory>(HistoryParams { limit: None })
        .await
        .expect("history");
    let texts: Vec<&str> = history.entries.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["/tool ls -l", "tool ran: ls -l"]);

    // A remote error keeps its wire code through the typed path.
    let error = client
        .respond("no-such-request", Decision::Deny)
        .await
        .expect_err("nothing to answer");
    assert!(error.code().is_some(), "{error}");
    client.disconnect().await;
}

#[tokio::test]
async fn channel_sends_are_numbered_by_the_client_and_echoes_arrive_on_the_channel_stream() {
    let server = Server::start().await;
    let handle = server
        .transport
        .register_channel(ChannelDescriptor::new("e", &["*"], Binary::Accepted))
        .expect("registered");
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let echo = handle.clone();
    handle.on_inbound(move |message| {
        let body = match message.body {
            InboundBody::Binary(body) => FrameBody::Binary(body),
            InboundBody::Event(event) => FrameBody::EventBytes(event),
            _ => return,
        };
        let _ = seen_tx.send(message.seq);
        let _ = echo.send_to(message.connection, body);
    });

    let client = connected(&server).await;
    let descriptor = client
        .handshake()
        .and_then(|info| info.channel("e").cloned())
        .expect("the handshake describes channel e");
    assert!(descriptor.binary && descriptor.declares("anything"));

    let mut frames = client.channel("e");
    let mut sent = Vec::new();
    for body in [&b"one"[..], b"two", b"three"] {
        sent.push(
            client
                .send_channel_binary("e", Bytes::from_static(body))
                .await
                .expect("sent"),
        );
    }
    sent.push(
        client
            .send_channel_event("e", "note", &json!({"n": 4}))
            .await
            .expect("sent"),
    );
    assert_eq!(sent, [0, 1, 2, 3], "the client numbers its own frames");
    for expected in 0..4u32 {
        let seq = tokio::time::timeout(WAIT, seen.recv())
            .await
            .expect("the host saw the frame")
            .expect("handler alive");
        assert_eq!(seq, expected, "the host's handler sees the client's seq");
    }

    let mut echoed = Vec::new();
    while echoed.len() < 4 {
        let message = tokio::time::timeout(WAIT, frames.next())
            .await
            .expect("an echo in time")
            .expect("the client is alive");
        echoed.push(message);
    }
    let bodies: Vec<String> = echoed
        .iter()
        .map(|message| match message {
            ChannelMessage::Binary { body, .. } => String::from_utf8_lossy(body).into_owned(),
            ChannelMessage::Event { event, payload, .. } => format!("{event} {payload}"),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(bodies, ["one", "two", "three", r#"note {"n":4}"#]);

    // What the channel does not declare is refused locally and takes no seq.
    let refused = client
        .send_channel_binary("nope", Bytes::from_static(b"x"))
        .await
        .expect_err("no such channel");
    assert!(refused.to_string().contains("nope"), "{refused}");
    assert_eq!(
        client
            .send_channel_binary("e", Bytes::from_static(b"four"))
            .await
            .expect("sent"),
        4
    );

    // A new connection numbers from 0 again.
    let other = connected(&server).await;
    assert_eq!(
        other
            .try_send_channel_binary("e", Bytes::from_static(b"x"))
            .expect("room"),
        0
    );
    client.disconnect().await;
    other.disconnect().await;
}

/// What a driver and an observer write, from the crate's own exports: a turn aborted with
/// `abort()`, connection states on `events()` (connected, then disconnected when the carrier
/// goes away), a channel frame read as the host's own serde type, and the observe role asked
/// for with the type `carrier::client` re-exports.
#[tokio::test]
async fn abort_connection_states_typed_channel_frames_and_the_role_type() {
    use carrier_client::{ConnectionState, Role};
    use carrier_server::ChannelDirection;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(tag = "event", content = "payload", rename_all = "snake_case")]
    enum Diagnostics {
        Cpu { percent: f64 },
        Disk { free_bytes: u64 },
    }

    let server = Server::start().await;
    let diagnostics = server
        .transport
        .register_channel(
            ChannelDescriptor::new("diagnostics", &["cpu", "disk"], Binary::Refused)
                .host_to_clients(),
        )
        .expect("registered");
    let url = format!("ws://127.0.0.1:{}/", server.port);
    let client = Client::new(Arc::new(WsClientTransport::new(
        WsOptions::new(url.clone()).token(&server.token),
    )));
    let mut events = client.events();
    let mut frames = client.channel("diagnostics");
    tokio::time::timeout(WAIT, client.connect())
        .await
        .expect("connect settles")
        .expect("connected");
    let info = client.handshake().expect("handshaken");
    let descriptor = info.channel("diagnostics").expect("declared");
    assert_eq!(descriptor.direction, Some(ChannelDirection::HostToClients));

    // The states so far, in order, on the same stream as the session's events.
    let mut states = Vec::new();
    while !states.contains(&ConnectionState::Connected) {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the client is alive");
        if let ClientEvent::State(state) = event {
            states.push(state);
        }
    }
    assert_eq!(
        states,
        [ConnectionState::Connecting, ConnectionState::Connected]
    );

    // A turn waiting on its permission prompt, aborted by the client.
    let turn = client
        .submit("/tool rm -rf build")
        .await
        .expect("submitted");
    loop {
        if let ReceivedSessionEventKind::PermissionRequest { turn_id, .. } =
            next_session_event(&mut events).await
        {
            assert_eq!(turn_id, turn);
            break;
        }
    }
    client.abort(turn.clone()).await.expect("aborted");
    loop {
        if let ReceivedSessionEventKind::TurnCompleted {
            turn_id, aborted, ..
        } = next_session_event(&mut events).await
        {
            assert_eq!(turn_id, turn);
            assert!(aborted, "the turn ended aborted");
            break;
        }
    }
    let again = client.abort(turn).await.expect_err("the turn has ended");
    assert_eq!(
        again.code().map(|c| c.as_str()),
        Some("not_found"),
        "{again}"
    );

    // The host's events, read as its own type.
    diagnostics
        .send_event("cpu", json!({"percent": 12.5}))
        .expect("sent");
    diagnostics
        .send_event("disk", json!({"free_bytes": 1024}))
        .expect("sent");
    let mut typed = Vec::new();
    while typed.len() < 2 {
        let frame = tokio::time::timeout(WAIT, frames.next())
            .await
            .expect("a frame in time")
            .expect("the client is alive");
        typed.push(frame.json::<Diagnostics>().expect("the host's type"));
    }
    assert_eq!(
        typed,
        [
            Diagnostics::Cpu { percent: 12.5 },
            Diagnostics::Disk { free_bytes: 1024 }
        ]
    );

    // An observer, by the re-exported role type.
    let observer = Client::new(Arc::new(WsClientTransport::new(
        WsOptions::new(url).token(&server.token).role(Role::Observe),
    )));
    let observed = tokio::time::timeout(WAIT, observer.connect())
        .await
        .expect("connect settles")
        .expect("connected");
    assert_eq!(observed.role, Role::Observe);
    observer.disconnect().await;

    // The carrier goes away: the break shows on the stream (the client then tries again).
    server.transport.stop().await;
    let mut after = Vec::new();
    while !after.contains(&ConnectionState::Connecting) {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the client is alive");
        if let ClientEvent::State(state) = event {
            after.push(state);
        }
    }
    client.disconnect().await;
    loop {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the client is alive");
        if event == ClientEvent::State(ConnectionState::Disconnected) {
            break;
        }
    }
}

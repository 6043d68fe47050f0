//! When a connection receives channel frames, over real sockets on 127.0.0.1: from its
//! handshake on (whichever task completes it) until it fails. The connection's reader attaches
//! and removes it; these tests pin the timing the carrier promises.

use carrier_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use carrier_protocol::channel_frame::{self, FrameBody};
use carrier_server::{
    Binary, CarrierContext, ChannelDescriptor, Connection, Limits, TextProfile, TextSession,
    WsTransport,
};
use support::*;

/// Registers `name`, whose handler sends every inbound frame's body back to its sender.
fn echo_channel(transport: &WsTransport, name: &str) {
    let handle = transport
        .register_channel(ChannelDescriptor::new(name, &[], Binary::Accepted))
        .expect("register");
    let reply = handle.clone();
    handle.on_inbound(move |msg| {
        if let carrier_server::InboundBody::Binary(body) = msg.body {
            let _ = reply.send_to(msg.connection, FrameBody::Binary(body));
        }
    });
}

/// The body of a binary channel frame.
fn binary_body(frame: &channel_frame::ChannelFrame) -> &[u8] {
    match &frame.body {
        FrameBody::Binary(body) => body,
        other => panic!("expected a binary frame, got {other:?}"),
    }
}

/// Reads data frames until a binary one, and decodes it as a channel frame.
async fn next_channel_frame(raw: &mut Raw) -> channel_frame::ChannelFrame {
    loop {
        let f = tokio::time::timeout(WAIT, raw.recv_data())
            .await
            .expect("a frame in time")
            .expect("a frame before the end");
        if f.opcode == 2 {
            return channel_frame::decode(Bytes::from(f.payload)).expect("a channel frame");
        }
    }
}

#[tokio::test]
async fn a_channel_frame_sent_right_behind_the_handshake_is_answered() {
    // The handshake and a channel frame in one go, without waiting for the answer: the
    // connection is a sink before its reader reads the frame after the handshake, so the echo
    // reaches it.
    let server = Server::core_default().await;
    echo_channel(&server.transport, "back");
    let (status, mut raw) =
        Raw::upgrade(server.port, &format!("/?token={}", server.token), &[]).await;
    assert_eq!(status, 101);
    let frame =
        channel_frame::encode_binary("back", 0, Bytes::from_static(b"first")).expect("encode");
    raw.send(true, 1, b"hs").await;
    raw.send(true, 2, &frame.to_vec()).await;
    let ok = raw.recv_data().await.expect("handshake answer");
    assert_eq!(ok.payload, b"ok");
    let echo = next_channel_frame(&mut raw).await;
    assert_eq!(echo.channel, "back");
    assert_eq!(binary_body(&echo), b"first");
}

/// A profile that completes the handshake from a task of its own: `hs` is answered `ok` by a
/// spawned task, after it marks the handshake done.
struct LateHandshake;
struct LateSession(Connection);

impl TextProfile for LateHandshake {
    fn open(&self, conn: Connection, _ctx: &CarrierContext) -> Box<dyn TextSession> {
        Box::new(LateSession(conn))
    }
}

impl TextSession for LateSession {
    fn on_text(&mut self, text: &str) {
        if text == "hs" {
            let conn = self.0.clone();
            tokio::spawn(async move {
                // Long after the reader has gone back to waiting on the socket.
                tokio::time::sleep(Duration::from_millis(50)).await;
                conn.mark_handshaken();
                let _ = conn.send_text("ok");
            });
        }
    }
}

#[tokio::test]
async fn a_handshake_completed_from_another_task_makes_the_connection_a_sink() {
    // The client sends nothing after `hs`: the reader waits on the socket when the handshake
    // completes, and must still attach the connection.
    let transport = WsTransport::new(config()).expect("valid config");
    transport.attach(std::sync::Arc::new(LateHandshake));
    transport.start().await.expect("start");
    let port = transport.bound_port().expect("bound");
    let handle = transport
        .register_channel(ChannelDescriptor::new("news", &[], Binary::Accepted))
        .expect("register");
    let (status, mut raw) = Raw::upgrade(port, "/?token=test-token", &[]).await;
    assert_eq!(status, 101);
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.expect("answer").payload, b"ok");
    assert!(
        eventually(|| transport.registry().sinks().len() == 1).await,
        "the connection never became a channel sink"
    );
    handle
        .broadcast(FrameBody::Binary(Bytes::from_static(b"hello")))
        .expect("broadcast");
    let frame = next_channel_frame(&mut raw).await;
    assert_eq!(frame.channel, "news");
    assert_eq!(binary_body(&frame), b"hello");
    transport.stop().await;
}

#[tokio::test]
async fn a_failed_connection_stops_being_a_sink_and_is_counted_once() {
    // A slow reader is failed (1013): it leaves the sinks, and a broadcast afterwards goes to
    // the healthy connection only.
    let server =
        Server::core(config().with_limits(Limits::default().with_queue_bytes(256 * 1024))).await;
    let handle = server
        .transport
        .register_channel(ChannelDescriptor::new("news", &[], Binary::Accepted))
        .expect("register");
    let url = format!("/?token={}", server.token);
    let (_, mut slow) = Raw::upgrade(server.port, &url, &[]).await;
    slow.send(true, 1, b"hs").await;
    assert_eq!(slow.recv_data().await.expect("answer").payload, b"ok");
    let (_, mut healthy) = Raw::upgrade(server.port, &url, &[]).await;
    healthy.send(true, 1, b"hs").await;
    assert_eq!(healthy.recv_data().await.expect("answer").payload, b"ok");
    let registry = server.transport.registry();
    assert!(eventually(|| registry.sinks().len() == 2).await);

    // 4,000 x 16 KiB for a client that reads nothing: far past its budget and the kernel's
    // buffers.
    slow.send(true, 1, b"flood 4000 16384").await;
    let metrics = server.transport.metrics();
    assert!(
        eventually(|| metrics.delivery_failures() == 1 && registry.sinks().len() == 1).await,
        "failures {}, sinks {:?}",
        metrics.delivery_failures(),
        registry.sinks()
    );
    handle
        .broadcast(FrameBody::Binary(Bytes::from_static(b"still here")))
        .expect("broadcast");
    let frame = next_channel_frame(&mut healthy).await;
    assert_eq!(binary_body(&frame), b"still here");
    assert_eq!(metrics.delivery_failures(), 1, "failed exactly once");
}

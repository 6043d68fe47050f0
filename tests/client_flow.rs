//! The typed client's flow control over real sockets on 127.0.0.1, against a stub server of
//! its own written with tokio-tungstenite (an independent WebSocket implementation):
//!
//! - the outbound buffer is bounded in bytes: a `try_` send past it fails with `BufferFull`
//!   and queues nothing, an async send waits, and once the server reads everything arrives in
//!   `seq` order with nothing lost;
//! - bulk credit (protocol 1.1, `bulk_credit`): the client never sends a bulk channel's frames
//!   past the credit the handshake and `channel.credit` grants gave it, waits for a grant, and
//!   counts nothing on a bulk channel whose descriptor has no `credit` (a 1.0 server).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier::client::{
    ChannelSendError, Client, ClientError, Transport, TransportError, WsClientTransport, WsOptions,
};
use carrier::protocol::channel_frame::{self, FrameBody};
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const WAIT: Duration = Duration::from_secs(20);

type Stub = WebSocketStream<TcpStream>;

/// Accepts one client, answers its handshake with these channel descriptors, and hands the
/// socket over.
async fn stub(channels: Value) -> (u16, oneshot::Receiver<Stub>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
        let request = loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => {
                    break serde_json::from_str::<Value>(&text).expect("json")
                }
                Some(Ok(_)) => continue,
                other => panic!("no handshake: {other:?}"),
            }
        };
        assert_eq!(request["method"], "system.handshake");
        let reply = json!({"id": request["id"], "result": {
            "protocol_version": "1.2",
            "min_compatible_protocol": "1.0",
            "server": {"name": "stub", "version": "0"},
            "role": "drive",
            "session_id": "s1",
            "epoch": "e1",
            "features": {"bulk_credit": true},
            "channels": channels,
            "limits": {"max_message_bytes": 16 << 20},
            "resume": {"outcome": "new"},
        }});
        ws.send(Message::text(reply.to_string()))
            .await
            .expect("reply");
        let _ = tx.send(ws);
    });
    (port, rx)
}

async fn connect(port: u16, budget: usize) -> (Client, Arc<WsClientTransport>) {
    let options = WsOptions::new(format!("ws://127.0.0.1:{port}/")).outbound_budget(budget);
    let transport = Arc::new(WsClientTransport::new(options));
    let client = Client::new(Arc::clone(&transport) as Arc<dyn Transport>);
    tokio::time::timeout(WAIT, client.connect())
        .await
        .expect("connect settles")
        .expect("connected");
    (client, transport)
}

/// The next channel frame the stub receives: its channel, seq and body length.
async fn next_frame(ws: &mut Stub) -> (String, u32, usize) {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("open")
            .expect("readable");
        if let Message::Binary(bytes) = message {
            let frame = channel_frame::decode(bytes).expect("a channel frame");
            let FrameBody::Binary(body) = frame.body else {
                panic!("not binary")
            };
            return (frame.channel, frame.seq, body.len());
        }
    }
}

#[tokio::test]
async fn past_the_outbound_budget_try_sends_fail_async_sends_wait_and_nothing_is_lost() {
    const BUDGET: usize = 256 << 10;
    const CHUNK: usize = 32 << 10;
    let (port, stub_socket) =
        stub(json!([{"name": "b", "events": [], "binary": true, "delivery": "reliable"}])).await;
    let (client, transport) = connect(port, BUDGET).await;
    let mut ws = stub_socket.await.expect("the stub's socket");

    // The stub does not read: the kernel's buffers fill, then the client's queue.
    let mut accepted = 0u32;
    let full = loop {
        assert!(accepted < 10_000, "the buffer never filled");
        match client.try_send_channel_binary("b", Bytes::from(vec![7u8; CHUNK])) {
            Ok(seq) => {
                assert_eq!(seq, accepted);
                accepted += 1;
            }
            Err(error) => break error,
        }
        // Let the writer task move what it can into the socket.
        tokio::task::yield_now().await;
    };
    assert!(
        matches!(
            full,
            ClientError::Transport(TransportError::BufferFull { budget: BUDGET })
        ),
        "{full}"
    );
    assert!(
        transport.queued_bytes() <= BUDGET,
        "{}",
        transport.queued_bytes()
    );
    assert!(
        transport.queued_bytes() + CHUNK + 300 > BUDGET,
        "refused only when full"
    );

    // An async send waits for room instead.
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .send_channel_binary("b", Bytes::from(vec![8u8; CHUNK]))
                .await
        })
    };
    // Now the stub reads: every frame arrives, numbered 0, 1, 2 … without a gap.
    for expected in 0..=accepted {
        let (channel, seq, len) = next_frame(&mut ws).await;
        assert_eq!((channel.as_str(), seq, len), ("b", expected, CHUNK));
    }
    let seq = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("the waiting send completes")
        .expect("task")
        .expect("sent");
    assert_eq!(seq, accepted);
    client.disconnect().await;
}

#[tokio::test]
async fn bulk_sends_stay_within_credit_and_wait_for_a_grant() {
    const CREDIT: u64 = 100_000;
    const CHUNK: usize = 30_000;
    let (port, stub_socket) = stub(json!([
        {"name": "up", "events": [], "binary": true, "delivery": "bulk", "credit": CREDIT},
        {"name": "old", "events": [], "binary": true, "delivery": "bulk"},
    ]))
    .await;
    let (client, _transport) = connect(port, 8 << 20).await;
    let mut ws = stub_socket.await.expect("the stub's socket");
    assert_eq!(client.channel_credit("up"), Some(CREDIT));
    assert_eq!(
        client.channel_credit("old"),
        None,
        "no credit in the descriptor"
    );

    // What the stub receives, checked against what it granted, frame by frame.
    let (frames_tx, mut frames) = mpsc::unbounded_channel();
    let (grants_tx, mut grants) = mpsc::unbounded_channel::<u64>();
    let reader = tokio::spawn(async move {
        let mut granted = CREDIT;
        let mut received = 0u64;
        loop {
            tokio::select! {
                grant = grants.recv() => {
                    let Some(bytes) = grant else { return };
                    granted += bytes;
                    let event = json!({"event": "channel.credit",
                        "payload": {"channel": "up", "bytes": bytes}});
                    ws.send(Message::text(event.to_string())).await.expect("grant");
                }
                frame = next_frame(&mut ws) => {
                    if frame.0 == "up" {
                        received += frame.2 as u64;
                        assert!(received <= granted, "{received} bytes sent on {granted} of credit");
                    }
                    let _ = frames_tx.send(frame);
                }
            }
        }
    });

    for seq in 0..3u32 {
        let sent = client.send_channel_binary("up", Bytes::from(vec![1u8; CHUNK]));
        assert_eq!(
            tokio::time::timeout(WAIT, sent)
                .await
                .expect("in time")
                .expect("sent"),
            seq
        );
    }
    assert_eq!(client.channel_credit("up"), Some(CREDIT - 3 * CHUNK as u64));
    // The fourth frame does not fit in what is left: a try fails, an async send waits.
    let refused = client
        .try_send_channel_binary("up", Bytes::from(vec![1u8; CHUNK]))
        .expect_err("too little credit");
    assert!(
        matches!(
            refused,
            ClientError::Channel(ChannelSendError::AwaitingCredit { left: 10_000, .. })
        ),
        "{refused}"
    );
    let mut fourth = Box::pin(client.send_channel_binary("up", Bytes::from(vec![1u8; CHUNK])));
    assert!(
        (&mut fourth).now_or_never().is_none(),
        "it waits for credit"
    );
    // A frame larger than all the credit could never go: refused at once.
    let oversized = client
        .send_channel_binary("up", Bytes::from(vec![0u8; CREDIT as usize + 1]))
        .await
        .expect_err("over the whole credit");
    assert!(matches!(
        oversized,
        ClientError::Channel(ChannelSendError::OverCredit { .. })
    ));
    // The grant lets it go.
    grants_tx.send(25_000).expect("reader alive");
    let seq = tokio::time::timeout(WAIT, fourth)
        .await
        .expect("granted in time")
        .expect("sent");
    assert_eq!(seq, 3);
    assert_eq!(client.channel_credit("up"), Some(5_000));

    // Without credit in the descriptor, a bulk channel is paced by TCP only.
    for seq in 0..10u32 {
        let sent = client.send_channel_binary("old", Bytes::from(vec![2u8; CHUNK]));
        assert_eq!(
            tokio::time::timeout(WAIT, sent)
                .await
                .expect("in time")
                .expect("sent"),
            seq
        );
    }
    let mut seen = Vec::new();
    while seen.len() < 14 {
        let frame = tokio::time::timeout(WAIT, frames.recv())
            .await
            .expect("frames in time")
            .expect("the stub's reader is alive");
        seen.push((frame.0, frame.1));
    }
    let up: Vec<u32> = seen.iter().filter(|f| f.0 == "up").map(|f| f.1).collect();
    let old: Vec<u32> = seen.iter().filter(|f| f.0 == "old").map(|f| f.1).collect();
    assert_eq!(up, [0, 1, 2, 3]);
    assert_eq!(old, (0..10).collect::<Vec<_>>());
    drop(grants_tx);
    client.disconnect().await;
    let _ = tokio::time::timeout(WAIT, reader).await;
}

#[tokio::test]
async fn an_unread_channel_stream_pauses_reading_at_the_backlog_and_loses_nothing() {
    const BACKLOG: usize = 256 << 10;
    const CHUNK: usize = 64 << 10;
    const FRAMES: u32 = 400; // 25 MiB: more than loopback's socket buffers hold
    let (port, stub_socket) =
        stub(json!([{"name": "b", "events": [], "binary": true, "delivery": "reliable"}])).await;
    let options = WsOptions::new(format!("ws://127.0.0.1:{port}/"));
    let transport = Arc::new(WsClientTransport::new(options));
    let client = Client::with_options(
        Arc::clone(&transport) as Arc<dyn Transport>,
        carrier::client::ClientOptions {
            inbound_backlog: BACKLOG,
            ..Default::default()
        },
    );
    tokio::time::timeout(WAIT, client.connect())
        .await
        .expect("connect settles")
        .expect("connected");
    let mut frames = client.channel("b");
    let mut ws = stub_socket.await.expect("the stub's socket");
    let writer = tokio::spawn(async move {
        for seq in 0..FRAMES {
            let frame = channel_frame::encode_binary("b", seq, Bytes::from(vec![3u8; CHUNK]))
                .expect("encode")
                .to_vec();
            ws.send(Message::binary(frame)).await.expect("send");
        }
        ws
    });
    // Nobody reads the stream: what it holds grows to the backlog and one message past it.
    let one_message = CHUNK + 64;
    let deadline = tokio::time::Instant::now() + WAIT;
    while client.inbound_held() <= BACKLOG {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the backlog never filled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let held = client.inbound_held();
    assert!(held <= BACKLOG + one_message, "{held}");
    // It stays there: the transport stopped reading (the stub's writes back up in TCP).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(client.inbound_held(), held, "reading paused");
    assert!(!writer.is_finished(), "the server is held back by TCP");
    // Reading the stream lets everything through, in order, nothing lost.
    for expected in 0..FRAMES {
        let message = tokio::time::timeout(WAIT, frames.next())
            .await
            .expect("a frame in time")
            .expect("the client is alive");
        match message {
            carrier::client::ChannelMessage::Binary { seq, body } => {
                assert_eq!((seq, body.len()), (expected, CHUNK));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(client.inbound_held() <= BACKLOG + one_message);
    }
    let _ws = tokio::time::timeout(WAIT, writer)
        .await
        .expect("the stub finished")
        .expect("task");
    client.disconnect().await;
}

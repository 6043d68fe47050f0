//! Bulk channels (docs/protocol.md, "Bulk channels") over real sockets: a host streams with
//! `ChannelHandle::send_bulk_to` to a tokio-tungstenite client whose receive buffer is small, so
//! the carrier's own queue is what paces the transfer.
//!
//! Every wait below is for a condition (a frame, a flag the host sets, a byte counter), bounded
//! by `WAIT`; nothing sleeps and hopes. The one deliberate sleep is the slow reader's pace.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier_agent::{AgentProfile, EmbeddedAgent};
use carrier_protocol::channel_frame::{self, FrameBody};
use carrier_server::{
    Binary, CarrierConfig, ChannelDescriptor, ChannelError, ChannelHandle, ConnectionId,
    DeliveryClass, WsTransport, DEFAULT_BULK_WINDOW,
};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpSocket;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const WAIT: Duration = Duration::from_secs(20);
const TOKEN: &str = "bulk-test-token";
/// Frame payload: 64 KiB, the size `carrier pipe` uses.
const FRAME: usize = 64 * 1024;
/// 64 MiB in all.
const FRAMES: u64 = 1024;

type Ws = WebSocketStream<tokio::net::TcpStream>;

async fn carrier() -> (WsTransport, ChannelHandle, u16) {
    let transport = WsTransport::new(
        CarrierConfig::default()
            .with_port(0)
            .with_auth(carrier_server::Auth::Token(TOKEN.into())),
    )
    .expect("config");
    transport.attach(AgentProfile::embedded(EmbeddedAgent::default()));
    let handle = transport
        .registry()
        .register(
            ChannelDescriptor::new("bulk", &["*"], Binary::Accepted).delivery(DeliveryClass::Bulk),
        )
        .expect("register");
    transport.start().await.expect("start");
    let port = transport.bound_port().expect("port");
    (transport, handle, port)
}

/// A client whose socket receive buffer is small (so the kernel holds little of the transfer),
/// handshaken with protocol 1.0.
async fn client(port: u16, role: &str) -> Ws {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(16 * 1024).expect("rcvbuf");
    let tcp = socket
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("connect");
    let url = format!("ws://127.0.0.1:{port}/?token={TOKEN}&role={role}");
    let (mut ws, _) = tokio_tungstenite::client_async(url, tcp)
        .await
        .expect("upgrade");
    let hs = json!({"id": "hs", "method": "system.handshake", "params": {
        "protocol_version": "1.0", "min_compatible_protocol": "1.0",
        "client": {"name": "bulk-test", "version": "0"}}});
    ws.send(Message::text(hs.to_string())).await.expect("send");
    loop {
        let v = next_json(&mut ws).await;
        if v["id"] == "hs" {
            assert!(v.get("result").is_some(), "{v}");
            return ws;
        }
    }
}

async fn next_json(ws: &mut Ws) -> Value {
    match next(ws).await {
        Got::Text(v) => v,
        other => panic!("expected text, got {other:?}"),
    }
}

#[derive(Debug)]
enum Got {
    Text(Value),
    /// A bulk frame: its server seq and the index the host stamped into its body.
    Bulk {
        seq: u32,
        index: u64,
        len: usize,
    },
    Closed(Option<u16>),
}

async fn next(ws: &mut Ws) -> Got {
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame within WAIT");
        match msg {
            Some(Ok(Message::Text(t))) => {
                return Got::Text(serde_json::from_str(&t).expect("json"))
            }
            Some(Ok(Message::Binary(b))) => {
                let frame = channel_frame::decode(Bytes::from(b.to_vec())).expect("channel frame");
                assert_eq!(frame.channel, "bulk");
                let FrameBody::Binary(body) = frame.body else {
                    panic!("binary body expected")
                };
                let index = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
                return Got::Bulk {
                    seq: frame.seq,
                    index,
                    len: body.len(),
                };
            }
            Some(Ok(Message::Close(c))) => return Got::Closed(c.map(|c| u16::from(c.code))),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Got::Closed(None),
        }
    }
}

/// Sends one binary frame on the bulk channel: how the host learns the connection's id.
async fn say_go(ws: &mut Ws, handle: &ChannelHandle) -> ConnectionId {
    let mut inbound = handle.inbound(4);
    let frame = channel_frame::encode_binary("bulk", 0, Bytes::from_static(b"go")).expect("encode");
    ws.send(Message::binary(frame.to_vec()))
        .await
        .expect("send");
    let got = tokio::time::timeout(WAIT, inbound.recv())
        .await
        .expect("inbound within WAIT")
        .expect("inbound");
    got.connection
}

fn body(index: u64) -> FrameBody {
    let mut b = vec![0x5A; FRAME];
    b[..8].copy_from_slice(&index.to_le_bytes());
    FrameBody::Binary(Bytes::from(b))
}

/// What the streaming host saw.
#[derive(Default)]
struct HostLog {
    /// Index of the last frame queued (+1; 0 = none yet).
    queued: AtomicU64,
    /// Sends whose first poll was pending: the host was made to wait.
    waited: AtomicU64,
    /// The largest bulk queue byte count seen for the connection after a send.
    max_queued_bytes: AtomicU64,
    /// Set while a send waits for room.
    waiting: AtomicBool,
}

/// Streams `FRAMES` frames with `send_bulk_to`, logging what it sees. Returns the first error.
async fn stream(
    handle: ChannelHandle,
    to: ConnectionId,
    log: Arc<HostLog>,
) -> Result<(), ChannelError> {
    for i in 0..FRAMES {
        let mut send = pin!(handle.send_bulk_to(to, body(i)));
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::future::Future::poll(send.as_mut(), cx))
        })
        .await;
        let result = match first {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => {
                log.waited.fetch_add(1, Ordering::SeqCst);
                log.waiting.store(true, Ordering::SeqCst);
                let r = send.await;
                log.waiting.store(false, Ordering::SeqCst);
                r
            }
        };
        result?;
        log.queued.store(i + 1, Ordering::SeqCst);
        let bytes = handle.bulk_queued_bytes(to).unwrap_or(0) as u64;
        log.max_queued_bytes.fetch_max(bytes, Ordering::SeqCst);
    }
    Ok(())
}

/// Polls `cond` every 5 ms until it holds; panics after WAIT.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Bytes one 64 KiB frame holds against the window: the body, the frame head and the per-item
/// overhead the outbound queue charges.
fn frame_cost() -> u64 {
    // The RBF head: magic (3), version, kind, name length, the name "bulk" (4), seq (4).
    (FRAME + 10 + "bulk".len() + carrier_server::ITEM_OVERHEAD) as u64
}

#[tokio::test]
async fn a_64_mib_transfer_to_a_slow_then_fast_reader_is_paced_not_failed() {
    let (transport, handle, port) = carrier().await;
    let mut ws = client(port, "drive").await;
    let conn = say_go(&mut ws, &handle).await;
    let log = Arc::new(HostLog::default());
    let host = tokio::spawn(stream(handle.clone(), conn, log.clone()));

    // About 1 MiB/s for the first two seconds, then as fast as it goes.
    let slow_until = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut expected = 0u64;
    let mut last_seq = None;
    while expected < FRAMES {
        match next(&mut ws).await {
            Got::Bulk { seq, index, len } => {
                assert_eq!(index, expected, "bulk frames arrive in order");
                assert_eq!(len, FRAME);
                if let Some(last) = last_seq {
                    assert!(seq > last, "server seq increases: {seq} after {last}");
                }
                last_seq = Some(seq);
                expected += 1;
                if tokio::time::Instant::now() < slow_until {
                    tokio::time::sleep(Duration::from_millis(62)).await;
                }
            }
            Got::Text(v) => panic!("no text expected during the transfer: {v}"),
            Got::Closed(code) => panic!("the connection closed ({code:?}) at frame {expected}"),
        }
    }
    tokio::time::timeout(WAIT, host)
        .await
        .expect("host done")
        .expect("host task")
        .expect("every send succeeds");
    let waited = log.waited.load(Ordering::SeqCst);
    let max = log.max_queued_bytes.load(Ordering::SeqCst);
    assert!(waited > 0, "the host's sends were made to wait");
    assert!(
        max <= DEFAULT_BULK_WINDOW as u64 + frame_cost(),
        "queued {max} bytes: more than the window plus one frame"
    );
    assert!(max > 0);
    transport.stop().await;
}

#[tokio::test]
async fn a_reply_overtakes_the_bulk_frames_queued_before_it() {
    let (transport, handle, port) = carrier().await;
    let mut driver = client(port, "drive").await;
    let mut observer = client(port, "observe").await;
    let conn = say_go(&mut driver, &handle).await;
    let log = Arc::new(HostLog::default());
    let host = tokio::spawn(stream(handle.clone(), conn, log.clone()));

    // The driver reads nothing until the host waits on a full window: from then on the bulk
    // queue holds a window's worth of frames that are not written yet.
    until("the host to wait on a full window", || {
        log.waiting.load(Ordering::SeqCst)
            && handle.bulk_queued_bytes(conn).unwrap_or(0) as u64 + frame_cost()
                > DEFAULT_BULK_WINDOW as u64
    })
    .await;
    let prompt = "one two three four five six seven eight";
    let submit = json!({"id": "s1", "method": "session.submit", "params": {"prompt": prompt}});
    driver
        .send(Message::text(submit.to_string()))
        .await
        .expect("submit");
    // When the observer has the turn's end, every event of the reply has been queued on the
    // driver's connection too.
    loop {
        let v = next_json(&mut observer).await;
        if v["event"] == "session.turn_completed" {
            break;
        }
    }
    // Frames in the bulk queue now were queued before the reply's last event was emitted or
    // after it; either way every one of them must come after the reply. The snapshot may be off
    // by the one frame the writer is writing and the one a racing send just queued.
    // The driver reads nothing and the host waits on a full window, so the snapshot is stable;
    // read it until two readings agree. The window's count includes the one frame the writer
    // may be writing (its room is released once written): that frame, and only it, may come
    // before the reply.
    let (queued, in_lane) = loop {
        let a = (
            log.queued.load(Ordering::SeqCst),
            handle.bulk_queued_bytes(conn).unwrap_or(0) as u64,
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let b = (
            log.queued.load(Ordering::SeqCst),
            handle.bulk_queued_bytes(conn).unwrap_or(0) as u64,
        );
        if a == b {
            assert_eq!(b.1 % frame_cost(), 0, "whole frames in the window");
            break (b.0, b.1 / frame_cost());
        }
    };
    assert!(
        in_lane >= 8,
        "the queue held {in_lane} frames: too few to test priority"
    );
    let first_held = queued - in_lane + 1;

    let mut reply = Vec::new();
    let mut bulk_before_end = Vec::new();
    let mut expected = 0u64;
    let mut completed = false;
    while expected < FRAMES {
        match next(&mut driver).await {
            Got::Text(v) => {
                assert!(!completed, "nothing of the reply after turn_completed: {v}");
                completed = v["event"] == "session.turn_completed";
                reply.push(v);
            }
            Got::Bulk { index, .. } => {
                assert_eq!(index, expected, "bulk frames keep their order");
                expected += 1;
                if !completed {
                    bulk_before_end.push(index);
                }
            }
            Got::Closed(code) => panic!("closed ({code:?})"),
        }
    }
    assert!(completed, "the reply ended");
    if let Some(&late) = bulk_before_end.iter().find(|&&i| i >= first_held) {
        panic!(
            "bulk frame {late} (queued before the reply) was written ahead of it; \
             queue held {first_held}.. ({in_lane} frames)"
        );
    }
    // The reply's own order: the response, then turn_started, deltas, turn_completed, with the
    // session seq strictly increasing and the deltas spelling the echo.
    assert_eq!(reply[0]["id"], "s1", "{}", reply[0]);
    let events: Vec<&Value> = reply.iter().filter(|v| v.get("event").is_some()).collect();
    assert_eq!(
        events.first().map(|e| &e["event"]),
        Some(&json!("session.turn_started"))
    );
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] > w[0]),
        "session seqs in order: {seqs:?}"
    );
    let text: String = events
        .iter()
        .filter(|e| e["event"] == "session.text_delta")
        .filter_map(|e| e["payload"]["delta"].as_str())
        .collect();
    assert_eq!(text, format!("echo: {prompt}"));
    tokio::time::timeout(WAIT, host)
        .await
        .expect("host done")
        .expect("host task")
        .expect("sends succeed");
    transport.stop().await;
}

#[tokio::test]
async fn a_synchronous_send_on_a_full_window_is_refused_and_queues_nothing() {
    let (transport, handle, port) = carrier().await;
    let mut ws = client(port, "drive").await;
    let conn = say_go(&mut ws, &handle).await;
    // The client reads nothing: synchronous sends fill the kernel buffers, then the window.
    let mut refused = None;
    for i in 0..FRAMES {
        match handle.send_to(conn, body(i)) {
            Ok(_) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
        // Let the writer move what it can into the socket, so the window is what refuses.
        tokio::task::yield_now().await;
    }
    let (at, error) = refused.expect("a full window refuses a synchronous send");
    assert!(
        matches!(error, ChannelError::WindowFull { ref channel, ref receivers }
            if channel == "bulk" && receivers == &[conn]),
        "{error:?}"
    );
    let before = handle.bulk_queued_bytes(conn).expect("connected");
    assert!(
        before as u64 + frame_cost() > DEFAULT_BULK_WINDOW as u64,
        "{before}"
    );
    assert!(matches!(
        handle.send_to(conn, body(at)),
        Err(ChannelError::WindowFull { .. })
    ));
    assert!(matches!(
        handle.broadcast(body(at)),
        Err(ChannelError::WindowFull { .. })
    ));
    assert_eq!(
        handle.bulk_queued_bytes(conn),
        Some(before),
        "nothing was queued"
    );
    // Once the client reads, everything sent before the refusal arrives, in order.
    for expected in 0..at {
        match next(&mut ws).await {
            Got::Bulk { index, .. } => assert_eq!(index, expected),
            other => panic!("{other:?}"),
        }
    }
    transport.stop().await;
}

#[tokio::test]
async fn a_receiver_that_closes_mid_transfer_fails_the_pending_send() {
    let (transport, handle, port) = carrier().await;
    let mut ws = client(port, "drive").await;
    let conn = say_go(&mut ws, &handle).await;
    let log = Arc::new(HostLog::default());
    let host = tokio::spawn(stream(handle.clone(), conn, log.clone()));
    until("the host to wait on a full window", || {
        log.waiting.load(Ordering::SeqCst)
    })
    .await;
    drop(ws); // the socket goes away mid-transfer
    let result = tokio::time::timeout(WAIT, host)
        .await
        .expect("the pending send returns within WAIT")
        .expect("host task");
    assert!(result.is_err(), "a send to a closed connection is an error");
    assert!(log.queued.load(Ordering::SeqCst) < FRAMES);
    transport.stop().await;
}

#[tokio::test]
async fn bulk_sends_on_a_reliable_channel_are_refused() {
    let (transport, _bulk, port) = carrier().await;
    let reliable = transport
        .registry()
        .register(ChannelDescriptor::new("plain", &["*"], Binary::Accepted))
        .expect("register");
    let mut ws = client(port, "drive").await;
    let frame =
        channel_frame::encode_binary("plain", 0, Bytes::from_static(b"hi")).expect("encode");
    let mut inbound = reliable.inbound(4);
    ws.send(Message::binary(frame.to_vec()))
        .await
        .expect("send");
    let conn = inbound.recv().await.expect("inbound").connection;
    assert!(matches!(
        reliable.send_bulk_to(conn, body(0)).await,
        Err(ChannelError::NotBulk(_))
    ));
    transport.stop().await;
}

/// Cancel-safety: async bulk sends dropped at varied points (a timeout of 0..3 ms each) while
/// the client reads. Every frame that arrives is one whose send completed, whole and in order, the
/// seqs of the completed sends are contiguous (a dropped send took no seq and queued nothing), and
/// nothing else arrives.
#[tokio::test]
async fn a_dropped_bulk_send_queues_nothing_or_the_whole_frame() {
    let (transport, handle, port) = carrier().await;
    let mut ws = client(port, "drive").await;
    let conn = say_go(&mut ws, &handle).await;
    let h = handle.clone();
    let sender = tokio::spawn(async move {
        let mut completed = Vec::new();
        let mut cancelled = 0u64;
        for k in 0..800u64 {
            let t = Duration::from_micros((k * 7919) % 3000);
            match tokio::time::timeout(t, h.send_bulk_to(conn, body(k))).await {
                Ok(Ok(seq)) => completed.push((k, seq)),
                Ok(Err(e)) => panic!("send {k}: {e:?}"),
                Err(_) => cancelled += 1,
            }
        }
        (completed, cancelled)
    });
    let mut got: Vec<(u64, u32)> = Vec::new();
    while !sender.is_finished() {
        if let Ok(Some(Ok(Message::Binary(b)))) =
            tokio::time::timeout(Duration::from_millis(20), ws.next()).await
        {
            let f = channel_frame::decode(Bytes::from(b.to_vec())).expect("frame");
            let FrameBody::Binary(body) = f.body else {
                panic!("binary")
            };
            assert_eq!(body.len(), FRAME, "whole frame");
            got.push((u64::from_le_bytes(body[..8].try_into().unwrap()), f.seq));
            tokio::time::sleep(Duration::from_micros(300)).await;
        }
    }
    let (completed, cancelled) = sender.await.expect("sender");
    while got.len() < completed.len() {
        match next(&mut ws).await {
            Got::Bulk { seq, index, len } => {
                assert_eq!(len, FRAME);
                got.push((index, seq));
            }
            other => panic!("{other:?}"),
        }
    }
    // Nothing more arrives: no dropped send left a frame behind.
    let extra = tokio::time::timeout(Duration::from_millis(300), ws.next()).await;
    assert!(extra.is_err(), "an extra frame arrived: {extra:?}");
    assert!(cancelled > 0 && !completed.is_empty());
    assert_eq!(
        got, completed,
        "received exactly the completed sends, in order"
    );
    assert!(
        completed.windows(2).all(|w| w[1].1 == w[0].1 + 1),
        "contiguous seqs"
    );
    assert_eq!(handle.bulk_queued_bytes(conn), Some(0));
    transport.stop().await;
}

/// The very send that waits on a full window returns the error when the receiver goes away (not
/// only a later send to the gone connection).
#[tokio::test]
async fn the_send_waiting_on_a_full_window_fails_when_the_receiver_closes() {
    let (transport, handle, port) = carrier().await;
    let mut ws = client(port, "drive").await;
    let conn = say_go(&mut ws, &handle).await;
    let mut i = 0u64;
    let mut pending = loop {
        let mut send = Box::pin(handle.send_bulk_to(conn, body(i)));
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::future::Future::poll(send.as_mut(), cx))
        })
        .await;
        match first {
            std::task::Poll::Ready(r) => {
                r.expect("queued");
                i += 1;
                tokio::task::yield_now().await;
            }
            std::task::Poll::Pending => break send,
        }
        assert!(i < FRAMES, "the window never filled");
    };
    drop(ws);
    let result = tokio::time::timeout(WAIT, pending.as_mut())
        .await
        .expect("the pending send returns within WAIT");
    assert!(
        matches!(result, Err(ChannelError::Delivery(_))),
        "the pending send returned {result:?}"
    );
    transport.stop().await;
}

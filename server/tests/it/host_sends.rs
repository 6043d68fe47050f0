//! Every host send of a `ChannelHandle`, on every delivery class, to receivers that read slowly
//! or not at all, over real sockets (tokio-tungstenite clients with small receive buffers).
//!
//! Each test keeps the ledger that `ChannelHandle` promises ("What a send promises"): every frame
//! the host tries to send is accepted (`Ok(seq)`) or refused (an error the host sees); every
//! accepted frame reaches each of its receivers, or its loss is reported to that receiver
//! (`channel.dropped` on a lossy channel, or the end of its connection with a close code,
//! counted in `carrier_delivery_failures_total` when the connection failed). Nothing else.
//!
//! Every wait is for a condition bounded by `WAIT`, or for the end marker the host sends last
//! (an `end` event: a receiver has everything sent before it once it reads it, as frames of one
//! channel, and the frames of the reliable and lossy channels together, keep their order). The
//! one deliberate sleep is a slow reader's pace.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use carrier_agent::{AgentProfile, EmbeddedAgent};
use carrier_protocol::channel_frame::{self, FrameBody};
use carrier_server::{
    Binary, CarrierConfig, ChannelDescriptor, ChannelError, ChannelHandle, ConnectionId,
    DeliveryClass, DeliveryError, Limits, WsTransport,
};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const WAIT: Duration = Duration::from_secs(20);
const TOKEN: &str = "host-sends-token";

type Ws = WebSocketStream<TcpStream>;

fn channel(name: &str, delivery: DeliveryClass) -> ChannelDescriptor {
    ChannelDescriptor::new(name, &["*"], Binary::Accepted).delivery(delivery)
}

async fn carrier(
    limits: Limits,
    channels: Vec<ChannelDescriptor>,
) -> (WsTransport, Vec<ChannelHandle>, u16) {
    let transport = WsTransport::new(
        CarrierConfig::default()
            .with_port(0)
            .with_auth(carrier_server::Auth::Token(TOKEN.into()))
            .with_limits(limits),
    )
    .expect("config");
    transport.attach(AgentProfile::embedded(EmbeddedAgent::default()));
    let handles = channels
        .into_iter()
        .map(|d| transport.register_channel(d).expect("register"))
        .collect();
    transport.start().await.expect("start");
    let port = transport.bound_port().expect("port");
    (transport, handles, port)
}

/// A client handshaken at protocol 1.0, and its connection id (the channel sink that appears
/// once its handshake is done). `rcvbuf`: its socket's receive buffer, small so that the
/// kernel holds little of what the carrier sends and the carrier's own queue is what fills.
async fn receiver(transport: &WsTransport, port: u16, rcvbuf: Option<u32>) -> (Ws, ConnectionId) {
    let before = transport.registry().sinks();
    let socket = TcpSocket::new_v4().expect("socket");
    if let Some(bytes) = rcvbuf {
        socket.set_recv_buffer_size(bytes).expect("rcvbuf");
    }
    let tcp = socket
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("connect");
    let url = format!("ws://127.0.0.1:{port}/?token={TOKEN}");
    let (mut ws, _) = tokio_tungstenite::client_async(url, tcp)
        .await
        .expect("upgrade");
    let hs = json!({"id": "hs", "method": "system.handshake", "params": {
        "protocol_version": "1.0", "min_compatible_protocol": "1.0",
        "client": {"name": "host-sends-test", "version": "0"}}});
    ws.send(Message::text(hs.to_string())).await.expect("send");
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("handshake answer within WAIT");
        if let Some(Ok(Message::Text(t))) = msg {
            let v: Value = serde_json::from_str(&t).expect("json");
            if v["id"] == "hs" {
                assert!(v.get("result").is_some(), "{v}");
                break;
            }
        }
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(id) = transport
            .registry()
            .sinks()
            .into_iter()
            .find(|id| !before.contains(id))
        {
            return (ws, id);
        }
        assert!(tokio::time::Instant::now() < deadline, "never attached");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One channel frame as received.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Got {
    channel: String,
    seq: u32,
    /// The index the host stamped into the first 8 bytes of an opaque body, if any.
    index: Option<u64>,
}

/// What a receiver got, up to the host's end marker or the end of its connection.
#[derive(Debug, Default)]
struct Received {
    /// Channel frames in arrival order (the end marker left out).
    frames: Vec<Got>,
    /// `channel.dropped` counts, by channel.
    dropped: BTreeMap<String, u64>,
    /// The close frame's code and reason, when the connection ended with one.
    close: Option<(u16, String)>,
}

impl Received {
    fn seqs(&self, channel: &str) -> Vec<u32> {
        self.frames
            .iter()
            .filter(|g| g.channel == channel)
            .map(|g| g.seq)
            .collect()
    }
}

/// Reads until an `end` event (on any channel) or the end of the connection, sleeping `pace`
/// after each channel frame.
async fn read(mut ws: Ws, pace: Duration) -> Received {
    let mut got = Received::default();
    loop {
        let msg = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame within WAIT");
        match msg {
            Some(Ok(Message::Binary(b))) => {
                let frame = channel_frame::decode(Bytes::from(b.to_vec())).expect("channel frame");
                let index = match &frame.body {
                    FrameBody::Event { event, .. } if event == "end" => return got,
                    FrameBody::Binary(body) if body.len() >= 8 => {
                        Some(u64::from_le_bytes(body[..8].try_into().expect("8 bytes")))
                    }
                    _ => None,
                };
                got.frames.push(Got {
                    channel: frame.channel.to_string(),
                    seq: frame.seq,
                    index,
                });
                if !pace.is_zero() {
                    tokio::time::sleep(pace).await;
                }
            }
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["event"] == "channel.dropped" {
                    let channel = v["payload"]["channel"].as_str().expect("channel");
                    let count = v["payload"]["count"].as_u64().expect("count");
                    *got.dropped.entry(channel.to_string()).or_default() += count;
                }
            }
            Some(Ok(Message::Close(c))) => {
                got.close = c.map(|c| (u16::from(c.code), c.reason.to_string()));
                return got;
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return got,
        }
    }
}

/// `len` bytes whose first 8 carry `index`.
fn stamped(index: u64, len: usize) -> Bytes {
    let mut b = vec![0x5A; len.max(8)];
    b[..8].copy_from_slice(&index.to_le_bytes());
    Bytes::from(b)
}

/// An opaque body of `len` bytes whose first 8 carry `index`.
fn body(index: u64, len: usize) -> FrameBody {
    FrameBody::Binary(stamped(index, len))
}

fn end() -> FrameBody {
    FrameBody::Event {
        event: "end".into(),
        payload: Value::Null,
    }
}

/// Who an accepted frame was for.
#[derive(Debug, Clone, Copy)]
enum To {
    All,
    Only(ConnectionId),
}

/// The host's side of the ledger: each accepted frame's seq and receivers.
#[derive(Default)]
struct Sent(Vec<(u32, To)>);

impl Sent {
    fn for_receiver(&self, id: ConnectionId) -> Vec<u32> {
        self.0
            .iter()
            .filter(|(_, to)| match to {
                To::All => true,
                To::Only(c) => *c == id,
            })
            .map(|(seq, _)| *seq)
            .collect()
    }
}

/// The sync sends of a bulk channel to a slow reader (and a fast one), through every sync API
/// a host has: each is accepted or refused with `WindowFull` naming the receiver without room,
/// and every accepted frame arrives, in order, at each receiver it was for. Nothing is dropped,
/// nothing is reported dropped, no connection fails.
#[tokio::test]
async fn bulk_sync_sends_to_a_slow_reader_are_delivered_or_refused_never_lost() {
    const FRAME: usize = 16 * 1024;
    let (transport, handles, port) = carrier(
        Limits::default(),
        vec![channel("bulk", DeliveryClass::Bulk).bulk_window(256 * 1024)],
    )
    .await;
    let bulk = handles[0].clone();
    let (fast_ws, fast) = receiver(&transport, port, None).await;
    let (slow_ws, slow) = receiver(&transport, port, Some(16 * 1024)).await;
    let fast_reader = tokio::spawn(read(fast_ws, Duration::ZERO));
    let slow_reader = tokio::spawn(read(slow_ws, Duration::from_millis(10)));

    let mut sent = Sent::default();
    let mut refused = 0u64;
    const ATTEMPTS: u64 = 450;
    for k in 0..ATTEMPTS {
        let event = json!({"k": k});
        let (result, to) = match k % 6 {
            0 => (bulk.send_binary(stamped(k, FRAME)), To::All),
            1 => (bulk.send_event("e", event), To::All),
            2 => (bulk.broadcast(body(k, FRAME)), To::All),
            3 => (bulk.broadcast_except(fast, body(k, FRAME)), To::Only(slow)),
            4 => (bulk.send_to(slow, body(k, FRAME)), To::Only(slow)),
            _ => (bulk.send_event_to(slow, "e", event), To::Only(slow)),
        };
        match result {
            Ok(seq) => sent.0.push((seq, to)),
            Err(ChannelError::WindowFull { channel, receivers }) => {
                assert_eq!(channel, "bulk");
                assert!(
                    !receivers.is_empty() && receivers.iter().all(|r| *r == fast || *r == slow),
                    "a refusal names the receivers without room: {receivers:?}"
                );
                refused += 1;
            }
            Err(e) => panic!("send {k}: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for id in [fast, slow] {
        bulk.send_bulk_to(id, end()).await.expect("end marker");
    }
    let fast_got = fast_reader.await.expect("fast reader");
    let slow_got = slow_reader.await.expect("slow reader");

    assert_eq!(sent.0.len() as u64 + refused, ATTEMPTS);
    assert!(refused > 0, "the slow reader never filled its window");
    for (id, got) in [(fast, &fast_got), (slow, &slow_got)] {
        let expected = sent.for_receiver(id);
        assert_eq!(
            got.seqs("bulk"),
            expected,
            "{id}: accepted {} frames for it, it received {}",
            expected.len(),
            got.frames.len()
        );
        assert!(got.dropped.is_empty(), "{id}: {:?}", got.dropped);
    }
    assert_eq!(transport.metrics().delivery_failures(), 0);
    transport.stop().await;
}

/// A receiver the carrier is closing (here: it read nothing, so it never answered a ping) is
/// still attached until its reader notices. A targeted send to it on any delivery class is an
/// error, never an `Ok` for a frame that goes nowhere: the host is told for every frame it
/// does not get. (Before, a bulk channel's `send_to` and `send_event_to` returned `Ok(seq)` and
/// queued nothing: accepted frames vanished with no error, no event and no failure counted.)
#[tokio::test]
async fn a_targeted_send_to_a_receiver_being_closed_is_an_error_on_every_class() {
    let limits = Limits::default()
        .with_ping_interval(Duration::from_millis(200))
        .with_pong_timeout(Duration::from_millis(200))
        .with_stop_grace(Duration::from_secs(2));
    let (transport, handles, port) = carrier(
        limits,
        vec![
            channel("bulk", DeliveryClass::Bulk),
            channel("plain", DeliveryClass::Reliable),
            channel("live", DeliveryClass::Lossy),
        ],
    )
    .await;
    let names = ["bulk", "plain", "live"];
    // Reads nothing until the end: the carrier gives up on it ("no pong").
    let (quiet_ws, quiet) = receiver(&transport, port, None).await;

    let mut accepted: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    let mut closed: BTreeMap<&str, u64> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut k = 0u64;
    'sending: loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the connection was never let go"
        );
        for (handle, name) in handles.iter().zip(names) {
            let mut results = vec![handle.send_to(quiet, body(k, 64))];
            if name == "bulk" {
                results.push(handle.send_event_to(quiet, "e", json!(k)));
            }
            for result in results {
                match result {
                    Ok(seq) => accepted.entry(name).or_default().push(seq),
                    Err(ChannelError::Delivery(DeliveryError::Closed)) => {
                        *closed.entry(name).or_default() += 1
                    }
                    Err(ChannelError::UnknownConnection(_)) => break 'sending,
                    Err(e) => panic!("{name}: {e:?}"),
                }
            }
        }
        k += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = read(quiet_ws, Duration::ZERO).await;
    assert_eq!(got.close, Some((1001, "no pong".to_string())));
    for name in names {
        let expected = accepted.get(name).cloned().unwrap_or_default();
        assert_eq!(
            got.seqs(name),
            expected,
            "{name}: {} frames accepted, {} received, {} refused as closed",
            expected.len(),
            got.seqs(name).len(),
            closed.get(name).unwrap_or(&0)
        );
        assert!(
            closed.get(name).copied().unwrap_or(0) > 0,
            "{name}: the host was never told the receiver was closing"
        );
    }
    assert!(got.dropped.is_empty(), "{:?}", got.dropped);
    transport.stop().await;
}

/// A receiver that stops reading holds a host's synchronous bulk sends (each refused with
/// `WindowFull` naming it) for at most the stall time: then the next sync send fails it (1013,
/// `bulk receiver stalled`, counted), and the other receiver gets every frame from then on as
/// it did before. What the stalled receiver had been given and did not read is reported to it
/// by that close. (Before, only the async sends let a stalled receiver go: a host sending
/// synchronously was refused for every receiver for as long as the stalled one stayed.)
#[tokio::test]
async fn a_receiver_that_stops_reading_is_let_go_by_synchronous_bulk_sends() {
    const FRAME: usize = 16 * 1024;
    let (transport, handles, port) = carrier(
        Limits::default(),
        vec![channel("bulk", DeliveryClass::Bulk).bulk_window(256 * 1024)],
    )
    .await;
    let bulk = handles[0].clone();
    let (live_ws, live) = receiver(&transport, port, None).await;
    let (stuck_ws, stuck) = receiver(&transport, port, Some(16 * 1024)).await;
    let live_reader = tokio::spawn(read(live_ws, Duration::ZERO));

    let mut accepted = Vec::new();
    let mut refused_for_stuck = 0u64;
    // The stall time is 10 s (docs/protocol.md, "Bulk channels"); WAIT is twice that.
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut after_failure = 0;
    let mut k = 0u64;
    while after_failure < 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled receiver was never let go ({refused_for_stuck} sends refused for it)"
        );
        match bulk.send_binary(stamped(k, FRAME)) {
            Ok(seq) => accepted.push(seq),
            Err(ChannelError::WindowFull { receivers, .. }) => {
                assert!(
                    !receivers.is_empty() && receivers.iter().all(|r| *r == stuck || *r == live),
                    "{receivers:?}"
                );
                refused_for_stuck += u64::from(receivers.contains(&stuck));
            }
            Err(e) => panic!("send {k}: {e:?}"),
        }
        if transport.metrics().delivery_failures() > 0 {
            after_failure += 1;
        }
        k += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bulk.send_bulk_to(live, end()).await.expect("end marker");
    let stuck_got = read(stuck_ws, Duration::ZERO).await;
    let live_got = live_reader.await.expect("live reader");

    assert!(
        refused_for_stuck > 0,
        "the stuck receiver never filled its window"
    );
    assert_eq!(transport.metrics().delivery_failures(), 1);
    assert_eq!(
        stuck_got.close,
        Some((1013, "bulk receiver stalled".to_string()))
    );
    let stuck_seqs = stuck_got.seqs("bulk");
    assert!(
        stuck_seqs.len() < accepted.len() && accepted.starts_with(&stuck_seqs),
        "the stalled receiver got {} of {} accepted frames, in order, then its close",
        stuck_seqs.len(),
        accepted.len()
    );
    assert_eq!(
        live_got.seqs("bulk"),
        accepted,
        "the live receiver got every frame"
    );
    transport.stop().await;
}

/// Async bulk broadcasts dropped at varied points (a timeout of 0..3 ms each) while one
/// receiver reads fast and one slowly: each receiver gets exactly the broadcasts that
/// completed, in order, and their seqs are contiguous (a cancelled broadcast queued its frame
/// for no one and took no seq). (Before, a broadcast dropped while it waited for the slow
/// receiver left its frame with the fast one: a frame the host was never told it sent, and a
/// hole in the slow receiver's transfer.)
#[tokio::test]
async fn a_cancelled_bulk_broadcast_queues_its_frame_for_no_one() {
    const FRAME: usize = 16 * 1024;
    let (transport, handles, port) = carrier(
        Limits::default(),
        vec![channel("bulk", DeliveryClass::Bulk).bulk_window(64 * 1024)],
    )
    .await;
    let bulk = handles[0].clone();
    // The fast receiver first: a broadcast reaches the receivers in the order they attached.
    let (fast_ws, fast) = receiver(&transport, port, None).await;
    let (slow_ws, slow) = receiver(&transport, port, Some(16 * 1024)).await;
    let fast_reader = tokio::spawn(read(fast_ws, Duration::ZERO));
    let slow_reader = tokio::spawn(read(slow_ws, Duration::from_millis(5)));

    let mut completed = Vec::new();
    let mut cancelled = 0u64;
    for k in 0..300u64 {
        let t = Duration::from_micros((k * 7919) % 3000);
        match tokio::time::timeout(t, bulk.broadcast_bulk(body(k, FRAME))).await {
            Ok(Ok(seq)) => completed.push((Some(k), seq)),
            Ok(Err(e)) => panic!("broadcast {k}: {e:?}"),
            Err(_) => cancelled += 1,
        }
    }
    for id in [fast, slow] {
        bulk.send_bulk_to(id, end()).await.expect("end marker");
    }
    let fast_got = fast_reader.await.expect("fast reader");
    let slow_got = slow_reader.await.expect("slow reader");

    assert!(cancelled > 0 && !completed.is_empty());
    for (id, got) in [(fast, fast_got), (slow, slow_got)] {
        let frames: Vec<(Option<u64>, u32)> = got.frames.iter().map(|g| (g.index, g.seq)).collect();
        assert_eq!(
            frames, completed,
            "{id} received exactly the completed broadcasts, in order"
        );
    }
    assert!(
        completed.windows(2).all(|w| w[1].1 == w[0].1 + 1),
        "contiguous seqs: a cancelled broadcast took none"
    );
    transport.stop().await;
}

/// A lossy channel's sends, through every sync API, to a slow reader (and a fast one): every
/// send is accepted, and every frame a receiver does not get is counted in a `channel.dropped`
/// it receives, so received + reported dropped = sent, exactly, for each receiver.
#[tokio::test]
async fn a_lossy_channel_reports_every_frame_it_drops() {
    const FRAME: usize = 32 * 1024;
    let (transport, handles, port) = carrier(
        Limits::default(),
        vec![
            channel("live", DeliveryClass::Lossy),
            channel("done", DeliveryClass::Reliable),
        ],
    )
    .await;
    let (live, done) = (handles[0].clone(), handles[1].clone());
    live.set_lossy_budget(64 * 1024);
    let (fast_ws, fast) = receiver(&transport, port, None).await;
    let (slow_ws, slow) = receiver(&transport, port, Some(16 * 1024)).await;
    let fast_reader = tokio::spawn(read(fast_ws, Duration::ZERO));
    let slow_reader = tokio::spawn(read(slow_ws, Duration::from_millis(2)));

    let mut sent = Sent::default();
    for k in 0..450u64 {
        let event = json!({"k": k, "pad": "x".repeat(FRAME)});
        let (result, to) = match k % 6 {
            0 => (live.send_binary(stamped(k, FRAME)), To::All),
            1 => (live.send_event("e", event), To::All),
            2 => (live.broadcast(body(k, FRAME)), To::All),
            3 => (live.broadcast_except(fast, body(k, FRAME)), To::Only(slow)),
            4 => (live.send_to(slow, body(k, FRAME)), To::Only(slow)),
            _ => (live.send_event_to(slow, "e", event), To::Only(slow)),
        };
        sent.0
            .push((result.expect("a lossy send is never refused"), to));
        tokio::task::yield_now().await;
    }
    // Behind every lossy frame on each connection: one queue, in order.
    done.send_event("end", Value::Null).expect("end marker");
    let fast_got = fast_reader.await.expect("fast reader");
    let slow_got = slow_reader.await.expect("slow reader");

    for (id, got) in [(fast, &fast_got), (slow, &slow_got)] {
        let expected = sent.for_receiver(id);
        let seqs = got.seqs("live");
        let dropped = got.dropped.get("live").copied().unwrap_or(0);
        assert_eq!(
            seqs.len() as u64 + dropped,
            expected.len() as u64,
            "{id}: {} sent, {} received, {dropped} reported dropped",
            expected.len(),
            seqs.len()
        );
        let mut rest = expected.iter();
        assert!(
            seqs.iter().all(|s| rest.any(|e| e == s)),
            "{id}: received frames were sent to it, in order"
        );
    }
    assert!(
        slow_got.dropped.get("live").copied().unwrap_or(0) > 0,
        "the slow reader was never behind"
    );
    assert_eq!(transport.metrics().delivery_failures(), 0);
    transport.stop().await;
}

/// A reliable channel's sends to a receiver that reads nothing: broadcasts go on succeeding
/// (the other receiver gets every one), the receiver is failed once its queue is past the
/// budget (1013, counted once), a targeted send to it is refused from then on, and what it
/// did receive is exactly the first of the frames accepted for it: the rest is reported by its
/// close.
#[tokio::test]
async fn a_reliable_send_past_a_readers_budget_fails_that_reader_and_counts_it() {
    const FRAME: usize = 16 * 1024;
    let (transport, handles, port) = carrier(
        Limits::default().with_queue_bytes(256 * 1024),
        vec![channel("plain", DeliveryClass::Reliable)],
    )
    .await;
    let plain = handles[0].clone();
    let (live_ws, live) = receiver(&transport, port, None).await;
    let (stuck_ws, stuck) = receiver(&transport, port, Some(16 * 1024)).await;
    let live_reader = tokio::spawn(read(live_ws, Duration::ZERO));

    let mut sent = Sent::default();
    let mut refused = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut k = 0u64;
    while transport.metrics().delivery_failures() == 0 || refused.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reader was never failed"
        );
        sent.0
            .push((plain.broadcast(body(k, FRAME)).expect("broadcast"), To::All));
        match plain.send_to(stuck, body(k, FRAME)) {
            Ok(seq) => sent.0.push((seq, To::Only(stuck))),
            Err(e) => refused.push(e),
        }
        k += 1;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    plain
        .send_event_to(live, "end", Value::Null)
        .expect("end marker");
    let stuck_got = read(stuck_ws, Duration::ZERO).await;
    let live_got = live_reader.await.expect("live reader");

    assert!(refused.iter().all(|e| matches!(
        e,
        ChannelError::Delivery(DeliveryError::Overflow | DeliveryError::Closed)
            | ChannelError::UnknownConnection(_)
    )));
    assert_eq!(transport.metrics().delivery_failures(), 1);
    assert_eq!(stuck_got.close.as_ref().map(|c| c.0), Some(1013));
    let for_stuck = sent.for_receiver(stuck);
    let got = stuck_got.seqs("plain");
    assert!(
        got.len() < for_stuck.len() && for_stuck.starts_with(&got),
        "the failed reader got {} of {} frames accepted for it, in order, then its close",
        got.len(),
        for_stuck.len()
    );
    assert_eq!(live_got.seqs("plain"), sent.for_receiver(live));
    transport.stop().await;
}

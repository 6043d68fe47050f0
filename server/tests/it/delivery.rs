//! The single outbound path (docs/protocol.md, "Delivery and memory"): slow readers, vanished
//! sockets, isolation.

use carrier_test_support as support;

use std::time::Duration;

use carrier_server::{CarrierConfig, Limits};
use futures_util::{SinkExt, StreamExt};
use support::*;
use tokio_tungstenite::tungstenite::Message;

const BUDGET: usize = 256 * 1024;

fn small_budget() -> CarrierConfig {
    config().with_limits(Limits::default().with_queue_bytes(BUDGET))
}

#[tokio::test]
async fn a_reader_that_stops_is_closed_1013_within_budget_and_others_keep_receiving() {
    let s = Server::core(small_budget()).await;
    // The slow client: a raw socket we simply stop reading.
    let (_, mut slow) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    slow.send(true, 1, b"hs").await;
    assert_eq!(slow.recv_data().await.unwrap().payload, b"ok");
    let mut healthy = connect_handshaken(&s.url("")).await;

    // 4,000 x 16 KiB = 64 MiB: far more than the budget plus the kernel's socket buffers.
    slow.send(true, 1, b"flood 4000 16384").await;
    assert!(
        eventually(|| s.transport.metrics().delivery_failures() == 1).await,
        "slow reader failed"
    );
    let max = count(&s.stats.max_queued);
    assert!(
        max <= BUDGET + 16384,
        "queue held {max} bytes for a {BUDGET}-byte budget"
    );
    assert!(count(&s.stats.send_errors) > 0);

    // The other connection is unaffected and receives everything, in order.
    healthy.send(Message::text("seq 200")).await.unwrap();
    for i in 0..200 {
        assert_eq!(next_text(&mut healthy).await, format!("m{i}"));
    }

    // Once the slow client reads again it finds the data the kernel held, then close 1013.
    let mut data_frames = 0usize;
    let code = loop {
        let f = slow.recv().await.expect("a close before EOF");
        match f.opcode {
            1 => data_frames += 1,
            8 => break f.close_code(),
            _ => {}
        }
    };
    assert_eq!(code, Some(1013));
    assert!(data_frames < 4000);
    assert_eq!(
        s.transport.metrics().delivery_failures(),
        1,
        "failed exactly once"
    );
}

#[tokio::test]
async fn a_socket_that_vanishes_mid_stream_is_cleaned_up_exactly_once() {
    let s = Server::core(small_budget()).await;
    let (_, mut raw) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ok");
    raw.send(true, 1, b"flood 5000 1024").await;
    // Read a little of the stream, then vanish without a close frame.
    for _ in 0..5 {
        assert_eq!(raw.recv_data().await.unwrap().opcode, 1);
    }
    drop(raw);
    // The flood keeps producing frames after the socket is gone.
    assert!(eventually(|| count(&s.stats.sent) + count(&s.stats.send_errors) == 5000).await);
    assert!(eventually(|| count(&s.stats.closes) == 1).await);
    assert!(
        count(&s.stats.send_errors) > 0,
        "sends after the vanish fail"
    );
    assert!(s.transport.metrics().delivery_failures() <= 1);
    assert_eq!(s.transport.metrics().cleanups(), 1);
    assert!(eventually(|| s.transport.metrics().connections() == 0).await);
    // The server keeps serving.
    let mut ws = connect_handshaken(&s.url("")).await;
    ws.send(Message::text("x")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "x");
    assert_eq!(count(&s.stats.closes), 1);
}

#[tokio::test]
async fn frames_of_one_connection_are_never_reordered() {
    let s = Server::core_default().await;
    let mut ws = connect_handshaken(&s.url("")).await;
    ws.send(Message::text("seq 2000")).await.unwrap();
    for i in 0..2000 {
        assert_eq!(next_text(&mut ws).await, format!("m{i}"));
    }
}

#[tokio::test]
async fn the_server_pings_and_a_silent_peer_is_closed_1001() {
    let s = Server::core(
        config().with_limits(
            Limits::default()
                .with_ping_interval(Duration::from_millis(200))
                .with_pong_timeout(Duration::from_millis(200)),
        ),
    )
    .await;
    // tokio-tungstenite answers pings: it stays connected through several intervals.
    let mut live = connect_handshaken(&s.url("")).await;
    let mut pings = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1200);
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(100), live.next()).await {
            Ok(Some(Ok(Message::Ping(_)))) => pings += 1,
            Ok(Some(Ok(other))) => panic!("unexpected {other:?}"),
            Ok(_) => panic!("closed"),
            Err(_) => {}
        }
    }
    assert!(pings >= 3, "saw {pings} pings");
    live.send(Message::text("alive")).await.unwrap();
    assert_eq!(next_text(&mut live).await, "alive");
    // A raw peer that never answers (half-open) is closed with 1001.
    let (_, mut silent) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    silent.send(true, 1, b"hs").await;
    let mut saw_ping = false;
    let close = loop {
        let f = silent.recv().await.expect("frame");
        match f.opcode {
            9 => saw_ping = true,
            8 => break f,
            _ => {}
        }
    };
    assert!(saw_ping);
    assert_eq!(close.close_code(), Some(1001));
}

//! Priority that holds on the wire: a client receiving a 64 MiB bulk stream in
//! frames of 64 KiB, its socket's receive buffer set to 64 KiB, pings after every 64 frames;
//! each answer must arrive after at most 16 further bulk frames (1 MiB). The carrier writes the
//! answer ahead of its own bulk queue; what else it could wait behind is what the kernel already
//! holds, which the small unsent buffer (`TCP_NOTSENT_LOWAT`) keeps small. Without it the
//! answers came after 32 to 98 frames.
//!
//! A `tokio-tungstenite` client; every wait is bounded by `WAIT`.

use carrier_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use carrier_protocol::channel_frame::FrameBody;
use support::bulk::{connect_bulk, pings_behind_bulk, split_bulk, BulkOptions};

const WAIT: Duration = Duration::from_secs(30);
const FRAME: usize = 64 * 1024;
const FRAMES: usize = 1024;
const PING_AFTER: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_during_a_64_mib_bulk_stream_is_answered_within_16_frames() {
    let s = support::Server::start().await;
    let handle = s.bulk_channel("down");
    let mut inbound = handle.inbound(4);
    let (ws, hs) = connect_bulk(
        s.port,
        &s.token,
        BulkOptions {
            version: "1.1",
            rcvbuf: Some(64 * 1024),
        },
    )
    .await;
    let (mut w, mut r, credit) = split_bulk(ws, &hs, "down");
    // One frame so the host learns who to stream to.
    w.send(Bytes::from_static(b"go")).await;
    let to = tokio::time::timeout(WAIT, inbound.recv())
        .await
        .expect("go within WAIT")
        .expect("inbound")
        .connection;
    let host = tokio::spawn(async move {
        for i in 0..FRAMES {
            let body = FrameBody::Binary(Bytes::from(vec![i as u8; FRAME]));
            handle.send_bulk_to(to, body).await.expect("send");
        }
    });

    let behind = pings_behind_bulk(
        &mut r,
        &mut w,
        credit.as_ref(),
        (FRAMES, FRAME, PING_AFTER),
        "the client",
    )
    .await;
    host.await.expect("host");
    eprintln!("bulk frames between each ping and its answer: {behind:?}");
    assert!(behind.len() >= 15, "{behind:?}");
    let worst = behind.iter().max().copied().unwrap_or_default();
    assert!(
        worst <= 16,
        "answers behind up to {worst} frames: {behind:?}"
    );
    s.transport.stop().await;
}

//! Priority on the wire during a relay, every time: a client A streams 64 MiB in frames of
//! 64 KiB on a bulk channel, the host relays each frame to a receive-only client B (its socket's
//! receive buffer 64 KiB), and B sends a `system.ping` after every 64 frames it reads. Each
//! answer must reach B after at most 16 further bulk frames (1 MiB), in each of 20 runs.
//!
//! Before the writer let its connection's reader go first (`connection::writer`), an answer
//! waited behind more than 16 frames (up to 26) in about one invocation of this test in eight on
//! a loaded machine: the reader's thread did not run for a few milliseconds (before it read the ping, or
//! between reading and answering it) while the writer's did, and more of the transfer went out.
//!
//! `tokio-tungstenite` clients; every wait is bounded by `WAIT`.

use carrier_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use carrier_protocol::channel_frame::FrameBody;
use carrier_server::{ChannelInbound, InboundBody};
use support::bulk::{connect_bulk, pings_behind_bulk, split_bulk, take_grants, BulkOptions};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(30);
const FRAME: usize = 64 * 1024;
const FRAMES: usize = 1024;
const PING_AFTER: usize = 64;
const RUNS: usize = 20;
const MAX_BEHIND: usize = 16;

/// The next binary frame the host receives, past the notices of earlier runs' connections
/// that closed.
async fn next_frame(inbound: &mut mpsc::Receiver<ChannelInbound>) -> ChannelInbound {
    loop {
        let msg = tokio::time::timeout(WAIT, inbound.recv())
            .await
            .expect("a frame within WAIT")
            .expect("inbound open");
        if matches!(msg.body, InboundBody::Binary(_)) {
            return msg;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_only_clients_ping_is_answered_within_16_bulk_frames_in_each_of_20_relays() {
    let s = support::Server::start().await;
    let handle = s.bulk_channel("relay");
    let mut inbound = handle.inbound(4);
    let mut worst_per_run = Vec::new();
    for run in 0..RUNS {
        let opts = |rcvbuf| BulkOptions {
            version: "1.1",
            rcvbuf,
        };
        let (a, a_hs) = connect_bulk(s.port, &s.token, opts(None)).await;
        let (b, b_hs) = connect_bulk(s.port, &s.token, opts(Some(64 * 1024))).await;
        let (mut aw, ar, a_credit) = split_bulk(a, &a_hs, "relay");
        let (mut bw, mut br, b_credit) = split_bulk(b, &b_hs, "relay");
        // Who is who, from one frame each before the transfer; B sends nothing more but pings.
        bw.send(Bytes::from_static(b"b")).await;
        let b_id = next_frame(&mut inbound).await.connection;
        aw.send(Bytes::from_static(b"a")).await;
        let a_id = next_frame(&mut inbound).await.connection;
        assert_ne!(a_id, b_id);

        // A's reader keeps its credit coming (the grants arrive on its read half).
        let a_reader = tokio::spawn(take_grants(ar, a_credit, WAIT));
        let sender = tokio::spawn(async move {
            aw.send_numbered(FRAMES, FRAME).await;
            aw
        });
        let relay_handle = handle.clone();
        let mut relay_inbound = inbound;
        let relay = tokio::spawn(async move {
            for _ in 0..FRAMES {
                let msg = next_frame(&mut relay_inbound).await;
                assert_eq!(msg.connection, a_id);
                let InboundBody::Binary(body) = msg.body else {
                    unreachable!("next_frame returns binary frames");
                };
                relay_handle
                    .send_bulk_to(b_id, FrameBody::Binary(body))
                    .await
                    .expect("relay");
            }
            relay_inbound
        });

        let behind = pings_behind_bulk(
            &mut br,
            &mut bw,
            b_credit.as_ref(),
            (FRAMES, FRAME, PING_AFTER),
            &format!("run {run}: B"),
        )
        .await;
        inbound = relay.await.expect("relay");
        let aw = sender.await.expect("sender");
        drop((aw, bw, br));
        a_reader.abort();
        assert!(behind.len() >= 15, "run {run}: {behind:?}");
        let worst = behind.iter().max().copied().unwrap_or_default();
        worst_per_run.push(worst);
        assert!(
            worst <= MAX_BEHIND,
            "run {run}: an answer behind {worst} bulk frames: {behind:?} (worst per run so far: \
             {worst_per_run:?})"
        );
    }
    eprintln!("most bulk frames before an answer, per run: {worst_per_run:?}");
    s.transport.stop().await;
}

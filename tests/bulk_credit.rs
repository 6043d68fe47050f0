//! Inbound credit on bulk channels (protocol 1.1, feature `bulk_credit`) over real sockets, with
//! `tokio-tungstenite` clients (`carrier_test_support::bulk`): a frame past the remaining credit
//! is refused and the connection stays usable; a client that honours credit is never refused,
//! whatever the frame sizes and however the host consumes (a property test); a 1.0 client keeps
//! the old behaviour; a 1.1 client of a server that speaks 1.0 expects no credit.
//!
//! Every wait is for a condition and bounded by `WAIT`.

use carrier_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use carrier::agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
use carrier::protocol::version::VersionPair;
use carrier::server::{
    Binary, ChannelDescriptor, ChannelHandle, ChannelInbound, DeliveryClass, InboundBody,
};
use proptest::prelude::*;
use serde_json::{json, Value};
use support::bulk::{
    connect_bulk, descriptor_credit, read_next, split_bulk, BulkOptions, PlainWs, Read,
};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);

fn bulk_channel(s: &support::Server, name: &str, window: usize) -> ChannelHandle {
    s.transport
        .register_channel(
            ChannelDescriptor::new(name, &["*"], Binary::Accepted)
                .delivery(DeliveryClass::Bulk)
                .bulk_window(window),
        )
        .expect("register")
}

async fn connect(s: &support::Server, version: &str) -> (PlainWs, Value) {
    connect_bulk(
        s.port,
        &s.token,
        BulkOptions {
            version,
            rcvbuf: None,
        },
    )
    .await
}

async fn recv(inbound: &mut mpsc::Receiver<ChannelInbound>) -> ChannelInbound {
    tokio::time::timeout(WAIT, inbound.recv())
        .await
        .expect("a frame within WAIT")
        .expect("stream open")
}

fn binary_len(msg: &ChannelInbound) -> usize {
    match &msg.body {
        InboundBody::Binary(b) => b.len(),
        other => panic!("binary expected, got {other:?}"),
    }
}

#[tokio::test]
async fn a_frame_past_the_credit_is_refused_with_channel_and_seq_and_the_connection_stays_usable() {
    let s = support::Server::start().await;
    let handle = bulk_channel(&s, "up", 64 * 1024);
    // The host takes one frame into its stream and then reads nothing until told.
    let mut inbound = handle.inbound(1);
    let (ws, hs) = connect(&s, "1.2").await;
    assert_eq!(hs["features"]["bulk_credit"], true, "{hs}");
    assert_eq!(descriptor_credit(&hs, "up"), Some(64 * 1024));
    assert_eq!(hs["version_skew"], false);
    let (mut w, mut r, _) = split_bulk(ws, &hs, "up");
    // A client that does not count: six frames of 16 KiB. The first enters the host's stream
    // (its credit comes back at once), the next four wait for the host within the 64 KiB of
    // credit, the sixth is past it.
    w.credit = None;
    for _ in 0..6 {
        w.send(Bytes::from(vec![7u8; 16 * 1024])).await;
    }
    w.text(json!({"id": "ping", "method": "system.ping", "params": {}}))
        .await;
    let mut granted = 0;
    let mut refusal = None;
    loop {
        match read_next(&mut r, None, WAIT).await.expect("within WAIT") {
            Read::Text(v) if v["event"] == "channel.credit" => {
                assert_eq!(v["payload"]["channel"], "up");
                granted += v["payload"]["bytes"].as_u64().expect("bytes");
            }
            Read::Text(v) if v["event"] == "protocol_error" => refusal = Some(v),
            Read::Text(v) if v["id"] == "ping" => {
                assert!(v.get("result").is_some(), "{v}");
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(granted, 16 * 1024, "the first frame's credit, granted back");
    let refusal = refusal.expect("a protocol_error before the ping's answer");
    assert_eq!(refusal["payload"]["code"], "credit_exceeded", "{refusal}");
    assert_eq!(refusal["payload"]["channel"], "up");
    assert_eq!(refusal["payload"]["seq"], 5);

    // The host now reads: frames 0..=4, and the credit comes back.
    for seq in 0..5 {
        let msg = recv(&mut inbound).await;
        assert_eq!(msg.seq, seq);
        assert_eq!(binary_len(&msg), 16 * 1024);
    }
    while granted < 80 * 1024 {
        match read_next(&mut r, None, WAIT)
            .await
            .expect("a grant within WAIT")
        {
            Read::Text(v) if v["event"] == "channel.credit" => {
                granted += v["payload"]["bytes"].as_u64().expect("bytes");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(granted, 80 * 1024, "no more than was consumed");
    // The refused frame was never delivered: the next frame the host sees is the next one sent.
    w.send(Bytes::from_static(b"after")).await;
    let msg = recv(&mut inbound).await;
    assert_eq!((msg.seq, binary_len(&msg)), (6, 5));
    s.transport.stop().await;
}

#[tokio::test]
async fn a_1_0_client_gets_skew_no_credit_and_the_old_pacing() {
    let s = support::Server::start().await;
    let handle = bulk_channel(&s, "up", 64 * 1024);
    let mut inbound = handle.inbound(1);
    let (ws, hs) = connect(&s, "1.0").await;
    assert_eq!(hs["version_skew"], true, "{hs}");
    assert_eq!(hs["protocol_version"], "1.2");
    assert_eq!(hs["features"]["bulk_credit"], false);
    assert_eq!(descriptor_credit(&hs, "up"), None);
    let (mut w, mut r, credit) = split_bulk(ws, &hs, "up");
    assert!(credit.is_none());
    // Far past what credit would allow (4 MiB through a 64 KiB window), with a host that reads
    // slowly: no refusal, nothing lost; the client is paced by its paused reader.
    const N: u32 = 64;
    let writer = tokio::spawn(async move {
        for i in 0..N {
            w.send(Bytes::from(vec![i as u8; 64 * 1024])).await;
        }
        w.text(json!({"id": "done", "method": "system.ping", "params": {}}))
            .await;
        w
    });
    for seq in 0..N {
        let msg = recv(&mut inbound).await;
        assert_eq!(msg.seq, seq);
        if seq % 8 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let _w = writer.await.expect("writer");
    loop {
        match read_next(&mut r, None, WAIT).await.expect("within WAIT") {
            Read::Text(v) if v["id"] == "done" => break,
            Read::Text(v) => {
                assert_ne!(v["event"], "channel.credit", "no credit for a 1.0 client");
                assert_ne!(v["event"], "protocol_error", "{v}");
            }
            other => panic!("{other:?}"),
        }
    }
    s.transport.stop().await;
}

#[tokio::test]
async fn a_1_1_client_of_a_server_that_speaks_1_0_expects_no_credit_and_completes() {
    let agent = EmbeddedAgent::default();
    let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
        .protocol_version(VersionPair::parse("1.0", "1.0").expect("pair"))
        .build();
    let s = support::Server::with(support::config(), profile).await;
    let handle = bulk_channel(&s, "up", 64 * 1024);
    let mut inbound = handle.inbound(1);
    let (ws, hs) = connect(&s, "1.1").await;
    assert_eq!(hs["protocol_version"], "1.0");
    assert_eq!(hs["version_skew"], true);
    assert_eq!(hs["features"]["bulk_credit"], false);
    assert_eq!(descriptor_credit(&hs, "up"), None);
    let (mut w, mut r, credit) = split_bulk(ws, &hs, "up");
    assert!(
        credit.is_none(),
        "no credit expected: sends are paced by TCP"
    );
    let writer = tokio::spawn(async move {
        for i in 0..32u32 {
            w.send(Bytes::from(vec![i as u8; 64 * 1024])).await;
        }
        w.text(json!({"id": "done", "method": "system.ping", "params": {}}))
            .await;
        w
    });
    for seq in 0..32 {
        assert_eq!(recv(&mut inbound).await.seq, seq);
    }
    let _w = writer.await.expect("writer");
    loop {
        match read_next(&mut r, None, WAIT).await.expect("within WAIT") {
            Read::Text(v) if v["id"] == "done" => break,
            Read::Text(v) => assert_ne!(v["event"], "channel.credit"),
            other => panic!("{other:?}"),
        }
    }
    s.transport.stop().await;
}

/// One run of the property: `sizes` sent by an honest client over a channel of `window` bytes,
/// consumed by a host that reads `pattern[i].0` frames and then pauses `pattern[i].1` ms.
async fn honest_run(window: usize, capacity: usize, sizes: Vec<usize>, pattern: Vec<(u8, u8)>) {
    let s = support::Server::start().await;
    let handle = bulk_channel(&s, "up", window);
    let mut inbound = handle.inbound(capacity);
    let (ws, hs) = connect(&s, "1.1").await;
    let (mut w, mut r, credit) = split_bulk(ws, &hs, "up");
    let credit = credit.expect("credit");
    let n = sizes.len();
    let expected = sizes.clone();
    let writer = tokio::spawn(async move {
        for (i, len) in sizes.into_iter().enumerate() {
            tokio::time::timeout(WAIT, w.send(Bytes::from(vec![i as u8; len])))
                .await
                .expect("credit within WAIT");
        }
        w.text(json!({"id": "done", "method": "system.ping", "params": {}}))
            .await;
        w
    });
    let reader = tokio::spawn(async move {
        loop {
            match read_next(&mut r, Some(&credit), WAIT)
                .await
                .expect("within WAIT")
            {
                Read::Text(v) if v["id"] == "done" => return,
                Read::Text(v) => assert_ne!(v["event"], "protocol_error", "refused: {v}"),
                Read::Closed(c) => panic!("closed: {c:?}"),
                Read::Frame { .. } => {}
            }
        }
    });
    let mut got = 0;
    for (k, pause) in pattern.iter().cycle() {
        for _ in 0..(*k).max(1) {
            if got == n {
                break;
            }
            let msg = recv(&mut inbound).await;
            assert_eq!(msg.seq as usize, got);
            assert_eq!(binary_len(&msg), expected[got]);
            got += 1;
        }
        if got == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(u64::from(*pause))).await;
    }
    let _w = writer.await.expect("writer");
    reader.await.expect("the client was never refused");
    s.transport.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn a_client_that_honours_credit_is_never_refused(
        window in 4096usize..200_000,
        capacity in 1usize..4,
        frac in proptest::collection::vec(1u32..=1000, 1..60),
        pattern in proptest::collection::vec((0u8..6, 0u8..8), 1..6),
    ) {
        // Frame bodies from 1 byte up to the whole credit.
        let sizes: Vec<usize> = frac
            .iter()
            .map(|&f| ((window as u64 * u64::from(f)) / 1000).max(1) as usize)
            .collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(honest_run(window, capacity, sizes, pattern));
    }
}

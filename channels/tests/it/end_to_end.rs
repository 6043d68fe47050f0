//! Payload channels end to end over real sockets (docs/protocol.md, "Channels").

use carrier_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use carrier::protocol::channel_frame::{self, FrameBody};
use carrier::server::{
    Binary, ChannelDescriptor, ChannelError, DeliveryClass, InboundBody, Limits,
};
use futures_util::SinkExt;
use rand::RngCore;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::*;
use tokio_tungstenite::tungstenite::Message;

fn binary(channel: &str, seq: u32, payload: &[u8]) -> Message {
    Message::binary(
        channel_frame::encode_binary(channel, seq, Bytes::copy_from_slice(payload))
            .unwrap()
            .to_vec(),
    )
}

fn event(channel: &str, seq: u32, name: &str, payload: Value) -> Message {
    Message::binary(
        channel_frame::encode_event_frame(channel, seq, name, &payload)
            .unwrap()
            .to_vec(),
    )
}

async fn next_frame(ws: &mut Ws) -> channel_frame::ChannelFrame {
    match next_message(ws).await {
        Some(Message::Binary(b)) => channel_frame::decode(b).expect("valid channel frame"),
        other => panic!("expected a channel frame, got {other:?}"),
    }
}

async fn next_json(ws: &mut Ws) -> Value {
    serde_json::from_str(&next_text(ws).await).expect("json")
}

#[tokio::test]
async fn a_64_kib_upload_in_16_chunks_interleaved_with_text_arrives_identical_and_in_order() {
    let s = Server::core_default().await;
    let handle = s
        .transport
        .register_channel(ChannelDescriptor::new("upload", &[], Binary::Accepted))
        .unwrap();
    let mut inbound = handle.inbound(64);
    let mut ws = connect_handshaken(&s.url("")).await;
    let mut data = vec![0u8; 64 * 1024];
    rand::rng().fill_bytes(&mut data);
    for (i, chunk) in data.chunks(4096).enumerate() {
        ws.send(binary("upload", i as u32, chunk)).await.unwrap();
        ws.send(Message::text(format!("text {i}"))).await.unwrap();
    }
    for i in 0..16 {
        assert_eq!(next_text(&mut ws).await, format!("text {i}"));
    }
    let mut received = Vec::new();
    for i in 0..16u32 {
        let msg = tokio::time::timeout(WAIT, inbound.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(msg.seq, i);
        match msg.body {
            InboundBody::Binary(b) => received.extend_from_slice(&b),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(received, data);
}

#[tokio::test]
async fn a_seven_frame_20000_byte_upload_reaches_the_handler_in_order() {
    let s = Server::core_default().await;
    let handle = s
        .transport
        .register_channel(ChannelDescriptor::new("up", &["meta"], Binary::Accepted))
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    handle.on_inbound(move |m| {
        let _ = tx.send(m);
    });
    let mut ws = connect_handshaken(&s.url("")).await;
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let sizes = [1000, 5000, 3000, 4000, 2000, 4500, 500];
    let mut off = 0;
    for (i, n) in sizes.iter().enumerate() {
        ws.send(binary("up", i as u32, &data[off..off + n]))
            .await
            .unwrap();
        off += n;
    }
    let mut got = Vec::new();
    for i in 0..7u32 {
        let m = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(m.seq, i);
        let InboundBody::Binary(b) = m.body else {
            panic!("binary expected")
        };
        got.extend_from_slice(&b);
    }
    assert_eq!(got, data);
}

#[tokio::test]
async fn routing_failures_get_protocol_errors_and_the_connection_keeps_working() {
    let s = Server::core_default().await;
    let _text_only = s
        .transport
        .register_channel(ChannelDescriptor::new("chat", &["say"], Binary::Refused))
        .unwrap();
    let mut ws = connect_handshaken(&s.url("")).await;
    let cases = [
        (
            binary("nope", 3, b"x"),
            "unknown_channel",
            Some(("nope", 3)),
        ),
        (
            event("chat", 4, "shout", json!({})),
            "undeclared_event",
            Some(("chat", 4)),
        ),
        (
            binary("chat", 5, b"bytes"),
            "binary_not_declared",
            Some(("chat", 5)),
        ),
        (
            Message::binary(b"RBF\x01\x09\x04chat\0\0\0\x06".to_vec()),
            "malformed_frame",
            None,
        ),
        (
            Message::binary(b"not a channel frame".to_vec()),
            "malformed_frame",
            None,
        ),
        (
            Message::binary(
                channel_frame::encode_binary("chat", 7, Bytes::new())
                    .unwrap()
                    .to_vec()[..8]
                    .to_vec(),
            ),
            "malformed_frame",
            None,
        ),
    ];
    for (msg, code, where_) in cases {
        ws.send(msg).await.unwrap();
        let reply = next_json(&mut ws).await;
        assert_eq!(reply["event"], "protocol_error", "{reply}");
        assert_eq!(reply["payload"]["code"], code, "{reply}");
        assert!(reply["payload"]["message"].is_string());
        if let Some((channel, seq)) = where_ {
            assert_eq!(reply["payload"]["channel"], channel);
            assert_eq!(reply["payload"]["seq"], seq);
        }
        ws.send(Message::text("still open")).await.unwrap();
        assert_eq!(next_text(&mut ws).await, "still open");
    }
}

#[tokio::test]
async fn observers_receive_channel_frames_but_may_not_send() {
    let s = Server::core_default().await;
    let handle = carrier_channels::echo::mount(s.transport.registry(), "mic").unwrap();
    let mut observer = connect_handshaken(&format!("{}&role=observe", s.url(""))).await;
    observer.send(binary("mic", 0, b"x")).await.unwrap();
    let reply = next_json(&mut observer).await;
    assert_eq!(reply["payload"]["code"], "forbidden");
    assert_eq!(reply["payload"]["channel"], "mic");
    let seq = handle.send_event("level", json!({"db": -3})).unwrap();
    let f = next_frame(&mut observer).await;
    assert_eq!(f.seq, seq);
    assert_eq!(
        f.body,
        FrameBody::Event {
            event: "level".into(),
            payload: json!({"db": -3})
        }
    );
}

#[tokio::test]
async fn an_unauthenticated_socket_never_receives_channel_frames() {
    let s = Server::core_default().await;
    let handle = s
        .transport
        .register_channel(ChannelDescriptor::new("news", &["*"], Binary::Accepted))
        .unwrap();
    let (_, mut intruder) = Raw::upgrade(s.port, "/?token=wrong", &[]).await;
    // A legitimate connection proves the broadcasts really go out.
    let mut member = connect_handshaken(&s.url("")).await;
    for i in 0..5 {
        handle.send_binary(Bytes::from(vec![i; 10])).unwrap();
    }
    for _ in 0..5 {
        next_frame(&mut member).await;
    }
    let first = intruder.recv_data().await.expect("close");
    assert_eq!(
        first.close_code(),
        Some(1008),
        "only the close, never a channel frame: {first:?}"
    );
    assert!(!s.transport.registry().sinks().is_empty());
    assert_eq!(s.transport.registry().sinks().len(), 1);
}

#[tokio::test]
async fn echo_returns_frames_with_server_seqs_and_relay_reaches_only_the_others() {
    let s = Server::core_default().await;
    carrier_channels::echo::mount(s.transport.registry(), "echo").unwrap();
    carrier_channels::relay::mount(s.transport.registry(), "share").unwrap();
    let mut a = connect_handshaken(&s.url("")).await;
    let mut b = connect_handshaken(&s.url("")).await;
    let mut c = connect_handshaken(&s.url("")).await;
    a.send(binary("echo", 41, b"hello")).await.unwrap();
    let f = next_frame(&mut a).await;
    assert_eq!(
        (f.seq, f.body),
        (0, FrameBody::Binary(Bytes::from_static(b"hello")))
    );
    a.send(event("echo", 42, "anything", json!([1, 2])))
        .await
        .unwrap();
    assert_eq!(next_frame(&mut a).await.seq, 1);
    a.send(binary("share", 0, b"to all")).await.unwrap();
    for ws in [&mut b, &mut c] {
        let f = next_frame(ws).await;
        assert_eq!(f.body, FrameBody::Binary(Bytes::from_static(b"to all")));
    }
    // The sender did not get its own relay: its next frame is the echo of a marker.
    a.send(binary("echo", 43, b"marker")).await.unwrap();
    assert_eq!(
        next_frame(&mut a).await.body,
        FrameBody::Binary(Bytes::from_static(b"marker"))
    );
}

#[tokio::test]
async fn host_sends_are_checked_against_the_descriptor() {
    let s = Server::core_default().await;
    let h = s
        .transport
        .register_channel(ChannelDescriptor::new("t", &["a"], Binary::Refused))
        .unwrap();
    assert!(matches!(
        h.send_event("b", json!(null)),
        Err(ChannelError::UndeclaredEvent { .. })
    ));
    assert!(matches!(
        h.send_binary(Bytes::new()),
        Err(ChannelError::BinaryNotDeclared(_))
    ));
    assert!(matches!(
        s.transport
            .register_channel(ChannelDescriptor::new("t", &[], Binary::Accepted)),
        Err(ChannelError::NameTaken(_))
    ));
    h.close();
    assert!(matches!(
        h.send_event("a", json!(null)),
        Err(ChannelError::Closed(_))
    ));
    // Closing frees the name; inbound for a closed channel is unknown.
    let mut ws = connect_handshaken(&s.url("")).await;
    ws.send(event("t", 0, "a", json!(null))).await.unwrap();
    assert_eq!(
        next_json(&mut ws).await["payload"]["code"],
        "unknown_channel"
    );
    s.transport
        .register_channel(ChannelDescriptor::new("t", &[], Binary::Accepted))
        .unwrap();
}

#[tokio::test]
async fn channels_registered_after_start_work_and_seqs_increase_per_receiver() {
    let s = Server::core_default().await;
    let mut a = connect_handshaken(&s.url("")).await;
    let mut b = connect_handshaken(&s.url("")).await;
    let h = s
        .transport
        .register_channel(ChannelDescriptor::new("late", &["e"], Binary::Accepted))
        .unwrap();
    let ids = s.transport.registry().sinks();
    let s0 = h.send_binary(Bytes::from_static(b"0")).unwrap();
    let s1 = h
        .send_to(ids[0], FrameBody::Binary(Bytes::from_static(b"1")))
        .unwrap();
    let s2 = h.send_event("e", json!(2)).unwrap();
    assert!(s0 < s1 && s1 < s2);
    let fa: Vec<u32> = vec![next_frame(&mut a).await.seq, next_frame(&mut a).await.seq];
    let fb: Vec<u32> = vec![next_frame(&mut b).await.seq, next_frame(&mut b).await.seq];
    // One of them also got the targeted frame; each sees strictly increasing seqs.
    assert!(fa[0] < fa[1] && fb[0] < fb[1]);
    assert_eq!(fa[0], s0);
    assert_eq!(fb[0], s0);
}

#[tokio::test]
async fn a_lossy_channel_drops_oldest_and_tells_the_reader_while_reliable_fails_1013() {
    let s = Server::core(config().with_limits(Limits::default().with_queue_bytes(4 << 20))).await;
    let lossy = s
        .transport
        .register_channel(
            ChannelDescriptor::new("video", &[], Binary::Accepted).delivery(DeliveryClass::Lossy),
        )
        .unwrap();
    lossy.set_lossy_budget(64 * 1024);
    let (_, mut raw) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ok");
    // 2,000 x 16 KiB = 32 MiB to a reader that does not read.
    let payload = Bytes::from(vec![7u8; 16 * 1024]);
    let mut last = 0;
    for _ in 0..2000 {
        last = lossy.send_binary(payload.clone()).unwrap();
        let q = s.transport.metrics();
        assert_eq!(q.delivery_failures(), 0);
        tokio::task::yield_now().await;
    }
    assert_eq!(s.transport.metrics().connections(), 1, "still connected");
    // Now read: frames with gaps in seq, a channel.dropped notice whose counts add up.
    let mut frames = 0u64;
    let mut dropped = 0u64;
    let mut prev: Option<u32> = None;
    loop {
        let f = tokio::time::timeout(Duration::from_secs(10), raw.recv_data())
            .await
            .unwrap()
            .unwrap();
        if f.opcode == 1 {
            let v: Value = serde_json::from_slice(&f.payload).unwrap();
            assert_eq!(v["event"], "channel.dropped");
            assert_eq!(v["payload"]["channel"], "video");
            dropped += v["payload"]["count"].as_u64().unwrap();
            continue;
        }
        let frame = channel_frame::decode(Bytes::from(f.payload)).unwrap();
        if let Some(p) = prev {
            assert!(frame.seq > p);
        }
        prev = Some(frame.seq);
        frames += 1;
        if frame.seq == last {
            break;
        }
    }
    assert!(dropped > 0);
    assert_eq!(
        frames + dropped,
        2000,
        "every frame was delivered or reported dropped"
    );

    // The same flood on a reliable channel fails the connection with 1013.
    let reliable = s
        .transport
        .register_channel(ChannelDescriptor::new("file", &[], Binary::Accepted))
        .unwrap();
    for _ in 0..2000 {
        let _ = reliable.send_binary(payload.clone());
        if s.transport.metrics().delivery_failures() == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(s.transport.metrics().delivery_failures(), 1);
    let code = loop {
        let f = raw.recv().await.expect("close before EOF");
        if f.opcode == 8 {
            break f.close_code();
        }
    };
    assert_eq!(code, Some(1013));
}

fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

async fn upload(ws: &mut Ws, name: &str, data: &[u8], size: usize, hash: &str) -> Value {
    ws.send(event(
        "upload",
        0,
        "begin",
        json!({"name": name, "size": size, "sha256": hash}),
    ))
    .await
    .unwrap();
    let mut seq = 1;
    for chunk in data.chunks(8192) {
        ws.send(binary("upload", seq, chunk)).await.unwrap();
        seq += 1;
    }
    ws.send(event("upload", seq, "end", json!({})))
        .await
        .unwrap();
    let f = next_frame(ws).await;
    match f.body {
        FrameBody::Event { event, payload } => json!({"event": event, "payload": payload}),
        other => panic!("{other:?}"),
    }
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn files_saves_verified_uploads_and_refuses_escapes_wrong_sizes_and_wrong_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::core_default().await;
    carrier_channels::files::mount(s.transport.registry(), "upload", dir.path()).unwrap();
    let mut ws = connect_handshaken(&s.url("")).await;
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 256) as u8).collect();

    let saved = upload(&mut ws, "ok.bin", &data, data.len(), &sha(&data)).await;
    assert_eq!(saved["event"], "saved", "{saved}");
    assert_eq!(saved["payload"]["size"], data.len());
    assert_eq!(saved["payload"]["sha256"], sha(&data));
    assert_eq!(std::fs::read(dir.path().join("ok.bin")).unwrap(), data);

    // A name that escapes is refused at begin: the chunks that follow find no upload.
    ws.send(event(
        "upload",
        0,
        "begin",
        json!({"name": "../escape", "size": 3, "sha256": sha(b"abc")}),
    ))
    .await
    .unwrap();
    let f = next_frame(&mut ws).await;
    let FrameBody::Event { event: e, payload } = f.body else {
        panic!()
    };
    assert_eq!(
        (e.as_str(), payload["code"].as_str()),
        ("error", Some("invalid_name"))
    );

    let wrong_size = upload(
        &mut ws,
        "size.bin",
        &data[..1000],
        2000,
        &sha(&data[..1000]),
    )
    .await;
    assert_eq!(
        wrong_size["payload"]["code"], "size_mismatch",
        "{wrong_size}"
    );
    let wrong_hash = upload(&mut ws, "hash.bin", &data[..1000], 1000, &sha(b"other")).await;
    assert_eq!(
        wrong_hash["payload"]["code"], "hash_mismatch",
        "{wrong_hash}"
    );
    let too_much = upload(&mut ws, "big.bin", &data[..1000], 10, &sha(&data[..10])).await;
    assert_eq!(too_much["payload"]["code"], "size_mismatch", "{too_much}");
    // The upload was dropped at the first excess chunk, so its `end` finds none.
    let FrameBody::Event { payload, .. } = next_frame(&mut ws).await.body else {
        panic!()
    };
    assert_eq!(payload["code"], "no_upload");

    // Only the verified file is there: nothing partial, nothing outside.
    assert_eq!(entries(dir.path()), vec!["ok.bin".to_string()]);
    assert!(!dir.path().parent().unwrap().join("escape").exists());

    // A connection that goes away mid-upload leaves nothing behind.
    ws.send(event(
        "upload",
        0,
        "begin",
        json!({"name": "cut.bin", "size": 5000, "sha256": sha(&data[..5000])}),
    ))
    .await
    .unwrap();
    ws.send(binary("upload", 1, &data[..1000])).await.unwrap();
    ws.send(Message::text("sync")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "sync");
    drop(ws);
    assert!(
        eventually(|| entries(dir.path()) == vec!["ok.bin".to_string()]).await,
        "{:?}",
        entries(dir.path())
    );
}

/// `echo:bulk` and `relay:bulk`: 20 MiB (more than the 8 MiB connection budget plus what the
/// kernel buffers) relayed to a receiver that reads slowly (5 ms per 64 KiB frame) and to one
/// that keeps up: no one is failed, both get every frame in order, and the echo of the same
/// frames comes back whole.
#[tokio::test]
async fn bulk_echo_and_relay_pace_instead_of_failing_a_slow_receiver() {
    let s = Server::core_default().await;
    carrier_channels::echo::mount_bulk(s.transport.registry(), "back").unwrap();
    carrier_channels::relay::mount_bulk(s.transport.registry(), "share").unwrap();
    let mut slow = connect_handshaken(&s.url("")).await;
    let fast = connect_handshaken(&s.url("")).await;
    let mut sender = connect_handshaken(&s.url("")).await;
    const FRAMES: u32 = 320;
    let chunk = |i: u32| {
        let mut b = vec![0x33u8; 64 * 1024];
        b[..4].copy_from_slice(&i.to_be_bytes());
        b
    };
    let sending = tokio::spawn(async move {
        for i in 0..FRAMES {
            sender.send(binary("share", i, &chunk(i))).await.unwrap();
        }
        sender
    });
    let reader = |mut ws: Ws, pause: Duration| async move {
        for i in 0..FRAMES {
            let f = next_frame(&mut ws).await;
            assert_eq!(f.channel, "share");
            let FrameBody::Binary(b) = f.body else {
                panic!("binary")
            };
            assert_eq!(b[..4], i.to_be_bytes(), "in order");
            assert_eq!(b.len(), 64 * 1024);
            tokio::time::sleep(pause).await;
        }
        ws
    };
    let fast = tokio::spawn(reader(fast, Duration::ZERO));
    slow = reader(slow, Duration::from_millis(5)).await;
    fast.await.expect("the fast receiver got everything");
    let mut sender = sending.await.expect("the sender finished");
    // The echo in bulk mode gives the same frames back to their sender.
    for i in 0..64 {
        sender.send(binary("back", i, &chunk(i))).await.unwrap();
    }
    for i in 0..64u32 {
        let f = next_frame(&mut sender).await;
        assert_eq!(f.channel, "back");
        assert_eq!(f.body, FrameBody::Binary(Bytes::from(chunk(i))));
    }
    drop(slow);
    let list = s.transport.registry().descriptors();
    let share = list.iter().find(|d| d.name == "share").unwrap();
    assert_eq!(share.delivery, DeliveryClass::Bulk);
}

/// docs/protocol.md, "Channels": an event body passes through `echo` and `relay` (reliable and
/// bulk) byte for byte — unsorted keys, odd spacing, escapes and number spellings included — so a
/// peer that signs or hashes an event body gets back exactly what was signed.
#[tokio::test]
async fn event_bodies_come_back_byte_identical_through_echo_and_relay() {
    let s = Server::core_default().await;
    carrier_channels::echo::mount(s.transport.registry(), "echo").unwrap();
    carrier_channels::relay::mount(s.transport.registry(), "share").unwrap();
    carrier_channels::echo::mount_bulk(s.transport.registry(), "bulk-echo").unwrap();
    carrier_channels::relay::mount_bulk(s.transport.registry(), "bulk-share").unwrap();
    let mut a = connect_handshaken(&s.url("")).await;
    let mut b = connect_handshaken(&s.url("")).await;
    let body: &[u8] =
        br#"{ "z": 1,  "payload" : {"z":1,"a":[2, 3.50, 1e3], "s":"\u00e9\n"} ,"event":"sig" }"#;
    let raw = |channel: &str| {
        let mut m = channel_frame::encode_binary(channel, 7, Bytes::new())
            .unwrap()
            .head
            .to_vec();
        m[4] = 2; // kind: event
        m.extend_from_slice(body);
        Message::binary(m)
    };
    let body_of = |m: Option<Message>, channel: &str| match m {
        Some(Message::Binary(b)) => {
            let h = channel_frame::peek(&b).unwrap();
            assert_eq!(h.channel, channel);
            assert_eq!(h.kind, channel_frame::FrameKind::Event);
            b.slice(h.body_offset..)
        }
        other => panic!("expected a frame on {channel}, got {other:?}"),
    };
    for channel in ["echo", "bulk-echo"] {
        a.send(raw(channel)).await.unwrap();
        assert_eq!(
            &body_of(next_message(&mut a).await, channel)[..],
            body,
            "{channel}"
        );
    }
    for channel in ["share", "bulk-share"] {
        a.send(raw(channel)).await.unwrap();
        assert_eq!(
            &body_of(next_message(&mut b).await, channel)[..],
            body,
            "{channel}"
        );
    }
}

/// A connection's reader remembers the channel it sent on last; closing that channel and
/// registering another under the same name must route the next frame to the new one, and a
/// frame for the closed name in between is refused as unknown.
#[tokio::test]
async fn a_channel_closed_and_registered_again_gets_the_next_frames() {
    let s = Server::core_default().await;
    let first = s
        .transport
        .register_channel(ChannelDescriptor::new("ch", &[], Binary::Accepted))
        .unwrap();
    let mut first_in = first.inbound(8);
    let mut ws = connect_handshaken(&s.url("")).await;
    ws.send(binary("ch", 0, b"one")).await.unwrap();
    let got = tokio::time::timeout(WAIT, first_in.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.body, InboundBody::Binary(Bytes::from_static(b"one")));
    first.close();
    ws.send(binary("ch", 1, b"lost")).await.unwrap();
    let refusal = next_json(&mut ws).await;
    assert_eq!(refusal["payload"]["code"], "unknown_channel", "{refusal}");
    let second = s
        .transport
        .register_channel(ChannelDescriptor::new("ch", &[], Binary::Accepted))
        .unwrap();
    let mut second_in = second.inbound(8);
    ws.send(binary("ch", 2, b"two")).await.unwrap();
    let got = tokio::time::timeout(WAIT, second_in.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (got.seq, got.body),
        (2, InboundBody::Binary(Bytes::from_static(b"two")))
    );
}

#[test]
fn channel_specs_parse() {
    use carrier_channels::{ChannelSpec, Delivery};
    assert_eq!(
        "mic:echo".parse(),
        Ok(ChannelSpec::Echo("mic".into(), Delivery::Reliable))
    );
    assert_eq!(
        "share:relay".parse(),
        Ok(ChannelSpec::Relay("share".into(), Delivery::Reliable))
    );
    assert_eq!(
        "up:echo:bulk".parse(),
        Ok(ChannelSpec::Echo("up".into(), Delivery::Bulk))
    );
    assert_eq!(
        "share:relay:bulk".parse(),
        Ok(ChannelSpec::Relay("share".into(), Delivery::Bulk))
    );
    assert_eq!(
        "up:files:./inbox".parse(),
        Ok(ChannelSpec::Files("up".into(), "./inbox".into()))
    );
    for bad in [
        "mic",
        ":echo",
        "mic:other",
        "up:files",
        "mic:echo:x",
        "mic:relay:lossy",
    ] {
        assert!(bad.parse::<ChannelSpec>().is_err(), "{bad}");
    }
}

/// A full inbound stream pauses the sender's reader instead of dropping: with room for one
/// message and nobody receiving, the text sent after 30 frames is not answered; once the host
/// receives, all 30 frames arrive in order and then the text is answered.
#[tokio::test]
async fn a_full_inbound_stream_pauses_the_sender_and_loses_nothing() {
    let s = Server::core_default().await;
    let handle = s
        .transport
        .register_channel(ChannelDescriptor::new("slow", &[], Binary::Accepted))
        .unwrap();
    let mut inbound = handle.inbound(1);
    let mut ws = connect_handshaken(&s.url("")).await;
    for i in 0..30u32 {
        ws.send(binary("slow", i, &i.to_be_bytes())).await.unwrap();
    }
    ws.send(Message::text("after")).await.unwrap();
    // A window in which the answer must *not* come: the reader waits for room.
    let early = tokio::time::timeout(Duration::from_millis(300), next_message(&mut ws)).await;
    assert!(
        early.is_err(),
        "the reader went on past a full stream: {early:?}"
    );
    for i in 0..30u32 {
        let msg = tokio::time::timeout(WAIT, inbound.recv())
            .await
            .expect("a frame within the wait")
            .expect("the stream is open");
        assert_eq!(msg.seq, i);
        match msg.body {
            InboundBody::Binary(b) => assert_eq!(&b[..], &i.to_be_bytes()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(next_text(&mut ws).await, "after");
}

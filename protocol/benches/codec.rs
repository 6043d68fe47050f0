//! Channel-frame codec (docs/protocol.md, "Channels"): encode and decode at 0 B, 64 B,
//! 16 KiB and 1 MiB.
//!
//! `encode_binary` never copies the payload and `decode` hands it back as a slice, so both
//! should cost the same at every size: bytes/s grows with the size. `to_vec` (the single-buffer
//! form a client sends) is the copying reference. Event frames are measured with a small JSON
//! payload.

// `criterion_group!` declares an undocumented `pub fn`.
#![allow(missing_docs)]

use bytes::Bytes;
use carrier_protocol::channel_frame::{self, FrameBody};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::json;
use std::hint::black_box;

const SIZES: [(usize, &str); 4] = [
    (0, "0B"),
    (64, "64B"),
    (16 * 1024, "16KiB"),
    (1024 * 1024, "1MiB"),
];

fn binary_frames(c: &mut Criterion) {
    let mut encode = c.benchmark_group("channel_frame/encode_binary");
    for (size, label) in SIZES {
        let payload = Bytes::from(vec![0xA5u8; size]);
        encode.throughput(Throughput::Bytes(size as u64 + 14));
        encode.bench_with_input(BenchmarkId::from_parameter(label), &payload, |b, p| {
            b.iter(|| channel_frame::encode_binary(black_box("audio"), 7, p.clone()))
        });
    }
    encode.finish();

    let mut to_vec = c.benchmark_group("channel_frame/encode_to_vec");
    for (size, label) in SIZES {
        let payload = Bytes::from(vec![0xA5u8; size]);
        to_vec.throughput(Throughput::Bytes(size as u64 + 14));
        to_vec.bench_with_input(BenchmarkId::from_parameter(label), &payload, |b, p| {
            b.iter(|| {
                channel_frame::encode_binary(black_box("audio"), 7, p.clone()).map(|f| f.to_vec())
            })
        });
    }
    to_vec.finish();

    let mut decode = c.benchmark_group("channel_frame/decode_binary");
    for (size, label) in SIZES {
        let wire = channel_frame::encode_binary("audio", 7, Bytes::from(vec![0xA5u8; size]))
            .map(|f| Bytes::from(f.to_vec()))
            .expect("encodable");
        decode.throughput(Throughput::Bytes(wire.len() as u64));
        decode.bench_with_input(BenchmarkId::from_parameter(label), &wire, |b, w| {
            b.iter(|| channel_frame::decode(black_box(w.clone())))
        });
    }
    decode.finish();
}

fn event_frames(c: &mut Criterion) {
    let payload = json!({"level": 0.42, "speaking": true, "labels": ["a", "b"]});
    let body = FrameBody::Event {
        event: "vad".into(),
        payload: payload.clone(),
    };
    let wire = channel_frame::encode("app", 3, &body)
        .map(|f| Bytes::from(f.to_vec()))
        .expect("encodable");
    let mut g = c.benchmark_group("channel_frame/event");
    g.throughput(Throughput::Bytes(wire.len() as u64));
    g.bench_function("encode", |b| {
        b.iter(|| {
            channel_frame::encode_event_frame("app", 3, black_box("vad"), black_box(&payload))
        })
    });
    g.bench_function("decode", |b| {
        b.iter(|| channel_frame::decode(black_box(wire.clone())))
    });
    g.bench_function("peek", |b| {
        b.iter(|| channel_frame::peek(black_box(&wire)).map(|h| h.seq))
    });
    g.finish();
}

criterion_group!(benches, binary_frames, event_frames);
criterion_main!(benches);

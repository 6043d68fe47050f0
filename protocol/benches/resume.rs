//! The resume ring (docs/protocol.md, "Sessions and resume"): recording events in a full ring
//! (steady-state eviction) and computing a replay 1, 100 and 1000 events behind.

// `criterion_group!` declares an undocumented `pub fn`.
#![allow(missing_docs)]

use bytes::Bytes;
use carrier_protocol::resume::ResumeRing;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

/// A typical encoded `session.text_delta` event is ~100 bytes.
fn event(seq: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"event":"session.text_delta","seq":{seq},"payload":{{"turn_id":"t-1","delta":" word"}}}}"#
    ))
}

fn push(c: &mut Criterion) {
    let mut g = c.benchmark_group("resume_ring/push");
    g.throughput(Throughput::Elements(1));
    for (max_events, max_bytes, label) in [
        (1024, 4 << 20, "count_bound"),
        (1 << 20, 64 * 1024, "byte_bound"),
    ] {
        let mut ring = ResumeRing::new(max_events, max_bytes);
        let frame = event(1);
        let mut seq = 0u64;
        // Fill it first so every measured push also evicts.
        for _ in 0..max_events.min(4096) {
            seq += 1;
            ring.push(seq, frame.clone());
        }
        g.bench_function(label, |b| {
            b.iter(|| {
                seq += 1;
                ring.push(seq, black_box(frame.clone()));
            })
        });
    }
    g.finish();
}

fn replay(c: &mut Criterion) {
    let mut ring = ResumeRing::default();
    let last = 5000u64;
    for seq in 1..=last {
        ring.push(seq, event(seq));
    }
    let mut g = c.benchmark_group("resume_ring/replay_after");
    for behind in [1u64, 100, 1000] {
        g.throughput(Throughput::Elements(behind));
        g.bench_with_input(BenchmarkId::from_parameter(behind), &behind, |b, &n| {
            b.iter(|| ring.replay_after(black_box(last - n), last))
        });
    }
    g.bench_function("gap", |b| b.iter(|| ring.replay_after(black_box(10), last)));
    g.finish();
}

criterion_group!(benches, push, replay);
criterion_main!(benches);

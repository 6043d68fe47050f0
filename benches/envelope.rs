//! The text envelope (SPEC section 4): parsing and encoding representative frames.
//!
//! Measured on `serde_json` with the envelope's shapes: a `system.ping` request, a
//! `system.handshake` request, a `{}` result, a `session.text_delta` event and a handshake
//! result (the largest common frame). Parsing is measured both into a typed envelope with
//! borrowed names (what a dispatcher needs: id, method, params) and into a generic `Value`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::hint::black_box;

/// The envelope as a dispatcher reads it.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a str>,
    #[serde(borrow)]
    method: Option<&'a str>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
    #[serde(borrow)]
    event: Option<&'a str>,
    seq: Option<u64>,
    payload: Option<Value>,
}

#[derive(Serialize)]
struct Event<'a, P: Serialize> {
    event: &'a str,
    seq: u64,
    payload: P,
}

#[derive(Serialize)]
struct TextDelta<'a> {
    turn_id: &'a str,
    delta: &'a str,
}

fn frames() -> Vec<(&'static str, String)> {
    let handshake_result = json!({"id": "hs", "result": {
        "protocol_version": "1.0", "min_compatible_protocol": "1.0",
        "server": {"name": "carrier", "version": "0.1.0"}, "role": "drive",
        "session_id": "s-0001", "epoch": "9f86d081884c7d65", "version_skew": false,
        "features": {"sessions": true, "channels": true, "usage": true, "resume": true},
        "channels": [{"name": "echo", "events": ["*"], "binary": true, "delivery": "reliable"},
                      {"name": "relay", "events": ["*"], "binary": true, "delivery": "reliable"}],
        "limits": {"max_text_bytes": 1048576, "max_message_bytes": 16777216,
                   "max_connections": 1024, "queue_bytes": 8388608},
        "resume": {"outcome": "new"}}});
    vec![
        (
            "ping_request",
            r#"{"id":"p1","method":"system.ping","params":{}}"#.to_string(),
        ),
        (
            "handshake_request",
            json!({"id": "hs", "method": "system.handshake", "params": {
                "protocol_version": "1.0", "min_compatible_protocol": "1.0",
                "client": {"name": "carrier-bench", "version": "0.1.0"}}})
            .to_string(),
        ),
        ("empty_result", r#"{"id":"p1","result":{}}"#.to_string()),
        (
            "text_delta_event",
            r#"{"event":"session.text_delta","seq":7,"payload":{"turn_id":"t-1","delta":" world"}}"#
                .to_string(),
        ),
        ("handshake_result", handshake_result.to_string()),
    ]
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope/parse");
    for (name, text) in frames() {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("typed", name), &text, |b, t| {
            b.iter(|| {
                let e: Envelope<'_> = serde_json::from_str(black_box(t)).expect("valid");
                black_box((
                    e.id, e.method, e.params, e.result, e.error, e.event, e.seq, e.payload,
                ));
            })
        });
        g.bench_with_input(BenchmarkId::new("value", name), &text, |b, t| {
            b.iter(|| serde_json::from_str::<Value>(black_box(t)).expect("valid"))
        });
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope/encode");
    let delta = Event {
        event: "session.text_delta",
        seq: 7,
        payload: TextDelta {
            turn_id: "t-1",
            delta: " world",
        },
    };
    let len = serde_json::to_vec(&delta).map(|v| v.len()).unwrap_or(0);
    g.throughput(Throughput::Bytes(len as u64));
    g.bench_function("typed/text_delta_event", |b| {
        b.iter(|| serde_json::to_vec(black_box(&delta)))
    });
    for (name, text) in frames() {
        let value: Value = serde_json::from_str(&text).expect("valid");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("value", name), &value, |b, v| {
            b.iter(|| serde_json::to_vec(black_box(v)))
        });
    }
    g.finish();
}

criterion_group!(benches, parse, encode);
criterion_main!(benches);

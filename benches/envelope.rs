//! The text envelope (docs/protocol.md, "Envelope"): parsing, encoding and dispatch.
//!
//! - `envelope/parse`: [`carrier::protocol::envelope::parse`] on representative frames — a
//!   `system.ping` request, a `system.handshake` request, an invalid frame (answered with a
//!   rejection) — and, for scale, the same text into a bare `serde_json::Value`.
//! - `envelope/encode`: `encode_result` of an empty result and of a handshake-sized result,
//!   `encode_event` of a `session.text_delta`.
//! - `envelope/dispatch`: one text message through the agent profile of a handshaken
//!   connection (parse → catalog → role and feature checks → params → handler → reply queued
//!   on the outbound path), for `system.ping`, `surface.role` and an unknown method.

// `criterion_group!` declares an undocumented `pub fn`.
#![allow(missing_docs)]

use carrier::agent::{AgentProfile, EmbeddedAgent};
use carrier::protocol::envelope;
use carrier::protocol::Role;
use carrier::server::{CarrierContext, DetachedConnection, DriverInfo, Limits, TextProfile};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde::Serialize;
use serde_json::{json, Value};
use std::hint::black_box;

const PING: &str = r#"{"id":"p0000000001","method":"system.ping","params":{}}"#;
const HANDSHAKE: &str = r#"{"id":"hs","method":"system.handshake","params":{"protocol_version":"1.0","min_compatible_protocol":"1.0","client":{"name":"carrier-bench","version":"0.1.0"}}}"#;
const INVALID: &str = r#"{"id":"x1","method":"system.ping","result":{}}"#;

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope/parse");
    for (name, text) in [
        ("ping_request", PING),
        ("handshake_request", HANDSHAKE),
        ("invalid_shape", INVALID),
    ] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("envelope", name), text, |b, t| {
            b.iter(|| envelope::parse(black_box(t)).is_ok())
        });
        g.bench_with_input(BenchmarkId::new("serde_value", name), text, |b, t| {
            b.iter(|| serde_json::from_str::<Value>(black_box(t)).is_ok())
        });
    }
    g.finish();
}

#[derive(Serialize)]
struct TextDelta<'a> {
    turn_id: &'a str,
    delta: &'a str,
}

fn encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope/encode");
    let empty = json!({});
    let handshake_result = json!({
        "protocol_version": "1.0", "min_compatible_protocol": "1.0",
        "server": {"name": "carrier", "version": "0.1.0"}, "role": "drive",
        "session_id": "s-0001", "epoch": "9f86d081884c7d65", "version_skew": false,
        "features": {"sessions": true, "channels": true, "usage": true, "resume": true},
        "channels": [{"name": "echo", "events": ["*"], "binary": true, "delivery": "reliable"},
                     {"name": "relay", "events": ["*"], "binary": true, "delivery": "reliable"}],
        "limits": {"max_text_bytes": 1048576, "max_message_bytes": 16777216,
                   "max_connections": 1024, "queue_bytes": 8388608},
        "resume": {"outcome": "new"}});
    for (name, result) in [
        ("result_empty", &empty),
        ("result_handshake", &handshake_result),
    ] {
        let len = envelope::encode_result("p1", result).map_or(0, |b| b.len());
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::from_parameter(name), result, |b, r| {
            b.iter(|| envelope::encode_result(black_box("p1"), black_box(r)))
        });
    }
    let delta = TextDelta {
        turn_id: "t-1",
        delta: " world",
    };
    let len = envelope::encode_event("session.text_delta", Some(7), &delta).map_or(0, |b| b.len());
    g.throughput(Throughput::Bytes(len as u64));
    g.bench_function("event_text_delta", |b| {
        b.iter(|| envelope::encode_event("session.text_delta", Some(7), black_box(&delta)))
    });
    g.finish();
}

fn dispatch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _enter = rt.enter();
    let profile = AgentProfile::embedded(EmbeddedAgent::default());
    let driver = DriverInfo {
        driver_id: "bench".into(),
        surface: "bench".into(),
    };
    let ctx = CarrierContext::standalone(Limits::default(), Role::Drive, driver, "bench-epoch");
    let mut detached = DetachedConnection::new(Role::Drive, 64 << 20);
    let conn = detached.connection().clone();
    let mut session = profile.open(conn.clone(), &ctx);
    session.on_text(HANDSHAKE);
    assert!(
        conn.is_handshaken(),
        "the bench connection must be handshaken"
    );
    drain(&mut detached);

    let mut g = c.benchmark_group("envelope/dispatch");
    g.throughput(Throughput::Elements(1));
    for (name, text) in [
        ("system.ping", PING.to_string()),
        (
            "surface.role",
            r#"{"id":"r1","method":"surface.role","params":{}}"#.to_string(),
        ),
        (
            "unknown_method",
            r#"{"id":"u1","method":"no.such","params":{}}"#.to_string(),
        ),
    ] {
        g.bench_with_input(BenchmarkId::from_parameter(name), &text, |b, t| {
            b.iter(|| {
                session.on_text(black_box(t));
                drain(&mut detached)
            })
        });
    }
    g.finish();
    session.on_close();
}

/// Takes every frame queued on the connection, as its writer would (without writing them),
/// which releases their bytes; returns how many there were.
fn drain(detached: &mut DetachedConnection) -> usize {
    std::iter::from_fn(|| detached.try_next_frame()).count()
}

criterion_group!(benches, parse, encode, dispatch);
criterion_main!(benches);

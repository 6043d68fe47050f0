//! The channel registry (docs/protocol.md, "Channels"): inbound routing and encode-once fan-out.
//!
//! - `registry/route`: one inbound binary message from a connection to its channel's handler
//!   (decode, checks, handler call), and the `echo` shape (route + `send_to` back onto the
//!   connection's outbound queue).
//! - `registry/route/event_echo/…`: an event frame (a ~200-byte body with an object payload) echoed
//!   back: `passthrough` forwards the body's bytes as the reference echo does (the carrier forwards
//!   an event body's bytes as they came), `reserialized` parses the payload and encodes it again,
//!   as the echo did before event bodies passed through.
//! - `registry/fanout/SIZE`: one `broadcast` to 1, 10 and 100 connections, then each
//!   connection's queue drained as its writer would. Throughput is in deliveries; because the
//!   frame is encoded once and shared, deliveries/s should be the same for 64 B, 64 KiB and
//!   1 MiB payloads.

// `criterion_group!` declares an undocumented `pub fn`.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use carrier::protocol::channel_frame::{self, FrameBody};
use carrier::protocol::Role;
use carrier::server::{
    Binary, ChannelDescriptor, ChannelLink, ChannelRegistry, Connection, DetachedConnection,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures_util::FutureExt;
use std::hint::black_box;

fn connection() -> DetachedConnection {
    DetachedConnection::new(Role::Drive, 64 << 20)
}

/// Takes every frame queued on the connection, as its writer would (without writing them),
/// which releases their bytes; returns how many there were.
fn drain(detached: &mut DetachedConnection) -> usize {
    std::iter::from_fn(|| detached.try_next_frame()).count()
}

/// Routes one inbound binary message as the connection's reader does, answering a refusal
/// with its `protocol_error` event.
fn route_one(link: &mut ChannelLink, conn: &Connection, message: Bytes) {
    if let Some(Err(refusal)) = link.deliver(message).now_or_never() {
        let _ = conn.send_text(refusal.error_event());
    }
}

fn wire(channel: &str, size: usize) -> Bytes {
    channel_frame::encode_binary(channel, 1, Bytes::from(vec![0xA5u8; size]))
        .map(|f| Bytes::from(f.to_vec()))
        .expect("encodable")
}

fn route(c: &mut Criterion) {
    let registry = ChannelRegistry::default();
    let seen = Arc::new(AtomicU64::new(0));
    let counter = seen.clone();
    let sink = registry
        .register(ChannelDescriptor::new("sink", &["*"], Binary::Accepted))
        .expect("register");
    sink.on_inbound(move |msg| {
        black_box(msg);
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let echo = registry
        .register(ChannelDescriptor::new("echo", &["*"], Binary::Accepted))
        .expect("register");
    let reply = echo.clone();
    echo.on_inbound(move |msg| {
        if let carrier::server::InboundBody::Binary(bytes) = msg.body {
            let _ = reply.send_to(msg.connection, FrameBody::Binary(bytes));
        }
    });
    let passthrough = registry
        .register(ChannelDescriptor::new("ev-pass", &["*"], Binary::Refused))
        .expect("register");
    let reply = passthrough.clone();
    passthrough.on_inbound(move |msg| {
        if let carrier::server::InboundBody::Event(event) = msg.body {
            let _ = reply.send_to(msg.connection, FrameBody::EventBytes(event));
        }
    });
    let reserialized = registry
        .register(ChannelDescriptor::new("ev-json", &["*"], Binary::Refused))
        .expect("register");
    let reply = reserialized.clone();
    reserialized.on_inbound(move |msg| {
        if let carrier::server::InboundBody::Event(event) = msg.body {
            if let Ok(payload) = event.payload() {
                let body = FrameBody::Event {
                    event: event.event().to_string(),
                    payload,
                };
                let _ = reply.send_to(msg.connection, body);
            }
        }
    });
    let mut detached = connection();
    let conn = detached.connection().clone();
    let mut link = registry.link(&conn);
    let payload = serde_json::json!({
        "id": "req-42", "at": 1733097600123u64, "level": 0.75, "tags": ["mic", "left", "48k"],
        "meta": {"codec": "opus", "frames": 960, "ok": true, "note": "a short note"}
    });
    let mut g = c.benchmark_group("registry/route/event_echo");
    g.throughput(Throughput::Elements(1));
    for (channel, label) in [("ev-pass", "passthrough"), ("ev-json", "reserialized")] {
        let msg = channel_frame::encode_event_frame(channel, 1, "level", &payload)
            .map(|f| Bytes::from(f.to_vec()))
            .expect("encodable");
        g.bench_function(label, |b| {
            b.iter(|| {
                route_one(&mut link, &conn, black_box(msg.clone()));
                drain(&mut detached)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("registry/route");
    g.throughput(Throughput::Elements(1));
    for (size, label) in [(64usize, "64B"), (16 * 1024, "16KiB")] {
        let msg = wire("sink", size);
        g.bench_function(BenchmarkId::new("handler", label), |b| {
            b.iter(|| route_one(&mut link, &conn, black_box(msg.clone())))
        });
        let msg = wire("echo", size);
        g.bench_function(BenchmarkId::new("echo", label), |b| {
            b.iter(|| {
                route_one(&mut link, &conn, black_box(msg.clone()));
                drain(&mut detached)
            })
        });
    }
    let unknown = wire("nobody", 64);
    g.bench_function("unknown_channel_refused", |b| {
        b.iter(|| {
            route_one(&mut link, &conn, black_box(unknown.clone()));
            drain(&mut detached)
        })
    });
    g.finish();
    black_box(seen.load(Ordering::Relaxed));
}

fn fanout(c: &mut Criterion) {
    for (size, label) in [(64usize, "64B"), (64 * 1024, "64KiB"), (1 << 20, "1MiB")] {
        let mut g = c.benchmark_group(format!("registry/fanout/{label}"));
        let payload = Bytes::from(vec![0x5Au8; size]);
        for receivers in [1usize, 10, 100] {
            let registry = ChannelRegistry::default();
            let channel = registry
                .register(ChannelDescriptor::new("relay", &["*"], Binary::Accepted))
                .expect("register");
            let mut conns: Vec<DetachedConnection> = (0..receivers).map(|_| connection()).collect();
            let _links: Vec<ChannelLink> = conns
                .iter()
                .map(|conn| registry.link(conn.connection()))
                .collect();
            g.throughput(Throughput::Elements(receivers as u64));
            g.bench_with_input(
                BenchmarkId::from_parameter(receivers),
                &payload,
                |b, payload| {
                    b.iter(|| {
                        let seq = channel.send_binary(payload.clone());
                        for conn in &mut conns {
                            drain(conn);
                        }
                        seq
                    })
                },
            );
        }
        g.finish();
    }
}

criterion_group!(benches, route, fanout);
criterion_main!(benches);

//! Heap allocations per `system.ping` round trip, counted with a counting global allocator: the
//! whole server path — the frame read, the envelope parsed, the catalog, the answer encoded and
//! written. The client is a raw socket writing one prebuilt frame and reading into a prebuilt
//! buffer, so what is counted is the server's.
//!
//! A bound, not a timing: it holds the per-message path to what it allocates today (the counts
//! before and after the inline answer: BENCHMARKS.md), so a change that adds allocations to it
//! shows here.

// The counting global allocator below is the one `unsafe` here; each block says why it holds.
#![allow(unsafe_code)]

use carrier_test_support as support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::json;
use support::Raw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a side
// effect with no influence on the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PINGS: usize = 2000;
/// Allocations (and reallocations) per round trip allowed: the answer's bytes. The request's id
/// and method were owned strings until the dispatcher answered from slices of the frame's text
/// (3); a text message read whole used to take a buffer of its own, and the `Bytes` that owned
/// it with its permits (5); answered through the writer task, a round trip also took the
/// queue's buffer, and the answer two (its encoding buffer, then the shrink to its size).
const MAX_PER_PING: f64 = 1.0;

/// One masked text frame, built before counting.
fn masked_text(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut f = vec![0x81, 0x80 | payload.len() as u8];
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_system_ping_round_trip_allocates_once() {
    let s = support::Server::start().await;
    let (status, mut raw) = Raw::upgrade(s.port, &format!("/?token={}", s.token), &[]).await;
    assert_eq!(status, 101);
    let hs = json!({"id": "hs", "method": "system.handshake", "params": {
        "protocol_version": "1.0", "min_compatible_protocol": "1.0",
        "client": {"name": "ping-allocations", "version": "0"}}});
    raw.send(true, 1, hs.to_string().as_bytes()).await;
    let answer = raw.recv_data().await.expect("handshake answer");
    let answer: serde_json::Value = serde_json::from_slice(&answer.payload).expect("json");
    assert!(answer.get("result").is_some(), "{answer}");

    let ping = masked_text(br#"{"id":"p0000001","method":"system.ping","params":{}}"#);
    let expected = br#"{"id":"p0000001","result":{}}"#;
    let mut buf = vec![0u8; 256];
    let mut round_trip = async |raw: &mut Raw| {
        raw.tcp.write_all(&ping).await.expect("write");
        let mut have = 0;
        while have < 2 + expected.len() {
            let n = raw.tcp.read(&mut buf[have..]).await.expect("read");
            assert!(n > 0, "closed");
            have += n;
        }
        assert_eq!(&buf[2..have], expected);
    };
    // Warm up: the connection's buffers and the runtime's reach their steady state.
    for _ in 0..200 {
        round_trip(&mut raw).await;
    }
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..PINGS {
        round_trip(&mut raw).await;
    }
    COUNTING.store(false, Ordering::SeqCst);
    let per_ping = ALLOCS.load(Ordering::SeqCst) as f64 / PINGS as f64;
    eprintln!("allocations per system.ping round trip: {per_ping:.2}");
    assert!(
        per_ping <= MAX_PER_PING,
        "{per_ping:.2} allocations per ping (at most {MAX_PER_PING})"
    );
    s.transport.stop().await;
}

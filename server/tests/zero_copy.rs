//! Zero-copy and encode-once, proved with a counting global allocator (docs/protocol.md,
//! "Channels").
//!
//! Every allocation (or growth) of at least [`LARGE`] bytes is counted while the measured
//! operation runs. Clients are raw sockets writing prebuilt bytes and reading into prebuilt
//! buffers, so the only large allocations left are the server's.

// The counting global allocator below is the one `unsafe` here; each block says why it holds.
#![allow(unsafe_code)]

use carrier_test_support as support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use carrier_protocol::channel_frame;
use carrier_server::{Binary, ChannelDescriptor, InboundBody};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: usize = 1 << 20;
/// Half the payload: any copy of it crosses this.
const LARGE: usize = MIB / 2;

struct Counting;

static LARGE_ALLOCS: AtomicUsize = AtomicUsize::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a side
// effect with no influence on the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= LARGE && COUNTING.load(Ordering::Relaxed) {
            LARGE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= LARGE && new_size > layout.size() && COUNTING.load(Ordering::Relaxed) {
            LARGE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Both tests share the global counter: run them one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn start_counting() {
    LARGE_ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
}

fn stop_counting() -> usize {
    COUNTING.store(false, Ordering::SeqCst);
    LARGE_ALLOCS.load(Ordering::SeqCst)
}

/// A masked client frame carrying `payload`, built before any counting starts.
fn masked_binary_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x82, 0x80 | 127];
    f.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    let mask = [1u8, 2, 3, 4];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

async fn handshaken_raw(port: u16) -> Raw {
    let (status, mut raw) = Raw::upgrade(port, "/?token=test-token", &[]).await;
    assert_eq!(status, 101);
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.expect("ok").payload, b"ok");
    raw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_an_inbound_1_mib_frame_to_a_handler_does_not_copy_the_payload() {
    route_without_copy(MIB, 1).await;
}

/// From 4 MiB a message is received into a mapping of its own (its memory returns to the OS when
/// dropped): no large heap allocation at all, and no copy of the payload onto the heap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_an_inbound_5_mib_frame_to_a_handler_does_not_copy_the_payload() {
    route_without_copy(5 * MIB, 0).await;
}

/// Routes one `size`-byte payload to a handler and checks the large heap allocations made.
async fn route_without_copy(size: usize, expected_large: usize) {
    let _serial = SERIAL.lock().await;
    let s = Server::core_default().await;
    let handle = s
        .transport
        .register_channel(ChannelDescriptor::new("bulk", &[], Binary::Accepted))
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    handle.on_inbound(move |m| {
        if let InboundBody::Binary(b) = m.body {
            let _ = tx.send(b);
        }
    });
    let mut raw = handshaken_raw(s.port).await;
    let payload: Vec<u8> = (0..size).map(|i| (i % 253) as u8).collect();
    let message = channel_frame::encode_binary("bulk", 0, Bytes::from(payload.clone()))
        .unwrap()
        .to_vec();
    let wire = masked_binary_frame(&message);

    start_counting();
    raw.tcp.write_all(&wire).await.unwrap();
    let got = tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("delivered")
        .expect("payload");
    let large = stop_counting();

    assert_eq!(got.len(), size);
    assert!(got[..] == payload[..], "payload intact");
    // Under 4 MiB the one large allocation is the buffer the frame is received into; the
    // handler's `Bytes` is a slice of it. A copy anywhere on the way would make it two.
    assert_eq!(
        large, expected_large,
        "large allocations while routing a {size}-byte frame"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_1_mib_to_50_connections_allocates_the_payload_once() {
    let _serial = SERIAL.lock().await;
    let s = Server::core_default().await;
    let handle = s
        .transport
        .register_channel(ChannelDescriptor::new("bulk", &[], Binary::Accepted))
        .unwrap();
    let mut clients = Vec::new();
    for _ in 0..50 {
        clients.push(handshaken_raw(s.port).await);
    }
    assert!(eventually(|| s.transport.registry().sinks().len() == 50).await);
    // The payload is allocated once, by the host, before the broadcast.
    let payload = Bytes::from(vec![9u8; MIB]);
    let expected = 10
        + channel_frame::encode_binary("bulk", 0, Bytes::new())
            .unwrap()
            .len()
        + MIB;
    // Each reader drains into its own small, preallocated buffer and counts bytes.
    let done = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for raw in clients {
        let done = done.clone();
        let mut tcp = raw.tcp;
        readers.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0;
            while total < expected {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
            done.fetch_add(1, Ordering::SeqCst);
            total
        }));
    }

    start_counting();
    handle.send_binary(payload.clone()).unwrap();
    for r in readers {
        assert_eq!(
            tokio::time::timeout(WAIT, r)
                .await
                .expect("read in time")
                .unwrap(),
            expected
        );
    }
    let large = stop_counting();
    assert_eq!(done.load(Ordering::SeqCst), 50);
    assert_eq!(
        large, 0,
        "no copy of the payload for any of the 50 receivers"
    );
}

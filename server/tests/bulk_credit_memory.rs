//! What a bulk frame waiting for its host within its sender's credit is charged covers what it
//! holds (README, "Memory bounds": buffered bulk credit): the heap that frames add while they
//! wait is measured with a counting allocator that models the system allocator's chunks (8
//! bytes of header, 16-byte granules, 32 bytes at least) and compared with what the carrier
//! reports charging them (`carrier_bulk_credit_bytes`).
//!
//! An in-process carrier, a bulk channel whose host takes one frame into its stream and then
//! reads nothing, and a `tokio-tungstenite` client that announces 1.1 and sends frames within
//! its credit: empty ones (which spend none), 1-byte ones, and events with long names.

// The counting global allocator below is the one `unsafe` here; each block says why it holds.
#![allow(unsafe_code)]

use carrier_test_support as support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use carrier_protocol::channel_frame;
use futures_util::SinkExt;
use serde_json::json;
use support::bulk::{connect_bulk, read_next, split_bulk, BulkOptions, Read};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

struct Live;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The heap a block of `size` bytes really takes in glibc's malloc.
fn chunk(size: usize) -> isize {
    (size + 8).next_multiple_of(16).max(32) as isize
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a side
// effect with no influence on the returned memory.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(chunk(new_size) - chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

/// The counter is process-wide: the tests take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

const WAIT: Duration = Duration::from_secs(20);

/// A value of the carrier's `GET /metrics`.
async fn metric(port: u16, token: &str, name: &str) -> u64 {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let req = format!(
        "GET /metrics?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.expect("request");
    let mut text = String::new();
    tokio::time::timeout(WAIT, tcp.read_to_string(&mut text))
        .await
        .expect("metrics in time")
        .expect("read");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics:\n{text}"))
}

/// Sends `frames` channel frames made by `frame(seq)` to a bulk channel whose host holds one
/// frame and reads no more, and returns the heap they added once all were routed, and what
/// the carrier charges for them.
async fn held(frames: u32, frame: impl Fn(u32) -> Vec<u8>) -> (isize, u64) {
    let s = support::Server::start().await;
    let handle = s.bulk_channel("up");
    let _inbound = handle.inbound(1);
    let (ws, hs) = connect_bulk(
        s.port,
        &s.token,
        BulkOptions {
            version: "1.1",
            rcvbuf: None,
        },
    )
    .await;
    let (mut w, mut r, credit) = split_bulk(ws, &hs, "up");
    let credit = credit.expect("credit");
    // The first frame fills the host's stream; the next ones wait in the connection's ledger.
    w.send(Bytes::from_static(b"first")).await;
    routed(&mut w, &mut r, &credit, "p1").await;
    let before = live();
    for seq in 1..=frames {
        w.sink
            .send(Message::binary(frame(seq)))
            .await
            .expect("send");
    }
    routed(&mut w, &mut r, &credit, "p2").await;
    let heap = live() - before;
    let charged = metric(s.port, &s.token, "carrier_bulk_credit_bytes").await;
    s.transport.stop().await;
    (heap, charged)
}

/// Sends a request and reads up to its answer: everything sent before it has been routed.
async fn routed(
    w: &mut support::bulk::BulkWriter,
    r: &mut futures_util::stream::SplitStream<support::bulk::PlainWs>,
    credit: &support::bulk::Credit,
    id: &str,
) {
    w.text(json!({"id": id, "method": "system.ping"})).await;
    loop {
        match read_next(r, Some(credit), WAIT).await.expect("within WAIT") {
            Read::Text(v) if v["id"] == id => return,
            Read::Text(v) => assert_ne!(v["event"], "protocol_error", "{v}"),
            other => panic!("{other:?}"),
        }
    }
}

fn binary(body: &'static [u8]) -> impl Fn(u32) -> Vec<u8> {
    move |seq| {
        channel_frame::encode_binary("up", seq, Bytes::from_static(body))
            .expect("encode")
            .to_vec()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_and_one_byte_frames_waiting_for_the_host_are_charged_at_least_their_heap() {
    let _serial = SERIAL.lock().await;
    // 3,000 frames of 524 bytes' charge: within the ledger's 2 MiB + 16 KiB account.
    for (what, body) in [("empty", &b""[..]), ("1-byte", &b"x"[..])] {
        let (heap, charged) = held(3000, binary(body)).await;
        eprintln!("{what} frames: heap {heap} B, charged {charged} B");
        assert!(charged > 0, "{what}: the waiting frames are charged");
        assert!(
            heap <= charged as isize,
            "{what}: 3000 waiting frames hold {heap} B, charged {charged} B"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_with_long_names_waiting_for_the_host_are_charged_at_least_their_heap() {
    let _serial = SERIAL.lock().await;
    // The event's name is kept apart from its body: charged too.
    let name = "n".repeat(200);
    let (heap, charged) = held(1000, move |seq| {
        channel_frame::encode_event_frame("up", seq, &name, &json!(null))
            .expect("encode")
            .to_vec()
    })
    .await;
    eprintln!("events: heap {heap} B, charged {charged} B");
    assert!(
        heap <= charged as isize,
        "1000 waiting events hold {heap} B, charged {charged} B"
    );
}

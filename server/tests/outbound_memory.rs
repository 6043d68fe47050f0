//! The outbound budget counts real memory (docs/protocol.md, "Delivery and memory"): what a queue
//! charges for its frames is at least what they hold on the heap, measured with a counting
//! allocator that models the system allocator's chunks (8 bytes of header, 16-byte granules, 32
//! bytes at least).
//!
//! Frames are made the way the carrier makes them (the envelope's encoders, the channel-frame
//! codec), queued on a connection's outbound path with no writer draining it (a
//! `DetachedConnection` whose frames nobody takes), until the queue refuses one.

// The counting global allocator below is the one `unsafe` here; each block says why it holds.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use bytes::Bytes;
use carrier_protocol::channel_frame;
use carrier_protocol::envelope::{encode_event, encode_result};
use carrier_protocol::Role;
use carrier_server::{Connection, DeliveryError, DetachedConnection};
use serde_json::json;

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
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held for a whole test, so no other test allocates while one measures.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

/// Fills a fresh queue with `send(queue, i)` until it refuses a frame; returns the heap the queue held
/// at its fullest and what it charged for it.
fn fill(
    budget: usize,
    mut send: impl FnMut(&Connection, usize) -> Result<(), DeliveryError>,
) -> (isize, usize, usize) {
    let detached = DetachedConnection::new(Role::Drive, budget);
    let out = detached.connection();
    let before = live();
    let mut frames = 0;
    let (mut peak_heap, mut peak_charged) = (0, 0);
    loop {
        let charged_before = out.queued_bytes();
        let heap_before = live() - before;
        match send(out, frames) {
            Ok(()) => frames += 1,
            Err(DeliveryError::Overflow) => {
                // The failure dropped the queue: its memory is back.
                assert!(
                    live() - before <= heap_before,
                    "the failed queue released its frames"
                );
                break;
            }
            Err(e) => panic!("unexpected {e}"),
        }
        let heap = live() - before;
        if heap > peak_heap {
            (peak_heap, peak_charged) = (heap, out.queued_bytes());
        }
        assert!(
            charged_before <= budget,
            "a frame was taken past the budget"
        );
    }
    (peak_heap, peak_charged, frames)
}

#[test]
fn small_responses_are_charged_at_least_their_heap() {
    let _serial = serial();
    // `system.ping` answers: the frame a client that pipelines pings and never reads piles up.
    let (heap, charged, frames) = fill(8 << 20, |out, i| {
        let frame = encode_result(&format!("p{i}"), &json!({})).unwrap();
        out.send_text(frame)
    });
    assert!(frames > 10_000, "{frames}");
    assert!(
        heap <= charged as isize,
        "heap {heap} B for {frames} frames charged {charged} B"
    );
}

#[test]
fn session_events_are_charged_at_least_their_heap() {
    let _serial = serial();
    for delta in [1usize, 100, 1000, 20_000] {
        let text = "w".repeat(delta);
        let (heap, charged, frames) = fill(4 << 20, |out, i| {
            let frame = encode_event(
                "session.text_delta",
                Some(i as u64),
                &json!({"turn_id": "t1", "delta": text}),
            )
            .unwrap();
            out.send_text(frame)
        });
        assert!(
            heap <= charged as isize,
            "delta {delta}: heap {heap} B for {frames} frames charged {charged} B"
        );
    }
}

#[test]
fn channel_frames_are_charged_at_least_their_heap() {
    let _serial = serial();
    for size in [0usize, 10, 4096, 100_000] {
        let (heap, charged, frames) = fill(4 << 20, |out, i| {
            let frame = channel_frame::encode_binary("mic", i as u32, Bytes::from(vec![7u8; size]))
                .unwrap();
            out.send_binary(frame.head, frame.body)
        });
        assert!(
            heap <= charged as isize,
            "{size} B payloads: heap {heap} B for {frames} frames charged {charged} B"
        );
    }
}

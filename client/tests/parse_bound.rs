//! The client's estimate of what a text message takes once parsed
//! ([`WsOptions::max_parsed_bytes`](carrier_client::WsOptions::max_parsed_bytes)) is an upper
//! bound of real memory: for the shapes that cost the most per byte, this binary's allocator
//! counts what parsing them takes at its peak, in glibc's chunk sizes, and the estimate is at
//! least that.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use carrier_client::testing::parsed_bound;
use serde_json::Value;

/// Counts live heap bytes, each block as the chunk glibc's malloc gives it (the size plus its
/// 8-byte header, in 16-byte steps, at least 32), and the peak since it was last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Measurements run one at a time (the harness runs tests on several threads).
static MEASURING: Mutex<()> = Mutex::new(());

fn chunk(size: usize) -> usize {
    (size + 8).div_ceil(16).max(2) * 16
}

fn grow(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::SeqCst) + bytes;
    PEAK.fetch_max(live, Ordering::SeqCst);
}

// SAFETY: every call is passed on to the system allocator unchanged; only counters are added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(chunk(layout.size()));
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(chunk(layout.size()), Ordering::SeqCst);
        // SAFETY: the caller's contract for `dealloc` is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as a move: for a moment both blocks are live.
        grow(chunk(new_size));
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        LIVE.fetch_sub(chunk(layout.size()), Ordering::SeqCst);
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak heap parsing `text` takes, with the tree it returns still held.
fn parse_peak(text: &str) -> usize {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let value: Value = serde_json::from_str(text).expect("JSON");
    let peak = PEAK.load(Ordering::SeqCst) - before;
    drop(value);
    peak
}

fn repeated(item: &str, n: usize) -> String {
    format!("[{}{item}]", format!("{item},").repeat(n - 1))
}

#[test]
fn the_parsed_bound_is_at_least_what_parsing_takes() {
    let n = 50_000;
    let keys: String = (0..n).map(|i| format!("\"{i:x}\":0,")).collect();
    let shapes = [
        ("numbers", repeated("0", n)),
        ("floats", repeated("-1.5e3", n)),
        ("literals", repeated("null", n)),
        ("empty objects", repeated("{}", n)),
        ("empty arrays", repeated("[]", n)),
        ("empty strings", repeated(r#""""#, n)),
        ("short strings", repeated(r#""a""#, n)),
        (
            "24-byte strings",
            repeated(&format!("\"{}\"", "s".repeat(24)), n),
        ),
        ("escaped strings", repeated(r#""\n\u00e9""#, n)),
        ("one-key objects", repeated(r#"{"a":0}"#, n)),
        ("two-key objects", repeated(r#"{"a":0,"b":[]}"#, n)),
        ("one-item arrays", repeated("[0]", n)),
        ("nested", repeated(r#"{"a":[{"b":{"c":[1]}}]}"#, n / 4)),
        ("a wide object", format!("{{{keys}\"end\":0}}")),
        ("one long string", format!("[\"{}\"]", "x".repeat(n * 8))),
        (
            "long escaped string",
            format!("[\"{}\\n\"]", "x".repeat(n * 8)),
        ),
        (
            "long string, key",
            format!("{{\"{}\":0}}", "k\\t".repeat(n * 2)),
        ),
        ("deep", format!("{}0{}", "[".repeat(120), "]".repeat(120))),
    ];
    for (name, text) in shapes {
        let peak = parse_peak(&text);
        let bound = parsed_bound(text.as_bytes());
        eprintln!(
            "{name:16} text {:>8}  parse peak {:>9} ({:>5.1}x)  bound {:>9} ({:.2}x the peak)",
            text.len(),
            peak,
            peak as f64 / text.len() as f64,
            bound,
            bound as f64 / peak as f64
        );
        assert!(
            bound >= peak,
            "{name}: parsing took {peak} bytes, over the bound {bound}"
        );
    }
}

//! What the session-memory budget charges covers what the sessions really hold (docs/protocol.md,
//! "Delivery and memory"; README.md, "Memory bounds"): every held event and history entry is
//! charged its bytes plus `ENTRY_OVERHEAD`, and a counting allocator that models the system
//! allocator's chunks (8 bytes of header, 16-byte granules, 32 bytes at least) checks that the heap
//! the sessions grow by is never more than the charge grows by — for the smallest events (where the
//! overhead matters most), for large ones, and while the budget evicts.
//!
//! The sessions are driven through a [`Bridge`] (the agent protocol without a socket) with an
//! agent the test plays by hand, on one thread, and every measurement is taken once every
//! frame the bridge queued has been handed over.

// The counting global allocator below is the one `unsafe` here; each block says why it holds.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use carrier_agent::{
    AgentProfile, Bridge, BridgeFrame, HostError, InMemoryDirectory, ProtocolSession, TurnSink,
    TurnStart, ENTRY_OVERHEAD,
};
use carrier_protocol::methods::Decision;
use carrier_protocol::Role;
use carrier_server::{CarrierContext, DriverInfo, Limits};
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

/// The counter is process-wide: the tests take turns, each on a runtime of its own thread.
static SERIAL: Mutex<()> = Mutex::new(());

fn serially(test: impl std::future::Future<Output = ()>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(test);
}

fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

/// The agent of every session: keeps each running turn's sink for the test to play.
#[derive(Clone, Default)]
struct Puppets {
    sinks: Arc<Mutex<HashMap<String, TurnSink>>>,
}

struct Puppet {
    session: String,
    sinks: Arc<Mutex<HashMap<String, TurnSink>>>,
}

impl ProtocolSession for Puppet {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        self.sinks
            .lock()
            .unwrap()
            .insert(self.session.clone(), turn.sink);
        Ok(())
    }
    fn abort_turn(&self, _turn_id: &str) {}
    fn permission_decided(&self, _turn_id: &str, _request_id: &str, _decision: Decision) {}
}

/// One bridge connection driving the profile's sessions, counting the frames handed over.
struct Driving {
    profile: AgentProfile,
    bridge: Bridge,
    puppets: Puppets,
    handed_over: Arc<AtomicUsize>,
    queued: usize,
    next_id: u64,
}

impl Driving {
    fn open(max_session_bytes: usize) -> Driving {
        let puppets = Puppets::default();
        let sinks = puppets.sinks.clone();
        let profile = AgentProfile::builder(InMemoryDirectory::new(move |id| {
            Arc::new(Puppet {
                session: id.to_owned(),
                sinks: sinks.clone(),
            }) as Arc<dyn ProtocolSession>
        }))
        .max_session_bytes(max_session_bytes)
        .build();
        let driver = DriverInfo {
            driver_id: "heap".into(),
            surface: "test".into(),
        };
        let limits = Limits::default().with_handshake_timeout(Duration::from_secs(3600));
        let ctx = CarrierContext::standalone(limits, Role::Drive, driver, "epoch");
        let handed_over = Arc::new(AtomicUsize::new(0));
        let counter = handed_over.clone();
        let bridge = Bridge::open(&profile, &ctx, Role::Drive, move |frame| {
            assert!(matches!(frame, BridgeFrame::Text(_)), "{frame:?}");
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .expect("bridge");
        let mut d = Driving {
            profile,
            bridge,
            puppets,
            handed_over,
            queued: 0,
            next_id: 0,
        };
        d.request(
            "system.handshake",
            json!({"protocol_version": "1.0", "min_compatible_protocol": "1.0"}),
        );
        d
    }

    /// Feeds a request; its answer is one frame.
    fn request(&mut self, method: &str, params: serde_json::Value) {
        self.next_id += 1;
        let text = json!({"id": format!("r{}", self.next_id), "method": method, "params": params});
        self.bridge.feed(&text.to_string()).expect("feed");
        self.queued += 1;
    }

    /// One turn in the bound session: the prompt, `deltas` deltas, and the reply.
    fn turn(&mut self, session: &str, prompt: &str, deltas: &[&str], reply: &str) {
        self.request("session.submit", json!({ "prompt": prompt }));
        self.queued += 1; // turn_started
        let sink = self
            .puppets
            .sinks
            .lock()
            .unwrap()
            .remove(session)
            .expect("a turn");
        for delta in deltas {
            sink.delta(delta).expect("delta");
            self.queued += 1;
        }
        sink.complete(reply).expect("complete");
        self.queued += 1;
    }

    /// Waits until every frame queued so far was handed over (the queue is empty).
    async fn drained(&self) {
        for _ in 0..100_000 {
            if self.handed_over.load(Ordering::SeqCst) >= self.queued {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!(
            "{} of {} frames handed over",
            self.handed_over.load(Ordering::SeqCst),
            self.queued
        );
    }

    fn charged(&self) -> isize {
        self.profile.session_memory().in_use() as isize
    }
}

/// Fills each of `sessions` (started before) with `turns` turns of `deltas` deltas of
/// `delta_len` bytes; after every session, asserts the heap grew by no more than the charge
/// did since the start. Returns the heap growth and the charge at the end.
async fn fill_and_compare(
    d: &mut Driving,
    sessions: std::ops::RangeInclusive<u32>,
    turns: usize,
    deltas: usize,
    delta_len: usize,
) -> (isize, isize) {
    let delta = "d".repeat(delta_len);
    let all: Vec<&str> = vec![delta.as_str(); deltas];
    let (heap0, charged0) = (live(), d.charged());
    let mut last = (0, 0);
    for n in sessions {
        let session = format!("s{n}");
        d.request("sessions.switch", json!({ "session_id": session }));
        for t in 0..turns {
            d.turn(&session, &format!("prompt {t} {delta}"), &all, &delta);
        }
        d.drained().await;
        last = (live() - heap0, d.charged() - charged0);
        let (heap, charged) = last;
        assert!(
            heap <= charged,
            "{deltas} deltas of {delta_len} B a turn, up to {session}: the sessions grew by \
             {heap} B of heap, charged {charged} B"
        );
    }
    last
}

/// Starts sessions `s2` ..= `s{last}` and runs one small turn in each, so that what every
/// session keeps whatever it holds (its hub, its agent, its place in the directory and the
/// usage counters) exists before anything is measured.
async fn start_sessions(d: &mut Driving, last: u32) {
    for n in 2..=last {
        d.request("sessions.start", json!({}));
        d.turn(&format!("s{n}"), "hi", &["h", "i"], "hi");
    }
    d.drained().await;
}

#[test]
fn what_is_charged_covers_what_the_sessions_hold() {
    serially(what_is_charged_covers_what_the_sessions_hold_async());
}

async fn what_is_charged_covers_what_the_sessions_hold_async() {
    let mut d = Driving::open(1 << 40);
    start_sessions(&mut d, 21).await;
    // A first round grows what lasts for the connection (the bridge's queue) to its size.
    fill_and_compare(&mut d, 2..=2, 1, 600, 1).await;
    for (round, (deltas, len)) in [(600, 1), (300, 100), (20, 10_000), (2, 200_000)]
        .into_iter()
        .enumerate()
    {
        let first = 2 + 5 * round as u32;
        let (heap, charged) = fill_and_compare(&mut d, first..=first + 4, 2, deltas, len).await;
        eprintln!(
            "{deltas} deltas of {len} B: heap {heap} B, charged {charged} B \
             ({ENTRY_OVERHEAD} B per entry of it overhead)"
        );
    }
}

#[test]
fn what_the_budget_evicts_leaves_the_heap() {
    serially(what_the_budget_evicts_leaves_the_heap_async());
}

async fn what_the_budget_evicts_leaves_the_heap_async() {
    const BUDGET: usize = 2 << 20;
    let mut d = Driving::open(BUDGET);
    start_sessions(&mut d, 41).await;
    fill_and_compare(&mut d, 2..=2, 1, 60, 1).await;
    // Forty sessions of about 1 MiB each through a 2 MiB budget: the charge stays within it,
    // and the heap follows it down as well as up — whatever the heap grew by since the start
    // is still held and charged (what the sessions held at the start may be gone since, and
    // is not counted).
    let heap0 = live();
    let delta = "e".repeat(10_000);
    let deltas = vec![delta.as_str(); 50];
    for n in 2..=41u32 {
        let session = format!("s{n}");
        d.request("sessions.switch", json!({ "session_id": session }));
        d.turn(&session, &delta, &deltas, &delta);
        d.drained().await;
        let (grown, charged) = (live() - heap0, d.charged());
        assert!(charged as usize <= BUDGET, "{charged} B charged");
        assert!(
            grown <= charged,
            "up to {session}: the heap grew by {grown} B, {charged} B are charged"
        );
    }
    eprintln!(
        "after 40 sessions: the heap grew by {} B, {} B are charged",
        live() - heap0,
        d.charged()
    );
}

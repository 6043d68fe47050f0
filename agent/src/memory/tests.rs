//! The accountant with stores that hold nothing but their charges: the budget exactly and one
//! past it, the order of evictions, what the adding session keeps, and closing accounts.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Event,
    Entry,
}

/// A store of `(name, kind, charge)`, oldest first.
struct Fake {
    held: Mutex<VecDeque<(&'static str, Kind, usize)>>,
    account: Account,
}

impl Fake {
    fn open(memory: &SessionMemory) -> Arc<Fake> {
        Arc::new_cyclic(|me: &Weak<Fake>| {
            let store: Weak<dyn Store> = me.clone();
            Fake {
                held: Mutex::new(VecDeque::new()),
                account: memory.open(store),
            }
        })
    }

    fn add(&self, name: &'static str, kind: Kind, bytes: usize) {
        self.account.record(|| {
            self.held.lock().unwrap().push_back((name, kind, bytes));
            Change {
                added: bytes,
                removed: 0,
            }
        });
    }

    fn names(&self) -> Vec<&'static str> {
        self.held.lock().unwrap().iter().map(|e| e.0).collect()
    }
}

impl Store for Fake {
    fn evict_oldest(&self, spare: Spare) -> Option<usize> {
        let mut held = self.held.lock().unwrap();
        let newest = |kind| held.iter().rposition(|e| e.1 == kind);
        let keep = match spare {
            Spare::Nothing => [None, None],
            Spare::Newest => [newest(Kind::Event), newest(Kind::Entry)],
        };
        let i = (0..held.len()).find(|i| !keep.contains(&Some(*i)))?;
        held.remove(i).map(|e| e.2)
    }
}

#[test]
fn the_budget_exactly_is_kept_and_one_byte_past_evicts_the_oldest() {
    let memory = SessionMemory::new(100);
    let a = Fake::open(&memory);
    let b = Fake::open(&memory);
    a.add("a1", Kind::Event, 40);
    a.add("a2", Kind::Entry, 30);
    b.add("b1", Kind::Event, 30);
    assert_eq!(memory.in_use(), 100, "at the budget");
    assert_eq!((a.names(), b.names()), (vec!["a1", "a2"], vec!["b1"]));

    b.add("b2", Kind::Event, 1);
    assert_eq!(
        memory.in_use(),
        61,
        "one byte past: the oldest entry of the LRU session went"
    );
    assert_eq!((a.names(), b.names()), (vec!["a2"], vec!["b1", "b2"]));
}

#[test]
fn the_least_recently_used_session_goes_first_whole_then_the_next() {
    let memory = SessionMemory::new(100);
    let a = Fake::open(&memory);
    let b = Fake::open(&memory);
    let c = Fake::open(&memory);
    a.add("a1", Kind::Event, 20);
    a.add("a2", Kind::Event, 20);
    b.add("b1", Kind::Event, 20);
    b.add("b2", Kind::Event, 20);
    // A is used after B: B is now the least recently used.
    a.account.touch();
    c.add("c1", Kind::Event, 50);
    assert_eq!(a.names(), ["a1", "a2"]);
    assert!(b.names().is_empty(), "B went whole before A lost anything");
    assert_eq!(memory.in_use(), 90);
    c.add("c2", Kind::Event, 20);
    assert_eq!(a.names(), ["a2"], "then A, oldest first");
    assert_eq!(c.names(), ["c1", "c2"]);
    assert_eq!(memory.in_use(), 90);
}

#[test]
fn the_session_added_to_goes_last_and_keeps_its_newest_event_and_entry() {
    let memory = SessionMemory::new(100);
    let a = Fake::open(&memory);
    let b = Fake::open(&memory);
    b.add("b1", Kind::Event, 10);
    a.add("a1", Kind::Entry, 30);
    a.add("a2", Kind::Event, 30);
    a.add("a3", Kind::Entry, 30);
    a.add("a4", Kind::Event, 30);
    // 130 > 100: B (least recently used) goes first, then A's oldest.
    assert!(b.names().is_empty());
    assert_eq!(a.names(), ["a2", "a3", "a4"]);
    assert_eq!(memory.in_use(), 90);

    // An entry larger than the whole budget: everything else goes, the newest of each kind
    // stays, and the total is over the budget by what is kept.
    a.add("huge", Kind::Entry, 150);
    assert_eq!(a.names(), ["a4", "huge"]);
    assert_eq!(memory.in_use(), 180);
    // The next addition lets the kept ones go as they stop being the newest.
    a.add("a5", Kind::Event, 10);
    assert_eq!(a.names(), ["huge", "a5"]);
    a.add("a6", Kind::Entry, 10);
    assert_eq!(a.names(), ["a5", "a6"]);
    assert_eq!(memory.in_use(), 20);
}

#[test]
fn a_closed_account_gives_its_bytes_back_and_is_never_asked_again() {
    let memory = SessionMemory::new(100);
    let a = Fake::open(&memory);
    let b = Fake::open(&memory);
    a.add("a1", Kind::Event, 60);
    b.add("b1", Kind::Event, 30);
    drop(a);
    assert_eq!(memory.in_use(), 30);
    b.add("b2", Kind::Event, 70);
    assert_eq!((b.names(), memory.in_use()), (vec!["b1", "b2"], 100));
    let gauges = memory.gauges();
    let figure = |name: &str| gauges.iter().find(|g| g.name() == name).map(Gauge::get);
    assert_eq!(figure("carrier_session_bytes"), Some(100));
    assert_eq!(figure("carrier_session_bytes_limit"), Some(100));
}

#[test]
fn a_store_whose_last_handle_an_eviction_borrowed_closes_after_the_ledger_lock() {
    let memory = SessionMemory::new(100);
    let a = Fake::open(&memory);
    a.add("a1", Kind::Event, 60);
    let b = Fake::open(&memory);
    let weak_a = Arc::downgrade(&a);
    // Another thread drops A while B's addition may be evicting from it: neither deadlocks,
    // and what A held is given back once.
    let dropper = std::thread::spawn(move || drop(a));
    b.add("b1", Kind::Event, 60);
    dropper.join().unwrap();
    assert!(weak_a.upgrade().is_none());
    assert_eq!(memory.in_use(), 60);
}

#[test]
fn sessions_adding_at_once_are_seen_within_the_budget() {
    const ENTRY: usize = 1000;
    let memory = SessionMemory::new(20 * ENTRY);
    let stores: Vec<Arc<Fake>> = (0..8).map(|_| Fake::open(&memory)).collect();
    let threads: Vec<_> = stores
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, store)| {
            let memory = memory.clone();
            std::thread::spawn(move || {
                for n in 0..500 {
                    let kind = if n % 2 == 0 { Kind::Event } else { Kind::Entry };
                    store.add("x", kind, ENTRY + i);
                    store.account.touch();
                    // Read under the ledger lock: between additions, never past the budget.
                    assert!(memory.in_use() <= 20 * ENTRY);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(memory.in_use() <= 20 * ENTRY);
    let held: usize = stores
        .iter()
        .map(|s| s.held.lock().unwrap().iter().map(|e| e.2).sum::<usize>())
        .sum();
    assert_eq!(
        held,
        memory.in_use(),
        "the ledger matches what the stores hold"
    );
}

//! [`SessionMemory`]: one budget, in bytes of real memory, for what every session of a process
//! keeps — its history and its resume ring — whichever profile, directory or agent the
//! sessions belong to.
//!
//! Each session's record ([`super::record::SessionRecord`]) is a [`Store`] with an [`Account`]
//! here. Whatever a store adds is charged when it is added ([`Account::record`]); when that
//! takes the total over the budget, entries are evicted until it fits:
//!
//! - the least recently used session first (used: an entry recorded, a connection bound or
//!   resumed to it, its history read), its oldest entries first, until it is empty;
//! - then the next least recently used, and so on;
//! - the session being added to last, and never its newest event nor its newest history entry.
//!
//! A session that lost events answers a resume from before them with `gap` (its ring knows its
//! oldest held seq); its history starts later.
//!
//! # Locks
//!
//! Three kinds, always taken in this order, each released before an earlier one:
//!
//! 1. a session hub's lock (a thread holds at most one);
//! 2. this memory's ledger lock (one per process);
//! 3. a store's own lock (a thread holds at most one, and takes nothing while it does).
//!
//! Every change to what a store holds — an addition, an eviction by its own bounds, an
//! eviction for the budget — happens under the ledger lock, so the ledger's figure of each
//! store is exactly what the store holds whenever the ledger lock is free, and additions never
//! overtake each other's evictions. A store reads itself (a replay, a history answer) under its
//! own lock only, and marks itself used ([`Account::touch`]) only after releasing it. Nothing
//! under the ledger lock calls the host or a hub, and no store is dropped under it (the stores
//! an eviction borrowed are let go after the ledger lock is released: dropping the last one
//! takes the ledger lock to close its account).
//!
//! # How far over the budget
//!
//! Additions are serialised, and each evicts until the total fits before the ledger lock is
//! released, so the total passes the budget by at most the one entry being added — and by the
//! adding session's newest event and newest history entry when the budget is smaller than
//! those two.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use carrier_server::Gauge;

/// Default budget for every session's history and resume ring together: 64 MiB.
pub const DEFAULT_MAX_SESSION_BYTES: usize = 64 << 20;

/// What each held entry (an encoded event in a ring, an entry of a history) is charged beyond
/// its bytes. It covers, with room to spare, what holding the entry costs besides them: its
/// slots (an event's seq, handle and stamp: 48 bytes; a history entry's stamp, strings and
/// flags: 64 bytes) twice over, since a queue's buffer grows by doubling and gives room back
/// once it is less than half full; the allocator's header and rounding of each buffer (up to
/// 23 bytes); the shared handle an event's bytes get when the fan-out first clones them
/// (32 bytes); and a history entry's `turn_id` buffer (32 bytes at least) — at most 183 bytes.
/// `agent/tests/session_memory_heap.rs` checks with a counting allocator that what is charged covers
/// what the sessions hold.
pub const ENTRY_OVERHEAD: usize = 256;

/// Which entries of a store an eviction must leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spare {
    /// None: a session other than the one being added to may lose everything.
    Nothing,
    /// Its newest event and its newest history entry: the session being added to.
    Newest,
}

/// Entries charged to a [`SessionMemory`] (a session's record).
pub(crate) trait Store: Send + Sync {
    /// Evicts the oldest entry that `spare` allows and returns what it was charged; `None`
    /// when there is none. Called with the ledger lock held: takes the store's own lock and
    /// nothing else.
    fn evict_oldest(&self, spare: Spare) -> Option<usize>;
}

/// What a store's change did to its holdings, in charged bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// Charged for what was added.
    pub(crate) added: usize,
    /// Charged for what the store's own bounds evicted to make room.
    pub(crate) removed: usize,
}

/// One process-wide budget for every session's history and resume ring (see the module
/// docs). Cheap to clone; clones share the budget, so profiles built with the same
/// `SessionMemory` ([`super::AgentProfileBuilder::session_memory`]) share one figure.
///
/// ```
/// use carrier_agent::SessionMemory;
///
/// let memory = SessionMemory::new(64 << 20);
/// assert_eq!((memory.limit(), memory.in_use()), (64 << 20, 0));
/// ```
#[derive(Clone)]
pub struct SessionMemory {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SessionMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionMemory")
            .field("limit", &self.limit())
            .field("in_use", &self.in_use())
            .finish()
    }
}

impl Default for SessionMemory {
    /// [`DEFAULT_MAX_SESSION_BYTES`].
    fn default() -> Self {
        SessionMemory::new(DEFAULT_MAX_SESSION_BYTES)
    }
}

struct Shared {
    limit: usize,
    /// `carrier_session_bytes`: the total, set whenever it changes under the ledger lock.
    in_use: Gauge,
    /// `carrier_session_bytes_limit`.
    limit_gauge: Gauge,
    ledger: Mutex<Ledger>,
}

#[derive(Default)]
struct Ledger {
    total: usize,
    /// Ticks at every use of any store: the order of last uses.
    clock: u64,
    next_id: u64,
    accounts: Vec<Slot>,
}

struct Slot {
    id: u64,
    store: Weak<dyn Store>,
    bytes: usize,
    last_used: u64,
}

impl Ledger {
    fn slot(&mut self, id: u64) -> Option<&mut Slot> {
        self.accounts.iter_mut().find(|s| s.id == id)
    }

    fn used(&mut self, id: u64) {
        self.clock += 1;
        let now = self.clock;
        if let Some(slot) = self.slot(id) {
            slot.last_used = now;
        }
    }

    fn charge(&mut self, id: u64, change: Change) {
        if let Some(slot) = self.slot(id) {
            slot.bytes = slot.bytes + change.added - change.removed;
            self.total = self.total + change.added - change.removed;
        }
    }

    fn release(&mut self, id: u64, bytes: usize) {
        if let Some(slot) = self.slot(id) {
            slot.bytes -= bytes;
            self.total -= bytes;
        }
    }

    /// The least recently used store other than `me` that holds anything and was not
    /// passed over.
    fn least_recently_used(&self, me: u64, passed: &[u64]) -> Option<u64> {
        self.accounts
            .iter()
            .filter(|s| s.id != me && s.bytes > 0 && !passed.contains(&s.id))
            .min_by_key(|s| s.last_used)
            .map(|s| s.id)
    }
}

impl SessionMemory {
    /// A budget of `max_bytes` for every session's history and resume ring together.
    pub fn new(max_bytes: usize) -> Self {
        let limit_gauge = Gauge::new(
            "carrier_session_bytes_limit",
            "The budget for every session's history and resume ring together (--max-session-bytes).",
        );
        limit_gauge.set(max_bytes as u64);
        SessionMemory {
            shared: Arc::new(Shared {
                limit: max_bytes,
                in_use: Gauge::new(
                    "carrier_session_bytes",
                    "Bytes charged for every session's history and resume ring together.",
                ),
                limit_gauge,
                ledger: Mutex::new(Ledger::default()),
            }),
        }
    }

    /// The budget.
    pub fn limit(&self) -> usize {
        self.shared.limit
    }

    /// What every session's history and resume ring hold now, as charged.
    pub fn in_use(&self) -> usize {
        self.shared.ledger().total
    }

    /// `carrier_session_bytes` and `carrier_session_bytes_limit`, for `GET /metrics`.
    pub fn gauges(&self) -> Vec<Gauge> {
        vec![self.shared.in_use.clone(), self.shared.limit_gauge.clone()]
    }

    /// Opens the account of a new store (holding nothing yet).
    pub(crate) fn open(&self, store: Weak<dyn Store>) -> Account {
        let mut ledger = self.shared.ledger();
        ledger.next_id += 1;
        ledger.clock += 1;
        let (id, now) = (ledger.next_id, ledger.clock);
        ledger.accounts.push(Slot {
            id,
            store,
            bytes: 0,
            last_used: now,
        });
        Account {
            id,
            shared: self.shared.clone(),
        }
    }
}

impl Shared {
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // Every critical section leaves the ledger consistent before anything in it can
        // panic, so a poisoned lock is still usable.
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Evicts until the total fits (see the module docs); `me` is the store being added to.
    /// The stores it borrowed go to `borrowed`, for the caller to drop after the ledger lock.
    fn settle(&self, ledger: &mut Ledger, me: u64, borrowed: &mut Vec<Arc<dyn Store>>) {
        // Stores found empty or gone (a store being dropped still has its bytes until its
        // account closes, which waits for this lock).
        let mut passed = Vec::new();
        while ledger.total > self.limit {
            let (id, spare) = match ledger.least_recently_used(me, &passed) {
                Some(id) => (id, Spare::Nothing),
                None => (me, Spare::Newest),
            };
            let Some(store) = ledger.slot(id).and_then(|s| s.store.upgrade()) else {
                if id == me {
                    return;
                }
                passed.push(id);
                continue;
            };
            while ledger.total > self.limit {
                match store.evict_oldest(spare) {
                    Some(bytes) => ledger.release(id, bytes),
                    None => break,
                }
            }
            borrowed.push(store);
            if ledger.total > self.limit {
                if id == me {
                    return;
                }
                passed.push(id);
            }
        }
    }
}

/// A store's account with its [`SessionMemory`]; closing it (dropping it, with the store)
/// gives back what the store was charged.
pub(crate) struct Account {
    id: u64,
    shared: Arc<Shared>,
}

impl Account {
    /// Runs `change` — the store adding to itself, under its own lock — with the ledger
    /// lock held, charges what it reports, marks the store used, then evicts until the total
    /// fits the budget.
    pub(crate) fn record(&self, change: impl FnOnce() -> Change) {
        // Declared before the guard, so dropped after it (see the module docs on locks).
        let mut borrowed: Vec<Arc<dyn Store>> = Vec::new();
        let mut ledger = self.shared.ledger();
        let change = change();
        ledger.charge(self.id, change);
        ledger.used(self.id);
        self.shared.settle(&mut ledger, self.id, &mut borrowed);
        self.shared.in_use.set(ledger.total as u64);
    }

    /// Marks the store used now (a connection bound to its session, its history read). Must
    /// not be called under the store's own lock.
    pub(crate) fn touch(&self) {
        self.shared.ledger().used(self.id);
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let mut ledger = self.shared.ledger();
        if let Some(i) = ledger.accounts.iter().position(|s| s.id == self.id) {
            let slot = ledger.accounts.swap_remove(i);
            ledger.total -= slot.bytes;
        }
        self.shared.in_use.set(ledger.total as u64);
    }
}

#[cfg(test)]
mod tests {
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
}

//! [`SessionRecord`]: what the carrier keeps of one session between events — its resume ring
//! and its history — each within the session's own bounds, and all of it charged to the
//! process's [`SessionMemory`], which may take the oldest entries from outside.
//!
//! The record has its own lock, apart from the hub's: another session's addition evicts from
//! this one without the hub's lock (see the lock order in [`super::memory`]). Every entry gets
//! a stamp when it is recorded, so an eviction takes the oldest of the ring's and the
//! history's fronts.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;

use super::history::{give_back_room, EntryMeta, History, HistoryConfig, Recorded};
use super::memory::{Account, Change, SessionMemory, Spare, Store, ENTRY_OVERHEAD};
use carrier_protocol::methods::HistoryEntry;
use carrier_protocol::resume::{Replay, ResumeRing};

/// Bounds of a session's resume ring (by default 1024 events or 4 MiB;
/// docs/protocol.md, "Sessions and resume").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RingConfig {
    /// Events held.
    pub max_events: usize,
    /// Encoded bytes held.
    pub max_bytes: usize,
}

impl RingConfig {
    /// Sets [`max_events`](Self::max_events).
    #[must_use]
    pub fn with_max_events(mut self, max_events: usize) -> Self {
        self.max_events = max_events;
        self
    }

    /// Sets [`max_bytes`](Self::max_bytes).
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            max_events: carrier_protocol::resume::DEFAULT_MAX_EVENTS,
            max_bytes: carrier_protocol::resume::DEFAULT_MAX_BYTES,
        }
    }
}

/// What an encoded event in the ring is charged.
fn event_cost(frame: &Bytes) -> usize {
    frame.len() + ENTRY_OVERHEAD
}

/// What a history entry is charged: the buffers it holds, not just their text.
fn entry_cost(entry: &Recorded) -> usize {
    ENTRY_OVERHEAD
        + match entry {
            Recorded::Said(said) => said.text.capacity() + said.turn_id.capacity(),
            // The update is a boxed `str` of exactly its length.
            Recorded::AgentUpdate(u) => {
                u.update.len() + u.turn_id.as_ref().map_or(0, String::capacity)
            }
        }
}

/// One session's ring and history, charged to a [`SessionMemory`].
pub(crate) struct SessionRecord {
    held: Mutex<Held>,
    account: Account,
}

struct Held {
    ring: ResumeRing,
    /// The stamp of each event in `ring`, front to back.
    ring_stamps: VecDeque<u64>,
    history: History,
    next_stamp: u64,
}

impl Held {
    fn stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp
    }
}

impl SessionRecord {
    /// An empty record with its own bounds, charged to `memory`.
    pub(crate) fn new(
        memory: &SessionMemory,
        ring: RingConfig,
        history: HistoryConfig,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me: &Weak<SessionRecord>| {
            let store: Weak<dyn Store> = me.clone();
            SessionRecord {
                held: Mutex::new(Held {
                    ring: ResumeRing::new(ring.max_events, ring.max_bytes),
                    ring_stamps: VecDeque::new(),
                    history: History::new(history),
                    next_stamp: 0,
                }),
                account: memory.open(store),
            }
        })
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        // Every critical section leaves the record consistent before anything in it can
        // panic, so a poisoned lock is still usable.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records event `seq`, already encoded (see [`ResumeRing::push`]).
    pub(crate) fn push_event(&self, seq: u64, frame: Bytes) {
        self.account.record(|| {
            let mut held = self.lock();
            let added = event_cost(&frame);
            let stamp = held.stamp();
            let evicted = held.ring.push(seq, frame);
            held.ring_stamps.push_back(stamp);
            held.ring_stamps.drain(..evicted.events);
            Change {
                added,
                removed: evicted.bytes + evicted.events * ENTRY_OVERHEAD,
            }
        });
    }

    /// Appends `entry` to the history, not interrupted.
    #[cfg(test)]
    pub(crate) fn push_history(&self, entry: HistoryEntry) {
        self.push_history_noted(Recorded::Said(entry), false);
    }

    /// Appends `entry` to the history, noted with the time now and whether it is the reply of
    /// an aborted turn.
    pub(crate) fn push_history_noted(&self, entry: Recorded, interrupted: bool) {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let meta = EntryMeta { at_ms, interrupted };
        self.account.record(|| {
            let mut held = self.lock();
            let added = entry_cost(&entry);
            let stamp = held.stamp();
            let evicted = held.history.push_noted(stamp, meta, entry);
            Change {
                added,
                removed: evicted.iter().map(entry_cost).sum(),
            }
        });
    }

    /// What to replay after `after_seq` (see [`ResumeRing::replay_after`]).
    pub(crate) fn replay_after(&self, after_seq: u64, last_seq: u64) -> Replay {
        self.lock().ring.replay_after(after_seq, last_seq)
    }

    /// Marks the session used now (a connection bound or resumed to it). Not under the
    /// record's own lock (see the lock order in [`super::memory`]).
    pub(crate) fn touch(&self) {
        self.account.touch();
    }

    /// The newest `limit` history entries, oldest first, copied up to `budget` bytes of text
    /// (see [`History::newest`]); the session is used now.
    pub(crate) fn history(&self, limit: Option<u32>, budget: usize) -> Vec<HistoryEntry> {
        let newest = self.lock().history.newest(limit, budget);
        self.account.touch();
        newest
    }

    /// [`SessionRecord::history`] with every entry's note: all entries held, up to `budget`
    /// bytes of text.
    pub(crate) fn history_noted(&self, budget: usize) -> Vec<(EntryMeta, HistoryEntry)> {
        let newest = self.lock().history.newest_noted(None, budget);
        self.account.touch();
        newest
    }

    /// Every entry held, the agent's updates too when `updates`, each with its note, up to
    /// `budget` bytes.
    pub(crate) fn history_recorded(
        &self,
        budget: usize,
        updates: bool,
    ) -> Vec<(EntryMeta, Recorded)> {
        let newest = self.lock().history.newest_recorded(budget, updates);
        self.account.touch();
        newest
    }
}

impl Store for SessionRecord {
    fn evict_oldest(&self, spare: Spare) -> Option<usize> {
        let mut held = self.lock();
        let keep = match spare {
            Spare::Nothing => 0,
            Spare::Newest => 1,
        };
        let ring = (held.ring.len() > keep)
            .then(|| held.ring_stamps.front().copied())
            .flatten();
        let history = (held.history.len() > keep)
            .then(|| held.history.oldest_stamp())
            .flatten();
        let from_ring = match (ring, history) {
            (None, None) => return None,
            (Some(r), Some(h)) => r < h,
            (ring, _) => ring.is_some(),
        };
        if from_ring {
            let (_, frame) = held.ring.pop_oldest()?;
            held.ring_stamps.pop_front();
            give_back_room(&mut held.ring_stamps);
            Some(event_cost(&frame))
        } else {
            held.history.pop_oldest().map(|entry| entry_cost(&entry))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carrier_protocol::methods::HistoryRole;

    /// An entry whose buffers are exactly their text (as the carrier's are).
    fn entry(turn: u32, text: &str) -> HistoryEntry {
        let mut turn_id = format!("t{turn}");
        turn_id.shrink_to_fit();
        HistoryEntry {
            role: HistoryRole::User,
            text: text.to_owned(),
            turn_id,
            truncated: None,
        }
    }

    fn frame(len: usize) -> Bytes {
        Bytes::from(vec![b'x'; len])
    }

    fn record(memory: &SessionMemory) -> Arc<SessionRecord> {
        SessionRecord::new(memory, RingConfig::default(), HistoryConfig::default())
    }

    fn turns(r: &SessionRecord) -> Vec<String> {
        r.history(None, usize::MAX)
            .into_iter()
            .map(|e| e.turn_id)
            .collect()
    }

    #[test]
    fn events_and_entries_are_charged_their_bytes_and_the_overhead() {
        let memory = SessionMemory::new(usize::MAX);
        let r = record(&memory);
        r.push_event(1, frame(100));
        assert_eq!(memory.in_use(), 100 + ENTRY_OVERHEAD);
        r.push_history(entry(1, "hello"));
        assert_eq!(memory.in_use(), 100 + 5 + 2 + 2 * ENTRY_OVERHEAD);
        drop(r);
        assert_eq!(
            memory.in_use(),
            0,
            "a dropped session gives everything back"
        );
    }

    #[test]
    fn the_sessions_own_bounds_still_evict_and_give_the_charge_back() {
        let memory = SessionMemory::new(usize::MAX);
        let r = SessionRecord::new(
            &memory,
            RingConfig {
                max_events: 2,
                max_bytes: usize::MAX,
            },
            HistoryConfig {
                max_entries: 1,
                max_bytes: usize::MAX,
            },
        );
        for seq in 1..=3 {
            r.push_event(seq, frame(10));
        }
        r.push_history(entry(1, "a"));
        r.push_history(entry(2, "b"));
        assert_eq!(
            memory.in_use(),
            2 * (10 + ENTRY_OVERHEAD) + (1 + 2 + ENTRY_OVERHEAD)
        );
        assert_eq!(turns(&r), ["t2"]);
    }

    #[test]
    fn the_oldest_entry_of_either_kind_goes_first_and_a_replay_reports_the_gap() {
        let unit = 100 + ENTRY_OVERHEAD;
        // Room for four events of 100 bytes.
        let memory = SessionMemory::new(4 * unit);
        let old = record(&memory);
        old.push_history(entry(1, &"p".repeat(98))); // 98 + 2 bytes: one unit
        old.push_event(1, frame(100));
        old.push_event(2, frame(100));
        let new = record(&memory);
        new.push_event(1, frame(100));
        assert_eq!(memory.in_use(), 4 * unit);

        new.push_event(2, frame(100));
        // The old session's oldest entry (its history entry) went first.
        assert!(turns(&old).is_empty());
        assert_eq!(
            old.replay_after(0, 2),
            Replay::Resumed {
                frames: vec![frame(100), frame(100)]
            }
        );
        new.push_event(3, frame(100));
        new.push_event(4, frame(100));
        // Then its events, oldest first: a resume from before them is a gap up to the last
        // seq, and nothing is replayed.
        assert_eq!(
            old.replay_after(0, 2),
            Replay::Gap {
                from: 1,
                to: 2,
                frames: vec![]
            }
        );
        assert_eq!(memory.in_use(), 4 * unit);
    }

    #[test]
    fn sessions_recording_and_reading_at_once_evict_from_each_other_without_deadlock() {
        // Each writer stands for a hub recording under its own lock; the readers replay and
        // read history as bound connections do. A budget of a few entries makes every
        // addition evict from the other sessions.
        let memory = SessionMemory::new(8 * (100 + ENTRY_OVERHEAD));
        let records: Vec<Arc<SessionRecord>> = (0..4).map(|_| record(&memory)).collect();
        let (done, finished) = std::sync::mpsc::channel();
        for (i, r) in records.iter().enumerate() {
            let (writer, reader) = (r.clone(), records[(i + 1) % records.len()].clone());
            let done = done.clone();
            std::thread::spawn(move || {
                for seq in 1..=2000u32 {
                    writer.push_event(u64::from(seq), frame(100));
                    if seq % 3 == 0 {
                        writer.push_history(entry(seq, "a reply"));
                    }
                    let _ = reader.replay_after(0, 1);
                    let _ = reader.history(None, usize::MAX);
                }
                let _ = done.send(());
            });
        }
        drop(done);
        for _ in 0..records.len() {
            finished
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("every thread finishes (no lock waits on another for ever)");
        }
        assert!(memory.in_use() <= 8 * (100 + ENTRY_OVERHEAD));
        let held: usize = records
            .iter()
            .map(|r| {
                let held = r.lock();
                held.ring.bytes()
                    + held.ring.len() * ENTRY_OVERHEAD
                    + held
                        .history
                        .newest(None, usize::MAX)
                        .into_iter()
                        .map(|e| entry_cost(&Recorded::Said(e)))
                        .sum::<usize>()
            })
            .sum();
        assert_eq!(
            held,
            memory.in_use(),
            "the ledger matches what the records hold"
        );
    }
}

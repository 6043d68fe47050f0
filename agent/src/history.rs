//! A session's history as the carrier keeps it: the newest entries, bounded in count and in
//! text bytes like the resume ring, so a session that runs for days holds a window of its
//! conversation rather than all of it. All sessions' histories and rings also share one budget
//! ([`super::memory`]), which takes the oldest entries from outside ([`History::pop_oldest`]).

use std::collections::VecDeque;

use carrier_protocol::methods::HistoryEntry;

/// Default entries held per session: 500 turns (a prompt and a reply each).
pub(crate) const DEFAULT_HISTORY_ENTRIES: usize = 1000;
/// Default text bytes held per session (prompts and replies).
pub(crate) const DEFAULT_HISTORY_BYTES: usize = 4 * 1024 * 1024;

/// Room for this many entries is never given back when entries are taken from outside.
const SHRINK_SLACK: usize = 16;

/// Gives back the room of a queue entries were taken from once it is less than half full, so
/// its room stays under twice what it holds (and [`SHRINK_SLACK`]) however it was emptied:
/// what an entry is charged covers its slot twice over ([`super::ENTRY_OVERHEAD`]).
pub(crate) fn give_back_room<T>(queue: &mut VecDeque<T>) {
    let len = queue.len();
    if queue.capacity() > 2 * len + SHRINK_SLACK {
        queue.shrink_to(len + len / 2);
    }
}

/// Bounds of a session's history (whichever is reached first evicts the oldest entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryConfig {
    /// Entries held.
    pub max_entries: usize,
    /// Bytes of `text` and `turn_id` held.
    pub max_bytes: usize,
}

impl HistoryConfig {
    /// Sets [`max_entries`](Self::max_entries).
    #[must_use]
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries;
        self
    }

    /// Sets [`max_bytes`](Self::max_bytes).
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            max_entries: DEFAULT_HISTORY_ENTRIES,
            max_bytes: DEFAULT_HISTORY_BYTES,
        }
    }
}

/// What the carrier notes about an entry beside what `session.history` sends: when it was
/// recorded and whether it is the reply of an aborted turn (the seed system's clients read
/// both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EntryMeta {
    /// Milliseconds since the Unix epoch when the entry was recorded.
    pub at_ms: u64,
    /// The reply of a turn a client aborted.
    pub interrupted: bool,
}

/// The newest entries within a [`HistoryConfig`], oldest first, each with the stamp its
/// owner gave it (the order of everything the session recorded). The newest entry is always
/// kept by [`History::push`], even when it alone is over the byte bound.
pub(crate) struct History {
    entries: VecDeque<(u64, EntryMeta, HistoryEntry)>,
    bytes: usize,
    bounds: HistoryConfig,
}

fn size_of(entry: &HistoryEntry) -> usize {
    entry.text.len() + entry.turn_id.len()
}

impl History {
    pub(crate) fn new(bounds: HistoryConfig) -> Self {
        History {
            entries: VecDeque::new(),
            bytes: 0,
            bounds,
        }
    }

    /// Appends `entry` (stamped `stamp`) with no note, as [`History::push_noted`].
    #[cfg(test)]
    pub(crate) fn push(&mut self, stamp: u64, entry: HistoryEntry) -> Vec<HistoryEntry> {
        self.push_noted(stamp, EntryMeta::default(), entry)
    }

    /// Appends `entry` (stamped `stamp`, noted `meta`), then evicts the oldest entries past the
    /// bounds and returns them.
    pub(crate) fn push_noted(
        &mut self,
        stamp: u64,
        meta: EntryMeta,
        entry: HistoryEntry,
    ) -> Vec<HistoryEntry> {
        self.bytes += size_of(&entry);
        self.entries.push_back((stamp, meta, entry));
        let mut evicted = Vec::new();
        while self.entries.len() > 1
            && (self.entries.len() > self.bounds.max_entries || self.bytes > self.bounds.max_bytes)
        {
            if let Some((_, _, old)) = self.entries.pop_front() {
                self.bytes -= size_of(&old);
                evicted.push(old);
            }
        }
        evicted
    }

    /// Evicts the oldest entry, whatever the bounds (see [`give_back_room`]).
    pub(crate) fn pop_oldest(&mut self) -> Option<HistoryEntry> {
        let (_, _, oldest) = self.entries.pop_front()?;
        self.bytes -= size_of(&oldest);
        give_back_room(&mut self.entries);
        Some(oldest)
    }

    /// The stamp of the oldest entry held.
    pub(crate) fn oldest_stamp(&self) -> Option<u64> {
        self.entries.front().map(|&(stamp, _, _)| stamp)
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The newest `limit` entries (all held when `None`), oldest first, stopping once their
    /// text passes `budget` bytes (an answer is fitted to the connection's outbound budget
    /// later; no entry past it is worth copying).
    pub(crate) fn newest(&self, limit: Option<u32>, budget: usize) -> Vec<HistoryEntry> {
        self.newest_as(limit, budget, |_, entry| entry.clone())
    }

    /// [`History::newest`], each entry with its note.
    pub(crate) fn newest_noted(
        &self,
        limit: Option<u32>,
        budget: usize,
    ) -> Vec<(EntryMeta, HistoryEntry)> {
        self.newest_as(limit, budget, |meta, entry| (*meta, entry.clone()))
    }

    fn newest_as<T>(
        &self,
        limit: Option<u32>,
        budget: usize,
        copy: impl Fn(&EntryMeta, &HistoryEntry) -> T,
    ) -> Vec<T> {
        let wanted = limit.map_or(self.entries.len(), |n| n as usize);
        let mut text = 0usize;
        let mut newest: Vec<T> = Vec::new();
        for (_, meta, entry) in self.entries.iter().rev().take(wanted) {
            if text > budget {
                break;
            }
            text += size_of(entry);
            newest.push(copy(meta, entry));
        }
        newest.reverse();
        newest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carrier_protocol::methods::HistoryRole;

    fn entry(text: &str, turn: u32) -> HistoryEntry {
        HistoryEntry {
            role: HistoryRole::User,
            text: text.to_owned(),
            turn_id: format!("t{turn}"),
            truncated: None,
        }
    }

    fn texts(h: &History, limit: Option<u32>) -> Vec<String> {
        h.newest(limit, usize::MAX)
            .into_iter()
            .map(|e| e.text)
            .collect()
    }

    fn evicted_texts(evicted: Vec<HistoryEntry>) -> Vec<String> {
        evicted.into_iter().map(|e| e.text).collect()
    }

    #[test]
    fn holds_exactly_max_entries_and_evicts_the_oldest_past_it() {
        let mut h = History::new(HistoryConfig {
            max_entries: 3,
            max_bytes: usize::MAX,
        });
        for i in 1..=3 {
            assert!(h.push(u64::from(i), entry(&format!("m{i}"), i)).is_empty());
        }
        assert_eq!(texts(&h, None), ["m1", "m2", "m3"]);
        assert_eq!(evicted_texts(h.push(4, entry("m4", 4))), ["m1"]);
        assert_eq!(texts(&h, None), ["m2", "m3", "m4"]);
        assert_eq!(texts(&h, Some(2)), ["m3", "m4"]);
        assert_eq!(texts(&h, Some(0)), Vec::<String>::new());
        assert_eq!(texts(&h, Some(10)), ["m2", "m3", "m4"]);
    }

    #[test]
    fn byte_bound_counts_text_and_turn_id_and_keeps_the_newest_entry() {
        // Each entry is 4 + 2 = 6 bytes.
        let mut h = History::new(HistoryConfig {
            max_entries: 100,
            max_bytes: 12,
        });
        h.push(1, entry("aaaa", 1));
        h.push(2, entry("bbbb", 2));
        assert_eq!(texts(&h, None), ["aaaa", "bbbb"], "at the byte limit");
        assert_eq!(evicted_texts(h.push(3, entry("cccc", 3))), ["aaaa"]);
        assert_eq!(texts(&h, None), ["bbbb", "cccc"], "one byte past evicts");
        assert_eq!(h.push(4, entry(&"x".repeat(50), 4)).len(), 2);
        assert_eq!(h.len(), 1, "an oversized entry stands alone");
        assert_eq!(h.bytes, 52);
    }

    #[test]
    fn taking_the_oldest_from_outside_keeps_the_stamps_in_order_and_shrinks() {
        let mut h = History::new(HistoryConfig {
            max_entries: 1000,
            max_bytes: usize::MAX,
        });
        for i in 1..=200 {
            h.push(u64::from(i) * 10, entry("e", i));
        }
        assert_eq!(h.oldest_stamp(), Some(10));
        assert_eq!(h.pop_oldest().map(|e| e.turn_id), Some("t1".to_owned()));
        assert_eq!(h.oldest_stamp(), Some(20));
        while h.len() > 1 {
            h.pop_oldest();
        }
        assert!(h.entries.capacity() <= 2 + SHRINK_SLACK);
        assert_eq!((h.bytes, texts(&h, None).len()), (5, 1));
        assert!(h.pop_oldest().is_some());
        assert_eq!((h.pop_oldest(), h.oldest_stamp(), h.bytes), (None, None, 0));
    }

    #[test]
    fn an_answer_copies_no_more_than_its_budget_and_one_entry() {
        let mut h = History::new(HistoryConfig::default());
        for i in 1..=10 {
            h.push(u64::from(i), entry(&"x".repeat(98), i)); // 100 bytes each
        }
        let newest = h.newest(None, 250);
        let turns: Vec<_> = newest.iter().map(|e| e.turn_id.as_str()).collect();
        assert_eq!(
            turns,
            ["t8", "t9", "t10"],
            "up to the entry that passes the budget"
        );
        assert_eq!(h.newest(Some(2), 0).len(), 1, "the newest entry at least");
    }
}

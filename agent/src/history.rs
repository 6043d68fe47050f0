//! A session's history as the carrier keeps it: the newest entries, bounded in count and in
//! text bytes like the resume ring, so a session that runs for days holds a window of its
//! conversation rather than all of it. All sessions' histories and rings also share one budget
//! ([`super::memory`]), which takes the oldest entries from outside ([`History::pop_oldest`]).
//!
//! An entry is something said (a prompt, a reply: what `session.history` answers with) or an
//! agent's update (protocol 1.2), which only a foreign wire's replay reads (an ACP client's
//! `session/load`); both count against the same bounds.

use std::collections::VecDeque;

use carrier_protocol::events::AgentUpdate;
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

/// One entry of a session's history.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    /// A prompt or a reply.
    Said(HistoryEntry),
    /// An agent's update, as its `session.agent_update` carried it.
    AgentUpdate(AgentUpdate),
}

impl Recorded {
    /// The prompt or reply, if it is one.
    pub fn said(&self) -> Option<&HistoryEntry> {
        match self {
            Recorded::Said(entry) => Some(entry),
            Recorded::AgentUpdate(_) => None,
        }
    }

    /// Bytes it counts against the history's byte bound: its text (or update) and turn id.
    pub(crate) fn size(&self) -> usize {
        match self {
            Recorded::Said(entry) => entry.text.len() + entry.turn_id.len(),
            Recorded::AgentUpdate(u) => u.update.len() + u.turn_id.as_ref().map_or(0, String::len),
        }
    }
}

/// The newest entries within a [`HistoryConfig`], oldest first, each with the stamp its
/// owner gave it (the order of everything the session recorded). The newest entry is always
/// kept by [`History::push`], even when it alone is over the byte bound.
pub(crate) struct History {
    entries: VecDeque<(u64, EntryMeta, Recorded)>,
    bytes: usize,
    bounds: HistoryConfig,
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
    pub(crate) fn push(&mut self, stamp: u64, entry: HistoryEntry) -> Vec<Recorded> {
        self.push_noted(stamp, EntryMeta::default(), Recorded::Said(entry))
    }

    /// Appends `entry` (stamped `stamp`, noted `meta`), then evicts the oldest entries past the
    /// bounds and returns them.
    pub(crate) fn push_noted(
        &mut self,
        stamp: u64,
        meta: EntryMeta,
        entry: Recorded,
    ) -> Vec<Recorded> {
        self.bytes += entry.size();
        self.entries.push_back((stamp, meta, entry));
        let mut evicted = Vec::new();
        while self.entries.len() > 1
            && (self.entries.len() > self.bounds.max_entries || self.bytes > self.bounds.max_bytes)
        {
            if let Some((_, _, old)) = self.entries.pop_front() {
                self.bytes -= old.size();
                evicted.push(old);
            }
        }
        evicted
    }

    /// Evicts the oldest entry, whatever the bounds (see [`give_back_room`]).
    pub(crate) fn pop_oldest(&mut self) -> Option<Recorded> {
        let (_, _, oldest) = self.entries.pop_front()?;
        self.bytes -= oldest.size();
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

    /// The newest `limit` prompts and replies (all held when `None`), oldest first, stopping
    /// once their text passes `budget` bytes (an answer is fitted to the connection's outbound
    /// budget later; no entry past it is worth copying).
    pub(crate) fn newest(&self, limit: Option<u32>, budget: usize) -> Vec<HistoryEntry> {
        self.newest_as(limit, budget, |_, entry| entry.said().cloned())
    }

    /// [`History::newest`], each entry with its note.
    pub(crate) fn newest_noted(
        &self,
        limit: Option<u32>,
        budget: usize,
    ) -> Vec<(EntryMeta, HistoryEntry)> {
        self.newest_as(limit, budget, |meta, entry| {
            entry.said().map(|said| (*meta, said.clone()))
        })
    }

    /// Every entry held, agent updates too when `updates`, each with its note, oldest first,
    /// up to `budget` bytes as [`History::newest`] counts them.
    pub(crate) fn newest_recorded(
        &self,
        budget: usize,
        updates: bool,
    ) -> Vec<(EntryMeta, Recorded)> {
        self.newest_as(None, budget, |meta, entry| {
            (updates || entry.said().is_some()).then(|| (*meta, entry.clone()))
        })
    }

    /// The newest `limit` entries that `copy` keeps, oldest first, up to `budget` bytes.
    fn newest_as<T>(
        &self,
        limit: Option<u32>,
        budget: usize,
        copy: impl Fn(&EntryMeta, &Recorded) -> Option<T>,
    ) -> Vec<T> {
        let wanted = limit.map_or(self.entries.len(), |n| n as usize);
        let mut text = 0usize;
        let mut newest: Vec<T> = Vec::new();
        for (_, meta, entry) in self.entries.iter().rev() {
            if newest.len() >= wanted || text > budget {
                break;
            }
            if let Some(kept) = copy(meta, entry) {
                text += entry.size();
                newest.push(kept);
            }
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

    fn evicted_texts(evicted: Vec<Recorded>) -> Vec<String> {
        evicted
            .into_iter()
            .filter_map(|e| e.said().map(|e| e.text.clone()))
            .collect()
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
        assert_eq!(
            h.pop_oldest()
                .and_then(|e| e.said().map(|e| e.turn_id.clone())),
            Some("t1".to_owned())
        );
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

    #[test]
    fn agent_updates_count_against_the_bounds_and_session_history_leaves_them_out() {
        use carrier_protocol::events::RawObject;
        let update = |text: &str| {
            let raw = serde_json::from_str::<Box<serde_json::value::RawValue>>(text).unwrap();
            Recorded::AgentUpdate(AgentUpdate {
                turn_id: Some("t1".into()),
                update: RawObject::new(raw).unwrap(),
            })
        };
        let mut h = History::new(HistoryConfig {
            max_entries: 3,
            max_bytes: usize::MAX,
        });
        h.push(1, entry("ask", 1));
        h.push_noted(2, EntryMeta::default(), update(r#"{"k":1}"#));
        h.push_noted(3, EntryMeta::default(), update(r#"{"k":2}"#));
        h.push(4, entry("reply", 1));
        assert_eq!(texts(&h, None), ["reply"], "the prompt made room");
        assert_eq!(h.bytes, 2 * (7 + 2) + (5 + 2));
        assert_eq!(h.newest_recorded(usize::MAX, true).len(), 3);
        assert_eq!(h.newest_recorded(usize::MAX, false).len(), 1);
        assert_eq!(
            texts(&h, Some(1)),
            ["reply"],
            "a limit counts prompts and replies"
        );
    }
}

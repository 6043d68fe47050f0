//! A session's history as the carrier keeps it: the newest entries, bounded in count and in
//! text bytes like the resume ring, so a session that runs for days holds a window of its
//! conversation rather than all of it.

use std::collections::VecDeque;

use crate::protocol::methods::HistoryEntry;

/// Default entries held per session: 500 turns (a prompt and a reply each).
pub(crate) const DEFAULT_HISTORY_ENTRIES: usize = 1000;
/// Default text bytes held per session (prompts and replies).
pub(crate) const DEFAULT_HISTORY_BYTES: usize = 4 * 1024 * 1024;

/// Bounds of a session's history (whichever is reached first evicts the oldest entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryConfig {
    /// Entries held.
    pub max_entries: usize,
    /// Bytes of `text` and `turn_id` held.
    pub max_bytes: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            max_entries: DEFAULT_HISTORY_ENTRIES,
            max_bytes: DEFAULT_HISTORY_BYTES,
        }
    }
}

/// The newest entries within a [`HistoryConfig`], oldest first. The newest entry is always
/// kept, even when it alone is over the byte bound.
pub(crate) struct History {
    entries: VecDeque<HistoryEntry>,
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

    /// Appends `entry`, evicting the oldest entries past the bounds.
    pub(crate) fn push(&mut self, entry: HistoryEntry) {
        self.bytes += size_of(&entry);
        self.entries.push_back(entry);
        while self.entries.len() > 1
            && (self.entries.len() > self.bounds.max_entries || self.bytes > self.bounds.max_bytes)
        {
            if let Some(old) = self.entries.pop_front() {
                self.bytes -= size_of(&old);
            }
        }
    }

    /// The newest `limit` entries (all held when `None`), oldest first.
    pub(crate) fn newest(&self, limit: Option<u32>) -> Vec<HistoryEntry> {
        let skip = match limit {
            Some(n) => self.entries.len().saturating_sub(n as usize),
            None => 0,
        };
        self.entries.iter().skip(skip).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::methods::HistoryRole;

    fn entry(text: &str, turn: u32) -> HistoryEntry {
        HistoryEntry {
            role: HistoryRole::User,
            text: text.to_owned(),
            turn_id: format!("t{turn}"),
            truncated: None,
        }
    }

    fn texts(h: &History, limit: Option<u32>) -> Vec<String> {
        h.newest(limit).into_iter().map(|e| e.text).collect()
    }

    #[test]
    fn holds_exactly_max_entries_and_evicts_the_oldest_past_it() {
        let mut h = History::new(HistoryConfig {
            max_entries: 3,
            max_bytes: usize::MAX,
        });
        for i in 1..=3 {
            h.push(entry(&format!("m{i}"), i));
        }
        assert_eq!(texts(&h, None), ["m1", "m2", "m3"]);
        h.push(entry("m4", 4));
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
        h.push(entry("aaaa", 1));
        h.push(entry("bbbb", 2));
        assert_eq!(texts(&h, None), ["aaaa", "bbbb"], "at the byte limit");
        h.push(entry("cccc", 3));
        assert_eq!(texts(&h, None), ["bbbb", "cccc"], "one byte past evicts");
        h.push(entry(&"x".repeat(50), 4));
        assert_eq!(h.newest(None).len(), 1, "an oversized entry stands alone");
        assert_eq!(h.bytes, 52);
    }
}

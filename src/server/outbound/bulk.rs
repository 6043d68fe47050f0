//! The bulk lane of one connection's outbound queue (SPEC section 7, "Bulk channels").
//!
//! Frames of `bulk` channels wait here, apart from every other frame, each channel within its own
//! window per connection (outside the connection's byte budget: a slow bulk reader is paced,
//! never failed). The writer takes a bulk frame only when nothing else is waiting, except that
//! it gives bulk one frame in every [`BULK_EVERY`] it writes, so other traffic cannot starve a
//! transfer. Bulk frames keep their order among themselves; only they are ever overtaken.

use std::collections::VecDeque;
use std::sync::Arc;

use super::item::BulkFrame;

/// Of every this many frames the writer writes while bulk frames wait, at least one is bulk.
pub(crate) const BULK_EVERY: usize = 16;

/// A bulk channel's bytes queued on this connection.
#[derive(Debug)]
struct Window {
    channel: Arc<str>,
    queued: usize,
}

/// Why a bulk frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BulkRefusal {
    /// The channel's window on this connection is full: wait for room.
    WindowFull,
}

/// The bulk frames queued on one connection. Lives under the outbound queue's lock.
#[derive(Debug, Default)]
pub(crate) struct BulkLane {
    frames: VecDeque<BulkFrame>,
    windows: Vec<Window>,
    /// Non-bulk frames handed to the writer since the last bulk frame, while bulk frames waited.
    since_bulk: usize,
}

impl BulkLane {
    fn window_mut(&mut self, channel: &Arc<str>) -> &mut Window {
        let i = match self.windows.iter().position(|w| w.channel == *channel) {
            Some(i) => i,
            None => {
                self.windows.push(Window {
                    channel: channel.clone(),
                    queued: 0,
                });
                self.windows.len() - 1
            }
        };
        &mut self.windows[i]
    }

    /// Bytes of `channel` queued now.
    pub(crate) fn queued(&self, channel: &str) -> usize {
        self.windows
            .iter()
            .find(|w| &*w.channel == channel)
            .map_or(0, |w| w.queued)
    }

    /// Whether `channel` has room for one more frame: its queued bytes are under `window` (so
    /// a channel holds at most its window plus one frame).
    pub(crate) fn has_room(&self, channel: &str, window: usize) -> bool {
        self.queued(channel) < window
    }

    /// Queues a frame if its channel has room.
    pub(crate) fn push(&mut self, frame: BulkFrame, window: usize) -> Result<(), BulkRefusal> {
        let cost = frame.cost();
        let w = self.window_mut(&frame.channel);
        if w.queued >= window {
            return Err(BulkRefusal::WindowFull);
        }
        w.queued += cost;
        self.frames.push_back(frame);
        Ok(())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// How many of the `waiting` other frames the writer may take before a bulk frame is due,
    /// and whether one is due first. Called with a batch about to be formed.
    pub(crate) fn plan(&self, waiting: usize) -> (bool, usize) {
        if self.frames.is_empty() {
            return (false, waiting);
        }
        if waiting == 0 || self.since_bulk + 1 >= BULK_EVERY {
            // A bulk frame now, then at most BULK_EVERY - 1 others.
            return (true, waiting.min(BULK_EVERY - 1));
        }
        (false, waiting.min(BULK_EVERY - 1 - self.since_bulk))
    }

    /// The writer takes `others` non-bulk frames and, when `with_bulk`, the next bulk frame.
    pub(crate) fn took(&mut self, with_bulk: bool, others: usize) -> Option<BulkFrame> {
        let frame = if with_bulk {
            self.since_bulk = 0;
            self.frames.pop_front()
        } else {
            None
        };
        if !self.frames.is_empty() {
            self.since_bulk += others;
        } else {
            self.since_bulk = 0;
        }
        frame
    }

    /// Every queued bulk frame, for the writer to send ahead of a graceful close.
    pub(crate) fn drain_all(&mut self) -> Vec<BulkFrame> {
        self.since_bulk = 0;
        self.frames.drain(..).collect()
    }

    /// A bulk frame left the queue (written, or dropped with the connection): its channel's
    /// window has that much more room.
    pub(crate) fn released(&mut self, channel: &Arc<str>, cost: usize) {
        let w = self.window_mut(channel);
        w.queued = w.queued.saturating_sub(cost);
    }

    /// Drops everything (the connection failed).
    pub(crate) fn clear(&mut self) {
        self.frames.clear();
        self.windows.clear();
        self.since_bulk = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn frame(channel: &Arc<str>, n: usize) -> BulkFrame {
        BulkFrame {
            channel: channel.clone(),
            head: Bytes::new(),
            body: Bytes::from(vec![0u8; n]),
        }
    }

    #[test]
    fn a_window_holds_at_most_its_size_plus_one_frame() {
        let ch: Arc<str> = Arc::from("file");
        let mut lane = BulkLane::default();
        let f = frame(&ch, 1000).cost();
        assert!(lane.push(frame(&ch, 1000), 2 * f + 1).is_ok());
        assert!(lane.push(frame(&ch, 1000), 2 * f + 1).is_ok());
        assert!(
            lane.push(frame(&ch, 1000), 2 * f + 1).is_ok(),
            "under the window: one more"
        );
        assert_eq!(
            lane.push(frame(&ch, 1000), 2 * f + 1),
            Err(BulkRefusal::WindowFull)
        );
        assert!(!lane.has_room("file", 2 * f + 1));
        lane.released(&ch, f);
        lane.released(&ch, f);
        assert!(lane.has_room("file", 2 * f + 1));
        // Another channel has a window of its own.
        let other: Arc<str> = Arc::from("other");
        assert!(lane.push(frame(&other, 10), 1).is_ok());
    }

    #[test]
    fn bulk_goes_when_nothing_else_waits_and_once_in_every_sixteen_frames() {
        let ch: Arc<str> = Arc::from("file");
        let mut lane = BulkLane::default();
        assert_eq!(lane.plan(5), (false, 5), "no bulk: everything else goes");
        for _ in 0..10 {
            lane.push(frame(&ch, 1), usize::MAX).unwrap();
        }
        assert_eq!(lane.plan(0), (true, 0), "nothing else waits: a bulk frame");
        // Under steady other traffic, count frames until each bulk frame.
        let mut written = Vec::new();
        for _ in 0..4 {
            let (bulk, others) = lane.plan(1000);
            if lane.took(bulk, others).is_some() {
                written.push('B');
            }
            written.extend(std::iter::repeat_n('o', others));
        }
        let s: String = written.into_iter().collect();
        for window in s.as_bytes().windows(BULK_EVERY) {
            assert!(window.contains(&b'B'), "{s}");
        }
    }
}

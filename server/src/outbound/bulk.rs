//! The bulk lane of one connection's outbound queue (docs/protocol.md, "Bulk channels").
//!
//! Frames of `bulk` channels wait here, apart from every other frame, each channel within its own
//! window per connection (outside the connection's byte budget: a slow bulk reader is paced,
//! never failed). The writer takes a bulk frame only when nothing else is waiting, except that
//! it gives bulk one frame in every [`BULK_EVERY`] it writes, so other traffic cannot starve a
//! transfer. Bulk frames keep their order among themselves; only they are ever overtaken.
//!
//! Each bulk frame remembers how many other frames were queued ahead of it. Those always go
//! first, and they do not count towards [`BULK_EVERY`]: the frame was not waiting while they
//! were written. So the frame owed to bulk never goes ahead of a frame queued before it, and a
//! frame other than bulk is never overtaken (only bulk frames may be: docs/protocol.md,
//! "Channels").

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::item::BulkFrame;

/// Of every this many frames the writer writes while bulk frames wait, at least one is bulk.
pub(crate) const BULK_EVERY: usize = 16;

/// How long a full bulk window may go without one of its frames written before its receiver
/// is failed as stalled (close 1013): a receiver that stops reading holds a relay, and every
/// sender paced by it, for at most this long.
pub(crate) const BULK_STALL: Duration = Duration::from_secs(10);

/// A bulk channel's bytes queued on this connection.
#[derive(Debug)]
struct Window {
    channel: Arc<str>,
    queued: usize,
    /// When a frame of this channel was last queued or written here. A full window was last
    /// queued to when it filled, so past this plus [`BULK_STALL`] it has been full with
    /// nothing written for that long.
    progress: Instant,
}

/// Why a bulk frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BulkRefusal {
    /// The channel's window on this connection is full: wait for room.
    WindowFull,
}

/// A queued bulk frame and the other frames queued ahead of it.
#[derive(Debug)]
struct Waiting {
    frame: BulkFrame,
    /// Frames of the connection's main queue that were queued before this one and are still
    /// there: they are written first.
    ahead: usize,
}

/// The bulk frames queued on one connection. Lives under the outbound queue's lock.
#[derive(Debug, Default)]
pub(crate) struct BulkLane {
    frames: VecDeque<Waiting>,
    windows: Vec<Window>,
    /// Frames other than bulk, queued after the head bulk frame, that the writer has taken
    /// since the last bulk frame.
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
                    progress: Instant::now(),
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

    /// Queues a frame if its channel has room; `ahead` other frames are queued before it.
    pub(crate) fn push(
        &mut self,
        frame: BulkFrame,
        window: usize,
        ahead: usize,
    ) -> Result<(), BulkRefusal> {
        let cost = frame.cost();
        let w = self.window_mut(&frame.channel);
        if w.queued >= window {
            return Err(BulkRefusal::WindowFull);
        }
        w.queued += cost;
        w.progress = Instant::now();
        self.frames.push_back(Waiting { frame, ahead });
        Ok(())
    }

    /// Other frames at these positions of the main queue (ascending) were dropped (a lossy
    /// channel's oldest): the frames behind them moved up.
    pub(crate) fn removed_at(&mut self, positions: &[usize]) {
        if positions.is_empty() {
            return;
        }
        for w in self.frames.iter_mut() {
            w.ahead -= positions.iter().take_while(|&&p| p < w.ahead).count();
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// How many of the `waiting` other frames (the front of the main queue) the writer may take,
    /// and whether a bulk frame is due before them. Called with a batch about to be formed.
    pub(crate) fn plan(&self, waiting: usize) -> (bool, usize) {
        let Some(head) = self.frames.front() else {
            return (false, waiting);
        };
        if waiting == 0 {
            return (true, 0);
        }
        // Frames queued before the head go first and are not counted: the head was not
        // waiting while they were written.
        let older = head.ahead.min(waiting);
        let newer = waiting - older;
        let room = (BULK_EVERY - 1).saturating_sub(self.since_bulk);
        if older == 0 && room == 0 {
            // The head has waited through BULK_EVERY - 1 later frames: it goes now, then at
            // most BULK_EVERY - 1 others.
            return (true, waiting.min(BULK_EVERY - 1));
        }
        (false, older + newer.min(room))
    }

    /// The writer takes `others` frames from the front of the main queue and, when
    /// `with_bulk`, the head bulk frame first.
    pub(crate) fn took(&mut self, with_bulk: bool, others: usize) -> Option<BulkFrame> {
        let frame = if with_bulk {
            self.since_bulk = 0;
            self.frames.pop_front().map(|w| w.frame)
        } else {
            None
        };
        match self.frames.front() {
            Some(head) => self.since_bulk += others - head.ahead.min(others),
            None => self.since_bulk = 0,
        }
        for w in self.frames.iter_mut() {
            w.ahead = w.ahead.saturating_sub(others);
        }
        frame
    }

    /// Every queued bulk frame, for the writer to send ahead of a graceful close (the close is
    /// the last frame queued, so every other frame has been taken before it).
    pub(crate) fn drain_all(&mut self) -> Vec<BulkFrame> {
        self.since_bulk = 0;
        self.frames.drain(..).map(|w| w.frame).collect()
    }

    /// A bulk frame left the queue (written, or dropped with the connection): its channel's
    /// window has that much more room.
    pub(crate) fn released(&mut self, channel: &Arc<str>, cost: usize) {
        let w = self.window_mut(channel);
        w.queued = w.queued.saturating_sub(cost);
        w.progress = Instant::now();
    }

    /// When `channel`'s window here, full now, counts as stalled if nothing changes: the last
    /// time one of its frames was queued or written, plus [`BULK_STALL`].
    pub(crate) fn stalled_at(&self, channel: &str) -> Option<Instant> {
        self.windows
            .iter()
            .find(|w| &*w.channel == channel)
            .map(|w| w.progress + BULK_STALL)
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
        assert!(lane.push(frame(&ch, 1000), 2 * f + 1, 0).is_ok());
        assert!(lane.push(frame(&ch, 1000), 2 * f + 1, 0).is_ok());
        assert!(
            lane.push(frame(&ch, 1000), 2 * f + 1, 0).is_ok(),
            "under the window: one more"
        );
        assert_eq!(
            lane.push(frame(&ch, 1000), 2 * f + 1, 0),
            Err(BulkRefusal::WindowFull)
        );
        assert!(!lane.has_room("file", 2 * f + 1));
        lane.released(&ch, f);
        lane.released(&ch, f);
        assert!(lane.has_room("file", 2 * f + 1));
        // Another channel has a window of its own.
        let other: Arc<str> = Arc::from("other");
        assert!(lane.push(frame(&other, 10), 1, 0).is_ok());
    }

    #[test]
    fn bulk_goes_when_nothing_else_waits_and_once_in_every_sixteen_frames() {
        let ch: Arc<str> = Arc::from("file");
        let mut lane = BulkLane::default();
        assert_eq!(lane.plan(5), (false, 5), "no bulk: everything else goes");
        for _ in 0..10 {
            lane.push(frame(&ch, 1), usize::MAX, 0).unwrap();
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

    #[test]
    fn frames_queued_before_a_bulk_frame_go_first_and_do_not_count_against_it() {
        let ch: Arc<str> = Arc::from("file");
        let mut lane = BulkLane::default();
        // 20 others were queued, then the bulk frame: all 20 go before it, in one batch.
        lane.push(frame(&ch, 1), usize::MAX, 20).unwrap();
        assert_eq!(lane.plan(20), (false, 20));
        assert!(lane.took(false, 20).is_none());
        assert_eq!(lane.plan(0), (true, 0));
        // With 30 waiting (20 older, 10 newer): the older ones and up to 15 newer.
        let mut lane = BulkLane::default();
        lane.push(frame(&ch, 1), usize::MAX, 20).unwrap();
        assert_eq!(lane.plan(40), (false, 35));
        lane.took(false, 35);
        assert_eq!(
            lane.plan(5),
            (true, 5),
            "15 later frames went: bulk is owed one"
        );
        // Two of the older ones were dropped (lossy): the head moved up.
        let mut lane = BulkLane::default();
        lane.push(frame(&ch, 1), usize::MAX, 4).unwrap();
        lane.push(frame(&ch, 1), usize::MAX, 6).unwrap();
        lane.removed_at(&[1, 3, 5]);
        assert_eq!(lane.plan(3), (false, 3));
        lane.took(false, 2);
        assert_eq!(
            lane.plan(1),
            (false, 1),
            "a later frame still goes before bulk"
        );
        assert_eq!(lane.plan(0), (true, 0));
        assert!(lane.took(true, 0).is_some());
        assert_eq!(
            lane.plan(2),
            (false, 2),
            "the second still has one older frame ahead"
        );
        lane.took(false, 1);
        assert_eq!(
            lane.since_bulk, 0,
            "taking its older frame does not count against it"
        );
    }
}

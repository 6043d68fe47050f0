//! The bounded ring of a session's recent events, replayed when a client resumes
//! (docs/protocol.md, "Sessions and resume").
//!
//! The ring stores each event already encoded, so a replay sends the same shared bytes the live
//! fan-out sent. It is bounded twice — by event count and by total bytes — and whichever bound is
//! reached first evicts the oldest events. The newest event is always kept, even when it alone is
//! over the byte bound, so a resume right after it still replays it.
//!
//! ```
//! use bytes::Bytes;
//! use carrier_protocol::resume::{Replay, ResumeRing};
//!
//! let mut ring = ResumeRing::new(2, 1024);
//! for seq in 1..=3 {
//!     ring.push(seq, Bytes::from(format!("event {seq}")));
//! }
//! // Event 1 was evicted: a client that saw nothing learns that 1..=1 is lost, and still gets 2 and 3.
//! let Replay::Gap { from, to, frames } = ring.replay_after(0, 3) else { panic!() };
//! assert_eq!((from, to, frames.len()), (1, 1, 2));
//! ```

use std::collections::VecDeque;

use bytes::Bytes;

/// Default bound on the number of events a ring holds (docs/protocol.md, "Limits").
pub const DEFAULT_MAX_EVENTS: usize = 1024;
/// Default bound on the total encoded bytes a ring holds: 4 MiB (docs/protocol.md, "Limits").
pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Room for this many events is never given back by [`ResumeRing::pop_oldest`]: shrinking
/// a small buffer saves less than reallocating it costs.
const SHRINK_SLACK: usize = 16;

/// What one [`ResumeRing::push`] evicted to stay within the ring's bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Events evicted.
    pub events: usize,
    /// Their encoded bytes.
    pub bytes: usize,
}

/// A session's recent events, oldest first, within a count bound and a byte bound.
#[derive(Debug, Clone)]
pub struct ResumeRing {
    /// `(seq, encoded event)`, seqs strictly increasing from front to back.
    events: VecDeque<(u64, Bytes)>,
    /// Sum of the lengths of the held events, kept in step with `events`.
    bytes: usize,
    max_events: usize,
    max_bytes: usize,
}

/// What a resuming client is sent, computed by [`ResumeRing::replay_after`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    /// Nothing the client asked for was lost: `frames` are every event after its `after_seq`,
    /// in order (possibly none).
    Resumed {
        /// The events to send before any new one, oldest first.
        frames: Vec<Bytes>,
    },
    /// Events `from..=to` were evicted and are lost (the client should refetch history).
    /// The events still held after the gap are replayed anyway, in `frames`, so the live stream
    /// continues without a second hole.
    Gap {
        /// The first lost seq (the client's `after_seq` + 1).
        from: u64,
        /// The last lost seq (the oldest held seq − 1, or the latest seq when nothing is held).
        to: u64,
        /// The held events after the gap, oldest first.
        frames: Vec<Bytes>,
    },
}

impl Replay {
    /// The events to send, oldest first, whether or not there was a gap.
    pub fn frames(&self) -> &[Bytes] {
        match self {
            Replay::Resumed { frames } | Replay::Gap { frames, .. } => frames,
        }
    }
}

impl Default for ResumeRing {
    /// A ring with the published defaults: 1024 events or 4 MiB, whichever is reached first.
    fn default() -> Self {
        ResumeRing::new(DEFAULT_MAX_EVENTS, DEFAULT_MAX_BYTES)
    }
}

impl ResumeRing {
    /// An empty ring holding at most `max_events` events and `max_bytes` bytes (except that the
    /// newest event is always kept).
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        ResumeRing {
            events: VecDeque::new(),
            bytes: 0,
            max_events,
            max_bytes,
        }
    }

    /// Records an event, then evicts the oldest ones while either bound is exceeded, and says
    /// what it evicted (a caller that accounts for the ring's memory elsewhere needs it).
    ///
    /// `seq` must be greater than every seq already held (the session hub numbers events
    /// 1, 2, 3 …). A seq that is not is a caller bug: debug builds panic, release builds drop
    /// everything held before recording it, so a later replay reports a gap rather than
    /// replaying events out of order.
    pub fn push(&mut self, seq: u64, frame: Bytes) -> Evicted {
        let mut evicted = Evicted::default();
        if let Some(&(newest, _)) = self.events.back() {
            debug_assert!(seq > newest, "resume ring seq {seq} after {newest}");
            if seq <= newest {
                evicted.events = self.events.len();
                evicted.bytes = self.bytes;
                self.events.clear();
                self.bytes = 0;
            }
        }
        self.bytes += frame.len();
        self.events.push_back((seq, frame));
        while self.events.len() > 1
            && (self.events.len() > self.max_events || self.bytes > self.max_bytes)
        {
            if let Some((_, frame)) = self.events.pop_front() {
                self.bytes -= frame.len();
                evicted.events += 1;
                evicted.bytes += frame.len();
            }
        }
        evicted
    }

    /// Evicts the oldest event held, if any, and returns it. A later replay from before it
    /// reports the gap, as for an event the ring's own bounds evicted: a ring whose memory is
    /// budgeted together with other rings gives up its oldest events from outside this way.
    ///
    /// The ring's buffer shrinks once it is less than half full, so a ring emptied from
    /// outside does not keep the room it had at its fullest: its room stays under twice what
    /// it holds (and a few slots).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use carrier_protocol::resume::{Replay, ResumeRing};
    ///
    /// let mut ring = ResumeRing::new(8, 1024);
    /// ring.push(1, Bytes::from_static(b"one"));
    /// ring.push(2, Bytes::from_static(b"two"));
    /// assert_eq!(ring.pop_oldest().map(|(seq, _)| seq), Some(1));
    /// let Replay::Gap { from, to, frames } = ring.replay_after(0, 2) else { panic!() };
    /// assert_eq!((from, to, frames.len()), (1, 1, 1));
    /// ```
    pub fn pop_oldest(&mut self) -> Option<(u64, Bytes)> {
        let oldest = self.events.pop_front()?;
        self.bytes -= oldest.1.len();
        let len = self.events.len();
        if self.events.capacity() > 2 * len + SHRINK_SLACK {
            self.events.shrink_to(len + len / 2);
        }
        Some(oldest)
    }

    /// What to replay to a client that has seen every event up to `after_seq`, given
    /// `last_seq`, the latest seq the session has assigned (0 when none yet).
    ///
    /// A client claiming `after_seq >= last_seq` has nothing to catch up on and gets an empty
    /// [`Replay::Resumed`].
    pub fn replay_after(&self, after_seq: u64, last_seq: u64) -> Replay {
        if after_seq >= last_seq {
            return Replay::Resumed { frames: Vec::new() };
        }
        let first_wanted = after_seq + 1;
        let start = self.events.partition_point(|&(seq, _)| seq <= after_seq);
        let frames: Vec<Bytes> = self
            .events
            .range(start..)
            .map(|(_, frame)| frame.clone())
            .collect();
        match self.oldest_seq() {
            Some(oldest) if oldest <= first_wanted => Replay::Resumed { frames },
            Some(oldest) => Replay::Gap {
                from: first_wanted,
                to: oldest - 1,
                frames,
            },
            None => Replay::Gap {
                from: first_wanted,
                to: last_seq,
                frames,
            },
        }
    }

    /// The number of events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is held.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The total encoded size of the held events.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The seq of the oldest event held, if any.
    pub fn oldest_seq(&self) -> Option<u64> {
        self.events.front().map(|&(seq, _)| seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u64, len: usize) -> Bytes {
        Bytes::from(vec![seq as u8; len])
    }

    fn ring_with(
        max_events: usize,
        max_bytes: usize,
        seqs: std::ops::RangeInclusive<u64>,
    ) -> ResumeRing {
        let mut ring = ResumeRing::new(max_events, max_bytes);
        for seq in seqs {
            ring.push(seq, frame(seq, 10));
        }
        ring
    }

    fn seqs_of(frames: &[Bytes]) -> Vec<u64> {
        frames.iter().map(|f| u64::from(f[0])).collect()
    }

    #[test]
    fn default_bounds_are_1024_events_and_4_mib() {
        let ring = ResumeRing::default();
        assert_eq!((ring.max_events, ring.max_bytes), (1024, 4 * 1024 * 1024));
    }

    #[test]
    fn exactly_max_events_are_all_kept() {
        let ring = ring_with(4, 1000, 1..=4);
        assert_eq!(
            (ring.len(), ring.bytes(), ring.oldest_seq()),
            (4, 40, Some(1))
        );
    }

    #[test]
    fn one_past_max_events_evicts_the_oldest() {
        let ring = ring_with(4, 1000, 1..=5);
        assert_eq!(
            (ring.len(), ring.bytes(), ring.oldest_seq()),
            (4, 40, Some(2))
        );
    }

    #[test]
    fn exactly_max_bytes_are_all_kept() {
        let ring = ring_with(100, 30, 1..=3);
        assert_eq!(
            (ring.len(), ring.bytes(), ring.oldest_seq()),
            (3, 30, Some(1))
        );
    }

    #[test]
    fn one_byte_past_max_bytes_evicts_the_oldest() {
        let mut ring = ring_with(100, 30, 1..=3);
        ring.push(4, frame(4, 1));
        assert_eq!(
            (ring.len(), ring.bytes(), ring.oldest_seq()),
            (3, 21, Some(2))
        );
    }

    #[test]
    fn an_event_over_the_byte_bound_alone_is_kept_as_the_newest() {
        let mut ring = ring_with(100, 30, 1..=2);
        ring.push(3, frame(3, 31));
        assert_eq!(
            (ring.len(), ring.bytes(), ring.oldest_seq()),
            (1, 31, Some(3))
        );
        assert_eq!(
            ring.replay_after(2, 3),
            Replay::Resumed {
                frames: vec![frame(3, 31)]
            }
        );
    }

    #[test]
    fn the_smaller_bound_wins() {
        let ring = ring_with(3, 1000, 1..=10);
        assert_eq!(ring.len(), 3);
        let ring = ring_with(1000, 25, 1..=10);
        assert_eq!((ring.len(), ring.bytes()), (2, 20));
    }

    #[test]
    fn caught_up_client_gets_an_empty_resume() {
        let ring = ring_with(4, 1000, 1..=5);
        assert_eq!(ring.replay_after(5, 5), Replay::Resumed { frames: vec![] });
        assert_eq!(ring.replay_after(9, 5), Replay::Resumed { frames: vec![] });
        let empty = ResumeRing::new(4, 1000);
        assert_eq!(empty.replay_after(0, 0), Replay::Resumed { frames: vec![] });
    }

    #[test]
    fn everything_after_after_seq_still_held_is_resumed_in_order() {
        let ring = ring_with(4, 1000, 1..=5); // holds 2..=5
        let replay = ring.replay_after(1, 5);
        assert!(matches!(replay, Replay::Resumed { .. }));
        assert_eq!(seqs_of(replay.frames()), vec![2, 3, 4, 5]);
        assert_eq!(seqs_of(ring.replay_after(3, 5).frames()), vec![4, 5]);
    }

    #[test]
    fn evicted_events_are_a_gap_and_the_held_ones_still_replay() {
        let ring = ring_with(4, 1000, 1..=7); // holds 4..=7
        let replay = ring.replay_after(1, 7);
        let Replay::Gap {
            from,
            to,
            ref frames,
        } = replay
        else {
            panic!("expected a gap, got {replay:?}");
        };
        assert_eq!((from, to), (2, 3));
        assert_eq!(seqs_of(frames), vec![4, 5, 6, 7]);
        let Replay::Gap { from, to, .. } = ring.replay_after(0, 7) else {
            panic!("expected a gap");
        };
        assert_eq!((from, to), (1, 3));
    }

    #[test]
    fn nothing_held_but_events_assigned_is_a_gap_to_the_latest_seq() {
        let ring = ResumeRing::new(4, 1000);
        assert_eq!(
            ring.replay_after(2, 6),
            Replay::Gap {
                from: 3,
                to: 6,
                frames: vec![]
            }
        );
    }

    #[test]
    fn push_reports_what_its_bounds_evicted() {
        let mut ring = ring_with(3, 1000, 1..=3);
        assert_eq!(
            ring.push(4, frame(4, 10)),
            Evicted {
                events: 1,
                bytes: 10
            }
        );
        let mut ring = ring_with(100, 30, 1..=3);
        assert_eq!(
            ring.push(4, frame(4, 25)),
            Evicted {
                events: 3,
                bytes: 30
            }
        );
        assert_eq!(ring.push(5, frame(5, 5)), Evicted::default());
    }

    #[test]
    fn popping_from_outside_moves_the_gap_and_an_emptied_ring_loses_everything() {
        let mut ring = ring_with(100, 1000, 1..=4);
        assert_eq!(
            ring.pop_oldest().map(|(seq, f)| (seq, f.len())),
            Some((1, 10))
        );
        assert_eq!(
            (ring.len(), ring.bytes(), ring.oldest_seq()),
            (3, 30, Some(2))
        );
        assert_eq!(
            ring.replay_after(0, 4),
            Replay::Gap {
                from: 1,
                to: 1,
                frames: vec![frame(2, 10), frame(3, 10), frame(4, 10)]
            }
        );
        assert!(matches!(ring.replay_after(1, 4), Replay::Resumed { .. }));
        while ring.pop_oldest().is_some() {}
        assert_eq!((ring.len(), ring.bytes(), ring.oldest_seq()), (0, 0, None));
        assert_eq!(
            ring.replay_after(2, 4),
            Replay::Gap {
                from: 3,
                to: 4,
                frames: vec![]
            }
        );
        // The next event starts the ring again; what came before it is lost.
        ring.push(5, frame(5, 10));
        let Replay::Gap { from, to, frames } = ring.replay_after(0, 5) else {
            panic!("expected a gap");
        };
        assert_eq!((from, to, seqs_of(&frames)), (1, 4, vec![5]));
    }

    #[test]
    fn a_ring_emptied_from_outside_gives_its_buffer_back() {
        let mut ring = ring_with(1000, usize::MAX, 1..=1000);
        assert!(ring.events.capacity() >= 1000);
        while ring.len() > 1 {
            ring.pop_oldest();
        }
        assert!(
            ring.events.capacity() <= 2 + SHRINK_SLACK,
            "{}",
            ring.events.capacity()
        );
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn out_of_order_push_clears_the_ring_in_release_builds() {
        let mut ring = ring_with(4, 1000, 1..=3);
        ring.push(2, frame(2, 10));
        assert_eq!((ring.len(), ring.oldest_seq()), (1, Some(2)));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "resume ring seq")]
    fn out_of_order_push_panics_in_debug_builds() {
        let mut ring = ring_with(4, 1000, 1..=3);
        ring.push(3, frame(3, 10));
    }
}

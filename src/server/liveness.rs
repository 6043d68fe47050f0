//! When the peer was last heard from, for the writer's ping and pong timeout.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Milliseconds since the connection started at which the peer was last heard from, and whether
/// the carrier itself has stopped reading (then the peer's silence is ours, not theirs).
pub(crate) struct Liveness {
    start: Instant,
    last_heard_ms: AtomicU64,
    paused: AtomicBool,
}

impl Liveness {
    pub(crate) fn new() -> Self {
        Liveness {
            start: Instant::now(),
            last_heard_ms: AtomicU64::new(0),
            paused: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Bytes arrived from the peer.
    pub(crate) fn heard(&self) {
        self.last_heard_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// How long the peer has been silent while we were reading.
    pub(crate) fn silent_for(&self) -> Duration {
        if self.paused.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        let last = self.last_heard_ms.load(Ordering::Relaxed);
        Duration::from_millis(self.now_ms().saturating_sub(last))
    }

    /// The reader stops reading (waiting for memory or for a full handler) until the guard is
    /// dropped; the time it waits does not count as the peer's silence.
    pub(crate) fn pause(&self) -> Paused<'_> {
        self.paused.store(true, Ordering::Relaxed);
        Paused(self)
    }
}

/// See [`Liveness::pause`]. Dropping it (also when the wait is cancelled) resumes the clock.
pub(crate) struct Paused<'a>(&'a Liveness);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.heard();
        self.0.paused.store(false, Ordering::Relaxed);
    }
}

//! The reconnect delay schedule (docs/protocol.md, "Client behaviour"): pure, no clock.

use std::time::Duration;

/// Exponential reconnect delays: 1 s → 2 s → 4 s → 8 s → 16 s → 30 s, then 30 s for every
/// further attempt, back to 1 s after [`reset`](Backoff::reset).
///
/// ```
/// use std::time::Duration;
/// use carrier_client::Backoff;
///
/// let mut backoff = Backoff::new();
/// let secs: Vec<u64> = (0..7).map(|_| backoff.next_delay().as_secs()).collect();
/// assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30]);
/// backoff.reset();
/// assert_eq!(backoff.next_delay(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Backoff {
    // Failed attempts since the last reset; saturates long before it could overflow a shift.
    attempt: u32,
}

impl Backoff {
    /// The first delay.
    pub const INITIAL: Duration = Duration::from_secs(1);
    /// The cap every later delay stays at.
    pub const MAX: Duration = Duration::from_secs(30);

    /// A schedule at its first delay.
    pub fn new() -> Backoff {
        Backoff { attempt: 0 }
    }

    /// The delay before the next attempt; each call advances the schedule.
    pub fn next_delay(&mut self) -> Duration {
        let doubled = Self::INITIAL.saturating_mul(1u32 << self.attempt.min(16));
        self.attempt = self.attempt.saturating_add(1);
        doubled.min(Self::MAX)
    }

    /// Starts over at the first delay (after a successful reconnect).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// How many delays were handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_doubles_from_one_second_and_caps_at_thirty() {
        let mut backoff = Backoff::new();
        let secs: Vec<u64> = (0..10).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30, 30, 30]);
    }

    #[test]
    fn schedule_stays_capped_after_many_attempts() {
        let mut backoff = Backoff::new();
        for _ in 0..1000 {
            assert!(backoff.next_delay() <= Backoff::MAX);
        }
        assert_eq!(backoff.next_delay(), Backoff::MAX);
    }

    #[test]
    fn reset_starts_over() {
        let mut backoff = Backoff::new();
        backoff.next_delay();
        backoff.next_delay();
        backoff.reset();
        assert_eq!(backoff.attempts(), 0);
        assert_eq!(backoff.next_delay(), Backoff::INITIAL);
    }
}

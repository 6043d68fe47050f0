//! [`RestartBudget`]: how often a child that exits is started again — at most so many times in
//! any minute, and then not until the carrier restarts (docs/protocol.md, "Agent processes").

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The window of the budget.
const WINDOW: Duration = Duration::from_secs(60);

/// The restarts of one agent process in the last minute, and whether the budget ran out.
#[derive(Debug, Clone)]
pub struct RestartBudget {
    per_minute: usize,
    /// When each restart of the last minute happened, oldest first (at most `per_minute`).
    restarts: VecDeque<Instant>,
    exhausted: bool,
}

impl RestartBudget {
    /// At most `per_minute` restarts in any 60 s window (0: never restart).
    pub fn new(per_minute: usize) -> Self {
        RestartBudget {
            per_minute,
            restarts: VecDeque::new(),
            exhausted: false,
        }
    }

    /// Takes one restart at `now`, or says why there is none: once refused, every later call
    /// is refused too (the message is the `agent_exited` error clients see).
    pub fn take(&mut self, now: Instant) -> Result<(), String> {
        while self
            .restarts
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            self.restarts.pop_front();
        }
        if self.exhausted || self.restarts.len() >= self.per_minute {
            self.exhausted = true;
            return Err(format!(
                "the agent process exited and has been restarted {} times within a minute; \
                 it is not restarted again until the carrier restarts",
                self.per_minute
            ));
        }
        self.restarts.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_per_minute_then_never_again() {
        let start = Instant::now();
        let mut budget = RestartBudget::new(2);
        assert!(budget.take(start).is_ok());
        assert!(budget.take(start + Duration::from_secs(59)).is_ok());
        let refused = budget.take(start + Duration::from_secs(59)).unwrap_err();
        assert!(refused.contains("2 times within a minute"), "{refused}");
        // Even once the window has moved on: the budget is spent for good.
        assert!(budget.take(start + Duration::from_secs(600)).is_err());
        assert!(RestartBudget::new(0).take(start).is_err());
    }

    #[test]
    fn restarts_older_than_a_minute_leave_the_window() {
        let start = Instant::now();
        let mut budget = RestartBudget::new(1);
        assert!(budget.take(start).is_ok());
        assert!(budget.take(start + WINDOW).is_ok());
    }
}

//! [`Requests`]: the requests the carrier sent a child and awaits the answers of — each under a
//! number of its own, tagged with the run of the child it went to (so a child that exits takes
//! its open requests with it), at most so many at once; and [`Outcome`], what became of one
//! within the request timeout.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::oneshot;

/// The requests awaiting a child's answer.
#[derive(Debug)]
pub struct Requests<A> {
    next: u64,
    open: HashMap<u64, Open<A>>,
    limit: usize,
}

#[derive(Debug)]
struct Open<A> {
    generation: u64,
    answer: oneshot::Sender<A>,
}

/// A request not sent: `limit` requests already await an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} requests already await the agent process's answer")]
pub struct TooManyRequests(pub usize);

/// What became of a request.
#[derive(Debug)]
pub enum Outcome<A> {
    /// The child answered.
    Answered(A),
    /// The child exited (or the request was forgotten) before answering.
    Gone,
    /// No answer within the timeout.
    TimedOut,
}

impl<A> Requests<A> {
    /// No request open; at most `limit` at once.
    pub fn new(limit: usize) -> Self {
        Requests {
            next: 0,
            open: HashMap::new(),
            limit,
        }
    }

    /// Opens a request to the child of run `generation`: its number (unique, rising) and where
    /// its answer arrives. Refused past the limit, before anything is sent.
    pub fn open(
        &mut self,
        generation: u64,
    ) -> Result<(u64, oneshot::Receiver<A>), TooManyRequests> {
        if self.open.len() >= self.limit {
            return Err(TooManyRequests(self.limit));
        }
        self.next += 1;
        let (answer, rx) = oneshot::channel();
        self.open.insert(self.next, Open { generation, answer });
        Ok((self.next, rx))
    }

    /// Delivers the child's answer to request `id`; `false` when no such request is open (an
    /// answer to nothing, or a late one).
    pub fn answer(&mut self, id: u64, answer: A) -> bool {
        match self.open.remove(&id) {
            Some(open) => {
                // A waiter that gave up no longer listens: nothing to do.
                let _ = open.answer.send(answer);
                true
            }
            None => false,
        }
    }

    /// Closes request `id` unanswered (its waiter gave up); its waiter sees [`Outcome::Gone`].
    pub fn forget(&mut self, id: u64) {
        self.open.remove(&id);
    }

    /// Closes every request of run `generation` (that child exited).
    pub fn forget_generation(&mut self, generation: u64) {
        self.open.retain(|_, o| o.generation != generation);
    }

    /// How many requests are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

/// Waits for the answer on `rx` at most `timeout`. On [`Outcome::TimedOut`] the caller forgets
/// the request ([`Requests::forget`]).
pub async fn answer_within<A>(rx: oneshot::Receiver<A>, timeout: Duration) -> Outcome<A> {
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(answer)) => Outcome::Answered(answer),
        Ok(Err(_)) => Outcome::Gone,
        Err(_) => Outcome::TimedOut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_reach_their_request_and_a_full_table_refuses() {
        let mut requests = Requests::<&str>::new(2);
        let (a, rx_a) = requests.open(1).unwrap();
        let (b, rx_b) = requests.open(2).unwrap();
        assert!(a < b);
        assert_eq!(requests.open(1).unwrap_err(), TooManyRequests(2));
        assert!(requests.answer(a, "yes"));
        assert!(!requests.answer(a, "again"), "answered once");
        assert!(matches!(
            answer_within(rx_a, Duration::from_secs(1)).await,
            Outcome::Answered("yes")
        ));
        requests.forget_generation(2);
        assert!(matches!(
            answer_within(rx_b, Duration::from_secs(1)).await,
            Outcome::Gone
        ));
        assert!(requests.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_in_time_is_timed_out() {
        let mut requests = Requests::<()>::new(1);
        let (id, rx) = requests.open(1).unwrap();
        assert!(matches!(
            answer_within(rx, Duration::from_millis(10)).await,
            Outcome::TimedOut
        ));
        requests.forget(id);
        assert_eq!(requests.len(), 0);
    }
}

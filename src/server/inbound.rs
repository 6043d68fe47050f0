//! The process-wide bound on inbound message memory.
//!
//! Every data frame a client sends is received into a buffer of its own, and that buffer is
//! paid for in advance from one [`InboundBudget`] shared by every connection of a transport: a
//! permit per byte of the buffer's capacity, taken before the buffer is allocated. The permits
//! travel with the message — the `Bytes` a handler, a channel or an outbound queue holds is a
//! view of that buffer — and return to the budget only when the last view is dropped. So the
//! bytes clients have sent that the carrier still holds, wherever they went, never exceed the
//! budget. A connection whose next message does not fit waits for room: its reader pauses (TCP
//! pushes back on the client) instead of failing.
//!
//! A message can always fit: the configuration refuses a budget below the message cap.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// Permits for `n` bytes of inbound buffer, returned when dropped.
pub(crate) struct Permit(Option<OwnedSemaphorePermit>);

impl Permit {
    /// Bytes this permit pays for.
    pub(crate) fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Gives back all but `keep` bytes (a message that came out smaller than reserved).
    pub(crate) fn shrink_to(&mut self, keep: usize) {
        if let Some(p) = self.0.as_mut() {
            let extra = p.num_permits().saturating_sub(keep);
            if extra > 0 {
                drop(p.split(extra));
            }
        }
    }
}

/// The shared budget. Cheap to clone.
#[derive(Clone)]
pub(crate) struct InboundBudget {
    sem: Arc<Semaphore>,
    total: usize,
}

impl InboundBudget {
    pub(crate) fn new(bytes: usize) -> Self {
        let total = bytes.min(Semaphore::MAX_PERMITS);
        InboundBudget {
            sem: Arc::new(Semaphore::new(total)),
            total,
        }
    }

    /// Bytes currently paid for by live inbound buffers.
    pub(crate) fn in_use(&self) -> usize {
        self.total - self.sem.available_permits()
    }

    /// Permits for `n` bytes at once, or `None` when they are not free right now.
    pub(crate) fn try_take(&self, n: usize) -> Option<Permit> {
        if n == 0 {
            return Some(Permit(None));
        }
        let n32 = u32::try_from(n).ok()?;
        match self.sem.clone().try_acquire_many_owned(n32) {
            Ok(p) => Some(Permit(Some(p))),
            Err(TryAcquireError::NoPermits) | Err(TryAcquireError::Closed) => None,
        }
    }

    /// Waits for permits for `n` bytes. Waiters are served in order, so a large message is not
    /// starved by a stream of small ones. `n` must not exceed the budget (the configuration
    /// guarantees it for any message within the cap).
    pub(crate) async fn take(&self, n: usize) -> Permit {
        if n == 0 {
            return Permit(None);
        }
        let n32 = u32::try_from(n.min(self.total)).unwrap_or(u32::MAX);
        match self.sem.clone().acquire_many_owned(n32).await {
            Ok(p) => Permit(Some(p)),
            // The semaphore is never closed; an unpaid buffer is still bounded by the cap.
            Err(_) => Permit(None),
        }
    }
}

/// A received message's buffer with the permits that paid for it.
struct Paid {
    data: Vec<u8>,
    _permit: Permit,
}

impl AsRef<[u8]> for Paid {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// Freezes a received buffer into `Bytes` that keep its permits until the last view is dropped.
/// The permits must cover `data.capacity()`.
pub(crate) fn freeze(data: Vec<u8>, permit: Permit) -> Bytes {
    debug_assert!(permit.bytes() >= data.capacity() || permit.0.is_none());
    if data.is_empty() {
        return Bytes::new();
    }
    Bytes::from_owner(Paid {
        data,
        _permit: permit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_return_when_the_last_view_is_dropped() {
        let budget = InboundBudget::new(100);
        let p = budget.try_take(60).unwrap();
        assert!(budget.try_take(41).is_none());
        let bytes = freeze(vec![1u8; 60], p);
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(budget.in_use(), 60, "a slice still holds the buffer");
        drop(slice);
        assert_eq!(budget.in_use(), 0);
        assert!(budget.try_take(100).is_some());
    }

    #[test]
    fn shrink_returns_the_unused_part() {
        let budget = InboundBudget::new(100);
        let mut p = budget.try_take(80).unwrap();
        p.shrink_to(30);
        assert_eq!(p.bytes(), 30);
        assert_eq!(budget.in_use(), 30);
    }

    #[tokio::test]
    async fn a_waiter_gets_room_when_it_is_freed() {
        let budget = InboundBudget::new(10);
        let held = budget.try_take(10).unwrap();
        let b = budget.clone();
        let waiter = tokio::spawn(async move { b.take(5).await.bytes() });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(held);
        assert_eq!(waiter.await.unwrap(), 5);
    }
}

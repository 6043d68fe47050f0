//! The outbound buffer's bound, in bytes: a frame is queued only with [`Room`] for its bytes,
//! and the room comes back when the socket's writer has written it (or the socket is gone).

use std::sync::Arc;

use tokio::sync::{Semaphore, TryAcquireError};

use super::transport::{Room, TransportError};

/// The byte budget of one transport's outbound buffer (shared by its successive sockets: a
/// socket's queued frames hold their room until they are written or the socket is dropped).
#[derive(Clone)]
pub(crate) struct OutboundBudget {
    bytes: usize,
    room: Arc<Semaphore>,
}

impl OutboundBudget {
    /// A budget of `bytes` (at least 1, at most what a semaphore counts).
    pub(crate) fn new(bytes: usize) -> OutboundBudget {
        let bytes = bytes.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        OutboundBudget {
            bytes,
            room: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// What a frame of `len` bytes takes: its length, but never more than the whole budget, so
    /// a frame larger than the budget still goes out once the buffer is empty.
    fn cost(&self, len: usize) -> u32 {
        // `bytes` fits in u32 (see `new`).
        u32::try_from(len.clamp(1, self.bytes)).unwrap_or(u32::MAX)
    }

    /// Waits until `len` bytes fit.
    pub(crate) async fn reserve(&self, len: usize) -> Result<Room, TransportError> {
        let permit = Arc::clone(&self.room)
            .acquire_many_owned(self.cost(len))
            .await
            .map_err(|_| TransportError::NotConnected)?;
        Ok(Room::held(permit))
    }

    /// Room for `len` bytes now, or [`TransportError::BufferFull`].
    pub(crate) fn try_reserve(&self, len: usize) -> Result<Room, TransportError> {
        match Arc::clone(&self.room).try_acquire_many_owned(self.cost(len)) {
            Ok(permit) => Ok(Room::held(permit)),
            Err(TryAcquireError::NoPermits) => {
                Err(TransportError::BufferFull { budget: self.bytes })
            }
            Err(TryAcquireError::Closed) => Err(TransportError::NotConnected),
        }
    }

    /// Bytes queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.bytes - self.room.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn room_is_refused_past_the_budget_and_comes_back_when_dropped() {
        let budget = OutboundBudget::new(100);
        let first = budget.try_reserve(60).expect("fits");
        let second = budget.try_reserve(40).expect("fits exactly");
        assert_eq!(budget.queued(), 100);
        assert!(matches!(
            budget.try_reserve(1),
            Err(TransportError::BufferFull { budget: 100 })
        ));
        drop(first);
        assert!(budget.try_reserve(60).is_ok());
        drop(second);
        assert_eq!(budget.queued(), 0);
    }

    #[tokio::test]
    async fn a_frame_larger_than_the_budget_waits_for_an_empty_buffer() {
        let budget = OutboundBudget::new(100);
        let small = budget.try_reserve(1).expect("fits");
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.reserve(1_000).await.map(drop) })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(small);
        waiting.await.expect("task").expect("room once empty");
    }
}

//! The inbound side's bound: what a [`Client`](super::Client) has received for its streams and
//! the application has not taken yet, in bytes. Past the budget the transport stops reading the
//! socket until the application catches up, so nothing is dropped and memory stays bounded
//! (TCP then slows the server down, which is its business).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::{mpsc, Notify};

/// Bytes received for a client's streams and not yet taken by the application, with the
/// budget past which the transport pauses reading.
#[derive(Debug)]
pub struct Backlog {
    budget: usize,
    held: AtomicUsize,
    drained: Notify,
}

impl Backlog {
    /// A backlog that pauses reading once more than `budget` bytes are held.
    pub fn new(budget: usize) -> Arc<Backlog> {
        Arc::new(Backlog {
            budget,
            held: AtomicUsize::new(0),
            drained: Notify::new(),
        })
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Waits while more than the budget is held. A transport calls this after delivering each
    /// inbound message, so the backlog holds at most the budget plus one message.
    pub async fn room(&self) {
        loop {
            let drained = self.drained.notified();
            if self.held() <= self.budget {
                return;
            }
            drained.await;
        }
    }

    fn add(&self, bytes: usize) {
        self.held.fetch_add(bytes, Ordering::AcqRel);
    }

    fn release(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
        self.drained.notify_waiters();
    }
}

/// The sending half of a [`BacklogStream`]: never waits, counts what it queues.
pub(crate) struct BacklogSender<T> {
    tx: mpsc::UnboundedSender<(T, usize)>,
    backlog: Arc<Backlog>,
}

impl<T> BacklogSender<T> {
    /// Queues `item` of `bytes`; `false` when the stream is gone (then nothing is held).
    pub(crate) fn send(&self, item: T, bytes: usize) -> bool {
        self.backlog.add(bytes);
        match self.tx.send((item, bytes)) {
            Ok(()) => true,
            Err(_) => {
                self.backlog.release(bytes);
                false
            }
        }
    }
}

/// A stream of items whose bytes are counted in a client's [`Backlog`] until taken.
///
/// Dropping it unsubscribes and gives back what it still held. A stream that is kept but not
/// read holds its items, and once the client's backlog is over budget the connection stops
/// reading (responses included) until it is read or dropped.
pub struct BacklogStream<T> {
    rx: mpsc::UnboundedReceiver<(T, usize)>,
    backlog: Arc<Backlog>,
}

/// A connected sender and stream over `backlog`.
pub(crate) fn backlog_stream<T>(backlog: &Arc<Backlog>) -> (BacklogSender<T>, BacklogStream<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        BacklogSender {
            tx,
            backlog: Arc::clone(backlog),
        },
        BacklogStream {
            rx,
            backlog: Arc::clone(backlog),
        },
    )
}

impl<T> BacklogStream<T> {
    /// The next item; `None` once the client is gone.
    pub async fn recv(&mut self) -> Option<T> {
        let (item, bytes) = self.rx.recv().await?;
        self.backlog.release(bytes);
        Some(item)
    }
}

impl<T> Stream for BacklogStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some((item, bytes))) => {
                self.backlog.release(bytes);
                Poll::Ready(Some(item))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for BacklogStream<T> {
    fn drop(&mut self) {
        self.rx.close();
        while let Ok((_, bytes)) = self.rx.try_recv() {
            self.backlog.release(bytes);
        }
    }
}

impl<T> std::fmt::Debug for BacklogStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BacklogStream")
            .field("backlog", &self.backlog)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn room_waits_past_the_budget_until_the_stream_is_read() {
        let backlog = Backlog::new(10);
        let (tx, mut rx) = backlog_stream::<u8>(&backlog);
        assert!(tx.send(1, 10));
        // At the budget: still room.
        backlog.room().await;
        assert!(tx.send(2, 1));
        assert_eq!(backlog.held(), 11);
        let waiter = {
            let backlog = Arc::clone(&backlog);
            tokio::spawn(async move { backlog.room().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "over the budget: reading pauses");
        assert_eq!(rx.recv().await, Some(1));
        waiter.await.expect("room again once read");
        assert_eq!(backlog.held(), 1);
    }

    #[tokio::test]
    async fn a_dropped_stream_gives_its_bytes_back_and_refuses_more() {
        let backlog = Backlog::new(10);
        let (tx, rx) = backlog_stream::<u8>(&backlog);
        assert!(tx.send(1, 30));
        drop(rx);
        assert_eq!(backlog.held(), 0);
        assert!(!tx.send(2, 5));
        assert_eq!(backlog.held(), 0);
    }
}

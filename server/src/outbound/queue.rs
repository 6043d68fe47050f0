//! The queue and its latch: [`OutboundPath`], the one path every outbound frame of a connection
//! takes, bounded in bytes, and [`OutboundPath::fail_once`], which fails the connection exactly once.
//!
//! The second jobs of the queue live beside it, each an `impl OutboundPath` of its own: the lossy
//! lane's drop policy (`lossy`), pong coalescing (`pong`), the bulk lane's sends (`bulk_send`)
//! and the writer's batches (`batch`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use super::bulk::BulkLane;
use super::error::{DeliveryError, FailReason};
use super::item::{MessageKind, OutItem};
use super::stream::SocketSlot;
use carrier_protocol::close::CloseCode;

/// What the queue's lock guards.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) items: VecDeque<OutItem>,
    /// Pongs in `items` the writer has not taken yet, and the index of the newest. Pongs keep
    /// their place among the other frames, but past [`super::pong::MAX_PENDING_PONGS`] a new ping replaces
    /// the newest pending pong's payload instead (RFC 6455 §5.5.3 allows answering only the
    /// most recent ping), so a peer that pings without reading costs a few pongs, not one per
    /// ping.
    pub(super) pending_pongs: usize,
    pub(super) newest_pong: Option<usize>,
    /// Per lossy channel: bytes queued and frames dropped since the receiver was last told.
    pub(super) lossy: Vec<LossyState>,
    /// Bulk frames, apart from the rest and written only when nothing else waits.
    pub(super) bulk: BulkLane,
    /// No more frames are accepted (close queued, or failed).
    pub(super) closed: bool,
    /// The writer task holds frames it took from the queue and has not yet flushed: the socket
    /// is its own until it asks for the next batch (no inline write meanwhile: `socket`).
    pub(super) writer_busy: bool,
}

/// One lossy channel's frames in the queue (the policy that uses it: `super::lossy`).
pub(super) struct LossyState {
    pub(super) channel: Arc<str>,
    pub(super) queued_bytes: usize,
    pub(super) dropped: u64,
}

/// The shared outbound queue of one connection. Cheap to clone (an `Arc`).
///
/// The budget is checked against what is already queued: a frame is refused (and the connection
/// failed) only when the bytes queued before it are over the budget, so a reader that keeps up
/// receives any message within the hard cap, and the queue holds at most the budget plus one
/// message.
#[derive(Clone)]
pub(crate) struct OutboundPath {
    pub(super) inner: Arc<OutboundInner>,
}

/// The state shared by every clone of an [`OutboundPath`]; the files beside this one reach it.
pub(super) struct OutboundInner {
    queue: Mutex<Queue>,
    /// Bytes held by queued items plus the batch the writer is writing now. This is the number
    /// the budget is checked against, so a slow reader's memory is bounded by it.
    pub(super) bytes: AtomicUsize,
    budget: usize,
    /// Wakes the writer: a frame was queued, or the connection failed.
    pub(super) wake: Notify,
    /// Set once a failure is recorded and the queue closed: what [`OutboundPath::failed`] checks.
    failed: AtomicBool,
    /// The latch of [`OutboundPath::fail_once`]: the first failure's reason, read by the writer
    /// (its close code) and the reader (its cleanup).
    fail_reason: Mutex<Option<FailReason>>,
    /// Wakes tasks waiting in [`OutboundPath::failed`]. Nothing runs inside `fail_once` on the
    /// failure's behalf: whoever cleans up after a failed connection (its reader) waits here,
    /// so a send that overflows never calls back into the registry or the metrics.
    failed_notify: Notify,
    /// Wakes bulk senders waiting for room: a bulk frame was written, or the connection closed.
    pub(super) bulk_room: Notify,
    /// The connection's socket, once attached (`socket`); a detached connection has none.
    pub(super) socket: SocketSlot,
}

impl OutboundPath {
    /// A queue that fails the connection once more than `budget` bytes are waiting.
    pub(crate) fn new(budget: usize) -> Self {
        OutboundPath {
            inner: Arc::new(OutboundInner {
                queue: Mutex::new(Queue::default()),
                bytes: AtomicUsize::new(0),
                budget,
                wake: Notify::new(),
                failed: AtomicBool::new(false),
                fail_reason: Mutex::new(None),
                failed_notify: Notify::new(),
                bulk_room: Notify::new(),
                socket: Mutex::new(None),
            }),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock cannot leave the queue inconsistent in a way that
        // matters more than losing the connection, so poisoning is ignored.
        self.inner.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes currently held for this connection (queued plus being written).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.inner.bytes.load(Ordering::Acquire)
    }

    /// The byte budget.
    pub(crate) fn budget(&self) -> usize {
        self.inner.budget
    }

    /// Whether the connection still accepts frames.
    pub(crate) fn is_open(&self) -> bool {
        !self.lock().closed
    }

    /// Queues a text message (a whole JSON document).
    pub(crate) fn send_text(&self, text: Bytes) -> Result<(), DeliveryError> {
        self.push(OutItem::Message {
            kind: MessageKind::Text,
            head: text,
            body: Bytes::new(),
            lossy: None,
        })
    }

    /// Queues a binary message made of a header and a payload written back to back.
    pub(crate) fn send_binary(&self, head: Bytes, body: Bytes) -> Result<(), DeliveryError> {
        self.push(OutItem::Message {
            kind: MessageKind::Binary,
            head,
            body,
            lossy: None,
        })
    }

    /// Queues a control or data item; the single entry point for reliable frames. A close is
    /// always taken (it is the last item); anything else is refused once the queue is over budget.
    /// A text answer the connection's reader sends while nothing is queued and the writer is
    /// idle is written at once instead, under the same lock (`socket`).
    pub(crate) fn push(&self, item: OutItem) -> Result<(), DeliveryError> {
        {
            let mut q = self.lock();
            if q.closed {
                return Err(DeliveryError::Closed);
            }
            let closing = matches!(item, OutItem::Close { .. });
            if !closing && self.over_budget() {
                drop(q);
                return self.overflow();
            }
            let item = if self.may_inline(&q, &item) {
                match self.write_inline(item) {
                    Ok(None) => return Ok(()),
                    Ok(Some(rest)) => rest,
                    Err(_) => {
                        drop(q);
                        self.fail_once(FailReason::WriteError);
                        return Err(DeliveryError::Closed);
                    }
                }
            } else {
                item
            };
            let cost = item.cost();
            q.closed |= closing;
            q.items.push_back(item);
            if closing {
                self.inner.bulk_room.notify_waiters();
            }
            // Counted before the lock is released, so before the writer can take the item and
            // release its bytes. Counting after the unlock let the writer's subtraction come
            // first: the counter wrapped below zero for a moment, and a concurrent send saw a
            // huge queue and failed a healthy connection as a slow reader (1013). Seen in the
            // 1,000-connection soak under CPU contention.
            self.inner.bytes.fetch_add(cost, Ordering::AcqRel);
        }
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Whether the bytes already queued are over the budget. Call under the queue lock.
    #[inline]
    pub(super) fn over_budget(&self) -> bool {
        self.inner.bytes.load(Ordering::Acquire) > self.inner.budget
    }

    /// Fails the connection as a slow reader.
    pub(super) fn overflow(&self) -> Result<(), DeliveryError> {
        self.fail_once(FailReason::SlowReader);
        Err(DeliveryError::Overflow)
    }

    /// Queues a close frame; the writer sends it after everything queued before it and then
    /// ends the connection. Later sends fail with [`DeliveryError::Closed`].
    pub(crate) fn close(&self, code: CloseCode, reason: &str) {
        let _ = self.push(OutItem::Close {
            code,
            reason: Arc::from(truncate_reason(reason)),
        });
    }

    /// Reading is over: accept no more frames. What is queued is still written (a close frame
    /// among it included); then the writer ends.
    pub(crate) fn shut(&self) {
        self.lock().closed = true;
        self.inner.wake.notify_one();
        self.inner.bulk_room.notify_waiters();
    }

    /// Fails the connection: the first call latches, drops everything queued, stops accepting
    /// frames, tells the writer to send the matching close code (1013 for a slow reader, 1011
    /// for a write error) and wakes the tasks waiting in `OutboundPath::failed`. Every later call
    /// is a no-op. Returns whether this call was the one that latched.
    pub(crate) fn fail_once(&self, reason: FailReason) -> bool {
        {
            let mut latched = self
                .inner
                .fail_reason
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if latched.is_some() {
                return false;
            }
            *latched = Some(reason);
        }
        let freed: usize = {
            let mut q = self.lock();
            q.closed = true;
            // The rest of a frame an inline write began stays: the writer finishes that frame
            // before its close, so the peer never reads a close inside a frame.
            let keep = usize::from(matches!(q.items.front(), Some(OutItem::Rest { .. })));
            let freed = q.items.iter().skip(keep).map(OutItem::cost).sum::<usize>();
            q.items.truncate(keep);
            q.bulk.clear();
            q.pending_pongs = 0;
            q.newest_pong = None;
            q.lossy.clear();
            freed
        };
        self.inner.bytes.fetch_sub(freed, Ordering::AcqRel);
        // Last, so whoever sees it finds the reason recorded and the queue closed.
        self.inner.failed.store(true, Ordering::Release);
        self.inner.wake.notify_one();
        self.inner.failed_notify.notify_waiters();
        self.inner.bulk_room.notify_waiters();
        true
    }

    /// The failure, once latched.
    pub(crate) fn failure(&self) -> Option<FailReason> {
        *self
            .inner
            .fail_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the connection has failed ([`OutboundPath::fail_once`]).
    pub(crate) fn has_failed(&self) -> bool {
        self.inner.failed.load(Ordering::Acquire)
    }

    /// A notification of the failure, for a waiter that checks [`OutboundPath::has_failed`]
    /// itself. It completes only once the flag is up (`fail_once` sets it first).
    pub(crate) fn failed_notified(&self) -> Notified<'_> {
        self.inner.failed_notify.notified()
    }
}

/// Close reasons are limited to 123 bytes by RFC 6455; cut on a character boundary.
fn truncate_reason(reason: &str) -> &str {
    if reason.len() <= 123 {
        return reason;
    }
    let mut end = 123;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

//! The one outbound path of a connection.
//!
//! Every frame a connection sends — responses, session events, channel frames, protocol errors,
//! pings, pongs and the close — is queued here and written by the connection's single writer
//! task. The queue is bounded in bytes, not frames: a reader that falls behind by more than the
//! budget fails the connection (1013) instead of growing the server's memory. Failure is latched:
//! [`Outbound::fail_once`] runs its cleanup exactly once, however many sends fail after it.

mod bulk;
mod item;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::protocol::close::CloseCode;
use bulk::BulkLane;
pub(crate) use item::{BulkFrame, OutItem};
pub use item::{MessageKind, ITEM_OVERHEAD};

/// Pongs that may wait in one queue before new pings replace the newest of them.
pub(crate) const MAX_PENDING_PONGS: usize = 16;

/// Why a send did not queue its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The connection is closing or closed; nothing more is sent on it.
    #[error("the connection is closed")]
    Closed,
    /// The queue was already past its byte budget; the connection has been failed (1013).
    #[error("the reader is too slow: outbound queue over its byte budget; connection failed")]
    Overflow,
    /// The bulk channel's window on this connection is full; nothing was queued. Wait for room
    /// (the async bulk sends do) or try again later.
    #[error("the bulk channel's window on this connection is full")]
    WindowFull,
}

/// How a connection ended, reported once by the latched cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// The outbound queue went over its byte budget (close 1013).
    SlowReader,
    /// Writing to the socket failed (close 1011).
    WriteError,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<OutItem>,
    /// Pongs in `items` the writer has not taken yet, and the index of the newest. Pongs keep
    /// their place among the other frames, but past [`MAX_PENDING_PONGS`] a new ping replaces
    /// the newest pending pong's payload instead (RFC 6455 §5.5.3 allows answering only the
    /// most recent ping), so a peer that pings without reading costs a few pongs, not one per
    /// ping.
    pending_pongs: usize,
    newest_pong: Option<usize>,
    /// Per lossy channel: bytes queued and frames dropped since the receiver was last told.
    lossy: Vec<LossyState>,
    /// Bulk frames, apart from the rest and written only when nothing else waits.
    bulk: BulkLane,
    /// No more frames are accepted (close queued, or failed).
    closed: bool,
}

struct LossyState {
    channel: Arc<str>,
    queued_bytes: usize,
    dropped: u64,
}

/// The shared outbound queue of one connection. Cheap to clone (an `Arc`).
///
/// The budget is checked against what is already queued: a frame is refused (and the connection
/// failed) only when the bytes queued before it are over the budget, so a reader that keeps up
/// receives any message within the hard cap, and the queue holds at most the budget plus one
/// message.
#[derive(Clone)]
pub struct Outbound {
    inner: Arc<OutboundInner>,
}

/// The latched cleanup of a failed connection.
type Cleanup = Box<dyn FnOnce(FailReason) + Send>;

struct OutboundInner {
    queue: Mutex<Queue>,
    /// Bytes held by queued items plus the batch the writer is writing now. This is the number
    /// the budget is checked against, so a slow reader's memory is bounded by it.
    bytes: AtomicUsize,
    budget: usize,
    /// Wakes the writer: a frame was queued, or the connection failed.
    wake: Notify,
    /// Latch for [`Outbound::fail_once`].
    failed: AtomicBool,
    /// Set on failure so the writer and reader stop.
    fail_reason: Mutex<Option<FailReason>>,
    /// Runs once, on the first failure.
    on_fail: Mutex<Option<Cleanup>>,
    /// Wakes tasks waiting in [`Outbound::failed`].
    failed_notify: Notify,
    /// Wakes bulk senders waiting for room: a bulk frame was written, or the connection closed.
    bulk_room: Notify,
}

impl Outbound {
    /// A queue that fails the connection once more than `budget` bytes are waiting.
    pub fn new(budget: usize) -> Self {
        Outbound {
            inner: Arc::new(OutboundInner {
                queue: Mutex::new(Queue::default()),
                bytes: AtomicUsize::new(0),
                budget,
                wake: Notify::new(),
                failed: AtomicBool::new(false),
                fail_reason: Mutex::new(None),
                on_fail: Mutex::new(None),
                failed_notify: Notify::new(),
                bulk_room: Notify::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock cannot leave the queue inconsistent in a way that
        // matters more than losing the connection, so poisoning is ignored.
        self.inner.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the cleanup that runs exactly once when the connection fails.
    pub(crate) fn set_on_fail(&self, f: impl FnOnce(FailReason) + Send + 'static) {
        *self.inner.on_fail.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f));
    }

    /// Bytes currently held for this connection (queued plus being written).
    pub fn queued_bytes(&self) -> usize {
        self.inner.bytes.load(Ordering::Acquire)
    }

    /// The byte budget.
    pub fn budget(&self) -> usize {
        self.inner.budget
    }

    /// Whether the connection still accepts frames.
    pub fn is_open(&self) -> bool {
        !self.lock().closed
    }

    /// Queues a text message (a whole JSON document).
    pub fn send_text(&self, text: Bytes) -> Result<(), DeliveryError> {
        self.push(OutItem::Message {
            kind: MessageKind::Text,
            head: text,
            body: Bytes::new(),
            lossy: None,
        })
    }

    /// Queues a binary message made of a header and a payload written back to back.
    pub fn send_binary(&self, head: Bytes, body: Bytes) -> Result<(), DeliveryError> {
        self.push(OutItem::Message {
            kind: MessageKind::Binary,
            head,
            body,
            lossy: None,
        })
    }

    /// Queues a binary frame of a lossy channel: when that channel's frames queued for this
    /// connection exceed `channel_budget` bytes, its oldest queued frames are dropped (never
    /// another channel's, never a reliable frame) and the receiver is told with a
    /// `channel.dropped` event before the channel's next frame.
    pub fn send_lossy(
        &self,
        channel: &Arc<str>,
        channel_budget: usize,
        head: Bytes,
        body: Bytes,
    ) -> Result<(), DeliveryError> {
        let item = OutItem::Message {
            kind: MessageKind::Binary,
            head,
            body,
            lossy: Some(channel.clone()),
        };
        let cost = item.cost();
        let mut q = self.lock();
        if q.closed {
            return Err(DeliveryError::Closed);
        }
        if self.over_budget() {
            drop(q);
            return self.overflow();
        }
        let idx = match q.lossy.iter().position(|s| s.channel == *channel) {
            Some(i) => i,
            None => {
                q.lossy.push(LossyState {
                    channel: channel.clone(),
                    queued_bytes: 0,
                    dropped: 0,
                });
                q.lossy.len() - 1
            }
        };
        let mut freed = 0usize;
        let mut dropped = 0u64;
        if q.lossy[idx].queued_bytes + cost > channel_budget {
            let mut over = q.lossy[idx].queued_bytes + cost - channel_budget;
            let mut position = 0usize;
            let mut removed = Vec::new();
            q.items.retain(|item| {
                position += 1;
                if over == 0 {
                    return true;
                }
                match item {
                    OutItem::Message { lossy: Some(c), .. } if c == channel => {
                        let n = item.cost();
                        over = over.saturating_sub(n);
                        freed += n;
                        dropped += 1;
                        removed.push(position - 1);
                        false
                    }
                    _ => true,
                }
            });
            q.bulk.removed_at(&removed);
        }
        if dropped > 0 && q.newest_pong.is_some() {
            // Frames before it may have gone: find it again.
            q.newest_pong = q.items.iter().rposition(|i| matches!(i, OutItem::Pong(_)));
        }
        let state = &mut q.lossy[idx];
        state.queued_bytes = state.queued_bytes - freed + cost;
        state.dropped += dropped;
        q.items.push_back(item);
        // Counted under the lock, like `push`: see there.
        self.inner.bytes.fetch_sub(freed, Ordering::AcqRel);
        self.inner.bytes.fetch_add(cost, Ordering::AcqRel);
        drop(q);
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Queues a control or data item; the single entry point for reliable frames. A close is
    /// always taken (it is the last item); anything else is refused once the queue is over budget.
    pub(crate) fn push(&self, item: OutItem) -> Result<(), DeliveryError> {
        let cost = item.cost();
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

    /// Answers a ping, in its place among the queued frames. Past [`MAX_PENDING_PONGS`] unsent
    /// pongs, the newest of them answers this ping instead (its payload is replaced), so pongs
    /// owed to a peer that does not read never pile up.
    pub(crate) fn pong(&self, payload: Bytes) {
        {
            let mut q = self.lock();
            if q.closed {
                return;
            }
            let newest = q
                .newest_pong
                .filter(|_| q.pending_pongs >= MAX_PENDING_PONGS);
            let added = payload.len();
            if let Some(OutItem::Pong(old)) = newest.and_then(|i| q.items.get_mut(i)) {
                let freed = old.len();
                *old = payload;
                self.inner.bytes.fetch_sub(freed, Ordering::AcqRel);
                self.inner.bytes.fetch_add(added, Ordering::AcqRel);
                return;
            }
            q.items.push_back(OutItem::Pong(payload));
            q.newest_pong = Some(q.items.len() - 1);
            q.pending_pongs += 1;
            self.inner
                .bytes
                .fetch_add(ITEM_OVERHEAD + added, Ordering::AcqRel);
        }
        self.inner.wake.notify_one();
    }

    /// Whether the bytes already queued are over the budget. Call under the queue lock.
    fn over_budget(&self) -> bool {
        self.inner.bytes.load(Ordering::Acquire) > self.inner.budget
    }

    /// Fails the connection as a slow reader.
    fn overflow(&self) -> Result<(), DeliveryError> {
        self.fail_once(FailReason::SlowReader);
        Err(DeliveryError::Overflow)
    }

    /// Queues a close frame; the writer sends it after everything queued before it and then
    /// ends the connection. Later sends fail with [`DeliveryError::Closed`].
    pub fn close(&self, code: CloseCode, reason: &str) {
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
    /// frames, runs the cleanup and tells the writer to send the matching close code (1013 for a
    /// slow reader, 1011 for a write error). Every later call is a no-op. Returns whether this
    /// call was the one that latched.
    pub fn fail_once(&self, reason: FailReason) -> bool {
        if self.inner.failed.swap(true, Ordering::AcqRel) {
            return false;
        }
        *self
            .inner
            .fail_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(reason);
        let freed: usize = {
            let mut q = self.lock();
            q.closed = true;
            let freed = q.items.iter().map(OutItem::cost).sum::<usize>();
            q.items.clear();
            q.bulk.clear();
            q.pending_pongs = 0;
            q.newest_pong = None;
            q.lossy.clear();
            freed
        };
        self.inner.bytes.fetch_sub(freed, Ordering::AcqRel);
        let cleanup = self
            .inner
            .on_fail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(cleanup) = cleanup {
            cleanup(reason);
        }
        self.inner.wake.notify_one();
        self.inner.failed_notify.notify_waiters();
        self.inner.bulk_room.notify_waiters();
        true
    }

    /// The failure, once latched.
    pub fn failure(&self) -> Option<FailReason> {
        *self
            .inner
            .fail_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves once the connection has failed.
    pub(crate) async fn failed(&self) {
        loop {
            let notified = self.inner.failed_notify.notified();
            if self.inner.failed.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    /// Queues a frame of a bulk channel whose window on this connection is `window` bytes: taken
    /// while the channel's queued bytes are under the window (so it holds at most the window plus
    /// one frame), refused with [`DeliveryError::WindowFull`] otherwise. Bulk bytes are not
    /// part of the connection's budget.
    pub(crate) fn send_bulk(&self, frame: BulkFrame, window: usize) -> Result<(), DeliveryError> {
        {
            let mut q = self.lock();
            if q.closed {
                return Err(DeliveryError::Closed);
            }
            let ahead = q.items.len();
            q.bulk
                .push(frame, window, ahead)
                .map_err(|_| DeliveryError::WindowFull)?;
        }
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Resolves once `channel` has room in its window here, or with [`DeliveryError::Closed`]
    /// once the connection takes no more frames. Room may be gone again by the time the caller
    /// sends (another sender): [`Outbound::send_bulk`] then says so and the caller waits again.
    pub(crate) async fn bulk_room(
        &self,
        channel: &str,
        window: usize,
    ) -> Result<(), DeliveryError> {
        loop {
            let notified = self.inner.bulk_room.notified();
            tokio::pin!(notified);
            // Registered before the check, so a release in between is not missed.
            notified.as_mut().enable();
            {
                let q = self.lock();
                if q.closed {
                    return Err(DeliveryError::Closed);
                }
                if q.bulk.has_room(channel, window) {
                    return Ok(());
                }
            }
            notified.await;
        }
    }

    /// Whether `channel` has room in its window here now.
    pub(crate) fn bulk_has_room(&self, channel: &str, window: usize) -> bool {
        self.lock().bulk.has_room(channel, window)
    }

    /// Bytes of bulk channel `channel` queued on this connection (its window's fill).
    pub fn bulk_queued_bytes(&self, channel: &str) -> usize {
        self.lock().bulk.queued(channel)
    }

    /// Waits until something is queued (or the connection failed), then takes a batch: every
    /// other frame queued, or while bulk frames wait, at most [`super::bulk::BULK_EVERY`] frames
    /// of which one is bulk (a bulk frame alone when nothing else waits). The batch's bytes stay
    /// counted until [`Outbound::written`] releases them.
    pub(crate) async fn next_batch(
        &self,
        batch: &mut Vec<OutItem>,
        drops: &mut Vec<(Arc<str>, u64)>,
    ) {
        loop {
            {
                let mut q = self.lock();
                take_batch(&mut q, batch, drops);
                if !batch.is_empty() || q.closed {
                    return;
                }
            }
            self.inner.wake.notified().await;
        }
    }

    /// Releases what an item the writer has handed to the socket held: its bytes of the
    /// budget, or its room in a bulk window (waking the senders waiting for it).
    pub(crate) fn written(&self, item: &OutItem) {
        match item {
            OutItem::Bulk(f) => {
                self.lock().bulk.released(&f.channel, f.cost());
                self.inner.bulk_room.notify_waiters();
            }
            other => {
                self.inner.bytes.fetch_sub(other.cost(), Ordering::AcqRel);
            }
        }
    }
}

/// Moves the next batch from the queue into `batch` (see [`Outbound::next_batch`]).
fn take_batch(q: &mut Queue, batch: &mut Vec<OutItem>, drops: &mut Vec<(Arc<str>, u64)>) {
    let waiting = q.items.len();
    let (with_bulk, take) = q.bulk.plan(waiting);
    if let Some(frame) = q.bulk.took(with_bulk, take) {
        batch.push(OutItem::Bulk(frame));
    }
    if take == 0 {
        return;
    }
    if take == waiting {
        if batch.is_empty() {
            // Hand the queue's own buffer to the writer (O(1) when contiguous, which it is
            // after the first batch) and leave the queue unallocated, so an idle connection
            // holds no queue memory (issue 7). The next push allocates a small buffer again.
            *batch = Vec::from(std::mem::take(&mut q.items));
        } else {
            batch.extend(q.items.drain(..));
        }
        q.pending_pongs = 0;
        q.newest_pong = None;
        for s in q.lossy.iter_mut() {
            s.queued_bytes = 0;
        }
    } else {
        let from = batch.len();
        batch.extend(q.items.drain(..take));
        for item in &batch[from..] {
            match item {
                OutItem::Pong(_) => q.pending_pongs = q.pending_pongs.saturating_sub(1),
                OutItem::Message { lossy: Some(c), .. } => {
                    if let Some(s) = q.lossy.iter_mut().find(|s| s.channel == *c) {
                        s.queued_bytes = s.queued_bytes.saturating_sub(item.cost());
                    }
                }
                _ => {}
            }
        }
        q.newest_pong = q.newest_pong.and_then(|i| i.checked_sub(take));
    }
    for s in q.lossy.iter_mut() {
        if s.dropped > 0 {
            drops.push((s.channel.clone(), s.dropped));
            s.dropped = 0;
        }
    }
    // A graceful close: the bulk frames still queued go out before it.
    if matches!(batch.last(), Some(OutItem::Close { .. })) && !q.bulk.is_empty() {
        if let Some(close) = batch.pop() {
            batch.extend(q.bulk.drain_all().into_iter().map(OutItem::Bulk));
            batch.push(close);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn a_send_is_refused_only_once_the_queue_is_already_over_budget() {
        let out = Outbound::new(1000);
        let runs = Arc::new(AtomicU32::new(0));
        let r = runs.clone();
        out.set_on_fail(move |reason| {
            assert_eq!(reason, FailReason::SlowReader);
            r.fetch_add(1, Ordering::SeqCst);
        });
        // One message far larger than the budget is taken: the queue was under it.
        assert!(out.send_text(Bytes::from(vec![b'a'; 5000])).is_ok());
        assert_eq!(out.queued_bytes(), 5000 + ITEM_OVERHEAD);
        // The next one finds the queue over budget: the connection fails, once.
        assert_eq!(
            out.send_text(Bytes::from_static(b"x")),
            Err(DeliveryError::Overflow)
        );
        for _ in 0..10 {
            assert_eq!(
                out.send_text(Bytes::from_static(b"x")),
                Err(DeliveryError::Closed)
            );
        }
        assert!(!out.fail_once(FailReason::WriteError));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(out.queued_bytes(), 0);
        assert_eq!(out.failure(), Some(FailReason::SlowReader));
    }

    #[test]
    fn small_frames_are_charged_their_overhead() {
        // 1000 bytes of budget hold three empty frames, not a thousand.
        let out = Outbound::new(3 * ITEM_OVERHEAD);
        for _ in 0..4 {
            out.send_text(Bytes::new()).unwrap();
        }
        assert_eq!(out.send_text(Bytes::new()), Err(DeliveryError::Overflow));
    }

    #[test]
    fn pongs_keep_their_place_and_past_the_limit_the_newest_answers_the_latest_ping() {
        let out = Outbound::new(100 * ITEM_OVERHEAD);
        out.send_text(Bytes::from_static(b"before")).unwrap();
        for i in 0..1000u32 {
            out.pong(Bytes::from(i.to_be_bytes().to_vec()));
        }
        out.send_text(Bytes::from_static(b"after")).unwrap();
        assert_eq!(
            out.queued_bytes(),
            2 * ITEM_OVERHEAD + 11 + MAX_PENDING_PONGS * (ITEM_OVERHEAD + 4)
        );
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        futures_util::FutureExt::now_or_never(out.next_batch(&mut batch, &mut drops)).unwrap();
        let pongs: Vec<u32> = batch
            .iter()
            .filter_map(|i| match i {
                OutItem::Pong(p) => Some(u32::from_be_bytes(p[..].try_into().unwrap())),
                _ => None,
            })
            .collect();
        // The first fifteen pings each get their pong; the sixteenth answers the latest.
        let mut expected: Vec<u32> = (0..MAX_PENDING_PONGS as u32 - 1).collect();
        expected.push(999);
        assert_eq!(pongs, expected);
        assert!(matches!(&batch[0], OutItem::Message { head, .. } if &head[..] == b"before"));
        assert!(
            matches!(batch.last(), Some(OutItem::Message { head, .. }) if &head[..] == b"after")
        );
        // Once the writer took them, pings are answered one by one again.
        out.pong(Bytes::from_static(b"x"));
        out.pong(Bytes::from_static(b"y"));
        batch.clear();
        futures_util::FutureExt::now_or_never(out.next_batch(&mut batch, &mut drops)).unwrap();
        assert_eq!(batch.len(), 2);
        assert_eq!(out.failure(), None);
    }

    #[test]
    fn lossy_drops_oldest_of_its_channel_only() {
        let out = Outbound::new(1 << 20);
        let mic: Arc<str> = Arc::from("mic");
        out.send_text(Bytes::from_static(b"reliable")).unwrap();
        let frame = 10 + ITEM_OVERHEAD;
        for i in 0..5u8 {
            out.send_lossy(&mic, 3 * frame, Bytes::new(), Bytes::from(vec![i; 10]))
                .unwrap();
        }
        // 5 frames with room for 3: the two oldest were dropped.
        assert_eq!(out.queued_bytes(), 8 + ITEM_OVERHEAD + 3 * frame);
        let mut batch = Vec::new();
        let mut drops = Vec::new();
        futures_util::FutureExt::now_or_never(out.next_batch(&mut batch, &mut drops)).unwrap();
        assert_eq!(batch.len(), 4);
        assert_eq!(drops, vec![(mic.clone(), 2)]);
        match &batch[1] {
            OutItem::Message { body, .. } => assert_eq!(body[0], 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn concurrent_sends_and_writes_never_fail_a_reader_that_keeps_up() {
        // The writer releases bytes as fast as they are queued, so at most a few sends are
        // ever outstanding: a spurious overflow can only come from a miscount.
        let out = Outbound::new(1000 + 10 * ITEM_OVERHEAD);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (out, stop) = (out.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut batch, mut drops) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Acquire) {
                    let _ = futures_util::FutureExt::now_or_never(
                        out.next_batch(&mut batch, &mut drops),
                    );
                    for item in batch.drain(..) {
                        out.written(&item);
                    }
                }
            })
        };
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let out = out.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        if out.send_text(Bytes::from_static(b"0123456789")).is_err() {
                            return false;
                        }
                        // Keep the queue short: wait for the writer to catch up.
                        while out.queued_bytes() > 2 * ITEM_OVERHEAD && out.failure().is_none() {
                            std::thread::yield_now();
                        }
                    }
                    true
                })
            })
            .collect();
        let ok = senders.into_iter().all(|s| s.join().unwrap());
        stop.store(true, Ordering::Release);
        writer.join().unwrap();
        assert!(ok, "a healthy connection failed: {:?}", out.failure());
        assert_eq!(out.failure(), None);
    }

    #[test]
    fn close_stops_further_sends() {
        let out = Outbound::new(1000);
        out.close(CloseCode::NORMAL, "bye");
        assert_eq!(
            out.send_text(Bytes::from_static(b"late")),
            Err(DeliveryError::Closed)
        );
        assert!(!out.is_open());
    }

    #[test]
    fn the_frame_owed_to_bulk_never_goes_ahead_of_a_frame_queued_before_it() {
        // 20 agent frames, then one bulk frame: the bulk frame comes last (it used to go after
        // the 15th, overtaking five frames queued before it).
        let out = Outbound::new(1 << 20);
        let file: Arc<str> = Arc::from("file");
        for i in 0..20u8 {
            out.send_text(Bytes::from(vec![i])).unwrap();
        }
        let bulk = BulkFrame {
            channel: file.clone(),
            head: Bytes::new(),
            body: Bytes::from_static(b"B"),
        };
        out.send_bulk(bulk, 1 << 20).unwrap();
        let mut order = Vec::new();
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            take_batch(&mut out.lock(), &mut batch, &mut drops);
            for item in batch.drain(..) {
                order.push(match &item {
                    OutItem::Bulk(_) => 255,
                    OutItem::Message { head, .. } => head[0],
                    other => panic!("unexpected {other:?}"),
                });
                out.written(&item);
            }
        }
        let expected: Vec<u8> = (0..20).chain([255]).collect();
        assert_eq!(order, expected);
    }

    mod lanes {
        //! For any interleaving of sends on the agent protocol, a reliable, a lossy and a bulk
        //! channel with the writer taking batches in between, every lane reaches the socket in
        //! its send order, and only bulk frames are ever overtaken (SPEC section 7, `seq`).
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Lane {
            Agent,
            Reliable,
            Lossy,
            Bulk,
        }

        #[derive(Debug, Clone)]
        enum Op {
            Send(Lane),
            /// The writer takes one batch and writes it.
            Take,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => Just(Op::Send(Lane::Agent)),
                2 => Just(Op::Send(Lane::Reliable)),
                2 => Just(Op::Send(Lane::Lossy)),
                4 => Just(Op::Send(Lane::Bulk)),
                2 => Just(Op::Take),
            ]
        }

        fn id_of(item: &OutItem) -> (Lane, u32) {
            let (lane, body) = match item {
                OutItem::Bulk(f) => (Lane::Bulk, &f.body),
                OutItem::Message {
                    head, body, lossy, ..
                } => {
                    let lane = match (lossy.is_some(), &head[..]) {
                        (true, _) => Lane::Lossy,
                        (false, b"r") => Lane::Reliable,
                        _ => Lane::Agent,
                    };
                    (lane, body)
                }
                other => panic!("unexpected item {other:?}"),
            };
            (lane, u32::from_be_bytes(body[..4].try_into().unwrap()))
        }

        fn take_and_write(out: &Outbound, written: &mut Vec<(Lane, u32)>) {
            let (mut batch, mut drops) = (Vec::new(), Vec::new());
            take_batch(&mut out.lock(), &mut batch, &mut drops);
            for item in &batch {
                written.push(id_of(item));
                out.written(item);
            }
        }

        proptest! {
            #[test]
            fn every_lane_keeps_its_order_and_only_bulk_is_overtaken(
                ops in proptest::collection::vec(op(), 1..400),
                bulk_window_frames in 1usize..8,
                lossy_frames in 1usize..4,
            ) {
                let out = Outbound::new(1 << 30);
                let lossy: Arc<str> = Arc::from("live");
                let bulk: Arc<str> = Arc::from("file");
                let frame_cost = ITEM_OVERHEAD + 4;
                let mut sent: Vec<(Lane, u32)> = Vec::new();
                let mut written = Vec::new();
                for (n, op) in ops.iter().enumerate() {
                    let body = Bytes::from((n as u32).to_be_bytes().to_vec());
                    match op {
                        Op::Take => take_and_write(&out, &mut written),
                        Op::Send(lane) => {
                            let accepted = match lane {
                                Lane::Agent => out.send_binary(Bytes::from_static(b"a"), body).is_ok(),
                                Lane::Reliable => out.send_binary(Bytes::from_static(b"r"), body).is_ok(),
                                Lane::Lossy => out
                                    .send_lossy(&lossy, lossy_frames * frame_cost, Bytes::new(), body)
                                    .is_ok(),
                                Lane::Bulk => out
                                    .send_bulk(
                                        BulkFrame { channel: bulk.clone(), head: Bytes::new(), body },
                                        bulk_window_frames * frame_cost,
                                    )
                                    .is_ok(),
                            };
                            if accepted {
                                sent.push((*lane, n as u32));
                            }
                        }
                    }
                }
                // The writer drains what is left.
                for _ in 0..ops.len() + 1 {
                    take_and_write(&out, &mut written);
                }
                prop_assert_eq!(out.queued_bytes(), 0);
                prop_assert_eq!(out.bulk_queued_bytes("file"), 0);
                for lane in [Lane::Agent, Lane::Reliable, Lane::Lossy, Lane::Bulk] {
                    let of = |v: &[(Lane, u32)]| -> Vec<u32> {
                        v.iter().filter(|(l, _)| *l == lane).map(|(_, n)| *n).collect()
                    };
                    let (s, w) = (of(&sent), of(&written));
                    prop_assert!(w.windows(2).all(|p| p[0] < p[1]), "{:?} out of order: {:?}", lane, w);
                    if lane == Lane::Lossy {
                        prop_assert!(w.iter().all(|n| s.contains(n)));
                    } else {
                        prop_assert_eq!(s, w, "{:?} lost frames", lane);
                    }
                }
                // Across lanes, frames other than bulk keep the connection's order: none of them
                // is ever overtaken.
                let others: Vec<u32> = written
                    .iter()
                    .filter(|(l, _)| *l != Lane::Bulk)
                    .map(|(_, n)| *n)
                    .collect();
                prop_assert!(others.windows(2).all(|p| p[0] < p[1]), "{:?}", written);
                // And no bulk frame goes ahead of a frame queued before it.
                for (at, (lane, n)) in written.iter().enumerate() {
                    if *lane == Lane::Bulk {
                        let older_after = written[at..]
                            .iter()
                            .find(|(l, m)| *l != Lane::Bulk && m < n);
                        prop_assert!(older_after.is_none(), "bulk {} overtook {:?}: {:?}", n, older_after, written);
                    }
                }
            }
        }
    }
}

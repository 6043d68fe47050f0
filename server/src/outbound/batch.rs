//! Batch planning: what the connection's writer takes from the queue next, and what it gives
//! back once a frame is written. The writer's loop runs through here for every batch.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::item::OutItem;
use super::queue::{OutboundPath, Queue};

impl OutboundPath {
    /// Waits until something is queued (or the connection failed), then takes a batch: every
    /// other frame queued, or while bulk frames wait, at most [`super::bulk::BULK_EVERY`] frames
    /// of which one is bulk (a bulk frame alone when nothing else waits). The batch's bytes stay
    /// counted until [`OutboundPath::written`] releases them.
    pub(crate) async fn next_batch(
        &self,
        batch: &mut Vec<OutItem>,
        drops: &mut Vec<(Arc<str>, u64)>,
    ) {
        loop {
            {
                let mut q = self.lock();
                take_batch(&mut q, batch, drops);
                // The writer asks for a batch once it has flushed the last one.
                q.writer_busy = !batch.is_empty();
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

/// Moves the next batch from the queue into `batch` (see [`OutboundPath::next_batch`]).
pub(super) fn take_batch(
    q: &mut Queue,
    batch: &mut Vec<OutItem>,
    drops: &mut Vec<(Arc<str>, u64)>,
) {
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
            // holds no queue memory. The next push allocates a small buffer again.
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

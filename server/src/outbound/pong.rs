//! Pong coalescing: a peer that pings without reading costs a few queued pongs, not one per
//! ping (RFC 6455 §5.5.3 allows answering only the most recent ping).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::item::{OutItem, ITEM_OVERHEAD};
use super::queue::OutboundPath;

/// Pongs that may wait in one queue before new pings replace the newest of them.
pub(crate) const MAX_PENDING_PONGS: usize = 16;

impl OutboundPath {
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
}

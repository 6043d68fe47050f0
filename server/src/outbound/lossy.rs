//! The lossy lane: a frame of a `lossy` channel makes room for itself by dropping the oldest
//! queued frames of the same channel, never another channel's or a reliable frame; the writer
//! then tells the receiver how many went (`channel.dropped`, taken with the batch).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::error::DeliveryError;
use super::item::{MessageKind, OutItem};
use super::queue::{LossyState, OutboundPath};
use carrier_protocol::envelope::encode_event;
use carrier_protocol::events::ChannelDropped;

impl OutboundPath {
    /// Queues a binary frame of a lossy channel: when that channel's frames queued for this
    /// connection exceed `channel_budget` bytes, its oldest queued frames are dropped (never
    /// another channel's, never a reliable frame) and the receiver is told with a
    /// `channel.dropped` event before the channel's next frame.
    pub(crate) fn send_lossy(
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
}

/// The `channel.dropped` notice that tells a receiver `count` frames of `channel` were dropped;
/// the writer sends it before the batch it was taken with. Encoding a string and a number
/// cannot fail; were it ever to, the notice is skipped (`None`).
pub(crate) fn dropped_notice(channel: &str, count: u64) -> Option<Bytes> {
    let notice = ChannelDropped {
        channel: channel.to_owned(),
        count,
    };
    encode_event("channel.dropped", None, &notice).ok()
}

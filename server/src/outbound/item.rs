//! What one connection's outbound queue holds: the items, and what each costs in memory.

use carrier_protocol::close::CloseCode;
use std::sync::Arc;

use bytes::Bytes;

/// Kind of a data message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageKind {
    /// A text message (UTF-8).
    Text,
    /// A binary message.
    Binary,
}

/// One queued outbound item.
#[derive(Debug, Clone)]
pub(crate) enum OutItem {
    /// A data message made of two shared parts written back to back (a channel-frame header and
    /// its payload, or a whole JSON text with an empty second part). Neither part is copied.
    Message {
        kind: MessageKind,
        head: Bytes,
        body: Bytes,
        /// The lossy channel this frame belongs to, if any: lossy frames may be dropped.
        lossy: Option<Arc<str>>,
    },
    /// A frame of a bulk channel (always binary), from the bulk lane.
    Bulk(BulkFrame),
    Ping(Bytes),
    Pong(Bytes),
    Close {
        code: CloseCode,
        reason: Arc<str>,
    },
    /// The unwritten end of a frame an inline write began (`socket`): raw bytes, `head` then
    /// `body`, written before anything else.
    Rest {
        head: Bytes,
        body: Bytes,
    },
}

/// What one queued item holds besides its payload bytes: its slot in the queue (which may be
/// up to twice the item's size, since the queue grows by doubling), the reference-counting
/// headers of its shared buffers and the allocator's own bookkeeping. A frame's payload is
/// allocated to its exact size where the carrier makes it, so payload plus this is what the
/// item really costs in memory; `server/tests/outbound_memory.rs` measures it with a counting allocator.
pub const ITEM_OVERHEAD: usize = 256;

impl OutItem {
    /// Bytes this item holds while queued: payload plus [`ITEM_OVERHEAD`].
    pub(crate) fn cost(&self) -> usize {
        ITEM_OVERHEAD
            + match self {
                OutItem::Message { head, body, .. } | OutItem::Rest { head, body } => {
                    head.len() + body.len()
                }
                OutItem::Bulk(f) => return f.cost(),
                OutItem::Ping(p) | OutItem::Pong(p) => p.len(),
                OutItem::Close { reason, .. } => 2 + reason.len(),
            }
    }
}

/// One queued bulk frame.
#[derive(Debug, Clone)]
pub(crate) struct BulkFrame {
    pub(crate) channel: Arc<str>,
    pub(crate) head: Bytes,
    pub(crate) body: Bytes,
}

impl BulkFrame {
    /// Bytes it holds against its channel's window: payload plus the fixed per-item overhead.
    pub(crate) fn cost(&self) -> usize {
        ITEM_OVERHEAD + self.head.len() + self.body.len()
    }
}

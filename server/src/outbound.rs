//! The one outbound path of a connection.
//!
//! Every frame a connection sends — responses, session events, channel frames, protocol errors,
//! pings, pongs and the close — is queued here and written by the connection's single writer
//! task. The queue is bounded in bytes, not frames: a reader that falls behind by more than the
//! budget fails the connection (1013) instead of growing the server's memory. Failure is latched:
//! [`OutboundPath::fail_once`] takes effect exactly once, however many sends fail after it, and
//! wakes whoever waits in [`OutboundPath::failed`] (the connection's reader, which cleans up).
//!
//! - `queue` — [`OutboundPath`]: the queue, its byte budget and the failure latch.
//! - `lossy` — the lossy lane: a lossy channel drops its own oldest frames.
//! - `pong` — pongs owed to a peer that does not read coalesce.
//! - `bulk` — the bulk lane (frames apart, each channel within its window); `bulk_send` — its
//!   sends and the wait for room.
//! - `batch` — what the writer takes next, and what it releases once written.
//! - `socket` — the reader's inline write of an answer when nothing is queued and the writer is
//!   idle, and the writer's handle on the socket; `stream` — the socket as the path holds it.
//! - `item` — what the queue holds and what each item costs; `error` — why a send was refused.

mod batch;
mod bulk;
mod bulk_send;
mod error;
mod item;
mod lossy;
mod pong;
mod queue;
mod socket;
mod stream;

pub use error::{DeliveryError, FailReason};
pub use item::ITEM_OVERHEAD;
pub(crate) use item::{BulkFrame, MessageKind, OutItem};
pub(crate) use lossy::dropped_notice;
pub(crate) use queue::OutboundPath;
pub(crate) use socket::SocketRef;
pub(crate) use stream::SocketWrite;

#[cfg(test)]
mod tests;

//! [`DetachedConnection`]: a connection that no socket backs. A text profile (or a channel
//! registry) sees an ordinary [`Connection`]; on the other side, whoever owns the real link —
//! a host's own socket (the agent layer's `Bridge`), a benchmark, a test — takes the frames it
//! sends, in order, as the carrier's writer would take them to write to a socket.
//!
//! The outbound path is the carrier's own: the same byte budget (a send that finds more than
//! the budget queued fails the connection as a slow reader) and the same fail-once latch. A
//! frame's bytes are released when it is taken; a write that fails is reported with
//! [`DetachedConnection::fail_write`], after which nothing more is accepted or handed out.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::FutureExt;

use super::handle::{Connection, ConnectionId};
use super::outbound::{dropped_notice, FailReason, MessageKind, OutItem, OutboundPath};
use carrier_protocol::close::CloseCode;
use carrier_protocol::Role;

/// One frame a detached connection sends, for its owner to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboundFrame {
    /// A text message (one complete JSON document, for the agent protocol).
    Text(Bytes),
    /// A binary message: `head` then `body`, back to back, as one message (a channel frame's
    /// header and its payload, neither copied).
    Binary {
        /// The first part (a channel frame's header).
        head: Bytes,
        /// The second part (the payload).
        body: Bytes,
    },
    /// Close with this code and reason; nothing follows.
    Close {
        /// The WebSocket close code.
        code: CloseCode,
        /// The reason, at most 123 bytes.
        reason: String,
    },
}

/// A connection that no socket backs: its [`Connection`] for a profile or a channel registry,
/// and the frames sent on it for the owner to take ([`DetachedConnection::next_frame`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use carrier_protocol::Role;
/// use carrier_server::{DetachedConnection, OutboundFrame};
///
/// let mut detached = DetachedConnection::new(Role::Drive, 1 << 20);
/// let conn = detached.connection().clone();
/// conn.send_text(r#"{"event":"hello"}"#).unwrap();
/// let frame = detached.next_frame().await;
/// assert_eq!(frame, Some(OutboundFrame::Text(r#"{"event":"hello"}"#.into())));
/// assert_eq!(conn.queued_bytes(), 0, "a frame taken is released");
/// # }
/// ```
pub struct DetachedConnection {
    conn: Connection,
    out: OutboundPath,
    /// The batch taken from the queue, not yet handed out: its items' bytes stay counted until
    /// then, and its buffer is freed once the batch is out (an idle connection holds none).
    pending: std::vec::IntoIter<OutItem>,
    /// Lossy channels' drop notices (`channel.dropped`), handed out before `pending` as the
    /// socket writer writes them before its batch; one per lossy channel at most.
    notices: std::vec::IntoIter<Bytes>,
    /// The close has been handed out: nothing follows it.
    closed: bool,
}

impl std::fmt::Debug for DetachedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetachedConnection")
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

impl DetachedConnection {
    /// A connection granted `role`, whose outbound queue holds at most `queue_budget` bytes
    /// (each frame charged its payload plus [`super::ITEM_OVERHEAD`]; see
    /// [`super::Limits::queue_bytes`]).
    pub fn new(role: Role, queue_budget: usize) -> Self {
        let out = OutboundPath::new(queue_budget);
        DetachedConnection {
            conn: Connection::new(ConnectionId::next(), role, out.clone()),
            out,
            pending: Vec::new().into_iter(),
            notices: Vec::new().into_iter(),
            closed: false,
        }
    }

    /// The connection, to hand to a text profile ([`super::TextProfile::open`]) or a channel
    /// registry ([`super::ChannelRegistry::link`]). Clones share it.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The next frame sent on the connection, in order; waits while none is queued. `None`
    /// once the connection has failed, or its close has been handed out.
    pub async fn next_frame(&mut self) -> Option<OutboundFrame> {
        loop {
            if let Some(frame) = self.ready() {
                return frame;
            }
            let mut batch = Vec::new();
            let mut drops = Vec::new();
            self.out.next_batch(&mut batch, &mut drops).await;
            if !self.take(batch, drops) {
                return None;
            }
        }
    }

    /// The next frame if one is queued now, without waiting.
    pub fn try_next_frame(&mut self) -> Option<OutboundFrame> {
        loop {
            if let Some(frame) = self.ready() {
                return frame;
            }
            let mut batch = Vec::new();
            let mut drops = Vec::new();
            self.out.next_batch(&mut batch, &mut drops).now_or_never()?;
            if !self.take(batch, drops) {
                return None;
            }
        }
    }

    /// The owner could not write a frame: fails the connection once, as a write error on a
    /// socket does ([`FailReason::WriteError`]). Sends are refused from then on and no frame
    /// is handed out. Returns whether this call latched the failure.
    pub fn fail_write(&mut self) -> bool {
        self.release_pending();
        self.out.fail_once(FailReason::WriteError)
    }

    /// `Some(frame)` to hand out, `Some(None)` when nothing more will be, `None` when the
    /// queue must be read.
    fn ready(&mut self) -> Option<Option<OutboundFrame>> {
        if self.closed || self.out.failure().is_some() {
            self.release_pending();
            return Some(None);
        }
        if let Some(notice) = self.notices.next() {
            return Some(Some(OutboundFrame::Text(notice)));
        }
        while let Some(item) = self.pending.next() {
            self.out.written(&item);
            if self.pending.len() == 0 {
                // The batch is out: its buffer goes now, not with the next batch.
                self.pending = Vec::new().into_iter();
            }
            let frame = match item {
                OutItem::Message {
                    kind: MessageKind::Text,
                    head,
                    ..
                } => OutboundFrame::Text(head),
                OutItem::Message {
                    kind: MessageKind::Binary,
                    head,
                    body,
                    ..
                } => OutboundFrame::Binary { head, body },
                OutItem::Bulk(f) => OutboundFrame::Binary {
                    head: f.head,
                    body: f.body,
                },
                OutItem::Close { code, reason } => {
                    self.closed = true;
                    self.release_pending();
                    OutboundFrame::Close {
                        code,
                        reason: reason.to_string(),
                    }
                }
                // Pings and pongs are a socket's own (its writer's keepalive, its reader's
                // answers), and so is the rest of a frame written in part (an inline write
                // needs a socket): nothing queues them on a detached connection.
                OutItem::Ping(_) | OutItem::Pong(_) | OutItem::Rest { .. } => continue,
            };
            return Some(Some(frame));
        }
        None
    }

    /// Keeps a batch taken from the queue; `false` when the queue is closed with nothing left.
    fn take(&mut self, batch: Vec<OutItem>, drops: Vec<(Arc<str>, u64)>) -> bool {
        if batch.is_empty() && drops.is_empty() {
            return false;
        }
        // Called only once both are handed out, so nothing is replaced before it is.
        self.notices = drops
            .iter()
            .filter_map(|(channel, count)| dropped_notice(channel, *count))
            .collect::<Vec<_>>()
            .into_iter();
        self.pending = batch.into_iter();
        true
    }

    fn release_pending(&mut self) {
        self.notices = Vec::new().into_iter();
        for item in std::mem::replace(&mut self.pending, Vec::new().into_iter()) {
            self.out.written(&item);
        }
    }
}

impl Drop for DetachedConnection {
    fn drop(&mut self) {
        self.release_pending();
    }
}

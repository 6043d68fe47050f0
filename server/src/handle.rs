//! The handle on one admitted connection: [`Connection`] and its [`ConnectionId`]. Everything
//! that sends to a connection (text profiles, channels) holds one; the connection's tasks own
//! the socket.

use carrier_protocol::close::CloseCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use super::outbound::{DeliveryError, FailReason, OutboundPath};
use carrier_protocol::Role;

/// Identifies one admitted connection for the lifetime of a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u64);

impl std::fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}", self.0)
    }
}

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

impl ConnectionId {
    /// A process-unique id.
    pub fn next() -> Self {
        ConnectionId(NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed))
    }
}

/// A handle on one admitted connection. Cheap to clone; every send goes through the
/// connection's single outbound path.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<ConnectionInner>,
}

struct ConnectionInner {
    id: ConnectionId,
    role: Role,
    outbound: OutboundPath,
    handshaken: AtomicBool,
    /// Wakes the connection's reader when the handshake completes: the reader attaches the
    /// connection as a channel sink (a profile may complete the handshake from a task of its
    /// own, so the reader cannot count on seeing it happen inside its own call).
    handshake_done: Notify,
    /// Whether the connection announced a protocol with inbound credit on bulk channels: its
    /// bulk frames are buffered for the host within its credit instead of pausing its reader.
    bulk_credit: AtomicBool,
}

impl Connection {
    /// A connection handle over an outbound path: the carrier makes one per admitted
    /// connection, and [`super::DetachedConnection`] one that no socket backs.
    pub(crate) fn new(id: ConnectionId, role: Role, outbound: OutboundPath) -> Self {
        Connection {
            inner: Arc::new(ConnectionInner {
                id,
                role,
                outbound,
                handshaken: AtomicBool::new(false),
                handshake_done: Notify::new(),
                bulk_credit: AtomicBool::new(false),
            }),
        }
    }

    /// The connection's id.
    pub fn id(&self) -> ConnectionId {
        self.inner.id
    }

    /// The effective role granted at admission.
    pub fn role(&self) -> Role {
        self.inner.role
    }

    /// The outbound path: every send goes through it.
    pub(crate) fn outbound(&self) -> &OutboundPath {
        &self.inner.outbound
    }

    /// Bytes held for this connection now: frames queued and the batch being written, each
    /// charged its payload plus [`super::ITEM_OVERHEAD`].
    pub fn queued_bytes(&self) -> usize {
        self.inner.outbound.queued_bytes()
    }

    /// The byte budget of the connection's outbound queue ([`super::Limits::queue_bytes`]): a
    /// send that finds more than this queued fails the connection as a slow reader.
    pub fn queue_budget(&self) -> usize {
        self.inner.outbound.budget()
    }

    /// Why the connection failed, once it has (a slow reader, a write error, a stalled bulk
    /// receiver); `None` while it has not, and for a connection that closed in order. A
    /// [`super::TextSession`] reads it in `on_close` to tell a failure from a close.
    pub fn failure(&self) -> Option<FailReason> {
        self.inner.outbound.failure()
    }

    /// Queues one text message (a complete JSON document).
    pub fn send_text(&self, text: impl Into<Bytes>) -> Result<(), DeliveryError> {
        self.inner.outbound.send_text(text.into())
    }

    /// Queues one binary message written as `head` followed by `body`, neither copied.
    pub fn send_binary(&self, head: Bytes, body: Bytes) -> Result<(), DeliveryError> {
        self.inner.outbound.send_binary(head, body)
    }

    /// Closes the connection after everything already queued (graceful close).
    pub fn close(&self, code: CloseCode, reason: &str) {
        self.inner.outbound.close(code, reason)
    }

    /// Whether frames are still accepted.
    pub fn is_open(&self) -> bool {
        self.inner.outbound.is_open()
    }

    /// Whether the text profile has completed its handshake on this connection.
    pub fn is_handshaken(&self) -> bool {
        self.inner.handshaken.load(Ordering::Acquire)
    }

    /// Marks the handshake done: stops the handshake timer, and the connection's reader
    /// attaches it as a channel sink before it reads the connection's next frame. Idempotent;
    /// call it once the handshake's reply is queued, so no channel frame goes ahead of it.
    pub fn mark_handshaken(&self) {
        if self.inner.handshaken.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.handshake_done.notify_waiters();
    }

    /// Tells the carrier that the peer counts inbound credit on bulk channels: its text
    /// profile negotiated the `bulk_credit` feature (protocol 1.1 and later; docs/protocol.md,
    /// "Channels"). From then on the connection's bulk frames are held for the host within
    /// the credit each bulk channel grants it (and the grants are sent back as the host takes
    /// them), instead of pausing its reader while a host stream is full. A profile whose
    /// peer does not count credit never calls it. Call it before [`Connection::mark_handshaken`],
    /// so the first bulk frame is already counted against the credit.
    pub fn enable_bulk_credit(&self) {
        self.inner.bulk_credit.store(true, Ordering::Release);
    }

    /// Whether the connection has inbound credit on bulk channels.
    pub(crate) fn has_bulk_credit(&self) -> bool {
        self.inner.bulk_credit.load(Ordering::Acquire)
    }

    /// A notification of the handshake, for a waiter that checks
    /// [`Connection::is_handshaken`] itself. It completes only once the flag is up
    /// (`mark_handshaken` sets it first).
    pub(crate) fn handshake_notified(&self) -> Notified<'_> {
        self.inner.handshake_done.notified()
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.inner.id)
            .field("role", &self.inner.role)
            .finish()
    }
}

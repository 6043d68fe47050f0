//! The payload-channel registry (docs/protocol.md, "Channels"): named, host-declared channels, the
//! connections that receive them, inbound routing and the host-side [`ChannelHandle`].
//!
//! Outbound frames are encoded once and shared by every receiving connection: the payload
//! `Bytes` is reference-counted, never copied per receiver. Inbound binary payloads reach the
//! handler as a slice of the received message.
//!
//! - `entry` — one registered channel and its inbound sink.
//! - `message` — what a channel hands its host ([`ChannelInbound`]).
//! - `map` — the channels by name and the receiving connections.
//! - `router` — inbound frames to their channel, or a refusal for the connection to answer.
//! - `credit` — inbound credit on bulk channels: frames buffered for the host, grants back.
//! - `channel_handle` — the host's sends ([`ChannelHandle`]).

mod channel_handle;
mod credit;
mod entry;
mod error;
mod map;
mod message;
mod router;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

pub(crate) use carrier_protocol::channel::ChannelDescriptor;
pub use channel_handle::ChannelHandle;
use entry::ChannelEntry;
pub use entry::DEFAULT_LOSSY_BUDGET;
pub use error::ChannelError;
use map::ChannelMap;
pub(crate) use message::Backpressure;
pub use message::{ChannelInbound, InboundBody};
pub use router::ChannelRefusal;
pub(crate) use router::RouteCache;

use crate::handle::{Connection, ConnectionId};
use crate::inbound_budget::{InboundBudget, Payment};
use carrier_protocol::channel_frame;

/// A connection linked to a [`ChannelRegistry`] by [`ChannelRegistry::link`]: the inbound side
/// of a connection whose frames the host reads itself.
pub struct ChannelLink {
    registry: ChannelRegistry,
    conn: Connection,
    /// The channel it sent on last, as a connection's reader keeps it.
    routes: RouteCache,
}

impl std::fmt::Debug for ChannelLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelLink")
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

impl ChannelLink {
    /// Routes one binary message the connection sent (a channel frame) to its channel's
    /// inbound side, as a carrier connection's reader does; resolves once the channel took it
    /// (a full inbound stream or credit ledger makes it wait). A frame that cannot be delivered
    /// is refused — not a channel frame, an unknown channel, an undeclared event, … — and the
    /// refusal is for the caller to answer (a carrier connection sends
    /// [`ChannelRefusal::error_event`]); the connection stays linked.
    pub async fn deliver(&mut self, message: Bytes) -> Result<(), ChannelRefusal> {
        let room = self
            .registry
            .route(&self.conn, message, None, &mut self.routes)?;
        if let Some(room) = room {
            room.await;
        }
        Ok(())
    }
}

impl Drop for ChannelLink {
    fn drop(&mut self) {
        self.registry.detach_sink(self.conn.id());
    }
}

/// The registry of channels and of the connections that receive them. Cheap to clone.
#[derive(Clone, Default)]
pub struct ChannelRegistry {
    inner: Arc<ChannelMap>,
}

impl ChannelRegistry {
    /// Declares a channel. Its name must be free (a closed channel frees its name).
    pub fn register(&self, descriptor: ChannelDescriptor) -> Result<ChannelHandle, ChannelError> {
        let len = descriptor.name.len();
        if len == 0 || len > channel_frame::MAX_CHANNEL_NAME {
            return Err(ChannelError::InvalidName(len));
        }
        let entry = Arc::new(ChannelEntry::new(descriptor));
        match self.inner.channels.entry(entry.descriptor.name.clone()) {
            dashmap::Entry::Occupied(_) => {
                Err(ChannelError::NameTaken(entry.descriptor.name.clone()))
            }
            dashmap::Entry::Vacant(v) => {
                v.insert(entry.clone());
                Ok(ChannelHandle::new(entry, Arc::downgrade(&self.inner)))
            }
        }
    }

    /// The declared descriptors, sorted by name.
    pub fn descriptors(&self) -> Vec<ChannelDescriptor> {
        let mut v: Vec<_> = self
            .inner
            .channels
            .iter()
            .map(|e| e.descriptor.clone())
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Ids of the connections that currently receive channel frames.
    pub fn sinks(&self) -> Vec<ConnectionId> {
        self.inner.snapshot().iter().map(Connection::id).collect()
    }

    /// Links a connection that no carrier socket reads (a
    /// [`DetachedConnection`](crate::DetachedConnection)'s) to these channels, as a
    /// carrier connection is linked once its handshake is done: it receives their frames from
    /// now on, and what it sends is routed with [`ChannelLink::deliver`]. Dropping the link
    /// unlinks it, and the channels it sent on see it disconnect.
    pub fn link(&self, conn: &Connection) -> ChannelLink {
        self.attach_sink(conn.clone());
        ChannelLink {
            registry: self.clone(),
            conn: conn.clone(),
            routes: RouteCache::default(),
        }
    }

    /// Sends channel frames to a connection from now on (its reader attaches it once it sees
    /// the handshake done).
    pub(crate) fn attach_sink(&self, conn: Connection) {
        let mut sinks = self.inner.sinks.write().unwrap_or_else(|e| e.into_inner());
        // Copy-on-write: the list is copied only while a broadcast holds the current snapshot;
        // otherwise it grows in place. Rebuilding it on every attach cost O(n) per connection
        // and left a trail of freed lists in the heap (~0.8 KiB resident per connection at
        // 1,000 connections; BENCHMARKS.md, "Server changes").
        let list = Arc::make_mut(&mut *sinks);
        list.retain(|c| c.id() != conn.id());
        list.push(conn.clone());
        drop(sinks);
        self.inner.by_id.insert(conn.id(), conn);
    }

    /// Stops sending channel frames to a connection (its reader does, once it sees it failed).
    pub(crate) fn remove_sink(&self, id: ConnectionId) {
        self.inner.by_id.remove(&id);
        let mut sinks = self.inner.sinks.write().unwrap_or_else(|e| e.into_inner());
        if sinks.iter().any(|c| c.id() == id) {
            // Copy-on-write, as in `attach_sink`: a broadcast iterating the old snapshot keeps it.
            Arc::make_mut(&mut *sinks).retain(|c| c.id() != id);
        }
    }

    /// The connection has ended: remove it and tell the channels it sent on.
    pub(crate) fn detach_sink(&self, id: ConnectionId) {
        self.remove_sink(id);
        let entries: Vec<Arc<ChannelEntry>> = self
            .inner
            .channels
            .iter()
            .map(|e| e.value().clone())
            .collect();
        for entry in entries {
            if entry.senders.remove(&id).is_some() {
                entry.disconnected(ChannelInbound {
                    connection: id,
                    seq: 0,
                    body: InboundBody::Disconnected,
                });
            }
        }
    }

    /// Routes one inbound binary message of a handshaken connection (see `router::route`),
    /// with what pays for it when it may have to change hands. A refusal is returned for the
    /// connection to answer; the connection stays open.
    pub(crate) fn route(
        &self,
        conn: &Connection,
        msg: Bytes,
        payment: Option<Payment>,
        cache: &mut RouteCache,
    ) -> Result<Option<Backpressure>, ChannelRefusal> {
        router::route(&self.inner, conn, msg, payment, cache)
    }

    /// The inbound budget that pays for buffered bulk frames once their host takes them (the
    /// transport's; set once).
    pub(crate) fn pay_from(&self, budget: &InboundBudget) {
        let _ = self.inner.inbound.set(budget.clone());
    }

    /// Bytes the bulk credit ledgers of every channel hold for their hosts now.
    pub(crate) fn buffered_credit_bytes(&self) -> usize {
        self.inner
            .channels
            .iter()
            .map(|e| e.value().buffered_credit())
            .sum()
    }

    /// Bulk frames dropped so far because their connection closed before the host took them.
    pub(crate) fn bulk_frames_dropped(&self) -> u64 {
        self.inner.bulk_frames_dropped.load(Ordering::Relaxed)
    }
}

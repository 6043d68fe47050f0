//! What the registry holds: the channels by name and the connections that receive them.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock, RwLock};

use dashmap::DashMap;

use super::entry::ChannelEntry;
use crate::handle::{Connection, ConnectionId};
use crate::inbound_budget::InboundBudget;

/// The registry's state, shared by the [`super::ChannelRegistry`] and (weakly) by every
/// channel's handle.
#[derive(Default)]
pub(super) struct ChannelMap {
    pub(super) channels: DashMap<String, Arc<ChannelEntry>>,
    /// Handshaken connections: the only channel sinks. A snapshot replaced on attach/detach,
    /// so a broadcast iterates it without holding a lock (a send that fails a connection
    /// detaches it from inside the loop).
    pub(super) sinks: RwLock<Arc<Vec<Connection>>>,
    /// The same connections by id, for targeted sends. Entries are cloned out, never held.
    pub(super) by_id: DashMap<ConnectionId, Connection>,
    /// The transport's inbound budget, which pays for a buffered bulk frame again once the
    /// host takes it (set once, when the transport is made).
    pub(super) inbound: OnceLock<InboundBudget>,
    /// Bulk frames dropped from credit ledgers because their connection closed.
    pub(super) bulk_frames_dropped: Arc<AtomicU64>,
}

impl ChannelMap {
    /// The connections that receive channel frames now.
    pub(super) fn snapshot(&self) -> Arc<Vec<Connection>> {
        self.sinks.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The receiving connection with this id.
    pub(super) fn sink(&self, id: ConnectionId) -> Option<Connection> {
        self.by_id.get(&id).map(|c| c.value().clone())
    }
}

impl Drop for ChannelMap {
    /// Breaks the entry → handler → handle → entry cycle of self-referencing handlers, so that
    /// dropping the last registry frees every channel and handler.
    fn drop(&mut self) {
        for entry in self.channels.iter() {
            *entry.sink.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

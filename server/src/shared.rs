//! State shared by the listener, the HTTP service and every connection of one transport.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use dashmap::DashMap;
use tokio::sync::Notify;

use super::config::Limits;
use super::connection::terminate::Terminate;
use super::context::CarrierContext;
use super::handle::{Connection, ConnectionId};
use super::inbound_budget::InboundBudget;
use super::metrics::Metrics;
use super::profile::{Asset, Attachment, TextSession};
use super::registry::ChannelRegistry;
use carrier_protocol::admission::AdmissionPolicy;

/// What exists only while the transport runs.
pub(crate) struct Running {
    /// The profile at `/`, and those at other paths ([`Attachment::with_route`]).
    pub(crate) attachment: Attachment,
    pub(crate) ctx: CarrierContext,
}

/// Refused connections that may linger at once (reading on for the peer's answer to their
/// 1008); past it a refused socket goes as soon as its close is written.
pub(crate) const REFUSED_LINGERING: usize = 64;

pub(crate) struct Shared {
    pub(crate) limits: Arc<Limits>,
    /// Memory for the messages clients send, shared by every connection.
    pub(crate) inbound: InboundBudget,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) registry: ChannelRegistry,
    pub(crate) policy: AdmissionPolicy,
    pub(crate) running: RwLock<Option<Running>>,
    /// The files served for the attached profile's web clients ([`Asset`]), replaced at every
    /// attach.
    assets: RwLock<Arc<[Asset]>>,
    /// Admitted connections, for `stop()`.
    pub(crate) connections: DashMap<ConnectionId, (Connection, Arc<Terminate>)>,
    /// Upgrades in flight or admitted: checked against `max_connections` before upgrading.
    /// Refused connections never take one, so a flood of bad tokens cannot lock clients out.
    slots: AtomicUsize,
    /// Refused connections still running.
    refused: AtomicUsize,
    /// Connection tasks still running (admitted or refused), for `stop()` to wait on.
    tasks: AtomicUsize,
    tasks_done: Notify,
    pub(crate) stopping: AtomicBool,
}

/// A running connection task's place, released on drop: a slot of `max_connections` for an
/// admitted one, a place among the refused ones otherwise.
pub(crate) struct Slot {
    shared: Arc<Shared>,
    refused: bool,
}

impl Slot {
    /// Whether this refused connection may linger for the peer's close (see
    /// [`REFUSED_LINGERING`]).
    pub(crate) fn lingers(&self) -> bool {
        !self.refused || self.shared.refused.load(Ordering::Acquire) <= REFUSED_LINGERING
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let counter = if self.refused {
            &self.shared.refused
        } else {
            &self.shared.slots
        };
        counter.fetch_sub(1, Ordering::AcqRel);
        if self.shared.tasks.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.tasks_done.notify_waiters();
        }
    }
}

impl Shared {
    pub(crate) fn new(limits: Limits, policy: AdmissionPolicy, registry: ChannelRegistry) -> Self {
        let inbound = InboundBudget::new(limits.max_inbound_bytes);
        registry.pay_from(&inbound);
        Shared {
            inbound,
            limits: Arc::new(limits),
            metrics: Arc::new(Metrics::default()),
            registry,
            policy,
            running: RwLock::new(None),
            assets: RwLock::new(Arc::new([])),
            connections: DashMap::new(),
            slots: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            tasks: AtomicUsize::new(0),
            tasks_done: Notify::new(),
            stopping: AtomicBool::new(false),
        }
    }

    /// Reserves a connection slot, or `None` when `max_connections` are taken.
    pub(crate) fn reserve_slot(self: &Arc<Self>) -> Option<Slot> {
        let max = self.limits.max_connections;
        let mut cur = self.slots.load(Ordering::Acquire);
        loop {
            if cur >= max {
                return None;
            }
            match self.slots.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        self.tasks.fetch_add(1, Ordering::AcqRel);
        Some(Slot {
            shared: self.clone(),
            refused: false,
        })
    }

    /// A place for a connection refused at admission (1008). Always granted: it takes no slot of
    /// `max_connections`, and it lingers only while few refused connections do.
    pub(crate) fn reserve_refused(self: &Arc<Self>) -> Slot {
        self.refused.fetch_add(1, Ordering::AcqRel);
        self.tasks.fetch_add(1, Ordering::AcqRel);
        Slot {
            shared: self.clone(),
            refused: true,
        }
    }

    /// Serves `assets` from now on.
    pub(crate) fn show_assets(&self, assets: Vec<Asset>) {
        *self.assets.write().unwrap_or_else(|e| e.into_inner()) = assets.into();
    }

    /// The files served beside the socket.
    pub(crate) fn assets(&self) -> Arc<[Asset]> {
        self.assets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The route `path` upgrades at: `/`, or one of the attached profile's routes.
    pub(crate) fn route(&self, path: &str) -> Option<&'static str> {
        if path == "/" {
            return Some("/");
        }
        let running = self.running.read().unwrap_or_else(|e| e.into_inner());
        running
            .as_ref()?
            .attachment
            .routes()
            .iter()
            .find(|(route, _)| *route == path)
            .map(|(route, _)| *route)
    }

    /// Opens the text session of a newly admitted connection and registers it for `stop()`:
    /// the session of the profile serving `path` (the attached one, unless `path` is one of
    /// its routes). `None` if the transport is not running (or stopping).
    pub(crate) fn open_session(
        &self,
        conn: &Connection,
        terminate: Arc<Terminate>,
        path: &str,
    ) -> Option<Box<dyn TextSession>> {
        if self.stopping.load(Ordering::Acquire) {
            return None;
        }
        let guard = self.running.read().unwrap_or_else(|e| e.into_inner());
        let running = guard.as_ref()?;
        self.connections
            .insert(conn.id(), (conn.clone(), terminate));
        self.metrics.connection_opened();
        let profile = running
            .attachment
            .routes()
            .iter()
            .find(|(route, _)| *route == path)
            .map_or(running.attachment.profile(), |(_, profile)| profile);
        Some(profile.open(conn.clone(), &running.ctx))
    }

    /// The connection ended: unregister it. Runs once per admitted connection.
    pub(crate) fn forget(&self, id: ConnectionId) {
        if self.connections.remove(&id).is_some() {
            self.metrics.connection_closed();
            self.metrics.cleanup_ran();
        }
    }

    /// Connection tasks still running.
    pub(crate) fn tasks(&self) -> usize {
        self.tasks.load(Ordering::Acquire)
    }

    /// Resolves when no connection task is left.
    pub(crate) async fn all_tasks_done(&self) {
        loop {
            let n = self.tasks_done.notified();
            if self.tasks() == 0 {
                return;
            }
            n.await;
        }
    }
}

//! Entry points for the criterion benches in `benches/`: not part of the carrier's API.
//!
//! The registry's routing and fan-out run inside connection tasks, behind crate-private
//! functions. These wrappers let a bench drive exactly that code without sockets; nothing in
//! the carrier calls them.

use std::sync::Arc;

use bytes::Bytes;

use super::admission::AdmissionPolicy;
use super::config::Limits;
use super::connection::answer_refusal;
use super::handle::Connection;
use super::outbound::Outbound;
use super::registry::{ChannelRegistry, RouteCache};
use super::shared::Shared;
use crate::protocol::Role;

/// A registry with the server state its routing needs (limits, metrics), and no listener.
pub struct RegistryHarness {
    shared: Arc<Shared>,
    routes: std::sync::Mutex<RouteCache>,
}

impl RegistryHarness {
    /// Wraps `registry` as a transport with default limits would.
    pub fn new(registry: ChannelRegistry) -> Self {
        let policy = AdmissionPolicy {
            token: None,
            grant: Role::Drive,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        };
        RegistryHarness {
            shared: Arc::new(Shared::new(Limits::default(), policy, registry)),
            routes: std::sync::Mutex::new(RouteCache::default()),
        }
    }

    /// Makes `conn` a channel sink, as a completed handshake does.
    pub fn attach(&self, conn: &Connection) {
        self.shared.registry.attach_sink(conn.clone());
    }

    /// Routes one inbound binary message from `conn`, as its reader task does.
    pub async fn route(&self, conn: &Connection, message: Bytes) {
        // One connection's reader keeps its route cache across frames; so does the harness.
        let routed = {
            let mut cache = self.routes.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.registry.route(conn, message, None, &mut cache)
        };
        match routed {
            Ok(Some(room)) => room.await,
            Ok(None) => {}
            Err(refusal) => answer_refusal(conn, &self.shared, &refusal),
        }
    }
}

/// Takes everything queued on `out` as its writer would (without writing it) and releases its
/// bytes. Returns the number of items taken.
pub fn drain(out: &Outbound) -> usize {
    let mut batch = Vec::new();
    let mut drops = Vec::new();
    let taken =
        futures_util::FutureExt::now_or_never(out.next_batch(&mut batch, &mut drops)).is_some();
    if !taken {
        return 0;
    }
    for item in &batch {
        out.written(item);
    }
    batch.len()
}

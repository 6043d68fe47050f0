//! What a text profile may read from the carrier it runs on.

use std::sync::Arc;

use super::config::Limits;
use super::metrics::Metrics;
use super::registry::ChannelRegistry;
use carrier_protocol::channel::ChannelDescriptor;
use carrier_protocol::Role;

/// The identity the host stamps on turns: never a value a client claims.
pub use carrier_protocol::events::DriverInfo;

/// One connection counted by [`CarrierContext::count_connection`]; dropping it uncounts it.
#[derive(Debug)]
#[must_use = "the connection is uncounted when this is dropped"]
pub struct CountedConnection {
    metrics: Arc<Metrics>,
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        self.metrics.connection_closed();
    }
}

/// Read access to the running carrier for text profiles: limits, grant, driver identity, epoch,
/// connection count, declared channels, and the protocol-error counter.
///
/// Cheap to clone: one reference count (a request's answer holds a clone, so this is paid on
/// every request).
#[derive(Clone)]
pub struct CarrierContext {
    inner: Arc<ContextParts>,
}

/// What a [`CarrierContext`] shares.
pub(crate) struct ContextParts {
    pub(crate) limits: Arc<Limits>,
    pub(crate) grant: Role,
    pub(crate) driver: DriverInfo,
    pub(crate) epoch: Arc<str>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) registry: ChannelRegistry,
}

impl CarrierContext {
    /// A context for text profiles served without a [`crate::WsTransport`] (the
    /// serverless `Bridge` of `carrier-agent`): its own counters and an empty channel registry.
    /// Share one context between the bridges of one host so `connections` counts them all.
    pub fn standalone(
        limits: Limits,
        grant: Role,
        driver: DriverInfo,
        epoch: impl Into<Arc<str>>,
    ) -> Self {
        CarrierContext::new(ContextParts {
            limits: Arc::new(limits),
            grant,
            driver,
            epoch: epoch.into(),
            metrics: Arc::new(Metrics::default()),
            registry: ChannelRegistry::default(),
        })
    }

    pub(crate) fn new(parts: ContextParts) -> Self {
        CarrierContext {
            inner: Arc::new(parts),
        }
    }

    /// The limits published in the handshake result.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The most this listener grants.
    pub fn grant(&self) -> Role {
        self.inner.grant
    }

    /// The host-configured driver identity.
    pub fn driver(&self) -> &DriverInfo {
        &self.inner.driver
    }

    /// Changes whenever the server (re)starts; clients use it to detect a restart on resume.
    pub fn epoch(&self) -> &str {
        &self.inner.epoch
    }

    /// Admitted connections right now.
    pub fn connection_count(&self) -> usize {
        self.inner.metrics.connections()
    }

    /// The declared channel descriptors, sorted by name.
    pub fn channels(&self) -> Vec<ChannelDescriptor> {
        self.inner.registry.descriptors()
    }

    /// Counts a connection the host serves itself (the serverless `Bridge` of `carrier-agent`,
    /// over a [`DetachedConnection`](crate::DetachedConnection)) among this context's
    /// connections ([`CarrierContext::connection_count`], `carrier_connections`) for as long
    /// as the returned guard lives.
    pub fn count_connection(&self) -> CountedConnection {
        self.inner.metrics.connection_opened();
        CountedConnection {
            metrics: self.inner.metrics.clone(),
        }
    }

    /// Counts one protocol error (`carrier_protocol_errors_total`).
    pub fn count_protocol_error(&self) {
        self.inner.metrics.protocol_error();
    }

    /// The server name reported in handshakes and status.
    pub fn server_name(&self) -> &'static str {
        "carrier"
    }

    /// The server's own version (never compared by clients).
    pub fn server_version(&self) -> &'static str {
        env!("CARGO_PKG_VERSION")
    }
}

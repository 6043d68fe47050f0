//! The server: listener and port retry, admission, the per-connection task with its single
//! outbound path, limits, metrics, the channel registry and the [`WsTransport`] lifecycle.
//!
//! Every public type is reached at one path, `carrier::server::T`; the modules are private.
//!
//! - `config` — [`CarrierConfig`], [`Limits`] and their validation.
//! - `admission` — the one function that decides who may connect ([`admit`]).
//! - `listener` — binding 127.0.0.1 with port retry, the accept loop.
//! - `http` — routes (`/`, `/healthz`, `/metrics`, `/console`, `/client.js` and its modules)
//!   and the mountable [`CarrierService`]; `http_strict` — the RFC 7230/6455 rules checked
//!   before any route.
//! - `connection` — the per-connection tasks: `reader`, `writer`, and `terminate` (how they
//!   end each other).
//! - `handle` — [`Connection`] and [`ConnectionId`], the handle everything sends through.
//! - `outbound` — the byte-bounded queue with its latched failure ([`Outbound`]), its items
//!   and its bulk lane.
//! - `profile` — the seam to whatever rides on text frames ([`TextProfile`]).
//! - `registry` — payload channels: descriptors, the router, the host's [`ChannelHandle`].
//! - `context` — what a profile may read ([`CarrierContext`]); `shared` — the transport's
//!   state; `metrics` — counters, and the [`Gauge`]s a profile reports.
//! - `transport` — [`WsTransport`].
//!
//! The modules import one another without a loop; `tests/imports.rs` checks it.

// Public items here are re-exported only with the `testing` feature.
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
mod admission;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod bench_support;
mod config;
mod connection;
mod context;
mod control;
mod frame_reader;
mod handle;
// Public items here are re-exported only with the `testing` feature.
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
mod http;
mod http_strict;
mod inbound;
// Public items here are re-exported only with the `testing` feature.
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
mod listener;
mod liveness;
mod metrics;
// Public items here are re-exported only with the `testing` feature.
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
mod outbound;
mod profile;
mod registry;
mod shared;
mod transport;
mod wire;

// What a host uses. Everything else (admission, the outbound queue, the listener, HTTP
// parsing) is the crate's own; the `testing` feature re-exports the internals tests and benches
// drive in `testing`.
pub use admission::Token;
pub use config::{
    Auth, CarrierConfig, ConfigError, Limits, DEFAULT_MAX_INBOUND, MAX_BUDGET, MAX_MESSAGE_CAP,
};
pub use context::{CarrierContext, Driver};
pub use handle::{Connection, ConnectionId};
pub use http::{Body, CarrierService};
pub use listener::BindError;
pub use metrics::{Gauge, Metrics};
pub use outbound::DeliveryError;
pub use profile::{Attachment, TextProfile, TextSession};
/// What a channel handler receives (the client's `Inbound` is another thing: a socket read).
pub use registry::Inbound as ChannelInbound;
pub use registry::{
    ChannelError, ChannelHandle, ChannelRegistry, InboundBody, DEFAULT_LOSSY_BUDGET,
};
pub use transport::{mint_token, LifecycleError, RuntimeFileOptions, WsTransport};

// The wire's types that the server's signatures take or return, so a host needs no second
// import path for them.
pub use crate::protocol::channel::{Binary, ChannelDescriptor, DeliveryClass, DEFAULT_BULK_WINDOW};
pub use crate::protocol::channel_frame::{EventBytes, FrameBody};
pub use crate::protocol::close::CloseCode;
pub use crate::protocol::Role;
/// Shared byte buffers (the `bytes` crate), as channel sends and inbound frames carry them.
pub use bytes::Bytes;

pub(crate) use outbound::{FailReason, MessageKind, OutItem, Outbound};

/// Internals for this package's tests, benches and fuzz targets (feature `testing`): not part
/// of the API and not covered by semver.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing {
    pub use super::admission::{
        admit, is_loopback_host, query_param, tokens_equal, Admission, AdmissionPolicy,
        AdmissionRequest, CloseRefusal, HttpRefusal,
    };
    pub use super::http::MAX_HEAD_BYTES;
    pub use super::listener::bind_loopback;
    pub use super::outbound::{FailReason, MessageKind, Outbound, ITEM_OVERHEAD};
}

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
mod http;
mod http_strict;
mod inbound;
mod listener;
mod liveness;
mod metrics;
mod outbound;
mod profile;
mod registry;
mod shared;
mod transport;
mod wire;

pub use admission::{
    admit, is_loopback_host, query_param, tokens_equal, Admission, AdmissionPolicy,
    AdmissionRequest, CloseRefusal, HttpRefusal, Token,
};
pub use config::{
    Auth, CarrierConfig, ConfigError, Limits, DEFAULT_MAX_INBOUND, MAX_BUDGET, MAX_MESSAGE_CAP,
};
pub use context::{CarrierContext, Driver};
pub use handle::{Connection, ConnectionId};
pub use http::{Body, CarrierService, MAX_HEAD_BYTES};
pub use listener::{bind_loopback, BindError};
pub use metrics::{Gauge, Metrics};
pub(crate) use outbound::OutItem;
pub use outbound::{DeliveryError, FailReason, MessageKind, Outbound, ITEM_OVERHEAD};
pub use profile::{Attachment, TextProfile, TextSession};
pub use registry::{
    ChannelError, ChannelHandle, ChannelRegistry, Inbound, InboundBody, DEFAULT_LOSSY_BUDGET,
};
// The channel types are the wire's (`carrier::protocol::channel`), re-exported for hosts.
pub use crate::protocol::channel::{Binary, ChannelDescriptor, DeliveryClass, DEFAULT_BULK_WINDOW};
pub use transport::{mint_token, LifecycleError, RuntimeFileOptions, WsTransport};

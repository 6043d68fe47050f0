//! The server a host runs: a [`WsTransport`] on 127.0.0.1 (configure, attach a text profile —
//! usually [`crate::agent::AgentProfile`] —, register payload channels, start, stop), or the
//! same carrier mounted in the host's own hyper or axum server as a [`CarrierService`].
//!
//! | To …                                           | use                                                         |
//! |------------------------------------------------|-------------------------------------------------------------|
//! | set the port, auth, roles, limits              | [`CarrierConfig`], [`Limits`]: `CarrierConfig::default().with_port(0)` |
//! | declare a payload channel                      | [`WsTransport::register_channel`] with a [`ChannelDescriptor`] → [`ChannelHandle`] |
//! | receive a channel's frames                     | [`ChannelHandle::inbound`] (a stream of [`ChannelInbound`]) or [`ChannelHandle::on_inbound`] |
//! | send on a channel                              | [`ChannelHandle::send_event`] / [`ChannelHandle::send_event_to`], [`ChannelHandle::send_binary`] / [`ChannelHandle::send_to`], the bulk sends |
//! | find the listener                              | [`WsTransport::url`], [`WsTransport::resolved_token`]       |
//! | carry a protocol of your own on text frames    | [`TextProfile`] / [`TextSession`], with [`CarrierContext`] and [`Connection`] |
//! | read counters                                  | [`WsTransport::metrics`] ([`Metrics`], the profile's [`Gauge`]s) |
//!
//! Every public type is reached at one path, `carrier::server::T`; the wire's types that these
//! signatures use ([`FrameBody`], [`ChannelDescriptor`], [`Role`], [`CloseCode`], [`Bytes`], …)
//! are re-exported here. Inside, the modules are private: `config`, `admission` (who may
//! connect), `listener`, `http` and `http_strict`, `connection` (the per-connection reader and
//! writer), `handle`, `outbound` (the byte-bounded queue), `profile`, `registry`, `context`,
//! `shared`, `metrics`, `transport`; they import one another without a loop
//! (`tests/imports.rs`).

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
pub use context::{CarrierContext, DriverInfo};
pub use handle::{Connection, ConnectionId};
pub use http::{Body, CarrierService};
pub use listener::BindError;
pub use metrics::{Gauge, Metrics};
pub use outbound::DeliveryError;
pub use profile::{Attachment, TextProfile, TextSession};
/// What a channel handler receives (the client's `Inbound` is another thing: a socket read).
pub use registry::Inbound as ChannelInbound;
pub use registry::{
    ChannelError, ChannelHandle, ChannelRefusal, ChannelRegistry, InboundBody, DEFAULT_LOSSY_BUDGET,
};
pub use transport::{mint_token, LifecycleError, RuntimeFileOptions, WsTransport};

// The wire's types that the server's signatures take or return, so a host needs no second
// import path for them.
pub use crate::protocol::channel::{Binary, ChannelDescriptor, DeliveryClass, DEFAULT_BULK_WINDOW};
pub use crate::protocol::channel_frame::{ChannelFrameError, EventBytes, FrameBody};
pub use crate::protocol::close::CloseCode;
pub use crate::protocol::error::ProtocolErrorCode;
pub use crate::protocol::Role;
/// Shared byte buffers (the `bytes` crate), as channel sends and inbound frames carry them.
pub use bytes::Bytes;

pub(crate) use config::DEFAULT_DRIVER_ID;
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

//! The server: listener and port retry, admission, the per-connection task with its single
//! outbound path, limits, metrics, the channel registry and the [`WsTransport`] lifecycle.
//!
//! - [`config`] — [`CarrierConfig`], [`Limits`] and their validation.
//! - [`admission`] — the one function that decides who may connect.
//! - [`listener`] — binding 127.0.0.1 with port retry, the accept loop.
//! - [`http`] — routes (`/`, `/healthz`, `/metrics`, `/console`, `/client.js` and its modules)
//!   and the mountable [`CarrierService`]; `http_strict` — the RFC 7230/6455 rules checked
//!   before any route.
//! - `connection` — the per-connection reader and its single writer.
//! - [`outbound`] — the byte-bounded queue with its latched failure.
//! - [`profile`] — the seam to whatever rides on text frames ([`TextProfile`]).
//! - [`registry`] — payload channels.
//! - [`transport`] — [`WsTransport`].

pub mod admission;
#[doc(hidden)]
pub mod bench_support;
mod bulk;
pub mod config;
mod connection;
pub mod context;
mod control;
mod frame_reader;
pub mod http;
mod http_strict;
mod inbound;
pub mod listener;
mod liveness;
pub mod metrics;
pub mod outbound;
pub mod profile;
pub mod registry;
mod shared;
pub mod transport;
mod wire;

pub use config::{CarrierConfig, ConfigError, Limits};
pub use context::{CarrierContext, Driver};
pub use http::CarrierService;
pub use outbound::{DeliveryError, Outbound, ITEM_OVERHEAD};
pub use profile::{Attachment, Connection, ConnectionId, TextProfile, TextSession};
pub use registry::{ChannelError, ChannelHandle, ChannelRegistry, Inbound, InboundBody};
// The channel types are the wire's (`carrier::protocol::channel`), re-exported for hosts.
pub use crate::protocol::channel::{Binary, ChannelDescriptor, DeliveryClass, DEFAULT_BULK_WINDOW};
pub use transport::{mint_token, LifecycleError, RuntimeFileOptions, WsTransport};

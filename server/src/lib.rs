//! The server a host runs: a [`WsTransport`] on 127.0.0.1 (configure, attach a text profile —
//! usually the agent protocol's `AgentProfile` (`carrier-agent`) —, register payload channels, start, stop), or the
//! same carrier mounted in the host's own hyper or axum server as a [`CarrierService`].
//!
//! | To …                                           | use                                                         |
//! |------------------------------------------------|-------------------------------------------------------------|
//! | set the port, auth, roles, limits              | [`CarrierConfig`], [`Limits`]: `CarrierConfig::default().with_port(0)` |
//! | declare a payload channel                      | [`WsTransport::register_channel`] with a [`ChannelDescriptor`] → [`ChannelHandle`] |
//! | receive a channel's frames                     | [`ChannelHandle::inbound`] (a stream of [`ChannelInbound`]) or [`ChannelHandle::on_inbound`] |
//! | send on a channel                              | [`ChannelHandle::send_event`] / [`ChannelHandle::send_event_to`], [`ChannelHandle::send_binary`] / [`ChannelHandle::send_to`], the bulk sends |
//! | find the listener                              | [`WsTransport::url`], [`WsTransport::resolved_token`], [`WsTransport::unix_socket_path`] |
//! | a Unix socket for the host's own user          | [`WsTransport::with_unix_socket`] ([`UnixSocket`]; by default beside the runtime file) |
//! | carry a protocol of your own on text frames    | [`TextProfile`] / [`TextSession`], with [`CarrierContext`] and [`Connection`]; more than one, at other paths: [`Attachment::with_route`] |
//! | serve a connection the host reads itself       | [`DetachedConnection`] (frames out), [`ChannelRegistry::link`] (channel frames in); an upgraded stream: [`WsTransport::serve_upgraded`] |
//! | read counters                                  | [`WsTransport::metrics`] ([`Metrics`], the profile's [`Gauge`]s) |
//!
//! Every public type is reached at one path, `carrier_server::T`; the wire's types that these
//! signatures use ([`FrameBody`], [`ChannelDescriptor`], [`Role`], [`CloseCode`], [`Bytes`], …)
//! are re-exported here (admission itself, a pure rule, is the protocol's:
//! [`carrier_protocol::admission`]). Inside, the modules are private: `config`, `listener`,
//! `unix_listener` (the Unix socket, each peer judged by its credentials), `http` (and the
//! request rules it checks first), `connection` (the per-connection reader and writer), `handle`,
//! `detached`, `outbound` (the byte-bounded queue), `profile`, `registry`, `context`, `shared`,
//! `metrics`, `transport`; they import one another without a loop (`tests/it/imports.rs`).

mod config;
mod connection;
mod context;
mod control;
mod detached;
mod frame_reader;
mod frame_writer;
mod handle;
mod http;
mod inbound_budget;
mod listener;
mod liveness;
mod metrics;
mod outbound;
mod profile;
mod registry;
mod setters;
mod shared;
mod transport;
mod unix_listener;

// What a host uses; the rest (the outbound queue, the listener, HTTP parsing, the registry's
// routing) is the server's own.
pub use carrier_protocol::admission::{CloseRefusal, Token};
pub use config::{
    Auth, CarrierConfig, ConfigError, Limits, DEFAULT_DRIVER_ID, DEFAULT_MAX_INBOUND, MAX_BUDGET,
    MAX_MESSAGE_CAP,
};
pub use context::{CarrierContext, CountedConnection, DriverInfo};
pub use detached::{DetachedConnection, OutboundFrame};
pub use handle::{Connection, ConnectionId};
pub use http::{Body, CarrierService};
pub use listener::BindError;
pub use metrics::{Gauge, Metrics};
pub use outbound::{DeliveryError, FailReason, ITEM_OVERHEAD};
pub use profile::{Asset, Attachment, TextProfile, TextSession};
pub use registry::{
    ChannelError, ChannelHandle, ChannelInbound, ChannelLink, ChannelRefusal, ChannelRegistry,
    InboundBody, DEFAULT_LOSSY_BUDGET,
};
pub use transport::{mint_token, LifecycleError, RuntimeFileOptions, WsTransport};
pub use unix_listener::UnixSocket;

// The wire's types that the server's signatures take or return, so a host needs no second
// import path for them.
/// Shared byte buffers (the `bytes` crate), as channel sends and inbound frames carry them.
pub use bytes::Bytes;
pub use carrier_protocol::channel::{
    Binary, ChannelDescriptor, ChannelDirection, DeliveryClass, DEFAULT_BULK_WINDOW,
};
pub use carrier_protocol::channel_frame::{ChannelFrameError, EventBytes, FrameBody};
pub use carrier_protocol::close::CloseCode;
pub use carrier_protocol::error::ProtocolErrorCode;
pub use carrier_protocol::Role;

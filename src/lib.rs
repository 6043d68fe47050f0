//! # carrier
//!
//! A loopback WebSocket carrier for AI-agent sessions. One socket carries two things at once:
//! text frames with a JSON agent protocol (prompts in, streamed output, permission prompts,
//! history, status) and binary frames with named, host-declared payload channels (audio, file
//! uploads, app events) that the carrier routes by name and never looks inside.
//!
//! ## Layout
//!
//! - [`protocol`] — the `carrier-protocol` crate (`protocol/`), the wire with no I/O runtime,
//!   sockets or clock: the text envelope and its codec, versions and features, the method
//!   catalog, error codes, close codes, channel descriptors, the channel-frame codec and the
//!   resume ring. Server and client both use its types and define none of them again.
//! - [`server`] — the listener and port retry, admission (one function decides), the
//!   per-connection task with its single outbound path, limits, metrics, the channel registry and
//!   the [`server::WsTransport`] lifecycle. Each of its public types has one path,
//!   `carrier::server::T`.
//! - [`agent`] — the host-side session traits, the session hub that stamps `seq` and keeps the
//!   resume ring, the agent-protocol text profile, the embedded default agent, and external agent
//!   processes (`carrier serve --agent-cmd`, [`agent::process`]).
//! - [`client`] — the client `Transport` trait, the WebSocket client and the handshake layer
//!   (feature `client`, default).
//! - [`discovery`] — runtime files: how a local client finds a running carrier and its token;
//!   and whose listener a loopback connection reached, checked before any token goes out
//!   (SPEC section 10).
//!
//! Without default features the library is the server a host embeds: no client. The `testing`
//! feature (off) adds the test doubles the benches and the client's reference suite use.
//!
//! The other crates of the workspace, each in a folder of its own: the `carrier` binary
//! (`cli/`, the `carrier-cli` package), which only parses arguments and wires these together;
//! the reference channels (`channels/`, `carrier-channels`), which depend on this library like
//! any host, so they can only use its public API; the load generator behind `carrier bench`
//! (`loadgen/`, `carrier-loadgen`); and what the integration tests share (`test-support/`).
//!
//! Data flows one way: bytes in → frame decoded → routed (agent protocol or channel) → handler →
//! outbound path → bytes out. No module imports one that imports it back, here or in the CLI
//! (`tests/imports.rs`).

pub mod agent;
#[cfg(feature = "client")]
pub mod client;
pub mod discovery;
pub mod server;
mod setters;

/// The wire (the `carrier-protocol` crate): one module, reachable as `carrier::protocol`.
pub use carrier_protocol as protocol;

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
//! - [`server`] — what a host runs: [`server::WsTransport`] (or [`server::CarrierService`]
//!   inside its own hyper or axum server), its configuration ([`server::CarrierConfig`]) and
//!   payload channels ([`server::ChannelHandle`]). Each of its public types has one path,
//!   `carrier::server::T`; its internals (admission, the outbound queue, HTTP parsing) are not
//!   public.
//! - [`agent`] — the agent protocol on text frames ([`agent::AgentProfile`]) and what a host
//!   implements for its own agent: [`agent::ProtocolSession`], whose turns stream output,
//!   await permission decisions and await their cancellation on a [`agent::TurnSink`]
//!   (`examples/embedded_agent.rs`); the session hub that stamps `seq` and keeps the resume
//!   ring; the embedded default agent; and external agent processes
//!   (`carrier serve --agent-cmd`, [`agent::process`]).
//! - [`client`] — the client `Transport` trait, the WebSocket client and the handshake layer
//!   (feature `client`, default).
//! - [`discovery`] — runtime files: how a local client finds a running carrier and its token;
//!   and whose listener a loopback connection reached, checked before any token goes out
//!   (SPEC section 10).
//!
//! Without default features the library is the server a host embeds: no client. The `testing`
//! feature (off) is not API: it adds the test doubles the benches and the client's reference
//! suite use, and makes internals reachable for this workspace's tests, benches and fuzz
//! targets (`server::testing`).
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

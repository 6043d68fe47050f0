//! # carrier
//!
//! A loopback WebSocket carrier for AI-agent sessions. A host — an agent runtime, a desktop
//! app — embeds it; local clients (a browser page, an editor extension, a CLI) connect on
//! `127.0.0.1`. One socket carries two things at once: text frames with a JSON agent protocol
//! (prompts in, streamed output, permission prompts, history, status) and binary frames with
//! named payload channels the host declares (audio, file uploads, app events), which the
//! carrier routes by name and never looks inside. Admission (Host and Origin checks, a token
//! compared in constant time, roles) and every memory bound are the carrier's job, not yours.
//!
//! ## Quickstart
//!
//! A host with its own agent (it answers with the prompt's words in reverse order), an event
//! channel `telemetry` that only the host sends on, and a Rust client running one turn against
//! it (the same client style as the README and `examples/rust_client.rs`):
//!
//! ```
//! use std::sync::Arc;
//!
//! use carrier::agent::{AgentProfile, HostError, InMemoryDirectory, ProtocolSession, TurnStart};
//! use carrier::client::{ChannelMessage, Client, ClientEvent, ReceivedSessionEventKind};
//! use carrier::client::{WsClientTransport, WsOptions};
//! use carrier::server::{Binary, CarrierConfig, ChannelDescriptor, WsTransport};
//! use futures_util::StreamExt;
//! use serde_json::json;
//!
//! /// The host's agent: one per session. `start_turn` is the only method it must write.
//! struct Reverse;
//!
//! impl ProtocolSession for Reverse {
//!     fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
//!         let TurnStart { prompt, sink, .. } = turn;
//!         tokio::spawn(async move {
//!             let reply: Vec<&str> = prompt.split_whitespace().rev().collect();
//!             let reply = reply.join(" ");
//!             for word in reply.split_inclusive(' ') {
//!                 // An error means the turn has ended (a client aborted it): stop.
//!                 if sink.delta(word).is_err() {
//!                     return;
//!                 }
//!             }
//!             let _ = sink.complete(&reply);
//!         });
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The host: a carrier on a free loopback port, the agent, one channel.
//! let carrier = WsTransport::new(CarrierConfig::default().with_port(0))?;
//! carrier.attach(AgentProfile::builder(InMemoryDirectory::new(|_| Arc::new(Reverse))).build());
//! let telemetry = carrier.register_channel(
//!     ChannelDescriptor::new("telemetry", &["cpu"], Binary::Refused).host_to_clients(),
//! )?;
//! carrier.start().await?;
//! let url = carrier.url().unwrap_or_default();
//! let token = carrier.resolved_token().unwrap_or_default();
//!
//! // A client, as any other local process would connect.
//! let client = Client::new(Arc::new(WsClientTransport::new(WsOptions::new(url).token(token))));
//! let mut events = client.events(); // subscribe before connecting: nothing is missed
//! let mut cpu = client.channel("telemetry");
//! client.connect().await?;
//! let turn = client.submit("world hello").await?;
//! // Events arrive in order: wait (at most 10 s) for the turn to complete.
//! let reply = tokio::time::timeout(std::time::Duration::from_secs(10), async {
//!     while let Some(event) = events.next().await {
//!         if let ClientEvent::Session(event) = event {
//!             if let ReceivedSessionEventKind::TurnCompleted { turn_id, text, .. } = event.kind {
//!                 if turn_id == turn {
//!                     return text;
//!                 }
//!             }
//!         }
//!     }
//!     String::new()
//! })
//! .await?;
//! assert_eq!(reply, "hello world");
//!
//! // The host broadcasts on its channel to every admitted connection.
//! telemetry.send_event("cpu", json!({"percent": 12}))?;
//! if let Some(frame @ ChannelMessage::Event { .. }) = cpu.next().await {
//!     assert_eq!(frame.json::<serde_json::Value>()?["payload"]["percent"], 12);
//! }
//! client.disconnect().await;
//! carrier.stop().await;
//! # Ok(())
//! # }
//! ```
//!
//! `docs/embedding.md` in the repository is the host's guide (mounted hosts, channel classes,
//! restarts, logging, shutdown). More, each a complete program: `examples/axum_mount.rs` (the
//! carrier inside an axum application, at a path of its own), `examples/reverse_agent.rs` (an agent as a separate
//! process, `carrier serve --agent-cmd`). The wire itself, for clients in other languages, is
//! described in `docs/protocol.md` in the repository.
//!
//! ## Which trait for what
//!
//! | you want to … | implement or use |
//! |---|---|
//! | run your own agent in the host's process | implement [`agent::ProtocolSession`] (one per session); hand a factory to [`agent::InMemoryDirectory::new`] and that to [`agent::AgentProfile::builder`] |
//! | run an agent as a separate program | nothing: [`agent::process`] speaks the protocol as JSON lines over its stdin/stdout |
//! | list, start and switch the host's own sessions | implement [`agent::SessionDirectory`] (and [`agent::SessionBinder`] to choose a connection's session) |
//! | answer `usage.report` | implement [`agent::UsageReporter`] |
//! | carry audio, files or app events | nothing: [`server::WsTransport::register_channel`] gives a [`server::ChannelHandle`] to send and receive on |
//! | serve inside your own axum or hyper server | [`server::WsTransport::service`], a [`server::CarrierService`] you mount at any path |
//! | serve over a socket you already own | [`agent::Bridge`] |
//! | speak another text protocol on the socket | implement [`server::TextProfile`] and [`server::TextSession`]; at a path of its own beside another: [`server::Attachment::with_route`] |
//! | speak another wire over the agent protocol's sessions | [`agent::foreign`] ([`agent::AgentProfile::sessions`]) |
//! | talk to a carrier from Rust | [`client::Client`] over [`client::WsClientTransport`]; over another link, implement [`client::Transport`] |
//!
//! ## Modules
//!
//! Each is a crate of its own, re-exported here, so the compiler holds the layering: the server
//! knows no agent protocol, the protocol no I/O.
//!
//! - [`server`] (`carrier-server`) — the listener, admission, connections and their one
//!   outbound path, limits, metrics, payload channels, and the [`server::WsTransport`]
//!   lifecycle (`new` → `attach` → `start` → `stop`).
//! - [`agent`] (`carrier-agent`) — the agent protocol on the server's text frames: the session
//!   traits a host implements, the session hub that numbers events and keeps the resume ring,
//!   the embedded demo agent, agent processes, the serverless bridge, and the seam other wires
//!   ride ([`agent::foreign`]).
//! - [`client`] (`carrier-client`) — the Rust client: the `Transport` trait, the WebSocket
//!   client and the handshake layer (feature `client`, on by default).
//! - [`discovery`] (`carrier-discovery`) — runtime files, how a local client finds a running
//!   carrier and its token, and whose listener a loopback port belongs to before a token goes
//!   out.
//! - [`protocol`] (`carrier-protocol`) — the wire with no I/O: envelope, catalog, versions and
//!   features, errors, admission rules, channel-frame codec, resume ring.
//! - `robota` (`carrier-robota`, feature `robota`) — the seed system's own wire over the agent
//!   protocol's sessions, for a host that attaches it.
//!
//! ## Features
//!
//! - `client` (default) — [`client`]. A host that embeds only the server builds with
//!   `default-features = false`.
//! - `robota` (off) — `robota`, the seed system's own wire over the agent protocol's sessions:
//!   a foreign wire, which a host attaches only when it asks for it (`carrier serve` does).

#![cfg_attr(docsrs, feature(doc_cfg))]

// Each layer inlined, so this crate's documentation is the whole API at the paths a host writes
// (`carrier::server::WsTransport`), not a list of links to other crates.

/// The Agent Client Protocol on both sides (the `carrier-acp` crate).
#[cfg(feature = "acp")]
#[cfg_attr(docsrs, doc(cfg(feature = "acp")))]
#[doc(inline)]
pub use carrier_acp as acp;
/// The agent protocol on the carrier's text frames (the `carrier-agent` crate).
#[doc(inline)]
pub use carrier_agent as agent;
/// The Rust client (the `carrier-client` crate).
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
#[doc(inline)]
pub use carrier_client as client;
/// Finding a running carrier, and trusting what is found (the `carrier-discovery` crate).
#[doc(inline)]
pub use carrier_discovery as discovery;
/// The wire, with no I/O (the `carrier-protocol` crate).
#[doc(inline)]
pub use carrier_protocol as protocol;
/// The seed system's own wire (the `carrier-robota` crate).
#[cfg(feature = "robota")]
#[cfg_attr(docsrs, doc(cfg(feature = "robota")))]
#[doc(inline)]
pub use carrier_robota as robota;
/// The server a host runs (the `carrier-server` crate).
#[doc(inline)]
pub use carrier_server as server;

/// The README's code blocks, compiled and run as doctests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

/// The embedding guide's code blocks (`docs/embedding.md`), compiled and run the same way.
#[cfg(doctest)]
#[doc = include_str!("../docs/embedding.md")]
mod embedding_guide {}

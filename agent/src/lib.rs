//! The agent protocol on the carrier's text frames, and the host-side traits behind it.
//!
//! - [`AgentProfile`] — the [`carrier_server::TextProfile`] a [`carrier_server::WsTransport`]
//!   attaches: handshake, method dispatch through the catalog, session binding per connection.
//! - [`ProtocolSession`] / [`TurnSink`] — the agent of one session: for each turn the prompt
//!   and a sink on which it streams deltas and agent updates ([`TurnSink::agent_update`]),
//!   awaits permission decisions ([`TurnSink::ask_permission`]) and awaits the turn's
//!   cancellation ([`TurnSink::cancelled`]); a [`SessionOutlet`] for what it says between
//!   turns. The carrier allocates the ids and routes the answers.
//! - [`SessionDirectory`] / [`SessionBinder`] — the host's sessions (`sessions.list`,
//!   `sessions.start`) and which one a new connection is bound to; [`InMemoryDirectory`] and
//!   [`DefaultBinder`] are the defaults.
//! - [`UsageReporter`] — the host's usage read model (`usage.report`); without one
//!   ([`NoUsage`], the builder's default) no usage feature is announced; [`SessionUsage`]
//!   counts words per session (the embedded agent's).
//! - `hub` — the carrier's side of each session: `seq` from 1, fan-out of each event encoded
//!   once to every bound, handshaken connection, the turn state machine, and the session's
//!   record (`record`: its resume ring and its bounded history, `history`).
//! - [`SessionMemory`] — one budget for every session's ring and history together; the least
//!   recently used sessions lose their oldest entries first (`memory`).
//! - [`embedded`] — the deterministic embedded default agent.
//! - [`process`] — an external agent process (`carrier serve --agent-cmd`) as a session.
//! - [`Bridge`] — the same protocol over a socket the host owns (serverless mode).
//! - [`foreign`] — the seam another text protocol (a foreign wire, such as the seed system's)
//!   rides to drive and hear the same sessions.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use carrier_agent::{AgentProfile, EmbeddedAgent};
//! use carrier_server::{CarrierConfig, WsTransport};
//!
//! let agent = EmbeddedAgent::default().with_demo_delay(Duration::from_millis(1));
//! let transport = WsTransport::new(CarrierConfig::default().with_port(0))?;
//! transport.attach(AgentProfile::embedded(agent));
//! transport.start().await?;
//! # Ok(()) }
//! ```

mod answer;
mod bridge;
mod connection;
mod directory;
pub mod embedded;
mod fit;
pub mod foreign;
mod handler_context;
mod handlers;
mod handshake;
mod history;
mod host;
mod hub;
mod memory;
mod outlet;
pub mod process;
mod profile;
mod record;
mod session;
mod turn_sink;
mod usage;

// The wire's types that this module's signatures take or return.
pub use carrier_protocol::events::DriverInfo;
/// A client's answer to a permission prompt, as [`TurnSink::ask_permission`] yields it.
pub use carrier_protocol::methods::Decision;
pub use carrier_protocol::version::VersionPair;

pub use bridge::{Bridge, BridgeError, BridgeFrame, BridgeSendError};
pub use directory::{
    AgentFactory, DefaultBinder, InMemoryDirectory, SessionBinder, SessionDirectory, SessionEntry,
};
pub use embedded::{EmbeddedAgent, EmbeddedSession};
pub use history::HistoryConfig;
pub use memory::{SessionMemory, DEFAULT_MAX_SESSION_BYTES, ENTRY_OVERHEAD};
pub use outlet::SessionOutlet;
pub use profile::{AgentProfile, AgentProfileBuilder};
pub use record::RingConfig;
pub use session::{AgentAnswer, AgentCallError, HostError, ProtocolSession, TurnStart};
pub use turn_sink::{PendingPermission, PermissionChoice, TurnEnded, TurnSink};
pub use usage::{NoUsage, SessionUsage, TurnRecord, UsageReporter};

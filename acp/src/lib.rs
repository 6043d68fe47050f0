//! # carrier-acp
//!
//! The Agent Client Protocol (ACP v1: JSON-RPC 2.0) on carrier, on both of its sides, over the
//! agent layer's sessions (`carrier_agent::foreign`):
//!
//! - the **client side** ([`AcpProfile`], module `profile`): a text profile a host attaches at
//!   [`ACP_PATH`], where carrier is the ACP *agent* of every editor or ACP client that
//!   connects;
//! - the **agent side**: an ACP agent process carrier launches and drives as its ACP *client*
//!   over stdio, as the agent of carrier's sessions.
//!
//! Layout:
//!
//! - `rpc` — JSON-RPC 2.0 framing and error codes, shared by both sides (internal).
//! - `profile` — the client side: `/acp` connections, their sessions' events as ACP messages.
//! - [`agent_host`] — an ACP agent process as the agent of carrier's sessions
//!   (`carrier serve --agent-acp`): carrier is its ACP client over stdio.

pub mod agent_host;
mod profile;
pub(crate) mod rpc;

pub use profile::{AcpProfile, ACP_PATH};

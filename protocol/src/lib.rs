//! # carrier-protocol
//!
//! carrier's wire: formats and rules with no I/O runtime, no sockets and no clock, so the
//! server, the client and any other implementation read and write the same types. The
//! `carrier` crate re-exports this crate as `carrier::protocol`.
//!
//! - [`role`] — the connection roles `drive` and `observe`.
//! - [`admission`] — who may connect: the Host, Origin, token and role rules of an upgrade
//!   request, decided by one pure function.
//! - [`ids`] — the session, turn and permission-request ids, as types (strings on the wire).
//! - [`envelope`] — the text envelope: parsing a frame into request/response/event with strict
//!   validation, and encoding the frames the server sends.
//! - [`version`] — `"MAJOR.MINOR"` protocol versions and the compatibility rules.
//! - [`features`] — protocol features, the version that introduced each, and feature preflight.
//! - [`catalog`] — the method catalog, the single source of every method and event name.
//! - [`methods`] / [`events`] — the params, result and event payload types.
//! - [`channel_frame`] — the binary channel-frame codec (docs/protocol.md, "Channels"), zero-copy.
//! - [`error`] — error codes, error objects and the `protocol_error` event.
//! - [`resume`] — the bounded per-session ring of recent events used for resume.
//! - [`channel`] — payload channels as the host declares them, and their delivery classes.
//! - [`close`] — the WebSocket close codes the carrier sends.
//! - [`timestamp`] — RFC 3339 timestamps in UTC, as runtime files and the seed system's wire
//!   write them (formatted from a time the caller passes: this crate reads no clock).
//!
//! No file access either (`protocol/tests/it/no_io.rs` keeps this crate free of file and stream
//! writes), and no code generators: the JSON Schemas, TypeScript declarations, JavaScript tables
//! and reference tables derived from the catalog are written by `carrier schema`, their only
//! caller, in the CLI crate.

#![warn(missing_docs, unreachable_pub)]

pub mod admission;
pub mod catalog;
pub mod channel;
pub mod channel_frame;
pub mod channel_info;
pub mod close;
pub mod envelope;
pub mod error;
pub mod events;
pub mod features;
pub mod ids;
pub mod methods;
pub mod resume;
pub mod role;
pub mod timestamp;
pub mod version;

pub use role::Role;

//! The seam between the carrier and what rides on text frames.
//!
//! The carrier is payload-agnostic: every text message of an admitted connection goes to a
//! [`TextSession`] opened by the attached [`TextProfile`]. The agent protocol
//! ([`crate::agent::AgentProfile`]) is one such profile. A profile talks back only through the
//! [`Connection`] handle, whose sends all go through the connection's one outbound path.

use std::sync::Arc;

use bytes::Bytes;

use super::context::CarrierContext;
use super::handle::Connection;
use super::metrics::Gauge;
use super::registry::ChannelRefusal;

/// Builds a [`TextSession`] for each admitted connection.
pub trait TextProfile: Send + Sync + 'static {
    /// Called once per admitted connection, before any of its frames is read.
    fn open(&self, conn: Connection, ctx: &CarrierContext) -> Box<dyn TextSession>;

    /// Called by `stop()`: the profile releases what it holds (child processes, tasks).
    fn shutdown(&self) {}

    /// Figures this profile keeps that `GET /metrics` reports beside the carrier's own (the
    /// agent profile's session memory). Asked once, when the profile is attached; the profile
    /// updates the gauges, the carrier only reads them.
    fn gauges(&self) -> Vec<Gauge> {
        Vec::new()
    }

    /// Other paths than `/` at which this attachment upgrades, each with the profile that
    /// serves the connections admitted there (the agent protocol also serves the seed system's
    /// own wire at `/robota`). Asked once, when the profile is attached; the profiles share
    /// whatever this one holds, so only this one is shut down.
    fn routes(&self) -> Vec<(&'static str, Arc<dyn TextProfile>)> {
        Vec::new()
    }
}

/// The per-connection side of a [`TextProfile`].
pub trait TextSession: Send {
    /// One complete text message, already checked to be valid UTF-8 and within the soft limit.
    /// Must not block; work that waits is spawned and answers through the connection.
    fn on_text(&mut self, text: &str);

    /// One complete binary message. The default hands it back, and the carrier routes it to the
    /// channel registry (docs/protocol.md, "Channels"); a session that handles raw binary itself (a
    /// plain echo endpoint, for conformance testing) returns `None`.
    fn on_binary(&mut self, message: Bytes) -> Option<Bytes> {
        Some(message)
    }

    /// The answer to a text message of `size` bytes over the soft limit `limit` (the socket
    /// stays open). The default, `None`, is the agent protocol's `too_large` reply.
    fn too_large(&mut self, _size: usize, _limit: usize) -> Option<Bytes> {
        None
    }

    /// The answer (a text message) to a binary message the channel registry refused — not a
    /// channel frame, an unknown channel, an undeclared event, … (the socket stays open). The
    /// default, `None`, is the agent protocol's `protocol_error` event.
    fn channel_refused(&mut self, _refusal: &ChannelRefusal) -> Option<Bytes> {
        None
    }

    /// The connection has ended (any reason). Detach from anything that sends to it.
    fn on_close(&mut self) {}
}

/// What [`crate::server::WsTransport::attach`] takes: the text profile for every connection.
#[derive(Clone)]
pub struct Attachment(pub Arc<dyn TextProfile>);

impl<P: TextProfile> From<Arc<P>> for Attachment {
    fn from(p: Arc<P>) -> Self {
        Attachment(p)
    }
}

impl From<Arc<dyn TextProfile>> for Attachment {
    fn from(p: Arc<dyn TextProfile>) -> Self {
        Attachment(p)
    }
}

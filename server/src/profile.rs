//! The seam between the carrier and what rides on text frames.
//!
//! The carrier is payload-agnostic: every text message of an admitted connection goes to a
//! [`TextSession`] opened by the attached [`TextProfile`]. The agent protocol
//! (`AgentProfile`, in `carrier-agent`) is one such profile; an [`Attachment`] puts one at `/` and
//! others at other paths. A profile talks back only through the
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

    /// Files the carrier serves beside the socket for this profile's web clients (`GET
    /// /console` and the JavaScript modules it imports, for the agent protocol), each at
    /// `/NAME` (beside the socket when the carrier is mounted at a prefix). Asked once, when
    /// the profile is attached at `/`; the other profiles of an attachment serve none.
    fn assets(&self) -> Vec<Asset> {
        Vec::new()
    }
}

/// A file the carrier serves for a text profile's web clients ([`TextProfile::assets`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asset {
    /// The last segment of its path: `console` is served at `/console`.
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its content.
    pub body: &'static str,
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

    /// The answer to `message`, a text message over the soft limit `limit` (the socket stays
    /// open; the message is valid UTF-8, and the answer may read it, e.g. for a request id).
    /// The default, `None`, is the agent protocol's `too_large` reply.
    fn too_large(&mut self, _message: &[u8], _limit: usize) -> Option<Bytes> {
        None
    }

    /// The answer (a text message) to a binary message the channel registry refused — not a
    /// channel frame, an unknown channel, an undeclared event, … (the socket stays open). The
    /// default, `None`, is the agent protocol's `protocol_error` event.
    fn channel_refused(&mut self, _refusal: &ChannelRefusal) -> Option<Bytes> {
        None
    }

    /// The answer (a text message) to a binary message that came before the profile's
    /// handshake; the carrier then closes the connection with 1008. The default, `None`, is the
    /// agent protocol's `protocol_error` event (`handshake_required`).
    fn binary_before_handshake(&mut self) -> Option<Bytes> {
        None
    }

    /// The connection has ended (any reason). Detach from anything that sends to it.
    fn on_close(&mut self) {}
}

/// What [`crate::WsTransport::attach`] takes: the text profile that serves the
/// connections admitted at `/`, and the profiles attached at other paths.
///
/// A profile at another path speaks another wire over what the profile at `/` holds (the
/// seed system's wire over the agent protocol's sessions, at `/robota`): only the profile at
/// `/` is shut down by `stop()`, which also clears the whole attachment.
///
/// ```
/// use std::sync::Arc;
/// use carrier_server::{Attachment, CarrierContext, Connection, TextProfile, TextSession};
///
/// struct Echo;
/// struct EchoSession(Connection);
/// impl TextProfile for Echo {
///     fn open(&self, conn: Connection, _ctx: &CarrierContext) -> Box<dyn TextSession> {
///         conn.mark_handshaken();
///         Box::new(EchoSession(conn))
///     }
/// }
/// impl TextSession for EchoSession {
///     fn on_text(&mut self, text: &str) {
///         let _ = self.0.send_text(text.to_owned());
///     }
/// }
///
/// let echo = Arc::new(Echo);
/// let attachment = Attachment::new(echo.clone()).with_route("/echo", echo);
/// # let _ = attachment;
/// ```
#[derive(Clone)]
pub struct Attachment {
    profile: Arc<dyn TextProfile>,
    routes: Vec<(&'static str, Arc<dyn TextProfile>)>,
}

impl Attachment {
    /// `profile` at `/`, and nothing at other paths.
    pub fn new(profile: Arc<dyn TextProfile>) -> Self {
        Attachment {
            profile,
            routes: Vec::new(),
        }
    }

    /// Also serves the connections that upgrade at `path` (one segment: `/robota`) with
    /// `profile`; a later route at the same path replaces an earlier one. `/` is the main
    /// profile's.
    pub fn with_route(mut self, path: &'static str, profile: Arc<dyn TextProfile>) -> Self {
        self.routes.retain(|(route, _)| *route != path);
        if path != "/" {
            self.routes.push((path, profile));
        }
        self
    }

    /// The profile at `/`.
    pub fn profile(&self) -> &Arc<dyn TextProfile> {
        &self.profile
    }

    /// The other paths and their profiles.
    pub(crate) fn routes(&self) -> &[(&'static str, Arc<dyn TextProfile>)] {
        &self.routes
    }
}

impl<P: TextProfile> From<Arc<P>> for Attachment {
    fn from(p: Arc<P>) -> Self {
        Attachment::new(p)
    }
}

impl From<Arc<dyn TextProfile>> for Attachment {
    fn from(p: Arc<dyn TextProfile>) -> Self {
        Attachment::new(p)
    }
}

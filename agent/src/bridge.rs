//! [`Bridge`]: the agent protocol over a socket the host already owns (serverless mode).
//!
//! The host feeds each inbound text message to [`Bridge::feed`] and supplies a send function;
//! the bridge answers exactly as a carrier connection would — same handshake, dispatch, session
//! events and resume. It is built on the server's [`DetachedConnection`] (the carrier's own
//! outbound queue, with no socket), so delivery has the same latched semantics as on a carrier
//! socket: a send function that
//! fails (or a queue over its byte budget) fails the bridge connection **once** — the queue
//! stops accepting frames, the session drops the connection from its fan-out, and no later
//! frame reaches the send function.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use carrier_agent::{AgentProfile, Bridge, BridgeFrame, EmbeddedAgent};
//! use carrier_protocol::Role;
//! use carrier_server::{CarrierContext, DriverInfo, Limits};
//!
//! let profile = AgentProfile::embedded(EmbeddedAgent::default());
//! let driver = DriverInfo { driver_id: "me".into(), surface: "bridge".into() };
//! let ctx = CarrierContext::standalone(Limits::default(), Role::Drive, driver, "epoch-1");
//! let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
//! let mut bridge = Bridge::open(&profile, &ctx, Role::Drive, move |frame| {
//!     tx.send(frame).map_err(|e| e.to_string().into())
//! })
//! .unwrap();
//! bridge.feed(r#"{"id":"h","method":"system.handshake","params":{"protocol_version":"1.0","min_compatible_protocol":"1.0"}}"#);
//! let Some(BridgeFrame::Text(reply)) = rx.recv().await else { panic!() };
//! assert!(std::str::from_utf8(&reply).unwrap().contains("\"session_id\""));
//! # }
//! ```

use bytes::Bytes;
use tokio::task::JoinHandle;

use super::profile::AgentProfile;
use carrier_protocol::close::CloseCode;
use carrier_protocol::envelope::too_large_reply;
use carrier_protocol::Role;
use carrier_server::{
    CarrierContext, Connection, CountedConnection, DeliveryError, DetachedConnection,
    OutboundFrame, TextProfile, TextSession,
};

/// One frame for the host to write to its socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BridgeFrame {
    /// A text message (one complete JSON document).
    Text(Bytes),
    /// Close the socket with this code and reason; nothing follows.
    Close {
        /// WebSocket close code (e.g. 1008 for a missing handshake).
        code: u16,
        /// Reason, at most 123 bytes.
        reason: String,
    },
}

/// What a host's send function returns when it could not write.
pub type BridgeSendError = Box<dyn std::error::Error + Send + Sync>;

/// A bridge could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BridgeError {
    /// The bridge spawns its writer on the current tokio runtime.
    #[error("Bridge::open must be called inside a tokio runtime")]
    NoRuntime,
}

/// One protocol connection over a host-owned socket.
pub struct Bridge {
    conn: Connection,
    session: Box<dyn TextSession>,
    ctx: CarrierContext,
    /// Counts the bridge among the context's connections until it closes.
    counted: Option<CountedConnection>,
    timer: JoinHandle<()>,
    ended: bool,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").field("conn", &self.conn).finish()
    }
}

impl Bridge {
    /// Opens a connection on `profile` with at most `role` (capped by the context's grant).
    /// `send` is called from a writer task, in order, once per outbound frame; the first
    /// `Err` fails the connection for good. The handshake timeout of `ctx.limits()` applies.
    pub fn open<F>(
        profile: &AgentProfile,
        ctx: &CarrierContext,
        role: Role,
        send: F,
    ) -> Result<Bridge, BridgeError>
    where
        F: FnMut(BridgeFrame) -> Result<(), BridgeSendError> + Send + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BridgeError::NoRuntime)?;
        let detached = DetachedConnection::new(role.min(ctx.grant()), ctx.limits().queue_bytes);
        let conn = detached.connection().clone();
        runtime.spawn(pump(detached, send));
        let timer = {
            let conn = conn.clone();
            let timeout = ctx.limits().handshake_timeout;
            runtime.spawn(async move {
                tokio::time::sleep(timeout).await;
                if !conn.is_handshaken() {
                    conn.close(CloseCode::POLICY, "handshake timeout");
                }
            })
        };
        let counted = Some(ctx.count_connection());
        let session = profile.open(conn.clone(), ctx);
        Ok(Bridge {
            conn,
            session,
            ctx: ctx.clone(),
            counted,
            timer,
            ended: false,
        })
    }

    /// Handles one inbound text message. A message over the soft limit is answered
    /// `too_large` and the connection stays open. Fails with [`DeliveryError::Closed`] once
    /// the connection is closing or has failed.
    pub fn feed(&mut self, text: &str) -> Result<(), DeliveryError> {
        if self.ended || !self.conn.is_open() {
            return Err(DeliveryError::Closed);
        }
        let limit = self.ctx.limits().max_text_bytes;
        if text.len() > limit {
            self.ctx.count_protocol_error();
            return self.conn.send_text(too_large_reply(text, limit));
        }
        self.session.on_text(text);
        Ok(())
    }

    /// The connection handle (id, role, whether it is still open).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Whether frames are still accepted.
    pub fn is_open(&self) -> bool {
        !self.ended && self.conn.is_open()
    }

    /// The host's socket is gone (or the host is done): detach from the session and send a
    /// normal close if nothing else did. Idempotent; also runs on drop.
    pub fn close(&mut self) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        self.timer.abort();
        self.session.on_close();
        self.conn.close(CloseCode::NORMAL, "");
        // Uncounted once the host's socket is gone, whatever the writer still finishes.
        self.counted = None;
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.close();
    }
}

/// The bridge connection's only writer: hands its frames to `send` in order; ends after a
/// close or on the first failed send (which latches the failure).
async fn pump<F>(mut detached: DetachedConnection, mut send: F)
where
    F: FnMut(BridgeFrame) -> Result<(), BridgeSendError>,
{
    while let Some(frame) = detached.next_frame().await {
        let (frame, last) = match frame {
            OutboundFrame::Text(text) => (BridgeFrame::Text(text), false),
            OutboundFrame::Close { code, reason } => (
                BridgeFrame::Close {
                    code: code.as_u16(),
                    reason,
                },
                true,
            ),
            // Binary channel frames belong to a real WebSocket, not this bridge.
            OutboundFrame::Binary { .. } => continue,
        };
        if let Err(e) = send(frame) {
            tracing::debug!(error = %e, "bridge send failed");
            detached.fail_write();
            return;
        }
        if last {
            return;
        }
    }
}

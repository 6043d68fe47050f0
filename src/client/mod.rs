//! The client side of carrier (SPEC section 11): a swappable [`Transport`], the WebSocket
//! transport with reconnect, and the handshake layer [`Client`].
//!
//! Three layers, each usable on its own:
//!
//! 1. [`Transport`] — a frame pipe: `connect`, `disconnect`, `send` (one call, one frame),
//!    `on_message`, `on_state_change`, plus `send_binary`/`on_binary` for payload channels.
//!    It never interprets frames.
//! 2. [`ReconnectingTransport`] — a `Transport` over any [`Connector`], with the reconnect policy
//!    ([`Backoff`]: 1 s → 2 s → 4 s → 8 s → 16 s → 30 s, capped; no retry after close 1008).
//!    [`WsClientTransport`] is this over a WebSocket.
//! 3. [`Client`] — the handshake layer over any `Transport`: `system.handshake` first, requests
//!    correlated by id with timeouts, typed errors ([`ClientError`] carries the wire error
//!    object), local `unsupported_feature` preflight, typed session events, and resume after a
//!    reconnect with duplicate dropping and a history refetch on `gap`/`reset`.
//!
//! # A whole turn
//!
//! ```no_run
//! use std::sync::Arc;
//! use carrier::client::{Client, ClientEvent, SessionEventKind, WsClientTransport, WsOptions};
//! use serde_json::json;
//! use tokio::sync::mpsc;
//!
//! # async fn run() -> Result<(), carrier::client::ClientError> {
//! let transport = WsClientTransport::new(WsOptions::new("ws://127.0.0.1:7070/").token("…"));
//! let client = Client::new(Arc::new(transport));
//!
//! // Handlers run on the transport's task: hand events to your own task.
//! let (events, mut inbox) = mpsc::unbounded_channel();
//! let _subscription = client.on_event(Box::new(move |event: &ClientEvent| {
//!     let _ = events.send(event.clone());
//! }));
//!
//! client.connect().await?;
//! let submitted = client.request("session.submit", json!({"prompt": "hello"})).await?;
//! let turn = submitted["turn_id"].as_str().unwrap_or_default().to_owned();
//! while let Some(event) = inbox.recv().await {
//!     let ClientEvent::Session(event) = event else { continue };
//!     match event.kind {
//!         SessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => print!("{delta}"),
//!         SessionEventKind::TurnCompleted { turn_id, .. } if turn_id == turn => break,
//!         _ => {}
//!     }
//! }
//! client.disconnect().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Writing another transport
//!
//! Either implement [`Connector`] for your socket and wrap it in [`ReconnectingTransport`], or
//! implement [`Transport`] directly. `tests/client_reference.rs` is the reference suite: copy it
//! and swap the fake socket for yours. `tests/client_real_server.rs` runs this client against
//! the real carrier: a server restart (`reset`), a connection cut mid-turn (`resumed`, no event
//! lost or repeated), a skewed and an incompatible server.

mod backoff;
mod error;
mod events;
mod features;
mod handshake;
mod probe;
mod reconnect;
mod resume;
mod server_frames;
mod subscribers;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;
mod transport;
mod ws;

pub use backoff::Backoff;
pub use error::{ClientError, EffectState, ErrorCode, ReceivedErrorCode, WireError};
pub use events::{
    ClientEvent, Decision, HistoryEntry, ResumeOutcome, SessionEvent, SessionEventKind,
};
pub use features::{feature_for_method, preflight, FeatureRequirement};
pub use handshake::{Client, ClientOptions, EventHandler, HandshakeInfo, PeerInfo, CLIENT_NAME};
pub use probe::{probe_health, Health, Probe};
pub use reconnect::{
    Connector, Inbound, Outbound, ReconnectingTransport, Socket, SocketReader, SocketWriter,
};
pub use resume::ResumePoint;
// What `carrier pipe` reads its socket with until it dials through this client.
#[doc(hidden)]
pub use server_frames::{ServerFrameError, ServerFrames, ServerMessage};
pub use transport::{
    BinaryHandler, CloseInfo, ConnectionState, MessageHandler, StateHandler, Subscription,
    Transport, TransportError,
};
// Whose listener a dial reached, and the refusals' details.
pub use crate::discovery::listener::{ForeignListener, Listener, UnattributedListener};
// The wire's version types: one parser, the server's (it refuses `"01.0"`, for one).
pub use crate::protocol::version::{
    ProtocolVersion, Side, Verdict, VersionPair, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION,
};
pub use ws::{TokenPlacement, WsClientTransport, WsConnector, WsOptions};

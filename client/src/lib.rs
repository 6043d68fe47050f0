//! The client side of carrier (docs/protocol.md, "Client behaviour"): a swappable [`Transport`],
//! the WebSocket transport with reconnect, and the handshake layer [`Client`].
//!
//! Three layers, each usable on its own:
//!
//! 1. [`Transport`] — a frame pipe: `connect`, `disconnect`, `send` (one call, one frame),
//!    `on_message`, `on_state_change`, plus `send_binary`/`on_binary` for payload channels.
//!    It never interprets frames.
//! 2. [`ReconnectingTransport`] — a `Transport` over any [`Connector`], with the reconnect policy
//!    ([`Backoff`]: 1 s → 2 s → 4 s → 8 s → 16 s → 30 s, capped; no retry after close 1008).
//!    [`WsClientTransport`] is this over a WebSocket.
//! 3. [`Client`] — the handshake layer over any `Transport`: `system.handshake` first, typed
//!    calls from the catalog ([`Client::call`]), typed errors ([`ClientError`] carries the wire
//!    error object), local `unsupported_feature` preflight, session events and each channel's
//!    frames as streams, channel sends that number their own `seq` and respect bulk credit,
//!    and resume after a reconnect with duplicate dropping and a history refetch on
//!    `gap`/`reset`. Its decisions are a pure state machine, [`ConnectionMachine`].
//!
//! [`dial`] is the one dialer under all of it (loopback TCP, or the carrier's Unix socket with a
//! `unix:` URL; the listener's owner checked before anything goes out: by the kernel's socket
//! table on TCP, by the peer credentials on the socket); tools that drive the raw socket for
//! speed dial through it too.
//!
//! # A whole turn
//!
//! ```no_run
//! use std::sync::Arc;
//! use carrier_client::{Client, ClientEvent, Decision, ReceivedSessionEventKind, WsClientTransport, WsOptions};
//! use futures_util::StreamExt;
//!
//! # async fn run() -> Result<(), carrier_client::ClientError> {
//! let transport = WsClientTransport::new(WsOptions::new("ws://127.0.0.1:7070/").token("…"));
//! let client = Client::new(Arc::new(transport));
//! let mut events = client.events();
//! client.connect().await?;
//! let turn = client.submit("/tool ls").await?;
//! while let Some(event) = events.next().await {
//!     let ClientEvent::Session(event) = event else { continue };
//!     match event.kind {
//!         ReceivedSessionEventKind::PermissionRequest { request_id, .. } => {
//!             client.respond(request_id, Decision::Allow).await?;
//!         }
//!         ReceivedSessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => print!("{delta}"),
//!         ReceivedSessionEventKind::TurnCompleted { turn_id, .. } if turn_id == turn => break,
//!         _ => {}
//!     }
//! }
//! client.disconnect().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Channels
//!
//! ```no_run
//! # async fn run(client: carrier_client::Client) -> Result<(), carrier_client::ClientError> {
//! use bytes::Bytes;
//! use carrier_client::ChannelMessage;
//! use futures_util::StreamExt;
//!
//! let mut echo = client.channel("mic");
//! let seq = client.send_channel_binary("mic", Bytes::from_static(b"pcm")).await?; // 0, 1, 2 …
//! client.send_channel_event("mic", "level", &serde_json::json!({"db": -20})).await?;
//! if let Some(ChannelMessage::Binary { body, .. }) = echo.next().await {
//!     assert_eq!(&body[..], b"pcm");
//! }
//! # let _ = seq;
//! # Ok(())
//! # }
//! ```
//!
//! # Writing another transport
//!
//! Either implement [`Connector`] for your socket and wrap it in [`ReconnectingTransport`], or
//! implement [`Transport`] directly. `client/tests/it/reference.rs` is the reference suite, run
//! over the in-memory network of [`testing`]: copy it and swap the fake socket for yours. `client/tests/it/real_server.rs` runs this client against
//! the real carrier: a server restart (`reset`), a connection cut mid-turn (`resumed`, no event
//! lost or repeated), a skewed and an incompatible server.

mod backlog;
mod backoff;
mod budget;
mod calls;
mod channels;
mod dialer;
mod error;
mod events;
mod features;
mod inner;
mod lowat;
mod machine;
mod options;
mod parse_bound;
mod probe;
mod read_chunks;
mod reconnect;
mod requests;
mod resume;
mod routes;
mod server_frames;
mod settings;
mod socket;
mod subscribers;
pub mod testing;
mod transport;
mod url_secrets;
mod ws;

pub use backlog::{Backlog, BacklogStream};
pub use backoff::Backoff;
pub use calls::{AppInfo, ChannelInfo, Client, EventHandler, EventStream, HandshakeInfo};
pub use dialer::{dial, Dialed, DialedSocket};
pub use error::{
    ChannelSendError, ClientError, EffectState, ErrorCode, ReceivedError, ReceivedErrorCode,
};
pub use events::{
    ClientEvent, Decision, ReceivedHistoryEntry, ReceivedSessionEvent, ReceivedSessionEventKind,
    ResumeOutcome,
};
pub use features::{feature_for_method, preflight, FeatureRequirement};
pub use machine::{read_response, ChannelGo, ConnectionMachine, HandshakeStep, SendKind};
pub use options::{TokenPlacement, WsOptions};
pub use probe::{probe_health, probe_health_at, Health, Probe};
pub use reconnect::{ReconnectingTransport, DEFAULT_OUTBOUND_BUDGET};
pub use resume::ResumePoint;
pub use routes::{ChannelMessage, ChannelStream};
pub use settings::{ClientOptions, CLIENT_NAME};
pub use socket::{Connector, Incoming, Outgoing, Socket, SocketReader, SocketWriter};
pub use transport::{
    BinaryHandler, CloseInfo, ConnectionState, MessageHandler, Room, StateHandler, Subscription,
    Transport, TransportError,
};
// Whose listener a dial reached, and the refusals' details.
pub use carrier_discovery::listener::{ForeignListener, Listener, UnattributedListener};
// The role a connection asks for ([`WsOptions::role`]) and is granted.
pub use carrier_protocol::Role;
// The wire's version types: one parser, the server's (it refuses `"01.0"`, for one).
pub use carrier_protocol::version::{
    ProtocolVersion, Side, Verdict, VersionPair, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION,
};
pub use url_secrets::{redact_url, split_url_token};
pub use ws::{WsClientTransport, WsConnector};

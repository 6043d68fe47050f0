//! The WebSocket client transport, built on `fastwebsockets` and hyper's HTTP/1 client.
//!
//! [`WsClientTransport`] is a [`ReconnectingTransport`] whose [`Connector`] dials a loopback
//! `ws://` URL or the carrier's Unix socket (`unix:PATH`, or [`WsOptions::unix_socket`]): it
//! connects, checks that the listener belongs to this user (see
//! [`carrier_discovery::listener`]; a listener of another user is refused with
//! [`TransportError::ForeignListener`] before anything is written), then adds the token
//! (`?token=` or the `Sec-WebSocket-Protocol` header) and the requested role (`?role=observe`)
//! and performs the upgrade. Every reconnect repeats the check. Fragmented messages are
//! reassembled before delivery; pings are answered through the socket's single writer task,
//! only the latest of those not yet answered (RFC 6455 §5.5.3).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use fastwebsockets::{Frame, Payload, WebSocketError};
use futures_util::future::BoxFuture;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{ReadHalf, WriteHalf};

use super::backlog::Backlog;
use super::dialer::dial;
use super::options::WsOptions;
use super::read_chunks::ReadChunks;
use super::reconnect::ReconnectingTransport;
use super::server_frames::{ServerFrameError, ServerFrames, ServerMessage};
use super::socket::{Connector, Incoming, Outgoing, Socket, SocketReader, SocketWriter};
use super::transport::Room;
use super::transport::{
    BinaryHandler, CloseInfo, ConnectionState, MessageHandler, StateHandler, Subscription,
    Transport, TransportError,
};
use carrier_discovery::listener::Listener;

type Stream = TokioIo<Upgraded>;

/// Dials `ws://` URLs for [`WsClientTransport`].
#[derive(Debug, Clone)]
pub struct WsConnector {
    options: WsOptions,
    // What the latest dial found out about its listener, for a caller that names a URL with
    // `any_owner` and should hear whose listener it got.
    last_listener: Arc<Mutex<Option<Listener>>>,
}

impl WsConnector {
    /// A connector for these options.
    pub fn new(options: WsOptions) -> WsConnector {
        WsConnector {
            options,
            last_listener: Arc::default(),
        }
    }

    /// The options it dials with.
    pub fn options(&self) -> &WsOptions {
        &self.options
    }

    /// Whose listener the latest dial reached (`None` before the first dial that connected).
    pub fn last_listener(&self) -> Option<Listener> {
        self.last_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Connector for WsConnector {
    fn connect(&self) -> BoxFuture<'_, Result<Socket, TransportError>> {
        Box::pin(open_socket(&self.options, &self.last_listener))
    }
}

async fn open_socket(
    options: &WsOptions,
    last_listener: &Mutex<Option<Listener>>,
) -> Result<Socket, TransportError> {
    let dialed = dial(options, |listener| {
        *last_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(listener.clone());
    })
    .await?;
    let (mut read, write) = dialed.socket.split(|io| {
        let (read, write) = tokio::io::split(io);
        (ReadChunks::new(read), write)
    });
    // Pings and closes are answered by the transport through the socket's one writer task, not
    // from inside the read half.
    read.set_auto_pong(false);
    read.set_auto_close(false);
    Ok(Socket {
        reader: Box::new(WsReader {
            inner: ServerFrames::new(read, options.max_message(), options.max_parsed()),
        }),
        writer: Box::new(WsWriter { inner: write }),
    })
}

struct WsReader {
    inner: ServerFrames<ReadChunks<ReadHalf<Stream>>>,
}

impl SocketReader for WsReader {
    fn read(&mut self) -> BoxFuture<'_, Result<Incoming, TransportError>> {
        Box::pin(async move {
            loop {
                let message = self.inner.next().await.map_err(|e| match e {
                    ServerFrameError::TooLarge { limit } => {
                        TransportError::MessageTooLarge { limit }
                    }
                    ServerFrameError::ParsedTooLarge { estimate, limit } => {
                        TransportError::ParsedTooLarge { estimate, limit }
                    }
                    other => TransportError::Io(other.to_string()),
                })?;
                return Ok(match message {
                    ServerMessage::Text(text) => Incoming::Text(text),
                    ServerMessage::Binary(payload) => Incoming::Binary(payload),
                    ServerMessage::Ping(payload) => Incoming::Ping(payload),
                    ServerMessage::Close(close) => {
                        Incoming::Close(close.map(|(code, reason)| CloseInfo { code, reason }))
                    }
                    ServerMessage::Pong => continue,
                });
            }
        })
    }
}

struct WsWriter {
    inner: fastwebsockets::WebSocketWrite<WriteHalf<Stream>>,
}

impl SocketWriter for WsWriter {
    fn write(&mut self, message: Outgoing) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            let frame = match message {
                Outgoing::Text(text) => Frame::text(Payload::Owned(text.into_bytes())),
                Outgoing::Binary(payload) => Frame::binary(Payload::Owned(Vec::from(payload))),
                Outgoing::Pong(payload) => Frame::pong(Payload::Owned(Vec::from(payload))),
                Outgoing::Close(info) => Frame::close(info.code, info.reason.as_bytes()),
            };
            self.inner.write_frame(frame).await.map_err(io_error)?;
            self.inner.flush().await.map_err(io_error)
        })
    }
}

fn io_error(error: WebSocketError) -> TransportError {
    TransportError::Io(error.to_string())
}

/// The WebSocket client transport: [`WsOptions`] in, a reconnecting [`Transport`] out.
///
/// It dials `ws://` URLs with hyper's HTTP/1 client and speaks WebSocket with `fastwebsockets`:
/// the token goes in `?token=` (or the `Sec-WebSocket-Protocol` header), the requested role in
/// `?role=`; fragmented messages are reassembled, pings answered, and reconnects follow
/// [`ReconnectingTransport`]'s policy.
///
/// ```no_run
/// use carrier_client::{Transport, WsClientTransport, WsOptions};
/// use carrier_protocol::Role;
///
/// # async fn run() -> Result<(), carrier_client::TransportError> {
/// let options = WsOptions::new("ws://127.0.0.1:7070/")
///     .token("3f9c…")
///     .role(Role::Observe);
/// let transport = WsClientTransport::new(options);
/// transport.connect().await?;
/// # Ok(())
/// # }
/// ```
pub struct WsClientTransport {
    inner: ReconnectingTransport<WsConnector>,
}

impl WsClientTransport {
    /// A disconnected transport for these options; nothing is dialled until `connect()`.
    pub fn new(options: WsOptions) -> WsClientTransport {
        let budget = options.budget_bytes();
        let reconnects = options.reconnects();
        let mut inner =
            ReconnectingTransport::new(WsConnector::new(options)).with_outbound_budget(budget);
        if !reconnects {
            inner = inner.without_reconnect();
        }
        WsClientTransport { inner }
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.inner.queued_bytes()
    }

    /// The URL it dials.
    pub fn url(&self) -> &str {
        self.options().url()
    }

    /// The options it connects with.
    pub fn options(&self) -> &WsOptions {
        self.inner.connector().options()
    }

    /// Whose listener the latest dial reached: [`Listener::Own`] (or `Unchecked` where the
    /// system cannot tell) unless [`WsOptions::any_owner`] let it talk to another — then it
    /// went without the token.
    pub fn last_listener(&self) -> Option<Listener> {
        self.inner.connector().last_listener()
    }
}

impl Transport for WsClientTransport {
    fn state(&self) -> ConnectionState {
        self.inner.state()
    }

    fn connect(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        self.inner.connect()
    }

    fn disconnect(&self) -> BoxFuture<'_, ()> {
        self.inner.disconnect()
    }

    fn send(&self, frame: &Value) -> Result<(), TransportError> {
        self.inner.send(frame)
    }

    fn on_message(&self, handler: MessageHandler) -> Subscription {
        self.inner.on_message(handler)
    }

    fn on_state_change(&self, handler: StateHandler) -> Subscription {
        self.inner.on_state_change(handler)
    }

    fn send_binary(&self, frame: Bytes) -> Result<(), TransportError> {
        self.inner.send_binary(frame)
    }

    fn on_binary(&self, handler: BinaryHandler) -> Subscription {
        self.inner.on_binary(handler)
    }

    fn last_close(&self) -> Option<CloseInfo> {
        self.inner.last_close()
    }

    fn last_error(&self) -> Option<TransportError> {
        self.inner.last_error()
    }

    fn reserve(&self, bytes: usize) -> BoxFuture<'_, Result<Room, TransportError>> {
        self.inner.reserve(bytes)
    }

    fn try_reserve(&self, bytes: usize) -> Result<Room, TransportError> {
        self.inner.try_reserve(bytes)
    }

    fn send_text_in(&self, text: String, room: Room) -> Result<(), TransportError> {
        self.inner.send_text_in(text, room)
    }

    fn send_binary_in(&self, frame: Bytes, room: Room) -> Result<(), TransportError> {
        self.inner.send_binary_in(frame, room)
    }

    fn pace_inbound(&self, backlog: Arc<Backlog>) {
        self.inner.pace_inbound(backlog);
    }
}

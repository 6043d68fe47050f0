//! The WebSocket client transport, built on `fastwebsockets` and hyper's HTTP/1 client.
//!
//! [`WsClientTransport`] is a [`ReconnectingTransport`] whose [`Connector`] dials a
//! `ws://` URL: it adds the token (`?token=` or the `Sec-WebSocket-Protocol` header) and the
//! requested role (`?role=observe`) and performs the upgrade. Fragmented messages are reassembled
//! before delivery; pings are answered through the socket's single writer task.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use fastwebsockets::{Frame, Payload, WebSocket, WebSocketError};
use futures_util::future::BoxFuture;
use http_body_util::Empty;
use hyper::header::{CONNECTION, HOST, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL, UPGRADE};
use hyper::upgrade::Upgraded;
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;
use tokio::io::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;

use super::reconnect::{
    Connector, Inbound, Outbound, ReconnectingTransport, Socket, SocketReader, SocketWriter,
};
use super::server_frames::{ServerFrames, ServerMessage};
use super::transport::{
    BinaryHandler, CloseInfo, ConnectionState, MessageHandler, StateHandler, Subscription,
    Transport, TransportError,
};
use crate::protocol::Role;

/// How the token reaches the server (SPEC section 2, admission step 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenPlacement {
    /// As the `token` query parameter (the default).
    #[default]
    Query,
    /// As the first `Sec-WebSocket-Protocol` value, the way browsers send it; the token never
    /// appears in a URL.
    Subprotocol,
}

/// Where and how [`WsClientTransport`] connects.
#[derive(Clone)]
pub struct WsOptions {
    url: String,
    token: Option<String>,
    token_placement: TokenPlacement,
    role: Option<Role>,
    connect_timeout: Duration,
    max_message_bytes: usize,
}

impl WsOptions {
    /// Options for `url` (`ws://HOST:PORT/PATH`), no token, the listener's default role,
    /// a 10 s connect timeout and a 64 MiB inbound message cap.
    pub fn new(url: impl Into<String>) -> WsOptions {
        WsOptions {
            url: url.into(),
            token: None,
            token_placement: TokenPlacement::Query,
            role: None,
            connect_timeout: Duration::from_secs(10),
            max_message_bytes: 64 << 20,
        }
    }

    /// Sends `token` for admission.
    pub fn token(mut self, token: impl Into<String>) -> WsOptions {
        self.token = Some(token.into());
        self
    }

    /// Sends the token as the WebSocket subprotocol instead of in the query string.
    pub fn token_in_subprotocol(mut self) -> WsOptions {
        self.token_placement = TokenPlacement::Subprotocol;
        self
    }

    /// Asks for `role` with `?role=`; the server grants it only if it is not above the
    /// listener's grant (otherwise it closes with 1008).
    pub fn role(mut self, role: Role) -> WsOptions {
        self.role = Some(role);
        self
    }

    /// How long one dial (TCP connect plus upgrade) may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> WsOptions {
        self.connect_timeout = timeout;
        self
    }

    /// The largest inbound frame accepted; a bigger one breaks the connection.
    pub fn max_message_bytes(mut self, bytes: usize) -> WsOptions {
        self.max_message_bytes = bytes;
        self
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Checks the URL without connecting, so a command line can reject it up front.
    pub fn validate(&self) -> Result<(), TransportError> {
        Target::resolve(self).map(drop)
    }
}

impl fmt::Debug for WsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WsOptions")
            .field("url", &self.url)
            // Never print the token: Debug output ends up in logs.
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_placement", &self.token_placement)
            .field("role", &self.role)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .finish()
    }
}

/// The query-value characters left as they are: RFC 3986 unreserved.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// What one dial needs, derived from the options.
struct Target {
    host: String,
    port: u16,
    authority: String,
    path_and_query: String,
}

impl Target {
    fn resolve(options: &WsOptions) -> Result<Target, TransportError> {
        let invalid = |reason: &str| TransportError::InvalidUrl {
            url: options.url.clone(),
            reason: reason.to_owned(),
        };
        let uri: Uri = options
            .url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| invalid(&e.to_string()))?;
        match uri.scheme_str() {
            Some("ws") => {}
            Some("wss") => {
                return Err(invalid(
                    "wss:// is not supported: carrier listens on loopback without TLS",
                ))
            }
            _ => return Err(invalid("expected ws://HOST:PORT/")),
        }
        let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(invalid("no host"));
        }
        let mut query: Vec<String> = uri
            .query()
            .filter(|q| !q.is_empty())
            .map(|q| vec![q.to_owned()])
            .unwrap_or_default();
        if let (Some(token), TokenPlacement::Query) = (&options.token, options.token_placement) {
            query.push(format!("token={}", utf8_percent_encode(token, QUERY_VALUE)));
        }
        if let Some(role) = options.role {
            query.push(format!("role={}", role.as_str()));
        }
        let path = if uri.path().is_empty() {
            "/"
        } else {
            uri.path()
        };
        let path_and_query = if query.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", query.join("&"))
        };
        Ok(Target {
            host,
            port: authority.port_u16().unwrap_or(80),
            authority: authority.as_str().to_owned(),
            path_and_query,
        })
    }
}

/// Dials `ws://` URLs for [`WsClientTransport`].
#[derive(Debug, Clone)]
pub struct WsConnector {
    options: WsOptions,
}

impl WsConnector {
    /// A connector for these options.
    pub fn new(options: WsOptions) -> WsConnector {
        WsConnector { options }
    }

    /// The options it dials with.
    pub fn options(&self) -> &WsOptions {
        &self.options
    }
}

impl Connector for WsConnector {
    fn connect(&self) -> BoxFuture<'_, Result<Socket, TransportError>> {
        Box::pin(dial(&self.options))
    }
}

async fn dial(options: &WsOptions) -> Result<Socket, TransportError> {
    let target = Target::resolve(options)?;
    let addr = format!("{}:{}", target.host, target.port);
    let connect_error = |reason: String| TransportError::Connect {
        addr: addr.clone(),
        reason,
    };
    let upgrade = async {
        let stream = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        upgrade(stream, &target, options).await
    };
    let ws = tokio::time::timeout(options.connect_timeout, upgrade)
        .await
        .map_err(|_| connect_error(format!("timed out after {:?}", options.connect_timeout)))??;
    let (read, write) = ws.split(tokio::io::split);
    let mut read = read;
    // Pings and closes are answered by the transport through the socket's one writer task, not
    // from inside the read half.
    read.set_auto_pong(false);
    read.set_auto_close(false);
    Ok(Socket {
        reader: Box::new(WsReader {
            inner: ServerFrames::new(read, options.max_message_bytes),
        }),
        writer: Box::new(WsWriter { inner: write }),
    })
}

type Stream = TokioIo<Upgraded>;

/// The HTTP/1 upgrade request. Written here rather than with `fastwebsockets::handshake::client`
/// so connection errors go to `tracing` instead of being printed on stderr.
async fn upgrade(
    stream: TcpStream,
    target: &Target,
    options: &WsOptions,
) -> Result<WebSocket<Stream>, TransportError> {
    let addr = format!("{}:{}", target.host, target.port);
    let failed = |reason: String| TransportError::Connect {
        addr: addr.clone(),
        reason,
    };
    let mut request = Request::builder()
        .method("GET")
        .uri(target.path_and_query.as_str())
        .header(HOST, target.authority.as_str())
        .header(UPGRADE, "websocket")
        .header(CONNECTION, "upgrade")
        .header(SEC_WEBSOCKET_KEY, fastwebsockets::handshake::generate_key())
        .header("Sec-WebSocket-Version", "13");
    if let (Some(token), TokenPlacement::Subprotocol) = (&options.token, options.token_placement) {
        request = request.header(SEC_WEBSOCKET_PROTOCOL, token.as_str());
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| failed(format!("cannot build the upgrade request: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| failed(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(error) = connection.with_upgrades().await {
            tracing::debug!(%error, "upgrade connection ended with an error");
        }
    });
    let mut response = sender
        .send_request(request)
        .await
        .map_err(|e| failed(e.to_string()))?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(TransportError::UpgradeRejected {
            status: response.status().as_u16(),
        });
    }
    let upgraded = hyper::upgrade::on(&mut response)
        .await
        .map_err(|e| failed(e.to_string()))?;
    Ok(WebSocket::after_handshake(
        TokioIo::new(upgraded),
        fastwebsockets::Role::Client,
    ))
}

struct WsReader {
    inner: ServerFrames<ReadHalf<Stream>>,
}

impl SocketReader for WsReader {
    fn read(&mut self) -> BoxFuture<'_, Result<Inbound, TransportError>> {
        Box::pin(async move {
            loop {
                let message = self
                    .inner
                    .next()
                    .await
                    .map_err(|e| TransportError::Io(e.to_string()))?;
                return Ok(match message {
                    ServerMessage::Text(text) => Inbound::Text(text),
                    ServerMessage::Binary(payload) => Inbound::Binary(payload),
                    ServerMessage::Ping(payload) => Inbound::Ping(payload),
                    ServerMessage::Close(close) => {
                        Inbound::Close(close.map(|(code, reason)| CloseInfo { code, reason }))
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
    fn write(&mut self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async move {
            let frame = match message {
                Outbound::Text(text) => Frame::text(Payload::Owned(text.into_bytes())),
                Outbound::Binary(payload) => Frame::binary(Payload::Owned(Vec::from(payload))),
                Outbound::Pong(payload) => Frame::pong(Payload::Owned(Vec::from(payload))),
                Outbound::Close(info) => Frame::close(info.code, info.reason.as_bytes()),
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
/// use carrier::client::{Transport, WsClientTransport, WsOptions};
/// use carrier::protocol::Role;
///
/// # async fn run() -> Result<(), carrier::client::TransportError> {
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
        WsClientTransport {
            inner: ReconnectingTransport::new(WsConnector::new(options)),
        }
    }

    /// The options it connects with.
    pub fn options(&self) -> &WsOptions {
        self.inner.connector().options()
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(options: WsOptions) -> Target {
        match Target::resolve(&options) {
            Ok(target) => target,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn token_and_role_go_in_the_query_by_default() {
        let target = resolve(
            WsOptions::new("ws://127.0.0.1:7070/")
                .token("a b&c")
                .role(Role::Observe),
        );
        assert_eq!(target.host, "127.0.0.1");
        assert_eq!(target.port, 7070);
        assert_eq!(target.authority, "127.0.0.1:7070");
        assert_eq!(target.path_and_query, "/?token=a%20b%26c&role=observe");
    }

    #[test]
    fn subprotocol_placement_keeps_the_token_out_of_the_url() {
        let target = resolve(
            WsOptions::new("ws://localhost:7071")
                .token("secret")
                .token_in_subprotocol(),
        );
        assert_eq!(target.path_and_query, "/");
        assert_eq!(target.port, 7071);
    }

    #[test]
    fn existing_query_and_ipv6_hosts_are_kept() {
        let target = resolve(WsOptions::new("ws://[::1]:7070/x?a=1").token("t"));
        assert_eq!(target.host, "::1");
        assert_eq!(target.authority, "[::1]:7070");
        assert_eq!(target.path_and_query, "/x?a=1&token=t");
    }

    #[test]
    fn non_ws_urls_are_refused() {
        for url in [
            "http://127.0.0.1:7070/",
            "wss://127.0.0.1/",
            "127.0.0.1:7070",
            "",
        ] {
            assert!(
                matches!(
                    WsOptions::new(url).validate(),
                    Err(TransportError::InvalidUrl { .. })
                ),
                "{url}"
            );
        }
    }

    #[test]
    fn debug_output_redacts_the_token() {
        let shown = format!("{:?}", WsOptions::new("ws://127.0.0.1:1/").token("hunter2"));
        assert!(!shown.contains("hunter2"));
    }
}

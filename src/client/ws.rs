//! The WebSocket client transport, built on `fastwebsockets` and hyper's HTTP/1 client.
//!
//! [`WsClientTransport`] is a [`ReconnectingTransport`] whose [`Connector`] dials a loopback
//! `ws://` URL: it connects, checks that the listener belongs to this user (see
//! [`crate::discovery::listener`]; a listener of another user is refused with
//! [`TransportError::ForeignListener`] before anything is written), then adds the token
//! (`?token=` or the `Sec-WebSocket-Protocol` header) and the requested role (`?role=observe`)
//! and performs the upgrade. Every reconnect repeats the check. Fragmented messages are
//! reassembled before delivery; pings are answered through the socket's single writer task.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
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
use crate::discovery::listener::{
    loopback_ip, DialError, Listener, OwnerCheck, OwnerPolicy, SocketTables,
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
    owner_check: OwnerCheck,
}

impl WsOptions {
    /// Options for `url` (`ws://HOST:PORT/PATH`, HOST `127.0.0.1`, `localhost`, `[::1]` or
    /// another loopback address), no token, the listener's default role, a 10 s connect timeout,
    /// a 64 MiB inbound message cap, and only listeners of this user.
    pub fn new(url: impl Into<String>) -> WsOptions {
        WsOptions {
            url: url.into(),
            token: None,
            token_placement: TokenPlacement::Query,
            role: None,
            connect_timeout: Duration::from_secs(10),
            max_message_bytes: 64 << 20,
            owner_check: OwnerCheck::own_user(),
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

    /// Also talks to a listener of another user, or one whose owner cannot be found out — but
    /// **without the token**: it goes only to a listener of this user, whatever this option
    /// says. For an `--open` carrier of someone else, named on purpose. Which kind of listener
    /// the last dial reached: [`WsClientTransport::last_listener`].
    pub fn any_owner(mut self) -> WsOptions {
        self.owner_check = self.owner_check.with_policy(OwnerPolicy::AnyOwner);
        self
    }

    /// Reads the socket tables that attribute a listener from `tables` instead of `/proc/net`
    /// (tests; a system with procfs mounted elsewhere).
    pub fn socket_tables(mut self, tables: SocketTables) -> WsOptions {
        self.owner_check = self.owner_check.with_tables(tables);
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
            .field("owner_check", &self.owner_check)
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
    addr: SocketAddr,
    authority: String,
    /// The URL's path and its own query, without token or role.
    path: String,
    query: Option<String>,
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
        if authority.host().is_empty() {
            return Err(invalid("no host"));
        }
        // A carrier binds 127.0.0.1, and only a loopback listener can be attributed to a local
        // user before the token goes out.
        let ip = loopback_ip(authority.host()).ok_or_else(|| {
            invalid("not a loopback host: carrier clients connect to 127.0.0.1, localhost or [::1] only")
        })?;
        let path = if uri.path().is_empty() {
            "/"
        } else {
            uri.path()
        };
        Ok(Target {
            addr: SocketAddr::new(ip, authority.port_u16().unwrap_or(80)),
            authority: authority.as_str().to_owned(),
            path: path.to_owned(),
            query: uri.query().filter(|q| !q.is_empty()).map(str::to_owned),
        })
    }

    /// The request target of the upgrade: the URL's path and query, then the token (when it
    /// goes in the query) and the role.
    fn path_and_query(&self, token: Option<&str>, options: &WsOptions) -> String {
        let mut query: Vec<String> = self.query.iter().cloned().collect();
        if let (Some(token), TokenPlacement::Query) = (token, options.token_placement) {
            query.push(format!("token={}", utf8_percent_encode(token, QUERY_VALUE)));
        }
        if let Some(role) = options.role {
            query.push(format!("role={}", role.as_str()));
        }
        if query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, query.join("&"))
        }
    }
}

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
        Box::pin(dial(&self.options, &self.last_listener))
    }
}

async fn dial(
    options: &WsOptions,
    last_listener: &Mutex<Option<Listener>>,
) -> Result<Socket, TransportError> {
    let target = Target::resolve(options)?;
    let addr = target.addr;
    let upgrade = async {
        let checked = options
            .owner_check
            .connect(addr)
            .await
            .map_err(|error| dial_error(options, error))?;
        let token = options.token.as_deref();
        let token = match &checked.listener {
            listener if listener.may_receive_token() => token,
            listener => {
                tracing::info!(%addr, ?listener, "talking to a listener that is not this user's, without the token");
                None
            }
        };
        *last_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(checked.listener);
        let stream = checked.stream;
        let _ = stream.set_nodelay(true);
        upgrade(stream, &target, token, options).await
    };
    let ws = tokio::time::timeout(options.connect_timeout, upgrade)
        .await
        .map_err(|_| TransportError::Connect {
            addr: addr.to_string(),
            reason: format!("timed out after {:?}", options.connect_timeout),
        })??;
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

/// A refused dial as the transport reports it.
fn dial_error(options: &WsOptions, error: DialError) -> TransportError {
    match error {
        DialError::Foreign(refusal) => {
            tracing::debug!(%refusal, "refused another user's listener");
            TransportError::ForeignListener(refusal)
        }
        DialError::Unattributed(refusal) => {
            tracing::debug!(%refusal, "refused a listener that cannot be attributed");
            TransportError::UnattributedListener(refusal)
        }
        DialError::Connect { addr, reason } => TransportError::Connect {
            addr: addr.to_string(),
            reason,
        },
        DialError::NotLoopback { addr } => TransportError::InvalidUrl {
            url: options.url.clone(),
            reason: format!("{addr} is not a loopback address"),
        },
    }
}

type Stream = TokioIo<Upgraded>;

/// The HTTP/1 upgrade request. Written here rather than with `fastwebsockets::handshake::client`
/// so connection errors go to `tracing` instead of being printed on stderr.
async fn upgrade(
    stream: TcpStream,
    target: &Target,
    token: Option<&str>,
    options: &WsOptions,
) -> Result<WebSocket<Stream>, TransportError> {
    let failed = |reason: String| TransportError::Connect {
        addr: target.addr.to_string(),
        reason,
    };
    let mut request = Request::builder()
        .method("GET")
        .uri(target.path_and_query(token, options))
        .header(HOST, target.authority.as_str())
        .header(UPGRADE, "websocket")
        .header(CONNECTION, "upgrade")
        .header(SEC_WEBSOCKET_KEY, fastwebsockets::handshake::generate_key())
        .header("Sec-WebSocket-Version", "13");
    if let (Some(token), TokenPlacement::Subprotocol) = (token, options.token_placement) {
        request = request.header(SEC_WEBSOCKET_PROTOCOL, token);
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
        let options = WsOptions::new("ws://127.0.0.1:7070/")
            .token("a b&c")
            .role(Role::Observe);
        let target = resolve(options.clone());
        assert_eq!(target.addr, "127.0.0.1:7070".parse().unwrap());
        assert_eq!(target.authority, "127.0.0.1:7070");
        assert_eq!(
            target.path_and_query(Some("a b&c"), &options),
            "/?token=a%20b%26c&role=observe"
        );
        // A listener that is not this user's gets the same request without the token.
        assert_eq!(target.path_and_query(None, &options), "/?role=observe");
    }

    #[test]
    fn subprotocol_placement_keeps_the_token_out_of_the_url() {
        let options = WsOptions::new("ws://localhost:7071")
            .token("secret")
            .token_in_subprotocol();
        let target = resolve(options.clone());
        assert_eq!(target.path_and_query(Some("secret"), &options), "/");
        assert_eq!(target.addr, "127.0.0.1:7071".parse().unwrap());
    }

    #[test]
    fn existing_query_and_ipv6_hosts_are_kept() {
        let options = WsOptions::new("ws://[::1]:7070/x?a=1").token("t");
        let target = resolve(options.clone());
        assert_eq!(target.addr, "[::1]:7070".parse().unwrap());
        assert_eq!(target.authority, "[::1]:7070");
        assert_eq!(target.path_and_query(Some("t"), &options), "/x?a=1&token=t");
    }

    #[test]
    fn non_ws_and_non_loopback_urls_are_refused() {
        for url in [
            "http://127.0.0.1:7070/",
            "wss://127.0.0.1/",
            "127.0.0.1:7070",
            "",
            "ws://10.0.0.1:7070/",
            "ws://example.com:7070/",
            "ws://0.0.0.0:7070/",
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

    /// A same-user listener that records what reaches it; the check is made to fail by reading
    /// the socket tables from an empty directory.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_port_that_cannot_be_attributed_is_refused_with_a_typed_error_and_gets_nothing() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let received = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut bytes = Vec::new();
            let _ = socket.read_to_end(&mut bytes).await;
            bytes
        });
        let nowhere = tempfile::tempdir().expect("tempdir");
        let options = WsOptions::new(format!("ws://{addr}/"))
            .token("the-token")
            .socket_tables(SocketTables::in_dir(nowhere.path()));
        let transport = WsClientTransport::new(options);
        let error = transport.connect().await.expect_err("refused");
        let TransportError::UnattributedListener(refusal) = &error else {
            panic!("not an attribution refusal: {error:?}");
        };
        assert_eq!(refusal.addr, addr);
        assert!(!error.to_string().contains('\n'), "{error}");
        let bytes = tokio::time::timeout(Duration::from_secs(10), received)
            .await
            .expect("the refused connection was closed")
            .expect("listener task");
        assert!(bytes.is_empty(), "the listener received {bytes:?}");
        assert_eq!(transport.last_listener(), None);
    }

    #[test]
    fn debug_output_redacts_the_token() {
        let shown = format!("{:?}", WsOptions::new("ws://127.0.0.1:1/").token("hunter2"));
        assert!(!shown.contains("hunter2"));
    }
}

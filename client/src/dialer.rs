//! The one dialer of the project's clients: connect to a loopback `ws://` URL (TCP) or to the
//! carrier's Unix socket (`unix:`), the listener's owner checked before anything is written (a
//! listener of another user is refused with [`TransportError::ForeignListener`], or reached
//! without the token when [`WsOptions::any_owner`] says so), then the HTTP/1 upgrade with the
//! token and role. On TCP the owner comes from the kernel's socket table (Linux); on the Unix
//! socket from the peer credentials, with no table read (`carrier_discovery::listener`).
//!
//! [`dial`] hands over the upgraded socket; [`WsClientTransport`](super::WsClientTransport)
//! dials through it, and so do tools that drive the raw socket for speed (the load generator).
//! Nobody else writes an upgrade.

use bytes::Bytes;
use fastwebsockets::WebSocket;
use http_body_util::Empty;
use hyper::header::{
    HeaderMap, HeaderName, CONNECTION, HOST, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_EXTENSIONS,
    SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL, UPGRADE,
};
use hyper::upgrade::Upgraded;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::options::{Target, TokenPlacement, WsOptions};
use super::transport::TransportError;
use carrier_discovery::listener::{DialError, Endpoint, Listener};

/// An upgraded client WebSocket, as [`dial`] hands it over.
pub type DialedSocket = WebSocket<TokioIo<Upgraded>>;

/// What one successful dial produced.
pub struct Dialed {
    /// The upgraded socket (client role: it masks what it sends).
    pub socket: DialedSocket,
    /// Whose listener it reached. Anything but [`Listener::Own`] / [`Listener::Unchecked`] was
    /// reached without the token.
    pub listener: Listener,
}

impl std::fmt::Debug for Dialed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialed")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

/// Dials once, within the options' connect timeout: resolve the URL (loopback or a Unix socket
/// only), connect, check the listener's owner, upgrade. `listener_seen` is told whose listener
/// was reached as soon as that is known (also when the upgrade then fails).
pub async fn dial(
    options: &WsOptions,
    listener_seen: impl FnOnce(&Listener),
) -> Result<Dialed, TransportError> {
    let target = Target::resolve(options)?;
    let upgrade = async {
        let check = options.owner_check();
        match &target.endpoint {
            Endpoint::Tcp(addr) => {
                let checked = check
                    .connect(*addr)
                    .await
                    .map_err(|error| dial_error(options, error))?;
                let _ = checked.stream.set_nodelay(true);
                super::lowat::limit_unsent(&checked.stream);
                checked_upgrade(
                    checked.stream,
                    checked.listener,
                    &target,
                    options,
                    listener_seen,
                )
                .await
            }
            #[cfg(unix)]
            Endpoint::Unix(path) => {
                let checked = check
                    .connect_unix(path)
                    .await
                    .map_err(|error| dial_error(options, error))?;
                checked_upgrade(
                    checked.stream,
                    checked.listener,
                    &target,
                    options,
                    listener_seen,
                )
                .await
            }
            #[cfg(not(unix))]
            Endpoint::Unix(_) => Err(TransportError::InvalidUrl {
                url: super::url_secrets::redact_url(options.url()),
                reason: "Unix sockets are not available on this system".into(),
            }),
        }
    };
    tokio::time::timeout(options.timeout(), upgrade)
        .await
        .map_err(|_| TransportError::Connect {
            addr: target.endpoint.to_string(),
            reason: format!("timed out after {:?}", options.timeout()),
        })?
}

/// The upgrade over a stream whose `listener` was checked: with the token only if that listener
/// may receive one.
async fn checked_upgrade<IO>(
    stream: IO,
    listener: Listener,
    target: &Target,
    options: &WsOptions,
    listener_seen: impl FnOnce(&Listener),
) -> Result<Dialed, TransportError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let token = if listener.may_receive_token() {
        target.token(options)
    } else {
        tracing::info!(endpoint = %target.endpoint, ?listener, "talking to a listener that is not this user's, without the token");
        None
    };
    listener_seen(&listener);
    let socket = upgrade(stream, target, token, options).await?;
    Ok(Dialed { socket, listener })
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
            url: super::url_secrets::redact_url(options.url()),
            reason: format!("{addr} is not a loopback address"),
        },
    }
}

/// The HTTP/1 upgrade request. Written here rather than with `fastwebsockets::handshake::client`
/// so connection errors go to `tracing` instead of being printed on stderr.
async fn upgrade<IO>(
    stream: IO,
    target: &Target,
    token: Option<&str>,
    options: &WsOptions,
) -> Result<DialedSocket, TransportError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |reason: String| TransportError::Connect {
        addr: target.endpoint.to_string(),
        reason,
    };
    let key = fastwebsockets::handshake::generate_key();
    let mut request = Request::builder()
        .method("GET")
        .uri(target.path_and_query(token, options))
        .header(HOST, target.authority.as_str())
        .header(UPGRADE, "websocket")
        .header(CONNECTION, "upgrade")
        .header(SEC_WEBSOCKET_KEY, key.as_str())
        .header("Sec-WebSocket-Version", "13");
    let offered = match (token, options.placement()) {
        (Some(token), TokenPlacement::Subprotocol) => Some(token),
        _ => None,
    };
    if let Some(token) = offered {
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
    if let Err(reason) = check_switch(response.headers(), &key, offered) {
        return Err(TransportError::InvalidUpgrade { reason });
    }
    let upgraded = hyper::upgrade::on(&mut response)
        .await
        .map_err(|e| failed(e.to_string()))?;
    Ok(WebSocket::after_handshake(
        TokioIo::new(upgraded),
        fastwebsockets::Role::Client,
    ))
}

/// RFC 6455 §4.1: what the client must check of a `101 Switching Protocols` before it uses the
/// connection — `Upgrade: websocket`, `Connection: upgrade`, `Sec-WebSocket-Accept` derived
/// from this request's `key`, no extension (none was offered), and no subprotocol but the one
/// `offered`. Whatever fails is a server that did not read our request as a WebSocket
/// handshake; the connection is then dropped without a frame written.
fn check_switch(headers: &HeaderMap, key: &str, offered: Option<&str>) -> Result<(), String> {
    let value = |name: HeaderName| {
        let mut values = headers.get_all(&name).iter();
        match (values.next(), values.next()) {
            (None, _) => Ok(None),
            (Some(one), None) => one
                .to_str()
                .map(|text| Some(text.trim()))
                .map_err(|_| format!("its {name} header is not text")),
            (Some(_), Some(_)) => Err(format!("it has more than one {name} header")),
        }
    };
    match value(UPGRADE)? {
        Some(upgrade) if upgrade.eq_ignore_ascii_case("websocket") => {}
        Some(other) => return Err(format!("it upgrades to {other:?}, not websocket")),
        None => return Err("it has no Upgrade header".into()),
    }
    let connection_upgrades = headers.get_all(CONNECTION).iter().any(|v| {
        v.to_str().is_ok_and(|text| {
            text.split(',')
                .any(|option| option.trim().eq_ignore_ascii_case("upgrade"))
        })
    });
    if !connection_upgrades {
        return Err("its Connection header does not say upgrade".into());
    }
    match value(SEC_WEBSOCKET_ACCEPT)? {
        Some(accept) if accept == accept_key(key) => {}
        Some(_) => {
            return Err("its Sec-WebSocket-Accept does not answer this request's key".into())
        }
        None => return Err("it has no Sec-WebSocket-Accept header".into()),
    }
    if headers.contains_key(SEC_WEBSOCKET_EXTENSIONS) {
        return Err("it selects a WebSocket extension, and none was offered".into());
    }
    match (value(SEC_WEBSOCKET_PROTOCOL)?, offered) {
        (None, _) => Ok(()),
        (Some(chosen), Some(offered)) if chosen == offered => Ok(()),
        // The value is not quoted: a server that picks a subprotocol nobody offered may echo
        // anything, and this line can end up in logs.
        (Some(_), _) => Err("it selects a subprotocol that was not offered".into()),
    }
}

/// The `Sec-WebSocket-Accept` a server must answer `key` with: base64 of the SHA-1 of the key
/// and the protocol's GUID (RFC 6455 §1.3).
fn accept_key(key: &str) -> String {
    use sha1::Digest as _;
    let mut sha1 = sha1::Sha1::new();
    sha1.update(key.as_bytes());
    sha1.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    data_encoding::BASE64.encode(&sha1.finalize())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Transport, WsClientTransport};
    use super::*;
    use carrier_discovery::listener::SocketTables;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().expect("header value"));
        }
        map
    }

    #[test]
    fn the_accept_key_is_the_rfc_s_example() {
        // RFC 6455 §1.3.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn a_switch_is_taken_only_with_the_answer_rfc_6455_requires() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
        let good = [
            ("upgrade", "WebSocket"),
            ("connection", "keep-alive, Upgrade"),
            ("sec-websocket-accept", accept),
        ];
        assert_eq!(check_switch(&headers(&good), key, None), Ok(()));
        let with_protocol = [&good[..], &[("sec-websocket-protocol", "tok")]].concat();
        assert_eq!(
            check_switch(&headers(&with_protocol), key, Some("tok")),
            Ok(())
        );
        let refused = |pairs: &[(&'static str, &str)], offered: Option<&str>, why: &str| {
            let reason = check_switch(&headers(pairs), key, offered).expect_err(why);
            assert!(reason.contains(why), "{reason}");
        };
        refused(&good[..2], None, "no Sec-WebSocket-Accept");
        refused(
            &[
                good[0],
                good[1],
                ("sec-websocket-accept", "x3JJHMbDL1EzLkh9GBhXDw=="),
            ],
            None,
            "does not answer this request's key",
        );
        refused(
            &[good[0], good[1], good[2], ("sec-websocket-accept", accept)],
            None,
            "more than one sec-websocket-accept",
        );
        refused(&good[1..], None, "no Upgrade header");
        refused(
            &[("upgrade", "h2c"), good[1], good[2]],
            None,
            "not websocket",
        );
        refused(
            &[good[0], ("connection", "close"), good[2]],
            None,
            "Connection",
        );
        refused(&with_protocol, None, "subprotocol that was not offered");
        refused(
            &with_protocol,
            Some("other"),
            "subprotocol that was not offered",
        );
        let extension = [
            &good[..],
            &[("sec-websocket-extensions", "permessage-deflate")],
        ]
        .concat();
        refused(&extension, None, "extension");
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
}

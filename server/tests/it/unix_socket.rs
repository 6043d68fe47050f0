//! The carrier's Unix socket, through the library: a `WsTransport` with a runtime file opens it
//! beside the file; a process of the same user drives a turn and a channel echo over it without
//! a token (with our client and with an independent one, `tokio-tungstenite`); a token that is
//! sent must still be right; only loopback names are accepted there, whatever the host allows
//! pages on TCP; the socket goes away with the transport. Peers of another uid are the CLI
//! tests' (`cli/tests/it/unix_socket.rs`): they need a second user.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use carrier_client::{
    ChannelMessage, Client, ClientEvent, ReceivedSessionEventKind, Transport, TransportError,
    WsClientTransport, WsOptions,
};
use carrier_discovery::listener::{Endpoint, Listener};
use carrier_discovery::RuntimeDir;
use carrier_protocol::channel_frame::FrameBody;
use carrier_server::{
    Binary, ChannelDescriptor, InboundBody, LifecycleError, RuntimeFileOptions, UnixSocket,
    WsTransport,
};
use carrier_test_support::{config, embedded, with_robota, DELAY, WAIT};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio_tungstenite::tungstenite::Message;

/// A started transport (token `test-token`, an `echo` channel) advertising itself in a runtime
/// directory of its own, and that directory.
struct Carrier {
    transport: WsTransport,
    runtime: tempfile::TempDir,
}

impl Carrier {
    async fn start(place: UnixSocket) -> Carrier {
        let runtime = tempfile::tempdir().expect("tempdir");
        let transport =
            WsTransport::new(config().with_allowed_origins(vec!["https://app.example".into()]))
                .expect("valid config")
                .with_runtime_file(RuntimeFileOptions::in_dir(RuntimeDir::at(
                    runtime.path().join("carrier"),
                )))
                .with_unix_socket(place);
        transport.attach(with_robota(embedded(DELAY)));
        let handle = transport
            .register_channel(ChannelDescriptor::new("echo", &["*"], Binary::Accepted))
            .expect("registered");
        let echo = handle.clone();
        handle.on_inbound(move |message| {
            let body = match message.body {
                InboundBody::Binary(body) => FrameBody::Binary(body),
                InboundBody::Event(event) => FrameBody::EventBytes(event),
                _ => return,
            };
            let _ = echo.send_to(message.connection, body);
        });
        transport.start().await.expect("start");
        Carrier { transport, runtime }
    }

    fn socket(&self) -> PathBuf {
        self.transport.unix_socket_path().expect("a socket")
    }
}

/// `request` written raw to the socket, and the status line and body of the answer (read up to
/// its `content-length`: the connection may stay open).
async fn http_over(socket: &Path, request: &str) -> (String, String) {
    let mut stream = UnixStream::connect(socket).await.expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write the request");
    let mut answer = Vec::new();
    let read = async {
        loop {
            let text = String::from_utf8_lossy(&answer).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    let status = head.lines().next().unwrap_or_default().to_owned();
                    return (status, body.to_owned());
                }
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.expect("read the answer");
            assert!(n > 0, "the connection closed mid-answer: {text}");
            answer.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("answered in time")
}

/// A `tokio-tungstenite` client over the socket, requesting `path_and_query` with `Host: host`.
async fn independent(
    socket: &Path,
    host: &str,
    path_and_query: &str,
) -> tokio_tungstenite::WebSocketStream<UnixStream> {
    let stream = UnixStream::connect(socket).await.expect("connect");
    let url = format!("ws://{host}{path_and_query}");
    let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(url, stream))
        .await
        .expect("upgrade in time")
        .expect("upgraded");
    ws
}

/// The next text frame, as JSON.
async fn next_json(ws: &mut tokio_tungstenite::WebSocketStream<UnixStream>) -> Value {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a frame in time")
            .expect("open")
            .expect("a frame");
        match message {
            Message::Text(text) => return serde_json::from_str(&text).expect("JSON"),
            Message::Close(close) => panic!("closed: {close:?}"),
            _ => continue,
        }
    }
}

#[tokio::test]
async fn the_runtime_file_lists_the_socket_beside_it_and_it_goes_with_the_transport() {
    let carrier = Carrier::start(UnixSocket::BesideRuntimeFile).await;
    let socket = carrier.socket();
    let runtime_file = carrier.transport.runtime_file().expect("a runtime file");
    assert_eq!(socket.parent(), runtime_file.parent());
    assert_eq!(socket.extension().and_then(|e| e.to_str()), Some("sock"));
    assert_eq!(socket.file_stem(), runtime_file.file_stem());
    let scan = RuntimeDir::at(carrier.runtime.path().join("carrier")).scan();
    assert_eq!(scan.carriers.len(), 1, "{:?}", scan.warnings);
    assert_eq!(scan.carriers[0].socket.as_deref(), Some(socket.as_path()));
    assert_eq!(
        scan.carriers[0].client_url(),
        format!("unix:{}", socket.display())
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&socket).expect("stat").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    carrier.transport.stop().await;
    assert!(!socket.exists(), "the socket stays after stop()");
    assert!(!runtime_file.exists());
    assert_eq!(carrier.transport.unix_socket_path(), None);

    // Off, or no runtime file: no socket.
    let off = Carrier::start(UnixSocket::Off).await;
    assert_eq!(off.transport.unix_socket_path(), None);
    let scan = RuntimeDir::at(off.runtime.path().join("carrier")).scan();
    assert_eq!(scan.carriers[0].socket, None);
    let plain = WsTransport::new(config()).expect("valid config");
    plain.attach(with_robota(embedded(DELAY)));
    plain.start().await.expect("start");
    assert_eq!(plain.unix_socket_path(), None);
}

#[tokio::test]
async fn the_same_user_runs_a_turn_and_a_channel_echo_over_the_socket_without_a_token() {
    let carrier = Carrier::start(UnixSocket::BesideRuntimeFile).await;
    let url = format!("unix:{}", carrier.socket().display());
    let transport = Arc::new(WsClientTransport::new(WsOptions::new(&url)));
    let client = Client::new(transport.clone());
    let mut events = client.events();
    client.connect().await.expect("admitted without a token");
    assert_eq!(transport.last_listener(), Some(Listener::Own));

    let turn = client
        .submit("hello over the socket")
        .await
        .expect("submit");
    let text = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            if let ClientEvent::Session(event) = event {
                if let ReceivedSessionEventKind::TurnCompleted { turn_id, text, .. } = event.kind {
                    if turn_id == turn {
                        return text;
                    }
                }
            }
        }
        panic!("the event stream ended");
    })
    .await
    .expect("the turn completed in time");
    assert_eq!(text, "echo: hello over the socket");

    let mut echoes = client.channel("echo");
    let payload = Bytes::from(vec![7u8; 16 * 1024]);
    client
        .send_channel_binary("echo", payload.clone())
        .await
        .expect("send");
    let echoed = tokio::time::timeout(WAIT, echoes.next())
        .await
        .expect("echoed in time")
        .expect("a frame");
    let ChannelMessage::Binary { body, .. } = echoed else {
        panic!("not a binary echo: {echoed:?}");
    };
    assert_eq!(body, payload);
    client.disconnect().await;

    // An independent client, no token either: handshake, then a channel echo.
    let mut ws = independent(&carrier.socket(), "localhost", "/").await;
    ws.send(Message::text(
        json!({"id": "h", "method": "system.handshake", "params": carrier_test_support::handshake_params(json!({}))})
            .to_string(),
    ))
    .await
    .expect("send");
    let answer = next_json(&mut ws).await;
    assert_eq!(answer["id"], "h", "{answer}");
    assert!(answer.get("result").is_some(), "{answer}");
    let frame =
        carrier_protocol::channel_frame::encode_binary("echo", 0, Bytes::from_static(b"ping"))
            .expect("a frame");
    ws.send(Message::binary(frame.to_vec()))
        .await
        .expect("send");
    let echoed = loop {
        match tokio::time::timeout(WAIT, ws.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => break bytes,
            Ok(Some(Ok(_))) => continue,
            other => panic!("no echo: {other:?}"),
        }
    };
    assert!(echoed.ends_with(b"ping"), "{echoed:?}");

    // The other wires ride the socket too.
    let mut robota = independent(&carrier.socket(), "localhost", "/robota").await;
    let first = next_json(&mut robota).await;
    assert!(first.get("type").is_some(), "{first}");
}

#[tokio::test]
async fn a_token_sent_on_the_socket_must_still_be_right_and_roles_hold() {
    let carrier = Carrier::start(UnixSocket::BesideRuntimeFile).await;
    let url = format!("unix:{}", carrier.socket().display());
    let right = Client::new(Arc::new(WsClientTransport::new(
        WsOptions::new(&url).token("test-token"),
    )));
    right.connect().await.expect("the right token");
    right.disconnect().await;

    for options in [
        WsOptions::new(&url).token("wrong").no_reconnect(),
        WsOptions::new(&url)
            .token("wrong")
            .token_in_subprotocol()
            .no_reconnect(),
    ] {
        let wrong = Client::new(Arc::new(WsClientTransport::new(options)));
        let error = wrong.connect().await.expect_err("a wrong token");
        assert!(error.to_string().contains("1008"), "{error}");
    }

    let observer = Client::new(Arc::new(WsClientTransport::new(
        WsOptions::new(&url).role(carrier_protocol::Role::Observe),
    )));
    observer.connect().await.expect("observe");
    let error = observer.submit("no").await.expect_err("an observer");
    assert!(error.to_string().contains("forbidden"), "{error}");
}

#[tokio::test]
async fn only_loopback_names_pass_on_the_socket_whatever_pages_are_allowed() {
    let carrier = Carrier::start(UnixSocket::BesideRuntimeFile).await;
    let socket = carrier.socket();
    let upgrade = |host: &str, origin: Option<&str>| {
        let origin = origin
            .map(|o| format!("Origin: {o}\r\n"))
            .unwrap_or_default();
        format!(
            "GET / HTTP/1.1\r\nHost: {host}\r\n{origin}Connection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
    };
    // The allowed origin is allowed on TCP…
    let port = carrier.transport.bound_port().expect("port");
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    tcp.write_all(upgrade("localhost", Some("https://app.example")).as_bytes())
        .await
        .expect("write");
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).await.expect("read");
    assert_eq!(&head, b"HTTP/1.1 101");
    // …and not on the socket, nor a foreign Host, nor Origin null.
    for (host, origin) in [
        ("localhost", Some("https://app.example")),
        ("evil.example", None),
        ("localhost", Some("null")),
    ] {
        let (status, _) = http_over(&socket, &upgrade(host, origin)).await;
        assert!(
            status.starts_with("HTTP/1.1 403"),
            "{host} {origin:?}: {status}"
        );
    }
    for (host, origin) in [
        ("localhost", None),
        ("127.0.0.1", Some("http://localhost:3000")),
    ] {
        let mut stream = UnixStream::connect(&socket).await.expect("connect");
        stream
            .write_all(upgrade(host, origin).as_bytes())
            .await
            .expect("write");
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.expect("read");
        assert_eq!(&head, b"HTTP/1.1 101", "{host} {origin:?}");
    }
    // /metrics: no token needed from the same user on the socket; a wrong one is refused.
    let (status, body) = http_over(
        &socket,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        body.contains("carrier_unix_peers_refused_total 0"),
        "{body}"
    );
    let (status, _) = http_over(
        &socket,
        "GET /metrics?token=wrong HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(status.starts_with("HTTP/1.1 401"), "{status}");
}

#[tokio::test]
async fn a_socket_path_that_cannot_be_trusted_fails_start_and_is_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("real.sock");
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let transport = WsTransport::new(config())
        .expect("valid config")
        .with_unix_socket(UnixSocket::At(link.clone()));
    transport.attach(with_robota(embedded(DELAY)));
    let error = transport.start().await.expect_err("a symbolic link");
    assert!(matches!(error, LifecycleError::UnixSocket(_)), "{error:?}");
    assert!(error.to_string().contains("symbolic link"), "{error}");
    assert!(link
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink()));
    assert!(!transport.is_running());
    assert!(!target.exists());
}

#[tokio::test]
async fn the_rust_client_names_the_socket_it_cannot_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nobody.sock");
    let transport =
        WsClientTransport::new(WsOptions::new(format!("unix:{}", path.display())).no_reconnect());
    let error = transport.connect().await.expect_err("nothing listens");
    let TransportError::Connect { addr, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*addr, Endpoint::Unix(path).to_string());
}

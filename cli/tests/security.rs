//! Security tests over real sockets on 127.0.0.1: DNS-rebinding hosts, hostile origins, token
//! encodings, oversized requests, secrets in logs and metrics, and RFC 6455 masking. (A failing OS
//! random source is the server's unit test: `WsTransport::new` refuses to start without a token.)

use carrier_test_support as support;

use std::sync::{Arc, Mutex, OnceLock};

use carrier::server::{Auth, CarrierConfig, WsTransport};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one raw HTTP request and returns the status code, or `None` if the server closed the
/// connection without answering. Panics if nothing happens within [`WAIT`] (a hang).
async fn http_status(port: u16, request: &[u8]) -> Option<u16> {
    let head = http_head(port, request).await;
    head.split_whitespace().nth(1).and_then(|s| s.parse().ok())
}

/// Sends one raw HTTP request and returns the response head as text (empty if the server
/// closed the connection without answering).
async fn http_head(port: u16, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    // The server may refuse before reading everything; a failed write is not the verdict.
    let _ = tcp.write_all(request).await;
    let mut buf = Vec::new();
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            match tcp.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        return;
                    }
                }
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the server neither answered nor closed: a hang");
    String::from_utf8_lossy(&buf).into_owned()
}

fn upgrade_request(path: &str, host: Option<&str>, extra: &[&str]) -> Vec<u8> {
    let mut req = format!("GET {path} HTTP/1.1\r\n");
    if let Some(h) = host {
        req.push_str(&format!("Host: {h}\r\n"));
    }
    req.push_str("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n");
    for line in extra {
        req.push_str(line);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.into_bytes()
}

#[tokio::test]
async fn dns_rebinding_hosts_are_refused_before_upgrade() {
    let server = Server::core_default().await;
    let path = format!("/?token={}", server.token);
    let port = server.port;
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        "localhost.evil.example".into(),
        "127.0.0.1.nip.io".into(),
        "localhost.".into(),
        format!("localhost.:{port}"),
        "LOCALHOST.".into(),
        "127.0.0.1.".into(),
        "127.0.0.2".into(),
        "0.0.0.0".into(),
        "127.1".into(),
        "2130706433".into(),
        "0x7f.0.0.1".into(),
        "[::ffff:127.0.0.1]".into(),
        "[::]".into(),
        "::1".into(),
        "[::1".into(),
        "[::1]x".into(),
        "localhost:abc".into(),
        "localhost:99999".into(),
        "".into(),
    ] {
        assert_eq!(
            http_status(port, &upgrade_request(&path, Some(&host), &[])).await,
            Some(403),
            "Host {host:?}"
        );
        // Every route but /healthz sits behind the same check.
        let metrics = format!(
            "GET /metrics?token={} HTTP/1.1\r\nHost: {host}\r\n\r\n",
            server.token.clone()
        );
        assert_eq!(
            http_status(port, metrics.as_bytes()).await,
            Some(403),
            "/metrics with Host {host:?}"
        );
    }
    assert_eq!(
        http_status(port, &upgrade_request(&path, None, &[])).await,
        Some(403),
        "missing Host"
    );
    assert_eq!(server.transport.metrics().connections(), 0);
}

#[tokio::test]
async fn loopback_hosts_in_any_spelling_are_admitted() {
    let server = Server::core_default().await;
    let path = format!("/?token={}", server.token);
    let port = server.port;
    for host in [
        format!("LOCALHOST:{port}"),
        "LocalHost".into(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "[0:0:0:0:0:0:0:1]".into(),
        "[0000::0001]".into(),
    ] {
        assert_eq!(
            http_status(port, &upgrade_request(&path, Some(&host), &[])).await,
            Some(101),
            "Host {host:?}"
        );
    }
}

#[tokio::test]
async fn null_and_foreign_origins_are_refused_before_upgrade() {
    let server = Server::core_default().await;
    let path = format!("/?token={}", server.token);
    let host = format!("127.0.0.1:{}", server.port);
    let refused = [
        "null",
        "NULL",
        " null ",
        "http://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io:7070",
        "https://localhost.",
        "http://localhost:3000/app",
        "file://",
        "chrome-extension://abcdef",
        "ws://localhost",
        "localhost",
    ];
    let admitted = [
        "http://localhost:3000",
        "http://LOCALHOST",
        "http://127.0.0.1",
        "https://[::1]:8443",
    ];
    let cases = refused
        .iter()
        .map(|o| (o, 403))
        .chain(admitted.iter().map(|o| (o, 101)));
    for (origin, status) in cases {
        let header = format!("Origin: {origin}");
        assert_eq!(
            http_status(
                server.port,
                &upgrade_request(&path, Some(&host), &[&header])
            )
            .await,
            Some(status),
            "Origin {origin:?}"
        );
    }
}

/// Upgrades with `path_and_query` and returns the first frame the server sends unprompted, or
/// after a handshake attempt.
async fn first_answer(port: u16, path: &str, extra: &[&str]) -> RawFrame {
    let (status, mut raw) = Raw::upgrade(port, path, extra).await;
    assert_eq!(status, 101, "{path}");
    raw.send(true, 1, b"hs").await;
    raw.recv_data().await.expect("a frame")
}

#[tokio::test]
async fn percent_encoded_tokens_are_decoded_once_and_compared_exactly() {
    let server = Server::core_default().await; // token "test-token"
    let port = server.port;
    // Fully and partly percent-encoded forms of the right token are the right token.
    for q in ["token=%74%65%73%74%2D%74%6F%6B%65%6E", "token=test%2dtoken"] {
        let f = first_answer(port, &format!("/?{q}"), &[]).await;
        assert_eq!(f.payload, b"ok", "{q}");
    }
    // Anything else closes with 1008 before any data frame, and never panics the server.
    for q in [
        "token=test+token",
        "token=test-token%00",
        "token=%",
        "token=%zz",
        "token=%ff%fe",
        "token=test-toke%6",
        "token=TEST-TOKEN",
        "token=test-token%20",
        "token=wrong&token=test-token",
        "tok%65n=wrong",
        "token=",
    ] {
        let f = first_answer(port, &format!("/?{q}"), &[]).await;
        assert_eq!(f.close_code(), Some(1008), "{q}: {f:?}");
    }
    // The query wins over the subprotocol.
    let f = first_answer(
        port,
        "/?token=wrong",
        &["Sec-WebSocket-Protocol: test-token"],
    )
    .await;
    assert_eq!(f.close_code(), Some(1008));
    let f = first_answer(port, "/", &["Sec-WebSocket-Protocol: test-token, other"]).await;
    assert_eq!(f.payload, b"ok");
    let ws = connect(&server.url("")).await;
    drop(ws);
}

#[tokio::test]
async fn overlong_requests_get_431_or_a_clean_refusal_never_a_hang() {
    let server = Server::core_default().await;
    let port = server.port;
    let path = format!("/?token={}", server.token);
    let host = format!("127.0.0.1:{port}");
    let big_header = format!("X-Big: {}", "a".repeat(100 * 1024));
    let many: Vec<String> = (0..500).map(|i| format!("X-H{i}: v")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let long_path = format!("/?token={}&pad={}", server.token, "p".repeat(80 * 1024));
    let big_protocol = format!("Sec-WebSocket-Protocol: {}", "t".repeat(70 * 1024));
    for (name, req) in [
        (
            "one 100 KiB header",
            upgrade_request(&path, Some(&host), &[&big_header]),
        ),
        ("500 headers", upgrade_request(&path, Some(&host), &many)),
        ("80 KiB URI", upgrade_request(&long_path, Some(&host), &[])),
        (
            "70 KiB subprotocol",
            upgrade_request("/", Some(&host), &[&big_protocol]),
        ),
    ] {
        // 431 (414 for the URI) from the carrier's head limit or hyper's; never an upgrade or a hang.
        let status = http_status(port, &req).await;
        assert!(
            matches!(status, Some(431) | Some(414)),
            "{name}: {status:?}"
        );
    }
    assert_eq!(server.transport.metrics().connections(), 0);
    // Still serving.
    let f = first_answer(port, &path, &[]).await;
    assert_eq!(f.payload, b"ok");
}

#[tokio::test]
async fn unmasked_client_frames_are_refused_with_1002() {
    let server = Server::core_default().await;
    let (status, mut raw) =
        Raw::upgrade(server.port, &format!("/?token={}", server.token), &[]).await;
    assert_eq!(status, 101);
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.expect("ok").payload, b"ok");
    raw.send_unmasked(true, 1, b"echo me").await;
    let f = raw.recv_data().await.expect("close");
    assert_eq!(f.close_code(), Some(1002), "{f:?}");
    // An unmasked ping is refused the same way (and not answered with a pong).
    let (_, mut raw) = Raw::upgrade(server.port, &format!("/?token={}", server.token), &[]).await;
    raw.send_unmasked(true, 9, b"ping").await;
    let f = raw.recv().await.expect("close");
    assert_eq!(f.close_code(), Some(1002), "{f:?}");
}

#[tokio::test]
async fn over_long_or_invalid_close_frames_are_refused_not_echoed() {
    let server = Server::core_default().await;
    let path = format!("/?token={}", server.token);
    let mut long_close = 1000u16.to_be_bytes().to_vec();
    long_close.extend_from_slice(&[b'r'; 130]);
    for (payload, code) in [
        (long_close, 1002),
        (vec![0x03], 1002),
        (1005u16.to_be_bytes().to_vec(), 1002),
        (vec![0x03, 0xe8, 0xff], 1007),
        (4321u16.to_be_bytes().to_vec(), 4321),
    ] {
        let (_, mut raw) = Raw::upgrade(server.port, &path, &[]).await;
        raw.send(true, 8, &payload).await;
        let f = raw.recv().await.expect("close");
        assert_eq!(f.opcode, 8);
        assert!(
            f.payload.len() <= 125,
            "close frame of {} bytes",
            f.payload.len()
        );
        assert_eq!(f.close_code(), Some(code), "{payload:?}");
    }
}

/// Everything every test of this binary logs, at every level.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || LogWriter(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        logs
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::Write::write(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()), buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_token_never_appears_in_logs_or_metrics() {
    let logs = captured_logs();
    let token = "Tk-5d1c8e0b7a2f4e6d9c3b1a0f8e7d6c5b";
    let server = Server::core(config().with_auth(Auth::Token(token.into()))).await;
    let port = server.port;
    // A full session with the token in the query, one with it as the subprotocol, and the
    // failures around them: a wrong token, a refused role, a refused host, a bad upgrade.
    let mut ws = connect_handshaken(&format!("ws://127.0.0.1:{port}/?token={token}")).await;
    futures_util::SinkExt::send(
        &mut ws,
        tokio_tungstenite::tungstenite::Message::text("hello"),
    )
    .await
    .expect("send");
    assert_eq!(next_text(&mut ws).await, "hello");
    let f = first_answer(port, "/", &[&format!("Sec-WebSocket-Protocol: {token}")]).await;
    assert_eq!(f.payload, b"ok");
    let encoded: String = token.bytes().map(|b| format!("%{b:02X}")).collect();
    let f = first_answer(port, &format!("/?token={encoded}"), &[]).await;
    assert_eq!(f.payload, b"ok");
    let f = first_answer(port, &format!("/?token={token}x"), &[]).await;
    assert_eq!(f.close_code(), Some(1008));
    let f = first_answer(port, &format!("/?token={token}&role=admin"), &[]).await;
    assert_eq!(f.close_code(), Some(1008));
    let req = upgrade_request(&format!("/?token={token}"), Some("evil.example"), &[]);
    assert_eq!(http_status(port, &req).await, Some(403));
    let bad = format!("GET /?token={token} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    assert!(matches!(
        http_status(port, bad.as_bytes()).await,
        Some(400) | Some(426)
    ));
    let metrics_req =
        format!("GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    tcp.write_all(metrics_req.as_bytes()).await.expect("write");
    let mut body = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut body))
        .await
        .expect("metrics answered")
        .expect("read");
    let body = String::from_utf8_lossy(&body);
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("carrier_connections"));
    assert!(!body.contains(token), "the token is in /metrics");
    ws.close(None).await.ok();
    server.transport.stop().await;

    let logs = logs.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let text = String::from_utf8_lossy(&logs);
    assert!(
        text.contains("carrier listening") && text.contains("carrier stopped"),
        "the capture saw the carrier's logs:\n{text}"
    );
    for secret in [token, encoded.as_str(), &token[3..]] {
        assert!(!text.contains(secret), "secret {secret:?} logged:\n{text}");
    }
}

#[test]
fn minted_tokens_are_64_hex_characters_and_differ() {
    let a = carrier::server::mint_token().expect("OS randomness");
    let b = carrier::server::mint_token().expect("OS randomness");
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
    let minted = WsTransport::new(CarrierConfig::default().with_port(0)).expect("config");
    assert_eq!(minted.resolved_token().map(str::len), Some(64));
}

/// `carrier serve --token-file PATH`: the token goes to a new 0600 file (an existing file or
/// symlink at PATH is replaced, never written through), stdout says `"token":"file"`, and the
/// token in the file admits a client.
#[cfg(unix)]
#[tokio::test]
async fn token_file_is_owner_only_and_never_written_through_a_link() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    use tokio::io::AsyncBufReadExt;

    let dir = tempfile::tempdir().expect("tempdir");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "do not touch\n").expect("victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let path = dir.path().join("token");
    symlink(&victim, &path).expect("symlink");

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_carrier"))
        .args(["serve", "--port", "0", "--token-file"])
        .arg(&path)
        .env_remove("CARRIER_TOKEN")
        // Its runtime file goes here, not among the runtime files of the person running tests.
        .env("XDG_RUNTIME_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn carrier serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::time::timeout(WAIT, tokio::io::BufReader::new(stdout).read_line(&mut line))
        .await
        .expect("listening line")
        .expect("read");
    let listening: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
    assert_eq!(listening["token"], "file", "{line}");
    let port = listening["port"].as_u64().expect("port") as u16;

    let meta = std::fs::symlink_metadata(&path).expect("token file");
    assert!(
        meta.file_type().is_file(),
        "the link was replaced by a file"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "do not touch\n"
    );
    let token = std::fs::read_to_string(&path).expect("token");
    let token = token.trim_end();
    assert_eq!(token.len(), 64);
    assert!(!line.contains(token), "the token was printed");
    // Nor is it in the runtime file: with --token-file the token stays in that file only.
    let pid = child.id().expect("pid");
    let runtime = dir.path().join(format!("carrier/{pid}.json"));
    let advertised: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runtime).expect("runtime file"))
            .expect("runtime JSON");
    assert_eq!(advertised["port"], port, "{advertised}");
    assert_eq!(advertised["token"], serde_json::Value::Null, "{advertised}");

    let req = upgrade_request(&format!("/?token={token}"), Some("127.0.0.1"), &[]);
    assert_eq!(http_status(port, &req).await, Some(101));
    child.kill().await.ok();
}

/// A request with `method`, `target` and `version` on its request line, `Host: 127.0.0.1`,
/// and the headers of a valid upgrade except those named in `drop` (lowercase), plus `extra`.
fn request_line(
    method: &str,
    target: &str,
    version: &str,
    drop: &[&str],
    extra: &[&str],
) -> Vec<u8> {
    let mut req = format!("{method} {target} {version}\r\n");
    for (name, value) in [
        ("host", "127.0.0.1"),
        ("upgrade", "websocket"),
        ("connection", "Upgrade"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("sec-websocket-version", "13"),
    ] {
        if !drop.contains(&name) {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    for line in extra {
        req.push_str(line);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.into_bytes()
}

/// RFC 7230 §5.4: a second `Host` is a bad request; answering by the first one would let a
/// request name a foreign host where a proxy or another parser reads the second.
#[tokio::test]
async fn two_host_headers_are_refused_with_400() {
    let server = Server::core_default().await;
    let (port, path) = (server.port, format!("/?token={}", server.token));
    for second in [
        "Host: 127.0.0.1",
        "Host: evil.example",
        &format!("host: localhost:{port}"),
    ] {
        let req = request_line("GET", &path, "HTTP/1.1", &[], &[second]);
        assert_eq!(http_status(port, &req).await, Some(400), "{second}");
        let metrics = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n{second}\r\n\r\n");
        assert_eq!(
            http_status(port, metrics.as_bytes()).await,
            Some(400),
            "/metrics, {second}"
        );
    }
    let one = request_line("GET", &path, "HTTP/1.1", &[], &[]);
    assert_eq!(http_status(port, &one).await, Some(101), "one Host is fine");
}

/// Admission judges one `Origin`; with two, which one a browser meant is unknowable.
#[tokio::test]
async fn two_origin_headers_are_refused_with_403() {
    let server = Server::core_default().await;
    let (port, path) = (server.port, format!("/?token={}", server.token));
    for pair in [
        ["Origin: http://127.0.0.1", "Origin: http://127.0.0.1"],
        ["Origin: http://localhost", "Origin: https://evil.example"],
        ["Origin: https://evil.example", "Origin: http://localhost"],
    ] {
        let req = request_line("GET", &path, "HTTP/1.1", &[], &pair);
        assert_eq!(http_status(port, &req).await, Some(403), "{pair:?}");
    }
    let one = request_line("GET", &path, "HTTP/1.1", &[], &["Origin: http://localhost"]);
    assert_eq!(
        http_status(port, &one).await,
        Some(101),
        "one loopback Origin is fine"
    );
    assert_eq!(server.transport.metrics().connections(), 1);
}

/// RFC 7230 §5.4: with an absolute-form target the authority in it stands for `Host`, so it
/// passes the same DNS-rebinding check.
#[tokio::test]
async fn an_absolute_form_target_with_a_foreign_authority_is_refused_with_403() {
    let server = Server::core_default().await;
    let (port, token) = (server.port, server.token.clone());
    for target in [
        format!("http://evil.example/?token={token}"),
        format!("http://evil.example:{port}/?token={token}"),
        format!("http://127.0.0.1@evil.example/?token={token}"),
        format!("ws://evil.example/?token={token}"),
    ] {
        let req = request_line("GET", &target, "HTTP/1.1", &[], &[]);
        assert_eq!(http_status(port, &req).await, Some(403), "{target}");
    }
    let metrics = format!(
        "GET http://evil.example/metrics?token={token} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    );
    assert_eq!(
        http_status(port, metrics.as_bytes()).await,
        Some(403),
        "/metrics"
    );
    for target in [
        format!("http://127.0.0.1:{port}/?token={token}"),
        format!("http://localhost/?token={token}"),
        format!("http://[::1]:{port}/?token={token}"),
    ] {
        let req = request_line("GET", &target, "HTTP/1.1", &[], &[]);
        assert_eq!(
            http_status(port, &req).await,
            Some(101),
            "{target}: a loopback authority"
        );
    }
}

/// RFC 6455 §4.1: the opening handshake is an HTTP/1.1 GET.
#[tokio::test]
async fn an_upgrade_over_http_1_0_is_refused_with_400() {
    let server = Server::core_default().await;
    let (port, path) = (server.port, format!("/?token={}", server.token));
    let req = request_line("GET", &path, "HTTP/1.0", &[], &[]);
    assert_eq!(http_status(port, &req).await, Some(400));
    assert_eq!(server.transport.metrics().connections(), 0);
}

#[tokio::test]
async fn a_head_upgrade_is_refused_with_400() {
    let server = Server::core_default().await;
    let (port, path) = (server.port, format!("/?token={}", server.token));
    let req = request_line("HEAD", &path, "HTTP/1.1", &[], &[]);
    assert_eq!(http_status(port, &req).await, Some(400));
    assert_eq!(server.transport.metrics().connections(), 0);
    // A HEAD without the upgrade is still an ordinary request.
    let head = b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    assert_eq!(http_status(port, head).await, Some(200));
}

/// RFC 6455 §4.1: the key is a random 16-byte value, base64-encoded (24 characters). Every
/// such key is accepted; anything else is a bad request.
#[tokio::test]
async fn a_sec_websocket_key_that_is_not_16_bytes_of_base64_is_refused_with_400() {
    let server = Server::core_default().await;
    let (port, path) = (server.port, format!("/?token={}", server.token));
    for key in [
        "",
        "short",
        "dGhlIHNhbXBsZSBub25jZQ",
        "dGhlIHNhbXBsZSBub25jZQ=",
        "dGhlIHNhbXBsZSBub25jZSE=",
        "dGhlIHNhbXBsZSBub25jZQ===",
        "dGhlIHNhbXBsZSBub25j-_==",
        "dGhlIHNhbXBsZSBub2 jZQ==",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    ] {
        let line = format!("Sec-WebSocket-Key: {key}");
        let req = request_line("GET", &path, "HTTP/1.1", &["sec-websocket-key"], &[&line]);
        assert_eq!(http_status(port, &req).await, Some(400), "key {key:?}");
    }
    let missing = request_line("GET", &path, "HTTP/1.1", &["sec-websocket-key"], &[]);
    assert_eq!(http_status(port, &missing).await, Some(400), "no key");
    let two = request_line(
        "GET",
        &path,
        "HTTP/1.1",
        &[],
        &["Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA=="],
    );
    assert_eq!(http_status(port, &two).await, Some(400), "two keys");
    assert_eq!(server.transport.metrics().connections(), 0);

    // Valid keys of every shape: random ones, and the extremes of the alphabet.
    let mut keys: Vec<String> = (0..32)
        .map(|_| data_encoding::BASE64.encode(&rand::random::<[u8; 16]>()))
        .collect();
    keys.extend(
        [
            "AAAAAAAAAAAAAAAAAAAAAA==",
            "/////////////////////w==",
            "+++++++++++++++++++++w==",
        ]
        .map(String::from),
    );
    for key in keys {
        let line = format!("Sec-WebSocket-Key: {key}");
        let req = request_line("GET", &path, "HTTP/1.1", &["sec-websocket-key"], &[&line]);
        assert_eq!(http_status(port, &req).await, Some(101), "key {key:?}");
    }
}

/// RFC 6455 §4.2.2: a WebSocket version the server does not speak gets 426 and the version it
/// does in `Sec-WebSocket-Version`; a request without the header is a bad request.
#[tokio::test]
async fn another_websocket_version_gets_426_naming_13_and_a_missing_one_400() {
    let server = Server::core_default().await;
    let (port, path) = (server.port, format!("/?token={}", server.token));
    for extra in [
        &["Sec-WebSocket-Version: 8"][..],
        &["Sec-WebSocket-Version: 14"],
        &["Sec-WebSocket-Version: 13, 8"],
        &["Sec-WebSocket-Version: 13", "Sec-WebSocket-Version: 8"],
    ] {
        let req = request_line("GET", &path, "HTTP/1.1", &["sec-websocket-version"], extra);
        let head = http_head(port, &req).await;
        assert!(head.starts_with("HTTP/1.1 426"), "{extra:?}: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("\r\nsec-websocket-version: 13\r\n"),
            "{extra:?}: {head}"
        );
    }
    let missing = request_line("GET", &path, "HTTP/1.1", &["sec-websocket-version"], &[]);
    assert_eq!(http_status(port, &missing).await, Some(400));
    assert_eq!(server.transport.metrics().connections(), 0);
    let good = request_line("GET", &path, "HTTP/1.1", &[], &[]);
    assert_eq!(http_status(port, &good).await, Some(101));
}

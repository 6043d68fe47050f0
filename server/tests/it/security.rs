//! Security tests over real sockets on 127.0.0.1: DNS-rebinding hosts, hostile origins, token
//! encodings, oversized requests, and RFC 6455 masking. (Secrets in logs and metrics are
//! `secret_logs.rs`, a binary of its own: it captures every log line of its process. A failing OS
//! random source is the server's unit test: `WsTransport::new` refuses to start without a token.
//! The token file `carrier serve --token-file` writes is the CLI's: `cli/tests/it/serve.rs`.)

use carrier_test_support as support;

use carrier_server::{CarrierConfig, WsTransport};
use support::*;

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

#[test]
fn minted_tokens_are_64_hex_characters_and_differ() {
    let a = carrier_server::mint_token().expect("OS randomness");
    let b = carrier_server::mint_token().expect("OS randomness");
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
    let minted = WsTransport::new(CarrierConfig::default().with_port(0)).expect("config");
    assert_eq!(minted.resolved_token().map(str::len), Some(64));
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

//! Admission over real sockets (docs/protocol.md, "Endpoint and admission"), with tokio-tungstenite
//! as the client.

use carrier_test_support as support;

use carrier::protocol::Role;
use carrier::server::{Auth, CarrierConfig, ConfigError, WsTransport};
use futures_util::SinkExt;
use support::*;
use tokio_tungstenite::tungstenite::Message;

async fn assert_admitted(url: &str, headers: &[(&str, &str)]) {
    let (mut ws, _) = connect_with(url, headers).await.expect("upgrade");
    ws.send(Message::text("hs")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "ok");
}

#[tokio::test]
async fn query_token_is_admitted() {
    let s = Server::core_default().await;
    assert_admitted(&s.url(""), &[]).await;
}

#[tokio::test]
async fn subprotocol_token_is_admitted_and_echoed() {
    let s = Server::core_default().await;
    let url = format!("ws://127.0.0.1:{}/", s.port);
    let (mut ws, resp) = connect_with(&url, &[("Sec-WebSocket-Protocol", "test-token")])
        .await
        .expect("upgrade");
    assert_eq!(
        resp.headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok()),
        Some("test-token")
    );
    ws.send(Message::text("hs")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "ok");
}

#[tokio::test]
async fn bearer_token_is_admitted_beside_a_subprotocol_of_the_client_s_own() {
    let s = Server::core_default().await;
    let url = format!("ws://127.0.0.1:{}/", s.port);
    let (mut ws, _) = connect_with(&url, &[("Authorization", "Bearer test-token")])
        .await
        .expect("upgrade");
    ws.send(Message::text("hs")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "ok");
    // The header decides; the client's own subprotocol is still echoed.
    let (mut ws, resp) = connect_with(
        &url,
        &[
            ("Authorization", "bearer test-token"),
            ("Sec-WebSocket-Protocol", "acp"),
        ],
    )
    .await
    .expect("upgrade");
    assert_eq!(
        resp.headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok()),
        Some("acp")
    );
    ws.send(Message::text("hs")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "ok");
}

#[tokio::test]
async fn wrong_bearer_token_is_closed_1008_before_any_data_frame() {
    let s = Server::core_default().await;
    let (status, mut raw) =
        Raw::upgrade(s.port, "/", &["Authorization: Bearer not-the-token"]).await;
    assert_eq!(status, 101);
    let first = raw.recv_data().await.expect("a frame");
    assert_eq!(first.close_code(), Some(1008), "{first:?}");
}

#[tokio::test]
async fn missing_token_is_closed_1008_before_any_data_frame() {
    let s = Server::core_default().await;
    let (status, mut raw) = Raw::upgrade(s.port, "/", &[]).await;
    assert_eq!(status, 101);
    let first = raw.recv_data().await.expect("a frame");
    assert_eq!(
        first.close_code(),
        Some(1008),
        "first frame must be the close: {first:?}"
    );
}

#[tokio::test]
async fn wrong_token_is_closed_1008_before_any_data_frame() {
    let s = Server::core_default().await;
    let (status, mut raw) = Raw::upgrade(s.port, "/?token=test-tokem", &[]).await;
    assert_eq!(status, 101);
    let first = raw.recv_data().await.expect("a frame");
    assert_eq!(first.close_code(), Some(1008));
    // A shorter and a longer token too: constant-time compare must not trip on lengths.
    for t in ["t", "test-token-and-more"] {
        let mut ws = connect(&format!("ws://127.0.0.1:{}/?token={t}", s.port)).await;
        expect_close(&mut ws, 1008).await;
    }
}

#[tokio::test]
async fn minted_token_works_and_differs_per_launch() {
    let a = Server::core(CarrierConfig::default().with_port(0)).await;
    let b = Server::core(CarrierConfig::default().with_port(0)).await;
    let (ta, tb) = (a.token.clone(), b.token.clone());
    assert!(
        ta.len() >= 64 && ta.bytes().all(|c| c.is_ascii_hexdigit()),
        "{ta}"
    );
    assert_ne!(ta, tb);
    assert_admitted(&a.url(""), &[]).await;
    let mut ws = connect(&format!("ws://127.0.0.1:{}/?token={tb}", a.port)).await;
    expect_close(&mut ws, 1008).await;
}

#[tokio::test]
async fn open_mode_admits_without_token() {
    let s = Server::core(CarrierConfig::default().with_port(0).with_auth(Auth::Open {
        reason: "integration test".into(),
    }))
    .await;
    assert_eq!(s.transport.resolved_token(), None);
    assert_admitted(&format!("ws://127.0.0.1:{}/", s.port), &[]).await;
}

// Open mode with a token cannot be configured at all ([`Auth`] holds one or the other); the
// CLI refuses `--open` with a token itself (tests/cli_serve.rs).
#[tokio::test]
async fn open_without_reason_is_refused_at_construction() {
    for reason in ["", "  "] {
        let open = CarrierConfig::default().with_auth(Auth::Open {
            reason: reason.into(),
        });
        assert_eq!(
            WsTransport::new(open).err(),
            Some(ConfigError::OpenWithoutReason)
        );
    }
}

#[tokio::test]
async fn foreign_host_gets_403_before_upgrade() {
    let s = Server::core_default().await;
    for host in [
        "evil.example",
        "localhost.evil.example",
        "127.0.0.2",
        "localhost.",
    ] {
        assert_eq!(
            connect_with(&s.url(""), &[("Host", host)]).await.err(),
            Some(403),
            "{host}"
        );
    }
}

#[tokio::test]
async fn host_localhost_with_port_is_accepted() {
    let s = Server::core_default().await;
    let host = format!("localhost:{}", s.port);
    assert_admitted(&s.url(""), &[("Host", &host)]).await;
    assert_admitted(&s.url(""), &[("Host", "[::1]:1234")]).await;
}

#[tokio::test]
async fn allowed_host_is_accepted() {
    let s = Server::core(config().with_allowed_hosts(vec!["carrier.test".into()])).await;
    assert_admitted(&s.url(""), &[("Host", "carrier.test:9")]).await;
}

#[tokio::test]
async fn foreign_origin_gets_403() {
    let s = Server::core_default().await;
    assert_eq!(
        connect_with(&s.url(""), &[("Origin", "https://evil.example")])
            .await
            .err(),
        Some(403)
    );
}

#[tokio::test]
async fn null_origin_gets_403() {
    let s = Server::core_default().await;
    assert_eq!(
        connect_with(&s.url(""), &[("Origin", "null")]).await.err(),
        Some(403)
    );
}

#[tokio::test]
async fn loopback_and_allowed_origins_are_accepted() {
    let s = Server::core(config().with_allowed_origins(vec!["https://app.example".into()])).await;
    assert_admitted(&s.url(""), &[("Origin", "https://app.example")]).await;
    let local = format!("http://localhost:{}", s.port);
    assert_admitted(&s.url(""), &[("Origin", &local)]).await;
}

#[tokio::test]
async fn observe_role_on_a_drive_listener_is_granted() {
    let s = Server::core_default().await;
    assert_admitted(&format!("{}&role=observe", s.url("")), &[]).await;
}

#[tokio::test]
async fn drive_role_on_an_observe_listener_is_closed_1008() {
    let s = Server::core(config().with_role(Role::Observe)).await;
    let mut ws = connect(&format!("{}&role=drive", s.url(""))).await;
    expect_close(&mut ws, 1008).await;
    assert_admitted(&s.url(""), &[]).await;
}

#[tokio::test]
async fn unknown_role_is_closed_1008() {
    let s = Server::core_default().await;
    for role in ["admin", "", "DRIVE"] {
        let mut ws = connect(&format!("{}&role={role}", s.url(""))).await;
        expect_close(&mut ws, 1008).await;
    }
}

#[tokio::test]
async fn taken_port_moves_to_the_next_one() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    // The next port may itself be busy on a shared machine; allow a few retries.
    let s = Server::core(config().with_port(taken).with_max_retries(5)).await;
    assert!(
        s.port > taken && s.port <= taken + 5,
        "bound {} after {taken}",
        s.port
    );
    assert_admitted(&s.url(""), &[]).await;
}

#[tokio::test]
async fn zero_retries_on_a_taken_port_is_a_clear_error_then_succeeds_once_free() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    let t = WsTransport::new(config().with_port(taken).with_max_retries(0)).unwrap();
    t.attach(std::sync::Arc::new(TestProfile {
        stats: Default::default(),
    }));
    let err = t.start().await.expect_err("port is taken");
    let msg = err.to_string();
    assert!(
        msg.contains(&taken.to_string()) && msg.contains("no free port"),
        "{msg}"
    );
    assert!(!t.is_running());
    drop(holder);
    t.start().await.expect("retry after the port frees");
    assert_eq!(t.bound_port(), Some(taken));
    t.stop().await;
}

#[tokio::test]
async fn port_zero_reports_the_real_port() {
    let s = Server::core_default().await;
    assert_ne!(s.port, 0);
    let tcp = std::net::TcpStream::connect(("127.0.0.1", s.port));
    assert!(tcp.is_ok());
}

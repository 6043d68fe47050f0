//! Message limits (docs/protocol.md, "Limits") at and one past each limit, and connection limits.

use carrier_test_support as support;

use carrier_server::{CarrierConfig, Limits};
use futures_util::SinkExt;
use support::*;
use tokio_tungstenite::tungstenite::Message;

const TEXT: usize = 16 * 1024;
const CAP: usize = 64 * 1024;

fn limited() -> CarrierConfig {
    config().with_limits(
        Limits::default()
            .with_max_text_bytes(TEXT)
            .with_max_message_bytes(CAP)
            .with_max_connections(3),
    )
}

#[tokio::test]
async fn text_at_the_soft_limit_is_delivered() {
    let s = Server::core(limited()).await;
    let mut ws = connect_handshaken(&s.url("")).await;
    let text = "a".repeat(TEXT);
    ws.send(Message::text(text.clone())).await.unwrap();
    assert_eq!(next_text(&mut ws).await, text);
}

#[tokio::test]
async fn text_past_the_soft_limit_is_answered_too_large_and_stays_open() {
    let s = Server::core(limited()).await;
    let mut ws = connect_handshaken(&s.url("")).await;
    ws.send(Message::text("a".repeat(TEXT + 1))).await.unwrap();
    let reply: serde_json::Value = serde_json::from_str(&next_text(&mut ws).await).unwrap();
    assert_eq!(reply["event"], "protocol_error");
    assert_eq!(reply["payload"]["code"], "too_large");
    assert_eq!(reply["payload"]["limit"], TEXT);
    assert_eq!(reply["payload"]["size"], TEXT + 1);
    // A request with an id gets its own error response instead.
    let padding = "x".repeat(TEXT);
    let request =
        format!(r#"{{"id":"big1","method":"system.ping","params":{{"pad":"{padding}"}}}}"#);
    ws.send(Message::text(request)).await.unwrap();
    let reply: serde_json::Value = serde_json::from_str(&next_text(&mut ws).await).unwrap();
    assert_eq!(reply["id"], "big1");
    assert_eq!(reply["error"]["code"], "too_large");
    assert_eq!(reply["error"]["data"]["limit"], TEXT);
    // Still open.
    ws.send(Message::text("still here")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "still here");
}

#[tokio::test]
async fn binary_at_the_hard_cap_in_one_frame_is_accepted() {
    let s = Server::core(limited()).await;
    let (_, mut raw) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ok");
    raw.send(true, 2, &vec![0u8; CAP]).await;
    // The binary frame goes to the channel registry: a malformed channel frame is answered,
    // and the connection stays open.
    let reply = raw.recv_data().await.unwrap();
    assert_eq!(reply.opcode, 1, "{reply:?}");
    assert!(String::from_utf8_lossy(&reply.payload).contains("malformed_frame"));
    raw.send(true, 1, b"ping").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ping");
}

#[tokio::test]
async fn one_frame_past_the_hard_cap_is_closed_1009() {
    let s = Server::core(limited()).await;
    let (_, mut raw) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ok");
    raw.send(true, 2, &vec![0u8; CAP + 1]).await;
    assert_eq!(raw.recv_data().await.unwrap().close_code(), Some(1009));
}

#[tokio::test]
async fn fragments_reassembled_to_the_hard_cap_are_accepted_and_one_byte_more_closes_1009() {
    let s = Server::core(limited()).await;
    let (_, mut raw) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ok");
    let quarter = vec![0u8; CAP / 4];
    raw.send(false, 2, &quarter).await;
    raw.send(false, 0, &quarter).await;
    raw.send(false, 0, &quarter).await;
    raw.send(true, 0, &quarter).await;
    let reply = raw.recv_data().await.unwrap();
    assert!(
        String::from_utf8_lossy(&reply.payload).contains("malformed_frame"),
        "{reply:?}"
    );
    // Same again with one extra byte in the last fragment: every fragment is under the cap,
    // the reassembled message is not.
    raw.send(false, 2, &quarter).await;
    raw.send(false, 0, &quarter).await;
    raw.send(false, 0, &quarter).await;
    raw.send(true, 0, &[0u8; CAP / 4 + 1]).await;
    assert_eq!(raw.recv_data().await.unwrap().close_code(), Some(1009));
}

#[tokio::test]
async fn fragmented_text_is_reassembled_and_invalid_utf8_closes_1007() {
    let s = Server::core(limited()).await;
    let (_, mut raw) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ok");
    let euro = "€".as_bytes();
    raw.send(false, 1, &[b'a', euro[0]]).await;
    raw.send(true, 0, &euro[1..]).await;
    assert_eq!(raw.recv_data().await.unwrap().payload, "a€".as_bytes());
    raw.send(true, 1, &[0xc3, 0x28]).await;
    assert_eq!(raw.recv_data().await.unwrap().close_code(), Some(1007));
}

#[tokio::test]
async fn connections_up_to_the_limit_are_admitted_and_one_more_gets_503() {
    let s = Server::core(limited()).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_handshaken(&s.url("")).await);
    }
    assert_eq!(connect_with(&s.url(""), &[]).await.err(), Some(503));
    // Freeing one slot admits again.
    let mut first = held.remove(0);
    first.close(None).await.unwrap();
    while next_message(&mut first).await.is_some() {}
    assert!(eventually(|| s.transport.metrics().connections() == 2).await);
    assert!(eventually(|| std::net::TcpStream::connect(("127.0.0.1", s.port)).is_ok()).await);
    let mut ok = None;
    for _ in 0..100 {
        if let Ok((ws, _)) = connect_with(&s.url(""), &[]).await {
            ok = Some(ws);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(ok.is_some(), "a freed slot admits a new connection");
}

#[tokio::test]
async fn healthz_is_open_and_metrics_need_the_token() {
    let s = Server::core_default().await;
    let get = |path: String, auth: Option<&'static str>| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", s.port))
            .await
            .unwrap();
        let auth = auth
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n");
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        out
    };
    let health = get("/healthz".into(), None).await;
    assert!(
        health.starts_with("HTTP/1.1 200") && health.ends_with(r#"{"status":"ok"}"#),
        "{health}"
    );
    assert!(get("/metrics".into(), None)
        .await
        .starts_with("HTTP/1.1 401"));
    assert!(get("/metrics?token=nope".into(), None)
        .await
        .starts_with("HTTP/1.1 401"));
    let m = get("/metrics?token=test-token".into(), None).await;
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");
    for name in [
        "carrier_connections",
        "carrier_frames_total{direction=\"in\",kind=\"text\"}",
        "carrier_bytes_total{direction=\"out\"}",
        "carrier_protocol_errors_total",
        "carrier_delivery_failures_total",
    ] {
        assert!(m.contains(name), "missing {name}");
    }
    assert!(
        !m.contains("test-token"),
        "the token never appears in metrics"
    );
    let bearer = get("/metrics".into(), Some("Bearer test-token")).await;
    assert!(bearer.starts_with("HTTP/1.1 200"));
}

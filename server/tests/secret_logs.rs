//! Secrets never reach the logs or the metrics: a carrier's whole life (a session with the token
//! in the query, one with it as the subprotocol, the failures around them, `/metrics`) logged at
//! every level, and no token in any spelling in what was logged.
//!
//! A binary of its own: the capture is the process's global subscriber, so it sees every log
//! line of every test in its process (in a shared binary it would hold every other test's lines
//! at TRACE for the rest of the run).

use carrier_test_support as support;

use std::sync::{Arc, Mutex, OnceLock};

use carrier_server::Auth;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Everything this binary logs, at every level.
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

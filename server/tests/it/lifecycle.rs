//! The library lifecycle (README.md, "Embedding"): attach → start → stop, and mounting as a
//! service.

use carrier_test_support as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use carrier_server::{LifecycleError, WsTransport};
use futures_util::SinkExt;
use support::*;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn start_before_attach_is_an_error() {
    let t = WsTransport::new(config()).unwrap();
    assert!(matches!(t.start().await, Err(LifecycleError::NotAttached)));
    assert!(!t.is_running());
}

#[tokio::test]
async fn a_second_start_while_running_is_an_error() {
    let s = Server::core_default().await;
    assert!(matches!(
        s.transport.start().await,
        Err(LifecycleError::AlreadyRunning)
    ));
    // The first listener is unaffected.
    let mut ws = connect_handshaken(&s.url("")).await;
    ws.send(Message::text("x")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "x");
}

#[tokio::test]
async fn stop_closes_clients_with_1001_and_twice_is_fine() {
    let s = Server::core_default().await;
    let mut ws = connect_handshaken(&s.url("")).await;
    let stop = tokio::spawn(async move {
        s.transport.stop().await;
        s.transport.stop().await;
        s
    });
    expect_close(&mut ws, 1001).await;
    drop(ws);
    let s = stop.await.unwrap();
    assert!(!s.transport.is_running());
    assert_eq!(s.transport.bound_port(), None);
}

#[tokio::test]
async fn stop_returns_within_3_5_s_when_a_client_never_answers_the_close() {
    let s = Server::core_default().await;
    // A raw client that completes the handshake and then never reads nor answers.
    let (_, mut raw) = Raw::upgrade(s.port, "/?token=test-token", &[]).await;
    raw.send(true, 1, b"hs").await;
    assert_eq!(raw.recv_data().await.unwrap().payload, b"ok");
    let mut polite = connect_handshaken(&s.url("")).await;
    let started = Instant::now();
    s.transport.stop().await;
    let took = started.elapsed();
    assert!(took < Duration::from_millis(3500), "stop took {took:?}");
    expect_close(&mut polite, 1001).await;
    // The unresponsive client got the close too; its socket is gone after the grace period.
    let f = raw.recv_data().await.expect("close frame");
    assert_eq!(f.close_code(), Some(1001));
    assert!(
        raw.recv().await.is_none(),
        "socket closed after the grace period"
    );
    drop(raw);
}

#[tokio::test]
async fn restart_after_stop_needs_attach() {
    let s = Server::core_default().await;
    s.transport.stop().await;
    assert!(matches!(
        s.transport.start().await,
        Err(LifecycleError::NotAttached)
    ));
    s.transport.attach(Arc::new(TestProfile {
        stats: s.stats.clone(),
    }));
    s.transport.start().await.expect("restart");
    let port = s.transport.bound_port().unwrap();
    let mut ws = connect_handshaken(&format!("ws://127.0.0.1:{port}/?token=test-token")).await;
    ws.send(Message::text("again")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "again");
    s.transport.stop().await;
}

#[tokio::test]
async fn the_service_mounts_in_a_host_server_with_the_same_admission() {
    let t = WsTransport::new(config()).unwrap();
    t.attach(Arc::new(TestProfile {
        stats: Default::default(),
    }));
    t.start_mounted().unwrap();
    let service = t.service();
    // The host's own hyper server on its own listener.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let service = service.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    let mut ws = connect_handshaken(&format!("ws://127.0.0.1:{port}/?token=test-token")).await;
    ws.send(Message::text("mounted")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "mounted");
    let mut bad = connect(&format!("ws://127.0.0.1:{port}/?token=wrong")).await;
    expect_close(&mut bad, 1008).await;
    let url = format!("ws://127.0.0.1:{port}/?token=test-token");
    assert_eq!(
        connect_with(&url, &[("Origin", "https://evil.example")])
            .await
            .err(),
        Some(403)
    );
    t.stop().await;
}

#[tokio::test]
async fn a_transport_that_asks_for_it_advertises_itself_in_a_runtime_file_until_stop() {
    use carrier_discovery::RuntimeDir;
    use carrier_server::RuntimeFileOptions;

    let runtime = tempfile::tempdir().unwrap();
    let dir = RuntimeDir::at(runtime.path().join("carrier"));
    for (options, token) in [
        (RuntimeFileOptions::in_dir(dir.clone()), Some("test-token")),
        (
            RuntimeFileOptions::in_dir(dir.clone()).without_token(),
            None,
        ),
    ] {
        let t = WsTransport::new(config())
            .unwrap()
            .with_runtime_file(options);
        t.attach(Arc::new(TestProfile {
            stats: Arc::default(),
        }));
        assert_eq!(t.runtime_file(), None, "nothing is written before start()");
        t.start().await.unwrap();
        let file = t.runtime_file().expect("a runtime file while running");
        let found = dir.scan();
        assert!(found.warnings.is_empty(), "{:?}", found.warnings);
        let [entry] = found.carriers.as_slice() else {
            panic!("one carrier: {found:?}");
        };
        assert_eq!(entry.pid, std::process::id());
        assert_eq!(Some(entry.port), t.bound_port());
        assert_eq!(entry.url, format!("ws://127.0.0.1:{}/", entry.port));
        assert_eq!(entry.token.as_deref(), token);
        t.stop().await;
        assert!(!file.exists(), "stop() removes {}", file.display());
        assert_eq!(t.runtime_file(), None);
    }
}

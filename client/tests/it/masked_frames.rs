//! Frames no server may send (RFC 6455 §5.1: a client must fail the connection on a masked
//! frame): the Rust client against a rogue server on 127.0.0.1 that completes the upgrade
//! properly and then masks what it sends. (`carrier pipe` against the same rogue is the CLI's
//! test: `cli/tests/it/server_frames.rs`.)
//!
//! The rogue masks with an all-zero key: a zero key leaves the payload readable, so a client
//! that ignored the mask bit would act on the frame — the tests see that, not only a garbled
//! payload.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use carrier_client::{
    Client, ClientOptions, ConnectionState, Transport, WsClientTransport, WsOptions,
};
use carrier_test_support::rogue::{
    accept_handshake, handshake_result, masked_frame, peer_goes_away, WAIT,
};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

#[tokio::test]
async fn the_rust_client_fails_the_connection_on_a_masked_frame_and_delivers_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (went_away_tx, went_away) = tokio::sync::oneshot::channel();
    let rogue = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        let mut ws = tokio_tungstenite::accept_async(tcp)
            .await
            .expect("the upgrade");
        ws.get_mut()
            .write_all(&masked_frame(
                0x1,
                br#"{"event":"rogue.event","payload":{}}"#,
                [0; 4],
            ))
            .await
            .expect("write the masked frame");
        let _ = went_away_tx.send(peer_goes_away(&mut ws).await);
        // Further dials (the transport reconnects) are accepted and left alone.
        while let Ok((tcp, _)) = listener.accept().await {
            drop(tcp);
        }
    });
    let transport = WsClientTransport::new(WsOptions::new(format!("ws://127.0.0.1:{port}/")));
    let delivered = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = Arc::clone(&delivered);
    let _messages = transport.on_message(Box::new(move |frame| {
        seen.lock().expect("lock").push(frame.clone());
    }));
    transport.connect().await.expect("the upgrade succeeds");
    let went_away = tokio::time::timeout(WAIT, went_away)
        .await
        .expect("the rogue reports")
        .expect("the rogue runs");
    assert!(went_away, "the client dropped the connection");
    assert!(
        delivered.lock().expect("lock").is_empty(),
        "the masked frame was not delivered"
    );
    assert_ne!(transport.state(), ConnectionState::Connected);
    transport.disconnect().await;
    rogue.abort();
}

#[tokio::test]
async fn the_rust_client_does_not_complete_a_handshake_answered_masked() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (dropped_tx, dropped) = tokio::sync::oneshot::channel();
    let rogue = tokio::spawn(async move {
        let (mut ws, request) = accept_handshake(&listener).await;
        let reply = handshake_result(&request["id"]).to_string();
        ws.get_mut()
            .write_all(&masked_frame(0x1, reply.as_bytes(), [0; 4]))
            .await
            .expect("write the masked reply");
        let _ = dropped_tx.send(peer_goes_away(&mut ws).await);
        // Redials get nothing.
        while let Ok((tcp, _)) = listener.accept().await {
            drop(tcp);
        }
    });
    let transport = WsClientTransport::new(WsOptions::new(format!("ws://127.0.0.1:{port}/")));
    let options = ClientOptions {
        handshake_timeout: Duration::from_secs(3),
        ..ClientOptions::default()
    };
    let client = Client::with_options(Arc::new(transport), options);
    let connected = tokio::time::timeout(WAIT, client.connect()).await;
    let dropped = tokio::time::timeout(WAIT, dropped).await;
    rogue.abort();
    match connected {
        Ok(Ok(info)) => panic!("a masked handshake reply was accepted: {info:?}"),
        Ok(Err(_)) => {}
        Err(_) => panic!("connect neither failed nor succeeded within {WAIT:?}"),
    }
    assert!(
        matches!(dropped, Ok(Ok(true))),
        "the client dropped the connection that sent the masked frame"
    );
    assert!(client.handshake().is_none());
    client.disconnect().await;
}

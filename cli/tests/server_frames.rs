//! Frames no server may send (RFC 6455 §5.1: a client must fail the connection on a masked
//! frame): `carrier pipe` and the Rust client against a rogue server on 127.0.0.1 that completes
//! the upgrade properly and then masks what it sends.
//!
//! The rogue masks with an all-zero key as well as a random one: a zero key leaves the payload
//! readable, so a client that ignores the mask bit would act on the frame — the tests see that,
//! not only a garbled payload.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use carrier::client::{
    Client, ClientOptions, ConnectionState, Transport, WsClientTransport, WsOptions,
};
use carrier::protocol::channel_frame;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const BIN: &str = env!("CARGO_BIN_EXE_carrier");
const WAIT: Duration = Duration::from_secs(20);

/// One WebSocket frame as a server must not send it: masked with `key`.
fn masked_frame(opcode: u8, payload: &[u8], key: [u8; 4]) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n < 65536 => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&key);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    out
}

/// The handshake result a carrier with one `echo` channel `e` would give.
fn handshake_result(id: &Value) -> Value {
    json!({
        "id": id,
        "result": {
            "protocol_version": "1.0",
            "min_compatible_protocol": "1.0",
            "server": {"name": "rogue", "version": "0"},
            "role": "drive",
            "session_id": "s1",
            "epoch": "e1",
            "version_skew": false,
            "features": {},
            "channels": [{"name": "e", "events": ["*"], "binary": true, "delivery": "reliable"}],
            "limits": {"max_message_bytes": 16777216},
            "resume": {"outcome": "new"},
        }
    })
}

/// Accepts one WebSocket client and reads its first text message (the handshake request).
async fn accept_handshake(listener: &TcpListener) -> (WebSocketStream<TcpStream>, Value) {
    let (tcp, _) = listener.accept().await.expect("accept");
    let mut ws = tokio_tungstenite::accept_async(tcp)
        .await
        .expect("the upgrade");
    loop {
        match tokio::time::timeout(WAIT, ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                let request: Value = serde_json::from_str(&text).expect("JSON");
                return (ws, request);
            }
            Ok(Some(Ok(_))) => continue,
            other => panic!("no handshake request: {other:?}"),
        }
    }
}

/// Whether the peer has closed the TCP connection (or sent a close) within [`WAIT`].
async fn peer_goes_away(ws: &mut WebSocketStream<TcpStream>) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return false,
            Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => return true,
            Ok(Some(Ok(_))) => continue,
        }
    }
}

/// `carrier pipe URL --channel e` sending `input`, against a rogue server that answers the
/// handshake properly and then echoes each channel frame back masked with `key`.
async fn pipe_against_a_masking_echo(key: [u8; 4]) -> (Option<i32>, String, Vec<u8>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let rogue = tokio::spawn(async move {
        let (mut ws, request) = accept_handshake(&listener).await;
        let reply = handshake_result(&request["id"]).to_string();
        ws.send(Message::text(reply))
            .await
            .expect("handshake reply");
        // The first channel frame from the pipe, echoed back masked.
        let frame = loop {
            match tokio::time::timeout(WAIT, ws.next()).await {
                Ok(Some(Ok(Message::Binary(frame)))) => break frame,
                Ok(Some(Ok(_))) => continue,
                other => panic!("no channel frame from the pipe: {other:?}"),
            }
        };
        let decoded = channel_frame::decode(frame).expect("a channel frame");
        let echo = channel_frame::encode(&decoded.channel, 0, &decoded.body)
            .expect("encode")
            .to_vec();
        ws.get_mut()
            .write_all(&masked_frame(0x2, &echo, key))
            .await
            .expect("write the masked frame");
        peer_goes_away(&mut ws).await;
    });
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(BIN)
            .args(["pipe", &format!("ws://127.0.0.1:{port}/"), "--channel", "e"])
            .args(["--linger-ms", "3000"])
            .env_remove("CARRIER_TOKEN")
            .env("RUST_LOG", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn carrier pipe");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"hello\n").expect("write stdin");
        drop(stdin);
        let deadline = Instant::now() + WAIT;
        let code = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().expect("output");
        let stderr = BufReader::new(&out.stderr[..])
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
            .join("\n");
        (code, stderr, out.stdout)
    })
    .await
    .expect("the pipe runner");
    rogue.abort();
    output
}

#[tokio::test]
async fn pipe_fails_on_a_masked_server_frame_with_exit_1_and_one_line() {
    for key in [[0, 0, 0, 0], [0x5a, 0x13, 0xc7, 0x01]] {
        let (code, stderr, stdout) = pipe_against_a_masking_echo(key).await;
        assert_eq!(code, Some(1), "mask {key:?}: exit code; stderr: {stderr}");
        assert!(stdout.is_empty(), "mask {key:?}: nothing reaches stdout");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.contains("masked"), "says why: {stderr:?}");
    }
}

#[tokio::test]
async fn pipe_fails_on_a_masked_handshake_reply() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let rogue = tokio::spawn(async move {
        let (mut ws, request) = accept_handshake(&listener).await;
        let reply = handshake_result(&request["id"]).to_string();
        ws.get_mut()
            .write_all(&masked_frame(0x1, reply.as_bytes(), [0; 4]))
            .await
            .expect("write the masked reply");
        peer_goes_away(&mut ws).await;
    });
    let out = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(["pipe", &format!("ws://127.0.0.1:{port}/"), "--channel", "e"])
            .env_remove("CARRIER_TOKEN")
            .env("RUST_LOG", "off")
            .stdin(Stdio::null())
            .output()
            .expect("run carrier pipe")
    })
    .await
    .expect("the pipe runner");
    rogue.abort();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains("masked"), "says why: {stderr:?}");
}

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

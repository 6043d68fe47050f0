//! Frames no server may send (RFC 6455 §5.1: a client must fail the connection on a masked
//! frame): `carrier pipe` against a rogue server on 127.0.0.1 that completes the upgrade
//! properly and then masks what it sends. (The Rust client against the same rogue is the
//! client's test: `client/tests/it/masked_frames.rs`.)
//!
//! The rogue masks with an all-zero key as well as a random one: a zero key leaves the payload
//! readable, so a client that ignores the mask bit would act on the frame — the tests see that,
//! not only a garbled payload.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use carrier::protocol::channel_frame;
use carrier_test_support::rogue::{
    accept_handshake, handshake_result, masked_frame, peer_goes_away, WAIT,
};
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

const BIN: &str = env!("CARGO_BIN_EXE_carrier");

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

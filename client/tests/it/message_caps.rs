//! The WebSocket client's two caps on one inbound message, at the limit and one byte past it,
//! over real sockets against a tokio-tungstenite server: `max_message_bytes` (the message as
//! received) and `max_parsed_bytes` (what parsing it can take, measured before parsing). A
//! message at a cap is delivered; one past it is not parsed, the client closes with 1009 and
//! does not reconnect, and `last_error` says which cap and by how much.

use std::sync::Arc;
use std::time::Duration;

use carrier_client::testing::parsed_bound;
use carrier_client::{ConnectionState, Transport, TransportError, WsClientTransport, WsOptions};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(20);

/// A text message of exactly `len` bytes: `{"pad":"xxx…"}`.
fn message_of(len: usize) -> String {
    let frame = r#"{"pad":""}"#;
    format!(r#"{{"pad":"{}"}}"#, "x".repeat(len - frame.len()))
}

/// Sends `at` then `past` to a client whose options `cap` sets; returns the frames the client
/// delivered, the close code it sent, and the transport.
async fn deliver(
    cap: impl FnOnce(WsOptions) -> WsOptions,
    at: &str,
    past: &str,
) -> (Vec<Value>, Option<u16>, Arc<WsClientTransport>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("addr"));
    let transport = Arc::new(WsClientTransport::new(cap(WsOptions::new(url))));
    let (tx, mut delivered) = mpsc::unbounded_channel();
    let _messages = transport.on_message(Box::new(move |frame| {
        let _ = tx.send(frame.clone());
    }));
    let upgraded = async {
        let (tcp, _) = listener.accept().await.expect("accept");
        tokio_tungstenite::accept_async(tcp).await.expect("upgrade")
    };
    let (connected, mut ws) = tokio::join!(transport.connect(), upgraded);
    connected.expect("connects");
    ws.send(Message::text(at)).await.expect("at the cap");
    let first = tokio::time::timeout(WAIT, delivered.recv())
        .await
        .expect("the message at the cap arrives")
        .expect("a frame");
    ws.send(Message::text(past)).await.expect("past the cap");
    let close = loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the client answers")
        {
            Some(Ok(Message::Close(close))) => break close.map(|c| u16::from(c.code)),
            Some(Ok(_)) => continue,
            other => panic!("no close: {other:?}"),
        }
    };
    // No reconnect follows.
    let again = tokio::time::timeout(Duration::from_millis(1500), listener.accept()).await;
    assert!(again.is_err(), "the client reconnected");
    let mut frames = vec![first];
    while let Ok(frame) = delivered.try_recv() {
        frames.push(frame);
    }
    (frames, close, transport)
}

#[tokio::test]
async fn a_message_at_max_message_bytes_is_delivered_and_one_byte_more_closes_with_1009() {
    let cap = 4096;
    let (frames, close, transport) = deliver(
        |options| options.max_message_bytes(cap),
        &message_of(cap),
        &message_of(cap + 1),
    )
    .await;
    assert_eq!(frames.len(), 1, "only the message at the cap");
    assert_eq!(close, Some(1009));
    assert_eq!(transport.state(), ConnectionState::Disconnected);
    assert_eq!(
        transport.last_error(),
        Some(TransportError::MessageTooLarge { limit: cap })
    );
}

#[tokio::test]
async fn a_message_at_max_parsed_bytes_is_delivered_and_one_that_would_take_more_closes_with_1009()
{
    // The same length, one more value: the second takes more once parsed.
    let at = r#"{"a":[0,0,0,0,0,0],"pad":"xx"}"#;
    let past = r#"{"a":[0,0,0,0,0,0,0],"pad":""}"#;
    assert_eq!(at.len(), past.len());
    let cap = parsed_bound(at.as_bytes());
    let estimate = parsed_bound(past.as_bytes());
    assert!(estimate > cap);
    let (frames, close, transport) =
        deliver(|options| options.max_parsed_bytes(cap), at, past).await;
    assert_eq!(frames.len(), 1, "only the message at the cap");
    assert_eq!(frames[0]["pad"], "xx");
    assert_eq!(close, Some(1009));
    assert_eq!(transport.state(), ConnectionState::Disconnected);
    assert_eq!(
        transport.last_error(),
        Some(TransportError::ParsedTooLarge {
            estimate,
            limit: cap
        })
    );
}

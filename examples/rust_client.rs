//! The Rust client against the host of `examples/embedded_agent.rs`: a prompt containing "rm",
//! its permission prompt answered, the reply streamed back reversed; audio bytes sent on the
//! `audio` channel and the host's running-count acks; one `cpu` event from `telemetry`.
//!
//! ```sh
//! cargo run --example embedded_agent                          # prints its URL and token
//! cargo run --example rust_client -- ws://127.0.0.1:PORT/ TOKEN allow   # or deny
//! ```
//!
//! Besides `carrier` a client needs `tokio`, `futures-util` (for `StreamExt` on the event and
//! channel streams), `bytes` (binary payloads) and `serde_json`. It keeps one id: the turn id
//! `submit` returns, to pick its own turn's events out of the session's.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier::client::{ChannelMessage, Client, ClientEvent, Decision, ReceivedSessionEventKind};
use carrier::client::{WsClientTransport, WsOptions};
use futures_util::StreamExt;
use serde_json::Value;

/// What the client saw.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Whether the agent asked for permission.
    pub asked: bool,
    /// The streamed pieces of the reply, in order.
    pub deltas: Vec<String>,
    /// The completed turn's text.
    pub reply: String,
    /// The `bytes` of each `ack` on `audio`.
    pub acks: Vec<u64>,
    /// One `cpu` event's payload from `telemetry`.
    pub cpu: Value,
}

/// Connects to `url` with `token`, runs the turn (answering its permission prompt with
/// `decision`), sends three audio frames of 100, 200 and 300 bytes and waits for their acks,
/// then for one telemetry event.
pub(crate) async fn drive(
    url: &str,
    token: &str,
    decision: Decision,
) -> Result<Seen, Box<dyn Error + Send + Sync>> {
    let transport = WsClientTransport::new(WsOptions::new(url).token(token));
    let client = Client::new(Arc::new(transport));
    // Subscribe before connecting: nothing sent right after the handshake is missed.
    let mut events = client.events();
    let mut audio = client.channel("audio");
    let mut telemetry = client.channel("telemetry");
    client.connect().await?;

    let mut seen = Seen::default();
    let turn = client.submit("please rm the build folder").await?;
    while let Some(event) = events.next().await {
        let ClientEvent::Session(event) = event else {
            continue; // connection states, channel changes
        };
        match event.kind {
            ReceivedSessionEventKind::PermissionRequest { request_id, .. } => {
                seen.asked = true;
                client.respond(request_id, decision).await?;
            }
            ReceivedSessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => {
                seen.deltas.push(delta);
            }
            ReceivedSessionEventKind::TurnCompleted { turn_id, text, .. } if turn_id == turn => {
                seen.reply = text;
                break;
            }
            _ => {}
        }
    }

    for bytes in [100, 200, 300] {
        let frame = Bytes::from(vec![0u8; bytes]);
        client.send_channel_binary("audio", frame).await?; // numbers its own seq
    }
    while seen.acks.len() < 3 {
        match audio.next().await {
            Some(ChannelMessage::Event { event, payload, .. }) if event == "ack" => {
                seen.acks
                    .push(payload["bytes"].as_u64().unwrap_or_default());
            }
            Some(_) => {}
            None => return Err("the audio channel closed".into()),
        }
    }
    while let Some(message) = telemetry.next().await {
        if let ChannelMessage::Event { event, payload, .. } = message {
            if event == "cpu" {
                seen.cpu = payload;
                break;
            }
        }
    }
    client.disconnect().await;
    Ok(seen)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(token)) = (args.next(), args.next()) else {
        return Err("usage: rust_client URL TOKEN [allow|deny]".into());
    };
    let decision = match args.next().as_deref() {
        None | Some("allow") => Decision::Allow,
        Some("deny") => Decision::Deny,
        Some(other) => return Err(format!("allow or deny, not {other:?}").into()),
    };
    let seen =
        tokio::time::timeout(Duration::from_secs(30), drive(&url, &token, decision)).await??;
    println!("asked for permission: {}", seen.asked);
    println!("streamed: {:?}", seen.deltas);
    println!("reply: {}", seen.reply);
    println!("audio acks: {:?}", seen.acks);
    println!("telemetry cpu: {}", seen.cpu);
    Ok(())
}

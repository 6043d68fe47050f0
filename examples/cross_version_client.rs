//! The Rust client's side of the cross-version checks (`scripts/cross-version.sh`): against a
//! running carrier with an `echo` and an `echo:bulk` channel, one handshake, one prompt turn,
//! one channel echo, one bulk transfer, and what this client's feature preflight says about each
//! feature of its catalog. Prints one JSON line per check and exits 1 if any check failed.
//!
//! ```sh
//! carrier serve --port 0 --token T --channel echo:echo --channel bulk:echo:bulk
//! cargo run --example cross_version_client -- ws://127.0.0.1:PORT/ T
//! ```
//!
//! It uses only what the Rust client has offered since 0.1.0 (`Client`, the transport's raw
//! handlers, the channel-frame codec and feature preflight), so the script builds this same file
//! against the 0.1.0 tag as the old Rust client. Bulk frames are paced by the channel's credit
//! when the server grants one (protocol 1.1) and otherwise by a window of echoes in flight.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier::client::{Client, WsClientTransport, WsOptions, PROTOCOL_VERSION};
use carrier::protocol::channel_frame::{self, FrameBody};
use carrier::protocol::features::{Feature, Peers};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// How long any one check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);
/// The prompt of the turn; the embedded agent answers `echo: ` and the prompt.
const PROMPT: &str = "cross-version";
/// Bytes of the bulk transfer, and of each of its frames.
const BULK_BYTES: usize = 4 << 20;
const BULK_CHUNK: usize = 64 << 10;
/// Bulk bytes sent and not yet echoed, at most.
const BULK_IN_FLIGHT: usize = 512 << 10;

fn report(check: &str, ok: bool, detail: Value) -> bool {
    println!("{}", json!({"check": check, "ok": ok, "detail": detail}));
    ok
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(token)) = (args.first(), args.get(1)) else {
        eprintln!("usage: cross_version_client URL TOKEN");
        return std::process::ExitCode::from(2);
    };
    let ok = match tokio::time::timeout(CHECK_TIMEOUT * 5, run(url, token)).await {
        Ok(ok) => ok,
        Err(_) => report("all", false, json!("timed out")),
    };
    std::process::ExitCode::from(if ok { 0 } else { 1 })
}

async fn run(url: &str, token: &str) -> bool {
    let transport = WsClientTransport::new(WsOptions::new(url).token(token));
    let client = Client::new(Arc::new(transport));
    // Raw frames, before the client's own handling: events (turns, credit) and channel frames.
    let (text_tx, mut text) = mpsc::unbounded_channel::<Value>();
    let (binary_tx, mut binary) = mpsc::unbounded_channel::<Bytes>();
    let _text = client
        .transport()
        .on_message(Box::new(move |frame: &Value| {
            let _ = text_tx.send(frame.clone());
        }));
    let _binary = client.transport().on_binary(Box::new(move |frame: &Bytes| {
        let _ = binary_tx.send(frame.clone());
    }));

    let info = match client.connect().await {
        Ok(info) => info,
        Err(e) => return report("handshake", false, json!(e.to_string())),
    };
    let mut ok = report(
        "handshake",
        true,
        json!({
            "client_protocol": PROTOCOL_VERSION.to_string(),
            "server_protocol": info.protocol_version.to_string(),
            "server_version": info.server.version,
            "version_skew": info.version_skew,
            "server_features": info.features,
        }),
    );

    // A prompt turn: the deltas and the completion of the turn this client submitted.
    let turn = async {
        let submitted = client
            .request("session.submit", json!({"prompt": PROMPT}))
            .await
            .map_err(|e| e.to_string())?;
        let turn_id = submitted["turn_id"].clone();
        let mut deltas = String::new();
        while let Some(frame) = text.recv().await {
            let payload = &frame["payload"];
            if payload["turn_id"] != turn_id {
                continue;
            }
            match frame["event"].as_str() {
                Some("session.text_delta") => {
                    deltas.push_str(payload["delta"].as_str().unwrap_or_default());
                }
                Some("session.turn_completed") => return Ok((deltas, payload["text"].clone())),
                _ => {}
            }
        }
        Err("the connection ended".to_owned())
    };
    ok &= match tokio::time::timeout(CHECK_TIMEOUT, turn).await {
        Ok(Ok((deltas, text))) => {
            let expected = format!("echo: {PROMPT}");
            report(
                "turn",
                deltas == expected && text == expected,
                json!({"deltas": deltas, "text": text}),
            )
        }
        Ok(Err(e)) => report("turn", false, json!(e)),
        Err(_) => report("turn", false, json!("timed out")),
    };

    // A channel echo: one binary frame on `echo` comes back with the same body.
    let echo = async {
        let body = Bytes::from_static(b"cross-version echo");
        let frame =
            channel_frame::encode_binary("echo", 0, body.clone()).map_err(|e| e.to_string())?;
        client
            .transport()
            .send_binary(Bytes::from(frame.to_vec()))
            .map_err(|e| e.to_string())?;
        while let Some(message) = binary.recv().await {
            let frame = channel_frame::decode(message).map_err(|e| e.to_string())?;
            if frame.channel == "echo" {
                return Ok(frame.body == FrameBody::Binary(body));
            }
        }
        Err("the connection ended".to_owned())
    };
    ok &= match tokio::time::timeout(CHECK_TIMEOUT, echo).await {
        Ok(Ok(same)) => report("echo", same, json!({"same_body": same})),
        Ok(Err(e)) => report("echo", false, json!(e)),
        Err(_) => report("echo", false, json!("timed out")),
    };

    // A bulk transfer on `bulk` (echo:bulk): every byte back, in order.
    // Read as JSON, so this file builds against the 0.1 client (descriptors as JSON) and the
    // current one (typed descriptors) alike.
    let channels = serde_json::to_value(&info.channels).unwrap_or_default();
    let credit = channels
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "bulk")
        .and_then(|c| c["credit"].as_u64());
    ok &= match tokio::time::timeout(CHECK_TIMEOUT, bulk(&client, credit, &mut text, &mut binary))
        .await
    {
        Ok(Ok(())) => report("bulk", true, json!({"bytes": BULK_BYTES, "credit": credit})),
        Ok(Err(e)) => report("bulk", false, json!(e)),
        Err(_) => report("bulk", false, json!("timed out")),
    };

    // What this client's preflight says of each feature it knows, from the handshake.
    for feature in Feature::ALL {
        let detail =
            match Peers::preflight_announced(info.protocol_version, &info.features, feature) {
                Ok(()) => json!({"feature": feature.name(), "available": true}),
                Err(e) => {
                    let data = e.data.unwrap_or(Value::Null);
                    json!({
                        "feature": feature.name(),
                        "available": false,
                        "code": serde_json::to_value(e.code).unwrap_or_default(),
                        "component": data["component"],
                        "required_protocol": data["required_protocol"],
                        "recovery": data["recovery"],
                    })
                }
            };
        report("feature", true, detail);
    }
    client.disconnect().await;
    ok
}

/// Sends [`BULK_BYTES`] on `bulk` and checks the echo, byte for byte.
async fn bulk(
    client: &Client,
    credit: Option<u64>,
    text: &mut mpsc::UnboundedReceiver<Value>,
    binary: &mut mpsc::UnboundedReceiver<Bytes>,
) -> Result<(), String> {
    let data: Vec<u8> = (0..BULK_BYTES).map(|i| (i % 251) as u8).collect();
    let mut available = credit.unwrap_or(u64::MAX);
    let (mut sent, mut echoed, mut seq) = (0usize, 0usize, 1u32);
    while echoed < data.len() {
        let room = sent < data.len()
            && sent - echoed + BULK_CHUNK <= BULK_IN_FLIGHT
            && available >= BULK_CHUNK.min(data.len() - sent) as u64;
        if room {
            let end = (sent + BULK_CHUNK).min(data.len());
            let body = Bytes::copy_from_slice(&data[sent..end]);
            let frame =
                channel_frame::encode_binary("bulk", seq, body).map_err(|e| e.to_string())?;
            client
                .transport()
                .send_binary(Bytes::from(frame.to_vec()))
                .map_err(|e| e.to_string())?;
            if credit.is_some() {
                available -= (end - sent) as u64;
            }
            sent = end;
            seq += 1;
            continue;
        }
        tokio::select! {
            message = binary.recv() => {
                let message = message.ok_or("the connection ended")?;
                let frame = channel_frame::decode(message).map_err(|e| e.to_string())?;
                if frame.channel != "bulk" {
                    continue;
                }
                let FrameBody::Binary(body) = frame.body else {
                    return Err("an event frame on the bulk channel".to_owned());
                };
                let end = echoed + body.len();
                if end > sent || body[..] != data[echoed..end] {
                    return Err(format!("the echo differs at byte {echoed}"));
                }
                echoed = end;
            }
            frame = text.recv() => {
                let frame = frame.ok_or("the connection ended")?;
                let payload = &frame["payload"];
                match frame["event"].as_str() {
                    Some("channel.credit") if payload["channel"] == "bulk" => {
                        available = available.saturating_add(payload["bytes"].as_u64().unwrap_or(0));
                    }
                    Some("protocol_error") => return Err(format!("protocol_error: {payload}")),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

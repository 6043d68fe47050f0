//! The pipe's two ends besides the socket: stdin's chunks sent on the channel, and the
//! channel's frames written to stdout; plus the progress line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use carrier::client::{ChannelMessage, Client};
use serde_json::{json, Value};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::client::failure::Failure;

/// Sends every chunk as one binary frame on `channel` (the client numbers them and waits for
/// room and credit); returns the payload bytes sent once stdin's chunks end, or the error.
pub(super) async fn send_all(
    client: Client,
    channel: String,
    mut chunks: mpsc::Receiver<Bytes>,
    sent: Arc<AtomicU64>,
) -> Result<u64, String> {
    while let Some(chunk) = chunks.recv().await {
        let len = chunk.len() as u64;
        client
            .send_channel_binary(&channel, chunk)
            .await
            .map_err(|error| error.to_string())?;
        sent.fetch_add(len, Ordering::Relaxed);
    }
    Ok(sent.load(Ordering::Relaxed))
}

/// Writes a frame of the channel to `output`: a binary body raw, an event as one JSON line
/// (with `events`). Returns the binary bytes written.
pub(super) async fn deliver(
    message: ChannelMessage,
    events: bool,
    output: &mut (impl AsyncWrite + Unpin),
) -> Result<u64, Failure> {
    let stdout_failed = |e: std::io::Error| Failure::runtime(format!("writing stdout: {e}"));
    let written = match message {
        ChannelMessage::Binary { body, .. } => {
            output.write_all(&body).await.map_err(stdout_failed)?;
            body.len() as u64
        }
        ChannelMessage::Event { event, payload, .. } if events => {
            let mut line = json!({ "event": event, "payload": payload }).to_string();
            line.push('\n');
            output
                .write_all(line.as_bytes())
                .await
                .map_err(stdout_failed)?;
            0
        }
        ChannelMessage::Dropped { count } => {
            tracing::warn!(
                count,
                "the carrier dropped frames of the channel for this reader"
            );
            0
        }
        _ => 0,
    };
    output.flush().await.map_err(stdout_failed)?;
    Ok(written)
}

/// A notice (an event that is not a session event): a `protocol_error` about this pipe's
/// channel ends the run; everything else is not ours.
pub(super) fn check_notice(event: &str, payload: &Value, channel: &str) -> Result<(), Failure> {
    let about_us = payload
        .get("channel")
        .and_then(Value::as_str)
        .is_none_or(|name| name == channel);
    let field = |key: &str| {
        payload
            .get(key)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_default()
    };
    if event == "protocol_error" && about_us {
        return Err(Failure::runtime(format!(
            "the carrier refused a frame on `{channel}`: {}: {}",
            field("code"),
            field("message")
        )));
    }
    Ok(())
}

/// The progress line on stderr, shown only when stderr is a terminal.
pub(super) struct Progress {
    enabled: bool,
    started: Instant,
    shown: bool,
}

impl Progress {
    pub(super) fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            started: Instant::now(),
            shown: false,
        }
    }

    pub(super) fn show(&mut self, sent: u64, received: u64) {
        if !self.enabled {
            return;
        }
        let seconds = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = sent.max(received) as f64 / seconds;
        eprint!(
            "\r{} sent, {} received, {}/s\x1b[K",
            human(sent as f64),
            human(received as f64),
            human(rate)
        );
        self.shown = true;
    }

    pub(super) fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

/// Bytes in binary units, one decimal.
fn human(bytes: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_read_well() {
        assert_eq!(human(512.0), "512 B");
        assert_eq!(human(65536.0), "64.0 KiB");
        assert_eq!(human(50.0 * 1024.0 * 1024.0), "50.0 MiB");
    }

    #[test]
    fn protocol_errors_about_other_channels_are_not_ours() {
        let other = json!({"code": "unknown_channel", "message": "x", "channel": "b"});
        assert!(check_notice("protocol_error", &other, "a").is_ok());
        let ours = json!({"code": "binary_not_allowed", "message": "no", "channel": "a"});
        assert!(check_notice("protocol_error", &ours, "a").is_err());
        assert!(check_notice("channel.dropped", &ours, "a").is_ok());
    }
}

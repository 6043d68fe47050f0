//! A host with its own in-process agent and two payload channels, on one carrier:
//!
//! - the agent streams each prompt back reversed, and asks permission first when the prompt
//!   contains "rm" (a denied prompt ends with "denied");
//! - `telemetry`: an event channel with a `cpu` event every second;
//! - `audio`: a binary channel; each frame is answered (to its sender) with an `ack` event
//!   carrying the running count of audio bytes the host has received.
//!
//! ```sh
//! cargo run --example embedded_agent          # prints the URL and the token, then serves
//! carrier send ws://127.0.0.1:PORT/ --token TOKEN "hello"   # olleh
//! ```
//!
//! The host keeps no ids of its own: each turn is one task that awaits its permission answer
//! and its cancellation on the turn's sink (`tests/it/example_embedded_agent.rs` drives it).

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use carrier::agent::{AgentProfile, Decision, HostError, InMemoryDirectory};
use carrier::agent::{ProtocolSession, TurnEnded, TurnSink, TurnStart};
use carrier::server::CarrierConfig;
use carrier::server::{Binary, ChannelDescriptor, InboundBody, WsTransport};
use serde_json::json;

/// The agent of every session: one task per turn, ended by the turn's end.
struct Reverser;

impl ProtocolSession for Reverser {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        let TurnStart { prompt, sink, .. } = turn;
        tokio::spawn(async move {
            tokio::select! {
                _ = reverse(&sink, &prompt) => {}
                () = sink.cancelled() => {} // aborted, or the host is stopping
            }
        });
        Ok(())
    }
}

async fn reverse(sink: &TurnSink, prompt: &str) -> Result<(), TurnEnded> {
    if prompt.contains("rm") {
        let input = json!({ "command": prompt });
        if sink.ask_permission("shell", input).await? == Decision::Deny {
            return sink.complete("denied");
        }
    }
    let reversed: String = prompt.chars().rev().collect();
    for word in reversed.split_inclusive(' ') {
        sink.delta(word)?;
    }
    sink.complete(&reversed)
}

/// Starts the host on `port` (0: any free port) and returns its running transport.
pub(crate) async fn start_host(port: u16) -> Result<WsTransport, Box<dyn Error + Send + Sync>> {
    let transport = WsTransport::new(CarrierConfig::default().with_port(port))?;
    let agent = InMemoryDirectory::new(|_| Arc::new(Reverser));
    transport.attach(AgentProfile::builder(agent).build());

    let telemetry = ChannelDescriptor::new("telemetry", &["cpu"], Binary::Refused);
    let telemetry = transport.register_channel(telemetry)?;
    tokio::spawn(async move {
        let mut second = tokio::time::interval(Duration::from_secs(1));
        for tick in 0u64.. {
            second.tick().await;
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            let load = load.split(' ').next().unwrap_or_default();
            let cpu = json!({ "tick": tick, "load": load.parse::<f64>().ok() });
            if telemetry.send_event("cpu", cpu).is_err() {
                break; // closed with `telemetry.close()`; a stopped transport still accepts sends
            }
        }
    });

    let audio = ChannelDescriptor::new("audio", &["ack"], Binary::Accepted);
    let audio = transport.register_channel(audio)?;
    let mut frames = audio.inbound(64);
    tokio::spawn(async move {
        let mut total = 0;
        while let Some(frame) = frames.recv().await {
            if let InboundBody::Binary(data) = frame.body {
                total += data.len();
                let ack = json!({ "bytes": total });
                let _ = audio.send_event_to(frame.connection, "ack", ack);
            }
        }
    });

    transport.start().await?;
    Ok(transport)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let port = std::env::args().nth(1).map_or(Ok(0), |p| p.parse())?;
    let host = start_host(port).await?;
    let url = host.url().unwrap_or_default();
    println!("{url} token {}", host.resolved_token().unwrap_or("-"));
    tokio::signal::ctrl_c().await?;
    host.stop().await;
    Ok(())
}

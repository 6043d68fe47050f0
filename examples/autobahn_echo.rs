//! A WebSocket echo endpoint built from the carrier's real connection layer, for the
//! Autobahn|Testsuite conformance run (`conformance/run.sh`).
//!
//! Text messages are echoed through a [`TextProfile`] whose sessions count as handshaken from
//! the start; binary messages are echoed raw through the [`TextSession::on_binary`] hook instead
//! of going to the channel registry. Everything else — framing, masking and control-frame rules,
//! reassembly, UTF-8 checks, the close handshake, the single writer — is the carrier's own.
//! Limits are generous (64 MiB messages) because the suite sends up to 16 MiB.
//!
//! ```sh
//! cargo run --release --example autobahn_echo -- 9001
//! ```

use std::sync::Arc;

use bytes::Bytes;
use carrier::server::{
    Auth, CarrierConfig, CarrierContext, Connection, Limits, TextProfile, TextSession, WsTransport,
};

struct Echo;

struct EchoSession(Connection);

impl TextProfile for Echo {
    fn open(&self, conn: Connection, _ctx: &CarrierContext) -> Box<dyn TextSession> {
        // No agent protocol here: the connection is ready for data at once.
        conn.mark_handshaken();
        Box::new(EchoSession(conn))
    }
}

impl TextSession for EchoSession {
    fn on_text(&mut self, text: &str) {
        let _ = self.0.send_text(text.to_owned());
    }

    fn on_binary(&mut self, message: Bytes) -> Option<Bytes> {
        let _ = self.0.send_binary(Bytes::new(), message);
        None
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse()?,
        None => 9001,
    };
    let transport = WsTransport::new(
        CarrierConfig::default()
            .with_port(port)
            .with_max_retries(0)
            .with_auth(Auth::Open {
                reason: "Autobahn conformance echo endpoint on loopback".into(),
            })
            .with_limits(
                Limits::default()
                    .with_max_text_bytes(64 << 20)
                    .with_max_message_bytes(64 << 20)
                    .with_queue_bytes(256 << 20),
            ),
    )?;
    transport.attach(Arc::new(Echo));
    transport.start().await?;
    println!(
        "{{\"event\":\"listening\",\"url\":\"ws://127.0.0.1:{}/\"}}",
        transport.bound_port().unwrap_or(port)
    );
    tokio::signal::ctrl_c().await?;
    transport.stop().await;
    Ok(())
}

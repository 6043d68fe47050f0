//! The carrier inside a host's own axum application, on the host's own port.
//!
//! ```sh
//! cargo run --example axum_mount
//! ```
//!
//! It prints one JSON line with the addresses and the token, then serves until Ctrl-C; while it
//! runs, a runtime file lists `ws://127.0.0.1:PORT/agent`, so `carrier send "hi"` and
//! `carrier status` find it without being given a URL or token:
//!
//! - `/` — the host's own page;
//! - `/agent/console#token=…` — the carrier's web console, its JavaScript modules beside it,
//!   and the WebSocket endpoint at `/agent` (`nest_service`: the whole carrier under a prefix);
//! - `/ws` — the WebSocket endpoint alone (`route_service`: one route, one socket).
//!
//! The agent is the embedded demo agent (it echoes the prompt; a prompt starting with `/tool `
//! asks for permission first), and one channel, `echo`, sends every frame back to its sender.

use axum::routing::get;
use axum::Router;
use carrier::agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
use carrier::protocol::channel_frame::FrameBody;
use carrier::server::{
    Binary, CarrierConfig, ChannelDescriptor, ChannelHandle, InboundBody, RuntimeFileOptions,
    WsTransport,
};

/// The host's router: its own page, the socket alone at `/ws`, the whole carrier under `/agent`.
pub(crate) fn app(transport: &WsTransport) -> Router {
    Router::new()
        .route("/", get(|| async { "the host's own page\n" }))
        .route_service("/ws", transport.service())
        .nest_service("/agent", transport.service())
}

/// A carrier with the embedded agent and an `echo` channel, with no listener of its own:
/// connections reach it only through [`app`], once [`serve`] has started it. Its token is
/// minted at construction.
pub(crate) fn carrier() -> Result<WsTransport, Box<dyn std::error::Error>> {
    let transport = WsTransport::new(CarrierConfig::default())?;
    let agent = EmbeddedAgent::default();
    transport
        .attach(AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session())).build());
    let echo =
        transport.register_channel(ChannelDescriptor::new("echo", &["*"], Binary::Accepted))?;
    tokio::spawn(echo_back(echo));
    Ok(transport)
}

/// Starts `transport` and serves [`app`] on a free port of 127.0.0.1 until `shutdown`
/// completes; returns the port and the server's task. The listener is bound first, so the
/// carrier can be told the URL it is served at (`/agent`, the whole carrier's mount).
pub(crate) async fn serve(
    transport: &WsTransport,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(u16, tokio::task::JoinHandle<std::io::Result<()>>), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    transport.start_mounted_at(&format!("ws://127.0.0.1:{port}/agent"))?;
    let server = axum::serve(listener, app(transport)).with_graceful_shutdown(shutdown);
    Ok((port, tokio::spawn(async move { server.await })))
}

/// Sends every frame on `channel` back to the connection it came from.
async fn echo_back(channel: ChannelHandle) {
    let mut inbound = channel.inbound(64);
    while let Some(message) = inbound.recv().await {
        let body = match message.body {
            InboundBody::Event(event) => FrameBody::EventBytes(event),
            InboundBody::Binary(bytes) => FrameBody::Binary(bytes),
            InboundBody::Disconnected => continue,
        };
        // The sender may have gone since; nothing to do then.
        let _ = channel.send_to(message.connection, body);
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Advertised for the CLI like `carrier serve` (the tests that run this router leave it out).
    let transport = carrier()?.with_runtime_file(RuntimeFileOptions::for_user());
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let (port, server) = serve(&transport, ctrl_c).await?;
    let line = serde_json::json!({
        "event": "listening",
        "url": format!("ws://127.0.0.1:{port}/agent"),
        "console": format!("http://127.0.0.1:{port}/agent/console"),
        "port": port,
        "token": transport.resolved_token(),
    });
    println!("{line}");
    server.await??;
    transport.stop().await;
    Ok(())
}

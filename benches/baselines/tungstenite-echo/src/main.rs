//! A tokio-tungstenite echo server in the crate's usual shape (`accept_async`, then
//! `next()` / `send()` per message), on the same tokio runtime the carrier binary uses, with
//! TCP_NODELAY. Usage: `tungstenite-echo [PORT]`; prints `{"event":"listening","port":P}`.

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};

async fn echo(stream: TcpStream) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    while let Some(Ok(msg)) = ws.next().await {
        if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
            return;
        }
    }
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    tokio::runtime::Runtime::new()?.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        println!("{{\"event\":\"listening\",\"port\":{}}}", listener.local_addr()?.port());
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(echo(stream));
        }
    })
}

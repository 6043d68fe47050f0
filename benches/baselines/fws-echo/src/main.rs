//! The bare fastwebsockets echo server: upstream's `examples/echo_server.rs` (hyper upgrade,
//! `FragmentCollector`, echo every text/binary message), on the same tokio runtime the carrier
//! binary uses, with TCP_NODELAY as the carrier sets it. Usage: `fws-echo [PORT] [--tuned]`
//! (0: any); prints `{"event":"listening","port":P}` on stdout.
//!
//! `--tuned` is fastwebsockets at its best, the ceiling the carrier is measured against: a
//! `current_thread` runtime (no work stealing, no cross-thread wake-ups) and
//! `WebSocket::set_writev(true)` (header and payload in one `writev`, no copy into a write
//! buffer). Without it, the upstream example's defaults: multi-thread runtime, writev off.

use fastwebsockets::{upgrade, FragmentCollector, OpCode, WebSocketError};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use tokio::net::TcpListener;

async fn handle_client(fut: upgrade::UpgradeFut, tuned: bool) -> Result<(), WebSocketError> {
    let mut ws = fut.await?;
    if tuned {
        ws.set_writev(true);
    }
    let mut ws = FragmentCollector::new(ws);
    loop {
        let frame = ws.read_frame().await?;
        match frame.opcode {
            OpCode::Close => break,
            OpCode::Text | OpCode::Binary => ws.write_frame(frame).await?,
            _ => {}
        }
    }
    Ok(())
}

async fn server_upgrade(
    mut req: Request<Incoming>,
    tuned: bool,
) -> Result<Response<Empty<Bytes>>, WebSocketError> {
    let (response, fut) = upgrade::upgrade(&mut req)?;
    tokio::spawn(async move {
        let _ = tokio::task::unconstrained(handle_client(fut, tuned)).await;
    });
    Ok(response)
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let tuned = std::env::args().any(|a| a == "--tuned");
    let runtime = if tuned {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Runtime::new()?
    };
    runtime.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        println!("{{\"event\":\"listening\",\"port\":{}}}", listener.local_addr()?.port());
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let conn = http1::Builder::new()
                    .serve_connection(io, service_fn(move |req| server_upgrade(req, tuned)))
                    .with_upgrades();
                let _ = conn.await;
            });
        }
    })
}

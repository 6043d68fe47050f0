//! The bare fastwebsockets echo server: upstream's `examples/echo_server.rs` (hyper upgrade,
//! `FragmentCollector`, echo every text/binary message), on the same tokio runtime the carrier
//! binary uses, with TCP_NODELAY as the carrier sets it. Usage: `fws-echo [PORT]` (0: any);
//! prints `{"event":"listening","port":P}` on stdout.

use fastwebsockets::{upgrade, FragmentCollector, OpCode, WebSocketError};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use tokio::net::TcpListener;

async fn handle_client(fut: upgrade::UpgradeFut) -> Result<(), WebSocketError> {
    let mut ws = FragmentCollector::new(fut.await?);
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

async fn server_upgrade(mut req: Request<Incoming>) -> Result<Response<Empty<Bytes>>, WebSocketError> {
    let (response, fut) = upgrade::upgrade(&mut req)?;
    tokio::spawn(async move {
        let _ = tokio::task::unconstrained(handle_client(fut)).await;
    });
    Ok(response)
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    tokio::runtime::Runtime::new()?.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        println!("{{\"event\":\"listening\",\"port\":{}}}", listener.local_addr()?.port());
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let conn = http1::Builder::new()
                    .serve_connection(io, service_fn(server_upgrade))
                    .with_upgrades();
                let _ = conn.await;
            });
        }
    })
}

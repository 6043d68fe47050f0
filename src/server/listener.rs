//! Binding 127.0.0.1 with port retry, and the accept loop.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::http::CarrierService;
use super::shared::Shared;

/// Binding failed on every port tried.
#[derive(Debug, thiserror::Error)]
#[error("no free port on 127.0.0.1 in {first}..={last} (tried {tries}): {source}")]
pub struct BindError {
    /// First port tried.
    pub first: u16,
    /// Last port tried.
    pub last: u16,
    /// How many ports were tried.
    pub tries: u32,
    /// The error of the last attempt.
    #[source]
    pub source: std::io::Error,
}

/// Binds 127.0.0.1 on `port`, or on the next ports up to `max_retries` more when taken.
/// Port 0 lets the OS choose (no retries needed).
pub async fn bind_loopback(port: u16, max_retries: u16) -> Result<TcpListener, BindError> {
    let mut last_err = None;
    let mut tries = 0u32;
    let span = if port == 0 { 0 } else { max_retries };
    for offset in 0..=span {
        let Some(p) = port.checked_add(offset) else {
            break;
        };
        tries += 1;
        match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, p))).await {
            Ok(l) => return Ok(l),
            Err(e) => {
                tracing::debug!(port = p, error = %e, "port unavailable");
                last_err = Some(e);
            }
        }
    }
    Err(BindError {
        first: port,
        last: port.saturating_add(span),
        tries,
        source: last_err.unwrap_or_else(|| std::io::Error::other("no port in range")),
    })
}

/// Accepts connections until `shutdown` flips to true.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = CarrierService {
        shared: shared.clone(),
    };
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => break,
            a = listener.accept() => a,
        };
        let (stream, _) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let header_timeout = shared.limits.header_timeout;
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(64 * 1024)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => if let Err(e) = r { tracing::debug!(error = %e, "http connection ended") },
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
}

//! Binding 127.0.0.1 with port retry, and the accept loop every listener of the transport runs
//! (TCP, and the Unix socket of `unix_listener`).

use std::collections::VecDeque;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

use super::http::CarrierService;
use super::shared::Shared;
use carrier_protocol::admission::Peer;

/// A listener the accept loop takes connections from.
pub(crate) trait Accept: Send + 'static {
    /// An accepted connection.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection.
    fn accept(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;

    /// Whether to serve `stream`, decided before a byte of it is read (and the stream set up
    /// for serving). A stream refused here is dropped: closed with nothing read or written.
    fn admit(&self, stream: &Self::Stream) -> bool;

    /// How connections of this listener reach the server, for admission.
    fn peer(&self) -> Peer;
}

impl Accept for TcpListener {
    type Stream = TcpStream;

    async fn accept(&self) -> std::io::Result<TcpStream> {
        TcpListener::accept(self).await.map(|(stream, _)| stream)
    }

    fn admit(&self, stream: &TcpStream) -> bool {
        let _ = stream.set_nodelay(true);
        true
    }

    fn peer(&self) -> Peer {
        Peer::Tcp
    }
}

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
pub(super) async fn bind_loopback(port: u16, max_retries: u16) -> Result<TcpListener, BindError> {
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

/// HTTP connections (before an upgrade, or kept alive between requests) one transport holds
/// at once. Each holds a task and hyper's read buffer (about 10 KiB) for up to the header
/// timeout, and anyone on the machine can open them without a token; past this many, the
/// oldest one that is not answering a request is dropped to make room. A client that means it
/// sends its request at once, so it is never the oldest idle one for long.
pub(crate) const MAX_HTTP_CONNECTIONS: usize = 512;

/// One accepted HTTP connection's place in the accept loop's list.
#[derive(Default)]
struct HttpSlot {
    /// Its task ended (upgraded, closed, timed out): gone from the list.
    ended: AtomicBool,
    /// A request is being answered: not to be dropped.
    busy: AtomicBool,
    evict: Notify,
}

impl HttpSlot {
    fn idle(&self) -> bool {
        !self.busy.load(Ordering::Acquire)
    }
}

/// Drops the oldest idle connection of `open` (forgetting ended ones first). `false` if none.
fn evict_oldest_idle(open: &mut VecDeque<Arc<HttpSlot>>) -> bool {
    open.retain(|s| !s.ended.load(Ordering::Acquire));
    match open.iter().position(|s| s.idle()) {
        Some(i) => {
            if let Some(slot) = open.remove(i) {
                slot.evict.notify_one();
            }
            true
        }
        None => false,
    }
}

/// Accepts connections until `shutdown` flips to true.
pub(crate) async fn accept_loop<L: Accept>(
    listener: L,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = CarrierService {
        shared: shared.clone(),
        mounted: false,
        peer: listener.peer(),
    };
    let mut open: VecDeque<Arc<HttpSlot>> = VecDeque::new();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                // EMFILE and friends: make room by dropping the oldest connection that has not
                // sent a request (clients that did are served), then back off briefly instead
                // of spinning.
                tracing::warn!(error = %e, "accept failed");
                let pause = if evict_oldest_idle(&mut open) { 5 } else { 50 };
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                continue;
            }
        };
        if !listener.admit(&stream) {
            continue;
        }
        open.retain(|s| !s.ended.load(Ordering::Acquire));
        if open.len() >= MAX_HTTP_CONNECTIONS {
            evict_oldest_idle(&mut open);
        }
        let slot = Arc::new(HttpSlot::default());
        open.push_back(slot.clone());
        let service = service.clone();
        let header_timeout = shared.limits.header_timeout;
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            let answering = slot.clone();
            let service = hyper::service::service_fn(move |req| {
                answering.busy.store(true, Ordering::Release);
                let response = hyper::service::Service::call(&service, req);
                let answering = answering.clone();
                async move {
                    let r = response.await;
                    answering.busy.store(false, Ordering::Release);
                    r
                }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(64 * 1024)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(error = %e, "http connection ended");
                        }
                        break;
                    }
                    // A request may have arrived since it was chosen: then it is answered.
                    _ = slot.evict.notified() => {
                        if slot.idle() {
                            tracing::debug!("idle http connection dropped: too many open");
                            break;
                        }
                    }
                    _ = stop.changed() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                        break;
                    }
                }
            }
            slot.ended.store(true, Ordering::Release);
        });
    }
}

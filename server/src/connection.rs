//! The per-connection tasks: the reader (`reader`) and the connection's single writer
//! (`writer`), joined by the [`OutboundPath`] queue, and how they end each other ([`Terminate`]).
//!
//! The reader never writes; everything it wants sent (pongs, close echoes, protocol errors)
//! goes through the queue like every other frame. Once a close is queued, the reader only
//! discards (see `reader::linger`). The reader also acts on what it sees happen to the
//! connection: it attaches it as a channel sink after the handshake and cleans up after a
//! failure (`failure`).

mod failure;
mod reader;
pub(crate) mod terminate;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncRead;
use tokio::net::TcpStream;

use reader::serve_admitted;
use terminate::Terminate;
use writer::{write_loop, Writer};

use super::frame_reader::FrameReader;
use super::inbound_budget::CONNECTION_ALLOWANCE;
use super::liveness::Liveness;
use super::outbound::OutboundPath;
use super::shared::Shared;
use carrier_protocol::admission::CloseRefusal;
use carrier_protocol::close::CloseCode;
use carrier_protocol::Role;

type Reader = Box<dyn AsyncRead + Send + Unpin>;

/// How long a refused connection reads on (discarding) for the peer's answer to its 1008, so the
/// peer reads the close rather than a reset. Short: a refused socket holds nothing worth waiting
/// for, and it must not keep a flood of refused sockets around.
const REFUSED_LINGER: Duration = Duration::from_secs(1);

/// Splits the upgraded stream and returns a copy of the bytes hyper read past the upgrade
/// request (usually none). A plain TCP or Unix stream is split without a lock; anything else (a
/// host's own server) falls back to `tokio::io::split`.
fn split_io(upgraded: Upgraded) -> (Reader, Writer, Vec<u8>) {
    // `read_buf` is a view of hyper's whole 8 KiB read buffer, even when it is empty: copied and
    // dropped here, before the connection's first await, so that buffer is not pinned for the
    // connection's life (it was 8 KiB of every idle connection's heap while the `Bytes` lived
    // in this task's state; BENCHMARKS.md, "Server changes").
    let upgraded = match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => {
            let tcp = parts.io.into_inner();
            let _ = tcp.set_nodelay(true);
            let (r, w) = tcp.into_split();
            return (Box::new(r), Box::new(w), parts.read_buf.to_vec());
        }
        Err(upgraded) => upgraded,
    };
    #[cfg(unix)]
    let upgraded = match upgraded.downcast::<TokioIo<tokio::net::UnixStream>>() {
        Ok(parts) => {
            let (r, w) = parts.io.into_inner().into_split();
            return (Box::new(r), Box::new(w), parts.read_buf.to_vec());
        }
        Err(upgraded) => upgraded,
    };
    let (r, w) = tokio::io::split(TokioIo::new(upgraded));
    (Box::new(r), Box::new(w), Vec::new())
}

/// How long a connection may linger after its close was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Linger {
    /// The usual grace period for the peer's close.
    Grace,
    /// A refused connection with a lingering slot: [`REFUSED_LINGER`].
    Refused,
    /// A refused connection past the lingering slots: none, the socket goes once the close is
    /// written.
    None,
}

/// Runs one upgraded connection to its end. `verdict` is admission's: a role, or a refusal that
/// closes with 1008 before any data frame. `route` is the path it upgraded at, which picks its
/// text profile.
pub(crate) async fn run(
    upgraded: Upgraded,
    verdict: Result<Role, CloseRefusal>,
    linger: Linger,
    shared: Arc<Shared>,
    route: &'static str,
) {
    let (reader, writer, leftover) = split_io(upgraded);
    run_split(reader, writer, leftover, verdict, linger, shared, route).await
}

/// Runs a connection over any byte stream that has already completed the WebSocket upgrade.
/// The same task as [`run`]; only the splitting differs
/// ([`crate::WsTransport::serve_upgraded`]).
pub(crate) async fn run_io<IO>(
    io: IO,
    verdict: Result<Role, CloseRefusal>,
    linger: Linger,
    shared: Arc<Shared>,
) where
    IO: AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(io);
    run_split(
        Box::new(reader),
        Box::new(writer),
        Vec::new(),
        verdict,
        linger,
        shared,
        "/",
    )
    .await
}

async fn run_split(
    reader: Reader,
    writer: Writer,
    leftover: Vec<u8>,
    verdict: Result<Role, CloseRefusal>,
    linger: Linger,
    shared: Arc<Shared>,
    route: &'static str,
) {
    let limits = shared.limits.clone();
    let out = OutboundPath::new(limits.queue_bytes);
    let terminate = Arc::new(Terminate::default());
    let live = Arc::new(Liveness::new());
    let writer_task = tokio::spawn(write_loop(
        out.attach_socket(writer),
        out.clone(),
        shared.clone(),
        live.clone(),
        terminate.clone(),
    ));
    let mut frames = FrameReader::new(
        reader,
        leftover,
        limits.max_message_bytes,
        shared.inbound.clone(),
        CONNECTION_ALLOWANCE,
        live.clone(),
    );

    let (close_queued, mut failure) = match verdict {
        Err(refusal) => {
            out.close(CloseCode::POLICY, &refusal.to_string());
            (true, None)
        }
        Ok(role) => {
            serve_admitted(&mut frames, role, route, &out, &shared, &live, &terminate).await
        }
    };
    if close_queued {
        let max = match linger {
            Linger::Grace => limits.stop_grace,
            Linger::Refused => REFUSED_LINGER.min(limits.stop_grace),
            Linger::None => Duration::ZERO,
        };
        reader::linger(&mut frames, &terminate, max).await;
    }
    drop(frames);

    // Reading is over: the writer writes what is queued (a close, if any) and ends.
    out.shut();
    terminate.fire();
    // The writer ends after its close frame (or failure) and grace period; never wait longer.
    let abort = writer_task.abort_handle();
    if tokio::time::timeout(limits.stop_grace + Duration::from_millis(500), writer_task)
        .await
        .is_err()
    {
        abort.abort();
    }
    // The writer may fail after reading ended (its last writes, to a peer that is gone): the
    // reader's task outlives it, so the cleanup (its count, above all) still runs, once.
    if let Some(failure) = failure.as_mut() {
        failure.if_failed(&out);
    }
}

//! When the peer was last heard from, for the keepalive check (a ping every `ping_interval`, no
//! pong within `pong_timeout`: close 1001; docs/protocol.md, "Limits"). Bytes from the peer count,
//! and so does the peer making room in a socket we were waiting to write to ([`WatchedWrite`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::time::Instant;

/// Milliseconds since the connection started at which the peer was last heard from, and whether
/// the carrier itself has stopped reading (then the peer's silence is ours, not theirs).
pub(crate) struct Liveness {
    start: Instant,
    last_heard_ms: AtomicU64,
    /// Reads of the connection's reader that brought bytes, and whether it is handling a text
    /// message now (one it read and has not answered yet): for the writer to let the reader
    /// go first (`connection::writer`).
    reads: AtomicU64,
    answering: AtomicBool,
    paused: AtomicBool,
}

impl Liveness {
    pub(crate) fn new() -> Self {
        Liveness {
            start: Instant::now(),
            last_heard_ms: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            answering: AtomicBool::new(false),
            paused: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Bytes arrived from the peer.
    pub(crate) fn heard(&self) {
        self.last_heard_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The reader read bytes from the socket.
    pub(crate) fn received(&self) {
        self.heard();
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    /// The reader starts (`true`) or has finished (`false`) handling a text message.
    pub(crate) fn answering(&self, now: bool) {
        self.answering.store(now, Ordering::Relaxed);
    }

    /// How many reads of the reader brought bytes so far.
    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Whether the reader is handling a text message now.
    pub(crate) fn is_answering(&self) -> bool {
        self.answering.load(Ordering::Relaxed)
    }

    /// Whether the reader has stopped reading on purpose (see [`Liveness::pause`]).
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// How long the peer has been silent while we were reading.
    pub(crate) fn silent_for(&self) -> Duration {
        if self.paused.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        let last = self.last_heard_ms.load(Ordering::Relaxed);
        Duration::from_millis(self.now_ms().saturating_sub(last))
    }

    /// The reader stops reading (waiting for memory or for a full handler) until the guard is
    /// dropped; the time it waits does not count as the peer's silence.
    pub(crate) fn pause(&self) -> Paused<'_> {
        self.paused.store(true, Ordering::Relaxed);
        Paused(self)
    }
}

/// See [`Liveness::pause`]. Dropping it (also when the wait is cancelled) resumes the clock.
pub(crate) struct Paused<'a>(&'a Liveness);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.heard();
        self.0.paused.store(false, Ordering::Relaxed);
    }
}

/// The connection's write half, watched for what the peer does with what we send:
/// - a write that had to wait for the socket and then goes through means the peer's application
///   read what we sent, which proves it alive as well as a pong does: a reader slower than our
///   queue is kept, though its pongs sit behind the data it is still reading;
/// - a write that waits `stall_limit` without a byte going out (the peer reads nothing, so our
///   pings never reach it either) fails with `TimedOut`: the writer's keepalive check cannot
///   run while it waits here, and such a peer would otherwise hold its connection for ever.
///
/// The timer exists only while a write waits.
pub(crate) struct WatchedWrite<W> {
    io: W,
    live: Arc<Liveness>,
    stall_limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<W> WatchedWrite<W> {
    pub(crate) fn new(io: W, live: Arc<Liveness>, stall_limit: Duration) -> Self {
        WatchedWrite {
            io,
            live,
            stall_limit,
            stalled: None,
        }
    }

    /// The stream it watches.
    pub(crate) fn get_ref(&self) -> &W {
        &self.io
    }

    fn observe(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match poll {
            Poll::Pending => {
                let limit = self.stall_limit;
                let stalled = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if stalled.as_mut().poll(cx).is_ready() {
                    self.stalled = None;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the peer read nothing for {limit:?}"),
                    )));
                }
                Poll::Pending
            }
            Poll::Ready(Ok(n)) if n > 0 => {
                if self.stalled.take().is_some() {
                    self.live.heard();
                }
                Poll::Ready(Ok(n))
            }
            ready => ready,
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for WatchedWrite<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.observe(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.observe(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

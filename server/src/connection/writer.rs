//! The connection's only writer: drains the outbound queue, pings, and ends after the close.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::terminate::Terminate;
use crate::frame_writer::{FrameWriter, Opcode};
use crate::liveness::{Liveness, WatchedWrite};
use crate::outbound::{
    dropped_notice, FailReason, MessageKind, OutItem, OutboundPath, SocketRef, SocketWrite,
};
use crate::shared::Shared;
use carrier_protocol::close::CloseCode;

/// The write half of the connection's stream.
pub(super) type Writer = Box<dyn SocketWrite>;

/// How long the writer holds a bulk frame back for a reader handling a text message
/// ([`reader_first`]). A bound, so that a reader stuck in a handler only slows a transfer (to a
/// frame per this); a reader that runs at all lets it go within a millisecond.
const READER_FIRST_MAX: Duration = Duration::from_millis(50);

/// Unsent bytes a connection with bulk traffic lets its socket hold (`TCP_NOTSENT_LOWAT`).
///
/// Without it, the kernel takes as much of a transfer as its send buffer allows (megabytes on
/// loopback, autotuned), and a reply the carrier writes ahead of its own bulk queue still waits
/// behind all of that: a client pinging during a 64 MiB transfer got its answers after 32–98
/// frames of 64 KiB. With the unsent part capped, the reply waits behind at most this much,
/// the bulk frame being written and what the network holds in flight.
///
/// Why 128 KiB, measured with `server/tests/it/bulk_priority.rs` (a 64 MiB stream of 64 KiB frames to
/// a client with a 64 KiB receive buffer that pings after every 64 frames; debug build): bulk
/// frames between a ping and its answer were 45–66 with the kernel's default, 2–5 at 64 KiB,
/// 2–5 at 128 KiB, 3–8 at 256 KiB, 6–11 at 512 KiB and 11–20 at 1 MiB. 128 KiB keeps two frames of the size `carrier pipe` sends ready
/// for the kernel between the writer's turns (so a fast reader is not kept waiting on the
/// writer) and the answers far inside the 16 frames (1 MiB) promised.
pub(super) const UNSENT_LOWAT: u32 = 128 * 1024;

/// Receive buffer of a connection with bulk traffic (`SO_RCVBUF`; the kernel doubles the figure
/// for its own bookkeeping).
///
/// The kernel otherwise autotunes it to megabytes, and on loopback a client streaming to an echo
/// fills it at once: its `system.ping`, written after its bulk frames, then waits behind all of
/// them here before the reader sees it. With a small buffer the transfer waits on the client's
/// side instead, where a client that keeps its own unsent bytes small (the project's clients do)
/// writes the ping ahead of it. With 16 frames of 64 KiB in flight (`benches/mixed_credit.sh`),
/// ping p99 during the transfer ÷ idle went from 3.9 to 0.97 (medians of 5). 128 KiB and more
/// let it back above 1.3; under cubic, 64 KiB costs the transfer a quarter of its rate (under
/// BBR it gains). Set with [`UNSENT_LOWAT`], when the writer first sends a bulk frame: set when
/// the reader first took one, it did not help under BBR. The runs: BENCHMARKS.md, "Bulk without head-of-line
/// blocking".
pub(super) const BULK_RCVBUF: usize = 64 * 1024;

// `limit_buffers` keeps the socket's unsent buffer ([`UNSENT_LOWAT`]) and receive buffer
// ([`BULK_RCVBUF`]) small, once the connection carries bulk traffic.
impl SocketWrite for tokio::net::tcp::OwnedWriteHalf {
    fn limit_buffers(&self) {
        // A failure of either only costs latency: logged, not returned.
        let socket = socket2::SockRef::from(self.as_ref());
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Err(e) = socket.set_tcp_notsent_lowat(UNSENT_LOWAT) {
            tracing::debug!(error = %e, "TCP_NOTSENT_LOWAT not set");
        }
        if let Err(e) = socket.set_recv_buffer_size(BULK_RCVBUF) {
            tracing::debug!(error = %e, "SO_RCVBUF not set");
        }
    }

    fn has_unread(&self) -> bool {
        // A peek on the non-blocking socket: one byte copied, nothing consumed; `WouldBlock`
        // when nothing waits.
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
        matches!(socket2::SockRef::from(self.as_ref()).peek(&mut byte), Ok(n) if n > 0)
    }
}

impl<T: tokio::io::AsyncWrite + Send> SocketWrite for tokio::io::WriteHalf<T> {}

/// A Unix socket has no network between the two ends: what the writer hands the kernel is
/// queued straight at the reader, within the socket's send buffer. Left as the kernel sets it.
#[cfg(unix)]
impl SocketWrite for tokio::net::unix::OwnedWriteHalf {}

/// The connection's only writer: drains the outbound queue, pings, and ends after the close.
pub(super) async fn write_loop(
    io: SocketRef,
    out: OutboundPath,
    shared: Arc<Shared>,
    live: Arc<Liveness>,
    terminate: Arc<Terminate>,
) {
    let limits = shared.limits.clone();
    let keepalive = limits.ping_interval + limits.pong_timeout;
    let mut w = FrameWriter::new(WatchedWrite::new(io, live.clone(), keepalive));
    let mut batch = Vec::new();
    let mut drops = Vec::new();
    // Set on the first bulk frame: a connection without bulk traffic keeps the kernel's default.
    let mut buffers_limited = false;
    // The reader's count of reads when the last bulk frame was written ([`reader_first`]).
    let mut reads_at_bulk = 0;
    let mut ping =
        tokio::time::interval_at(Instant::now() + limits.ping_interval, limits.ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let close_sent = 'run: loop {
        tokio::select! {
            biased;
            _ = out.next_batch(&mut batch, &mut drops) => {}
            _ = ping.tick() => {
                // Checked here when the writer is free; a write stuck on a peer that reads
                // nothing is ended by WatchedWrite after the same time.
                if live.silent_for() >= keepalive {
                    out.close(CloseCode::GOING_AWAY, "no pong");
                } else {
                    let _ = out.push(OutItem::Ping(Bytes::new()));
                }
                continue;
            }
        }
        if batch.is_empty() {
            // Failed with nothing left to write: tell the peer why, if the socket lets us.
            if let Some(reason) = out.failure() {
                let (code, text) = match reason {
                    FailReason::SlowReader => (
                        CloseCode::TRY_AGAIN_LATER,
                        "slow reader: outbound queue over budget",
                    ),
                    FailReason::BulkStalled => {
                        (CloseCode::TRY_AGAIN_LATER, "bulk receiver stalled")
                    }
                    FailReason::WriteError => break 'run false,
                };
                // On the heap, as the grace period below: paths taken once per connection, at
                // its end, do not make every idle connection's task larger (BENCHMARKS.md).
                let sent = Box::pin(tokio::time::timeout(limits.stop_grace, async {
                    w.frame(
                        Opcode::Close,
                        &[&code.as_u16().to_be_bytes(), text.as_bytes()],
                    )
                    .await?;
                    w.shutdown().await
                }))
                .await;
                break 'run matches!(sent, Ok(Ok(())));
            }
            // Closed with nothing queued and no close frame to send: the peer is gone.
            break 'run false;
        }
        for (channel, count) in drops.drain(..) {
            // The writer's state (one per connection) holds only the encoded text.
            let Some(text) = dropped_notice(&channel, count) else {
                continue;
            };
            shared.metrics.outbound(MessageKind::Text, text.len());
            // Boxed: rare, and held in place it was the largest state of every writer's task.
            if Box::pin(w.frame(Opcode::Text, &[&text[..]])).await.is_err() {
                out.fail_once(FailReason::WriteError);
                break 'run false;
            }
        }
        let mut closing = false;
        for item in batch.drain(..) {
            let result = match &item {
                OutItem::Message {
                    kind, head, body, ..
                } => {
                    shared.metrics.outbound(*kind, head.len() + body.len());
                    let op = match kind {
                        MessageKind::Text => Opcode::Text,
                        MessageKind::Binary => Opcode::Binary,
                    };
                    w.frame(op, &[head, body]).await
                }
                OutItem::Bulk(f) => {
                    if !buffers_limited {
                        w.get_ref().get_ref().limit_buffers();
                        buffers_limited = true;
                    }
                    reader_first(w.get_ref().get_ref(), &live, &mut reads_at_bulk).await;
                    shared
                        .metrics
                        .outbound(MessageKind::Binary, f.head.len() + f.body.len());
                    w.frame(Opcode::Binary, &[&f.head, &f.body]).await
                }
                // Counted in the metrics when the inline write began it.
                OutItem::Rest { head, body } => w.raw(&[head, body]).await,
                OutItem::Ping(p) => w.frame(Opcode::Ping, &[p]).await,
                OutItem::Pong(p) => w.frame(Opcode::Pong, &[p]).await,
                OutItem::Close { code, reason } => {
                    closing = true;
                    w.frame(
                        Opcode::Close,
                        &[&code.as_u16().to_be_bytes(), reason.as_bytes()],
                    )
                    .await
                }
            };
            out.written(&item);
            if result.is_err() {
                out.fail_once(FailReason::WriteError);
                break 'run false;
            }
            if closing {
                break;
            }
        }
        // Release the batch's buffer rather than keep it for the next batch: an idle
        // connection then holds no outbound buffers.
        batch = Vec::new();
        if closing {
            break 'run w.shutdown().await.is_ok();
        }
        if w.flush().await.is_err() {
            out.fail_once(FailReason::WriteError);
            break 'run false;
        }
    };
    if close_sent {
        // Give the peer its grace period to answer our close, then end the reader.
        Box::pin(async {
            tokio::select! {
                _ = terminate.wait() => {}
                _ = tokio::time::sleep(limits.stop_grace) => {}
            }
        })
        .await;
    }
    terminate.fire();
}

/// Before a bulk frame, the connection's reader goes first when it may hold a message to answer:
/// - while it handles a text message (one it read and has not answered yet), the writer yields
///   and then waits in steps of a millisecond, for at most [`READER_FIRST_MAX`];
/// - when bytes wait unread in its socket and it has read nothing since the last bulk frame went
///   out (and is not waiting on purpose), the writer yields once, so a reader ready on this
///   worker reads them first.
///
/// What it bounds: a receive-only client's `system.ping` arrives while the transfer to it runs.
/// The writer answers it ahead of every queued bulk frame, but only once the reader has handled
/// it; on a loaded machine the reader's thread may not run for milliseconds (before it reads the
/// ping, or between reading and answering it) while the writer's does, and every bulk frame the
/// client reads meanwhile is one more the answer arrives behind (past the 16 frames of 64 KiB
/// promised, in some runs: `server/tests/it/priority.rs`). Only the text in hand is waited for: a
/// reader busy with a transfer of its own (an echo's) never holds the writer for more than a turn.
async fn reader_first(socket: &SocketRef, live: &Liveness, reads_at_bulk: &mut u64) {
    if live.is_answering() {
        let until = Instant::now() + READER_FIRST_MAX;
        tokio::task::yield_now().await;
        while live.is_answering() && socket.path_open() && Instant::now() < until {
            // Boxed: a timer in this future would be part of every connection's writer task.
            Box::pin(tokio::time::sleep(Duration::from_millis(1))).await;
        }
    } else if live.reads() == *reads_at_bulk
        && !live.is_paused()
        && socket.path_open()
        && socket.has_unread()
    {
        tokio::task::yield_now().await;
    }
    *reads_at_bulk = live.reads();
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bulk_connection_keeps_both_socket_buffers_small() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (_client, (server, _)) = (client.unwrap(), accepted.unwrap());
        let (_read, write) = server.into_split();
        // As the kernel's autotuning leaves it after a few megabytes (its default here is
        // already what a bulk connection asks for, and would prove nothing).
        let socket = socket2::SockRef::from(write.as_ref());
        socket.set_recv_buffer_size(1 << 20).unwrap();

        write.limit_buffers();

        assert_eq!(socket.tcp_notsent_lowat().ok(), Some(UNSENT_LOWAT));
        // The kernel reports twice what was asked (its own bookkeeping is counted in).
        assert_eq!(socket.recv_buffer_size().ok(), Some(2 * BULK_RCVBUF));
    }
}

//! The per-connection task: reads messages, routes them by opcode, and runs the connection's
//! single writer.
//!
//! Two tasks per connection: the reader (this module's [`run`]) and the writer
//! ([`write_loop`]), joined by the [`Outbound`] queue. The reader never writes; everything it
//! wants sent (pongs, close echoes, protocol errors) goes through the queue like every other
//! frame. Once a close is queued, the reader only discards (see [`linger`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::admission::CloseRefusal;
use super::frame_reader::{FrameReader, Incoming, ReadEnd};
use super::liveness::Liveness;
use super::outbound::{FailReason, MessageKind, OutItem, Outbound};
use super::profile::{Connection, ConnectionId, TextSession};
use super::shared::Shared;
use super::wire::{FrameWriter, Opcode};
use crate::protocol::close::CloseCode;
use crate::protocol::envelope::too_large_reply;
use crate::protocol::error::{protocol_error_event, ProtocolErrorCode};
use crate::protocol::Role;

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// How long a refused connection reads on (discarding) for the peer's answer to its 1008, so the
/// peer reads the close rather than a reset. Short: a refused socket holds nothing worth waiting
/// for, and it must not keep a flood of refused sockets around.
const REFUSED_LINGER: Duration = Duration::from_secs(1);

/// Ends the connection's tasks: set by the writer once its close frame has had its grace
/// period, by a failure, or by a forced `stop()`.
#[derive(Default)]
pub(crate) struct Terminate {
    notify: Notify,
    done: AtomicBool,
}

impl Terminate {
    pub(crate) fn fire(&self) {
        self.done.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    async fn wait(&self) {
        loop {
            let n = self.notify.notified();
            if self.done.load(Ordering::Acquire) {
                return;
            }
            n.await;
        }
    }
}

/// Splits the upgraded stream and returns the bytes hyper read past the upgrade request. A
/// plain TCP stream is split without a lock; anything else (a host's own server) falls back to
/// `tokio::io::split`.
fn split_io(upgraded: Upgraded) -> (Reader, Writer, Bytes) {
    match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => {
            let tcp = parts.io.into_inner();
            let _ = tcp.set_nodelay(true);
            let (r, w) = tcp.into_split();
            // The leftover is a view of hyper's whole read buffer; the reader copies it, so
            // the buffer is not pinned for the connection's life (issue 7).
            (Box::new(r), Box::new(w), parts.read_buf)
        }
        Err(upgraded) => {
            let (r, w) = tokio::io::split(TokioIo::new(upgraded));
            (Box::new(r), Box::new(w), Bytes::new())
        }
    }
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
/// closes with 1008 before any data frame.
pub(crate) async fn run(
    upgraded: Upgraded,
    verdict: Result<Role, CloseRefusal>,
    linger: Linger,
    shared: Arc<Shared>,
) {
    let (reader, writer, leftover) = split_io(upgraded);
    run_split(reader, writer, &leftover, verdict, linger, shared).await
}

/// Runs a connection over any byte stream that has already completed the WebSocket upgrade.
/// The same task as [`run`]; only the splitting differs. Used by tests and fuzzing to drive the
/// real connection layer over an in-memory stream or a socket with injected faults.
pub(crate) async fn run_io<IO>(
    io: IO,
    verdict: Result<Role, CloseRefusal>,
    linger: Linger,
    shared: Arc<Shared>,
) where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(io);
    run_split(
        Box::new(reader),
        Box::new(writer),
        &[],
        verdict,
        linger,
        shared,
    )
    .await
}

async fn run_split(
    reader: Reader,
    writer: Writer,
    leftover: &[u8],
    verdict: Result<Role, CloseRefusal>,
    linger: Linger,
    shared: Arc<Shared>,
) {
    let limits = shared.limits.clone();
    let out = Outbound::new(limits.queue_bytes);
    let terminate = Arc::new(Terminate::default());
    let live = Arc::new(Liveness::new());
    let writer_task = tokio::spawn(write_loop(
        writer,
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
        live.clone(),
    );

    let close_queued = match verdict {
        Err(refusal) => {
            out.close(CloseCode::POLICY, &refusal.to_string());
            true
        }
        Ok(role) => serve_admitted(&mut frames, role, &out, &shared, &live, &terminate).await,
    };
    if close_queued {
        let max = match linger {
            Linger::Grace => limits.stop_grace,
            Linger::Refused => REFUSED_LINGER.min(limits.stop_grace),
            Linger::None => Duration::ZERO,
        };
        self::linger(&mut frames, &terminate, max).await;
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
}

/// After our close was queued: discard what the peer still sends, without buffering it, until
/// its close, the end of the stream, the writer's grace period or `max`, so the peer reads our
/// close instead of a reset.
async fn linger(frames: &mut FrameReader, terminate: &Terminate, max: Duration) {
    if max.is_zero() {
        return;
    }
    tokio::select! {
        biased;
        _ = terminate.wait() => {}
        _ = tokio::time::sleep(max) => {}
        _ = frames.discard_until_close() => {}
    }
}

/// Serves an admitted connection until it ends. Returns whether our close is queued and the
/// peer may still be sending (so the caller lingers to discard).
async fn serve_admitted(
    frames: &mut FrameReader,
    role: Role,
    out: &Outbound,
    shared: &Arc<Shared>,
    live: &Arc<Liveness>,
    terminate: &Arc<Terminate>,
) -> bool {
    let id = ConnectionId::next();
    let conn = Connection::new(id, role, out.clone());
    let Some(mut session) = shared.open_session(&conn, terminate.clone()) else {
        out.close(CloseCode::GOING_AWAY, "server stopping");
        return true;
    };
    {
        let registry = shared.registry.clone();
        let metrics = shared.metrics.clone();
        let term = terminate.clone();
        out.set_on_fail(move |reason| {
            metrics.delivery_failure();
            registry.remove_sink(id);
            tracing::debug!(conn = %id, ?reason, "connection failed");
            // A write error leaves nothing worth draining; a slow reader still gets its close.
            if reason == FailReason::WriteError {
                term.fire();
            }
        });
    }
    {
        let registry = shared.registry.clone();
        let sink = conn.clone();
        conn.set_on_handshake(move || registry.attach_sink(sink));
    }
    // The handshake deadline is a branch of the read loop rather than a task of its own: a
    // task (and its timer) per connection stayed allocated for the connection's life
    // (issue 7: idle memory per connection).
    let handshake_deadline = tokio::time::sleep(shared.limits.handshake_timeout);
    tokio::pin!(handshake_deadline);

    // Whether the peer may still be sending after we stop reading.
    let mut peer_sending = true;
    // Made once and polled every turn: a fresh `Notified` per frame registered and removed a
    // waiter (a lock each) twice per inbound frame.
    let terminated = terminate.wait();
    let failed = out.failed();
    tokio::pin!(terminated, failed);
    loop {
        let incoming = tokio::select! {
            biased;
            _ = &mut terminated => break,
            _ = &mut failed => break,
            _ = &mut handshake_deadline, if !conn.is_handshaken() => {
                conn.close(CloseCode::POLICY, "handshake timeout");
                break;
            }
            r = frames.next() => r,
        };
        match incoming {
            Err(ReadEnd::Closed) => {
                peer_sending = false;
                break;
            }
            Err(ReadEnd::Violation(v)) => {
                out.close(v.code, v.reason);
                break;
            }
            Ok(Incoming::Ping(payload)) => out.pong(payload),
            Ok(Incoming::Pong) => {}
            Ok(Incoming::Close(code, reason)) => {
                // Echo the peer's code; the close ends our side too.
                out.close(code, &reason);
                peer_sending = false;
                break;
            }
            Ok(Incoming::Message(MessageKind::Text, text)) => {
                on_text(&conn, session.as_mut(), shared, text)
            }
            Ok(Incoming::Message(MessageKind::Binary, data)) => {
                shared.metrics.inbound(MessageKind::Binary, data.len());
                if !conn.is_handshaken() {
                    send_protocol_error(
                        &conn,
                        shared,
                        ProtocolErrorCode::HandshakeRequired,
                        "the first frame must be a system.handshake request",
                        Map::new(),
                    );
                    conn.close(CloseCode::POLICY, "handshake required");
                    break;
                }
                if let Some(data) = session.on_binary(data) {
                    if let Some(room) = shared.registry.route(&conn, data, shared) {
                        let _paused = live.pause();
                        room.await;
                    }
                }
            }
        }
        if !out.is_open() {
            break;
        }
    }
    // Before detaching: a handshake completed from a task that outlives the connection must
    // not attach it as a sink again.
    conn.clear_on_handshake();
    shared.registry.detach_sink(id);
    session.on_close();
    shared.forget(id);
    peer_sending
}

fn on_text(conn: &Connection, session: &mut dyn TextSession, shared: &Shared, text: Bytes) {
    shared.metrics.inbound(MessageKind::Text, text.len());
    let limit = shared.limits.max_text_bytes;
    if text.len() > limit {
        answer_too_large(conn, shared, &text, limit);
        return;
    }
    match std::str::from_utf8(&text) {
        Ok(s) => session.on_text(s),
        // Unreachable in practice: the reader validated it. Close as RFC 6455 asks.
        Err(_) => conn.close(CloseCode::INVALID_PAYLOAD, "invalid UTF-8"),
    }
}

/// A text message over the soft limit: answered, and the socket stays open. When the message
/// is a request with a usable id, the answer is its error response; otherwise an event. The
/// envelope module owns the reply's shape (one copy of the rule, fuzzed there).
fn answer_too_large(conn: &Connection, shared: &Shared, text: &[u8], limit: usize) {
    shared.metrics.protocol_error();
    // The reader validated the UTF-8; a lossy view changes nothing for a valid text.
    let reply = too_large_reply(&String::from_utf8_lossy(text), limit);
    let _ = conn.send_text(reply);
}

/// Sends a `protocol_error` event and counts it.
pub(crate) fn send_protocol_error(
    conn: &Connection,
    shared: &Shared,
    code: ProtocolErrorCode,
    message: &str,
    extra: Map<String, Value>,
) {
    shared.metrics.protocol_error();
    let _ = conn.send_text(protocol_error_event(code, message, extra));
}

/// The connection's only writer: drains the outbound queue, pings, and ends after the close.
async fn write_loop(
    io: Writer,
    out: Outbound,
    shared: Arc<Shared>,
    live: Arc<Liveness>,
    terminate: Arc<Terminate>,
) {
    let mut w = FrameWriter::new(io);
    let limits = shared.limits.clone();
    let mut batch = Vec::new();
    let mut drops = Vec::new();
    let mut ping =
        tokio::time::interval_at(Instant::now() + limits.ping_interval, limits.ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let close_sent = 'run: loop {
        tokio::select! {
            biased;
            _ = out.next_batch(&mut batch, &mut drops) => {}
            _ = ping.tick() => {
                if live.silent_for() >= limits.ping_interval + limits.pong_timeout {
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
                    FailReason::WriteError => break 'run false,
                };
                let sent = tokio::time::timeout(limits.stop_grace, async {
                    w.frame(
                        Opcode::Close,
                        &[&code.as_u16().to_be_bytes(), text.as_bytes()],
                    )
                    .await?;
                    w.shutdown().await
                })
                .await;
                break 'run matches!(sent, Ok(Ok(())));
            }
            // Closed with nothing queued and no close frame to send: the peer is gone.
            break 'run false;
        }
        for (channel, count) in drops.drain(..) {
            let notice = serde_json::json!({"event": "channel.dropped", "payload": {"channel": &*channel, "count": count}});
            let text = notice.to_string();
            shared.metrics.outbound(MessageKind::Text, text.len());
            if w.frame(Opcode::Text, &[text.as_bytes()]).await.is_err() {
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
                    shared
                        .metrics
                        .outbound(MessageKind::Binary, f.head.len() + f.body.len());
                    w.frame(Opcode::Binary, &[&f.head, &f.body]).await
                }
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
        // connection then holds no outbound buffers (issue 7).
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
        tokio::select! {
            _ = terminate.wait() => {}
            _ = tokio::time::sleep(limits.stop_grace) => {}
        }
    }
    terminate.fire();
}

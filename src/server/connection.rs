//! The per-connection task: reads and reassembles messages, routes them by opcode, and runs the
//! connection's single writer.
//!
//! Two tasks per connection: the reader (this module's [`run`]) and the writer
//! ([`write_loop`]), joined by the [`Outbound`] queue. The reader never writes; everything it
//! wants sent (pongs, close echoes, protocol errors) goes through the queue like every other
//! frame.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fastwebsockets::{Frame, OpCode, WebSocketError};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::admission::CloseRefusal;
use super::control::{self, Control};
use super::outbound::{close_code, FailReason, MessageKind, OutItem, Outbound};
use super::profile::{Connection, ConnectionId, TextSession};
use super::reassembly::{Reassembler, Reassembly};
use super::shared::Shared;
use super::wire::{FrameWriter, Opcode};
use crate::protocol::envelope::too_large_reply;
use crate::protocol::error::{protocol_error_event, ProtocolErrorCode};
use crate::protocol::Role;

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Ends the connection's tasks: set by the writer once its close frame has had its grace
/// period, by a failure, or by a forced `stop()`.
#[derive(Default)]
pub(crate) struct Terminate {
    notify: Notify,
    done: std::sync::atomic::AtomicBool,
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

/// Milliseconds since the connection started at which the peer was last heard from.
struct Liveness {
    start: Instant,
    last_heard_ms: AtomicU64,
}

impl Liveness {
    fn heard(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_heard_ms.store(ms, Ordering::Relaxed);
    }
    fn silent_for(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_heard_ms.load(Ordering::Relaxed)))
    }
}

/// Splits the upgraded stream. A plain TCP stream is split without a lock; anything else
/// (a host's own server) falls back to `tokio::io::split`.
fn split_io(upgraded: Upgraded) -> (Reader, Writer) {
    match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => {
            let tcp = parts.io.into_inner();
            let _ = tcp.set_nodelay(true);
            let (r, w) = tcp.into_split();
            // Bytes hyper read past the upgrade request belong to the WebSocket stream.
            // `read_buf` is a view of hyper's whole read buffer (8 KiB or more); holding it for
            // the connection's life pinned that buffer per connection (issue 7: most of the
            // idle-memory gap to bare fastwebsockets). Keep only a copy of the leftover bytes,
            // and nothing at all in the usual case where there are none.
            if parts.read_buf.is_empty() {
                (Box::new(r), Box::new(w))
            } else {
                let leftover = std::io::Cursor::new(Bytes::copy_from_slice(&parts.read_buf));
                (Box::new(leftover.chain(r)), Box::new(w))
            }
        }
        Err(upgraded) => {
            let (r, w) = tokio::io::split(TokioIo::new(upgraded));
            (Box::new(r), Box::new(w))
        }
    }
}

/// Runs one upgraded connection to its end. `verdict` is admission's: a role, or a refusal that
/// closes with 1008 before any data frame.
pub(crate) async fn run(
    upgraded: Upgraded,
    verdict: Result<Role, CloseRefusal>,
    shared: Arc<Shared>,
) {
    let (reader, writer) = split_io(upgraded);
    run_split(reader, writer, verdict, shared).await
}

/// Runs a connection over any byte stream that has already completed the WebSocket upgrade.
/// The same task as [`run`]; only the splitting differs. Used by tests and fuzzing to drive the
/// real connection layer over an in-memory stream or a socket with injected faults.
pub(crate) async fn run_io<IO>(io: IO, verdict: Result<Role, CloseRefusal>, shared: Arc<Shared>)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(io);
    run_split(Box::new(reader), Box::new(writer), verdict, shared).await
}

async fn run_split(
    reader: Reader,
    writer: Writer,
    verdict: Result<Role, CloseRefusal>,
    shared: Arc<Shared>,
) {
    let limits = shared.limits.clone();
    let out = Outbound::new(limits.queue_bytes);
    let terminate = Arc::new(Terminate::default());
    let live = Arc::new(Liveness {
        start: Instant::now(),
        last_heard_ms: AtomicU64::new(0),
    });
    let writer_task = tokio::spawn(write_loop(
        writer,
        out.clone(),
        shared.clone(),
        live.clone(),
        terminate.clone(),
    ));

    let mut ws = fastwebsockets::after_handshake_split(
        reader,
        tokio::io::sink(),
        fastwebsockets::Role::Server,
    )
    .0;
    // The read half rejects a single frame at `max`; our cap is inclusive.
    ws.set_max_message_size(limits.max_message_bytes.saturating_add(1));
    // Pongs and close echoes are ours to send (see `control`): fastwebsockets would echo an
    // over-long close payload as is, and answer frames we must refuse (unmasked ones).
    ws.set_auto_close(false);
    ws.set_auto_pong(false);

    match verdict {
        Err(refusal) => {
            out.close(close_code::POLICY, &refusal.to_string());
            drain(&mut ws, &live, &terminate).await;
        }
        Ok(role) => serve_admitted(&mut ws, role, &out, &shared, &live, &terminate).await,
    }

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

async fn serve_admitted(
    ws: &mut fastwebsockets::WebSocketRead<Reader>,
    role: Role,
    out: &Outbound,
    shared: &Arc<Shared>,
    live: &Arc<Liveness>,
    terminate: &Arc<Terminate>,
) {
    let id = ConnectionId::next();
    let conn = Connection::new(id, role, out.clone());
    let Some(mut session) = shared.open_session(&conn, terminate.clone()) else {
        out.close(close_code::GOING_AWAY, "server stopping");
        drain(ws, live, terminate).await;
        return;
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

    let mut reassembler = Reassembler::new(shared.limits.max_message_bytes);
    // Whether the peer's side is over (close received, EOF): nothing left to drain.
    let mut peer_done = true;
    let mut send = no_obligations;
    // Made once and polled every turn: a fresh `Notified` per frame registered and removed a
    // waiter (a lock each) twice per inbound frame.
    let terminated = terminate.wait();
    let failed = out.failed();
    tokio::pin!(terminated, failed);
    loop {
        let frame = tokio::select! {
            biased;
            _ = &mut terminated => break,
            _ = &mut failed => break,
            _ = &mut handshake_deadline, if !conn.is_handshaken() => {
                conn.close(close_code::POLICY, "handshake timeout");
                peer_done = false;
                break;
            }
            r = ws.read_frame(&mut send) => r,
        };
        live.heard();
        let mut frame = match frame {
            Ok(f) => f,
            Err(e) => {
                peer_done = !close_for_read_error(out, &e);
                break;
            }
        };
        if !control::is_masked(&mut frame) {
            // RFC 6455 §5.1: a server MUST close the connection on an unmasked client frame.
            out.close(close_code::PROTOCOL_ERROR, "unmasked client frame");
            peer_done = false;
            break;
        }
        match frame.opcode {
            OpCode::Text | OpCode::Binary | OpCode::Continuation => {}
            op => match control::classify(op, &frame.payload) {
                Ok(Control::Ping(payload)) => {
                    let _ = out.push(OutItem::Pong(Bytes::copy_from_slice(payload)));
                    continue;
                }
                Ok(Control::Pong) => continue,
                Ok(Control::Close { code, reason }) => {
                    // Echo the peer's code; the close ends our side too.
                    out.close(code, reason);
                    break;
                }
                Err(v) => {
                    out.close(v.code, v.reason);
                    peer_done = false;
                    break;
                }
            },
        }
        let message = match reassembler.push(frame) {
            Reassembly::Partial => continue,
            Reassembly::Complete(kind, bytes) => (kind, bytes),
            Reassembly::Fail(code, reason) => {
                out.close(code, reason);
                peer_done = false;
                break;
            }
        };
        match message {
            (MessageKind::Text, text) => on_text(&conn, session.as_mut(), shared, text),
            (MessageKind::Binary, data) => {
                shared.metrics.inbound(MessageKind::Binary, data.len());
                if !conn.is_handshaken() {
                    send_protocol_error(
                        &conn,
                        shared,
                        ProtocolErrorCode::HandshakeRequired,
                        "the first frame must be a system.handshake request",
                        Map::new(),
                    );
                    conn.close(close_code::POLICY, "handshake required");
                    break;
                }
                if let Some(data) = session.on_binary(data) {
                    if let Some(room) = shared.registry.route(&conn, data, shared) {
                        room.await;
                    }
                }
            }
        }
        if !out.is_open() {
            peer_done = false;
            break;
        }
    }
    // Before detaching: a handshake completed from a task that outlives the connection must
    // not attach it as a sink again.
    conn.clear_on_handshake();
    shared.registry.detach_sink(id);
    session.on_close();
    shared.forget(id);
    if !peer_done && out.failure().is_none() {
        drain(ws, live, terminate).await;
    }
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
        // Unreachable in practice: the reassembler validated it. Close as RFC 6455 asks.
        Err(_) => conn.close(close_code::INVALID_PAYLOAD, "invalid UTF-8"),
    }
}

/// A text message over the soft limit: answered, and the socket stays open. When the message
/// is a request with a usable id, the answer is its error response; otherwise an event. The
/// envelope module owns the reply's shape (one copy of the rule, fuzzed there).
fn answer_too_large(conn: &Connection, shared: &Shared, text: &[u8], limit: usize) {
    shared.metrics.protocol_error();
    // The reassembler validated the UTF-8; a lossy view changes nothing for a valid text.
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

/// The `send_fn` of `read_frame`: with automatic pong and close off, fastwebsockets never has a
/// frame it is obliged to send, so this is never called with one that matters.
fn no_obligations(_frame: Frame<'_>) -> std::future::Ready<Result<(), std::io::Error>> {
    std::future::ready(Ok(()))
}

/// Queues the close a read error calls for; `false` when the socket itself is gone.
fn close_for_read_error(out: &Outbound, e: &WebSocketError) -> bool {
    let (code, reason) = match e {
        WebSocketError::FrameTooLarge => (close_code::TOO_BIG, "message over the size cap"),
        WebSocketError::InvalidUTF8 => (close_code::INVALID_PAYLOAD, "invalid UTF-8"),
        WebSocketError::UnexpectedEOF
        | WebSocketError::IoError(_)
        | WebSocketError::ConnectionClosed
        | WebSocketError::SendError(_) => return false,
        _ => (close_code::PROTOCOL_ERROR, "protocol error"),
    };
    out.close(code, reason);
    true
}

/// After we sent (or queued) a close: read and discard until the peer's close, an error or the
/// writer's grace period ends, so the peer reads our close instead of a reset.
async fn drain(
    ws: &mut fastwebsockets::WebSocketRead<Reader>,
    live: &Liveness,
    terminate: &Terminate,
) {
    let mut send = no_obligations;
    loop {
        let r = tokio::select! {
            biased;
            _ = terminate.wait() => return,
            r = ws.read_frame(&mut send) => r,
        };
        live.heard();
        match r {
            Ok(f) if f.opcode == OpCode::Close => return,
            Ok(_) => continue,
            Err(_) => return,
        }
    }
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
                    out.close(close_code::GOING_AWAY, "no pong");
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
                        close_code::TRY_AGAIN_LATER,
                        "slow reader: outbound queue over budget",
                    ),
                    FailReason::WriteError => break 'run false,
                };
                let sent = tokio::time::timeout(limits.stop_grace, async {
                    w.frame(Opcode::Close, &[&code.to_be_bytes(), text.as_bytes()])
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
            let cost = item.cost();
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
                OutItem::Ping(p) => w.frame(Opcode::Ping, &[p]).await,
                OutItem::Pong(p) => w.frame(Opcode::Pong, &[p]).await,
                OutItem::Close { code, reason } => {
                    closing = true;
                    w.frame(Opcode::Close, &[&code.to_be_bytes(), reason.as_bytes()])
                        .await
                }
            };
            out.written(cost);
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

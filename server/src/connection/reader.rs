//! The connection's reader: reads messages, routes them by opcode, and queues every answer
//! (pongs, close echoes, protocol errors) on the outbound path; it never writes.
//!
//! It is also where the connection's state changes are acted on, because it is the task that
//! sees them: it attaches the connection as a channel sink once the handshake is done, and it
//! cleans up once the connection fails. Nothing calls back into the registry or the metrics from
//! inside a send or a text profile: data flows one way, from the socket through the reader.

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use serde_json::Map;

use super::failure::FailureCleanup;
use super::terminate::Terminate;
use crate::frame_reader::{FrameReader, Incoming, ReadEnd};
use crate::handle::{Connection, ConnectionId};
use crate::liveness::Liveness;
use crate::outbound::{MessageKind, OutboundPath};
use crate::profile::TextSession;
use crate::registry::{ChannelRefusal, RouteCache};
use crate::shared::Shared;
use carrier_protocol::close::CloseCode;
use carrier_protocol::envelope::too_large_reply;
use carrier_protocol::error::{protocol_error_event, ProtocolErrorCode};
use carrier_protocol::Role;

/// After our close was queued: discard what the peer still sends, without buffering it, until
/// its close, the end of the stream, the writer's grace period or `max`, so the peer reads our
/// close instead of a reset.
pub(super) async fn linger(frames: &mut FrameReader, terminate: &Terminate, max: Duration) {
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
/// peer may still be sending (so the caller lingers to discard), and the connection's failure
/// cleanup for a failure that comes after reading ended (`None`: the connection was never
/// opened, the server is stopping). `route` picks the text profile.
pub(super) async fn serve_admitted<'a>(
    frames: &mut FrameReader,
    role: Role,
    route: &'static str,
    out: &OutboundPath,
    shared: &'a Arc<Shared>,
    live: &Arc<Liveness>,
    terminate: &'a Arc<Terminate>,
) -> (bool, Option<FailureCleanup<'a>>) {
    let id = ConnectionId::next();
    let conn = Connection::new(id, role, out.clone());
    let Some(mut session) = shared.open_session(&conn, terminate.clone(), route) else {
        out.close(CloseCode::GOING_AWAY, "server stopping");
        return (true, None);
    };
    let mut failure = FailureCleanup::new(id, shared, terminate);
    // Whether this connection is a channel sink: from its handshake on (the reader attaches it
    // as soon as it sees the handshake done) until it fails or ends.
    let mut attached = false;
    // The handshake deadline is a branch of the read loop rather than a task of its own: a
    // task (and its timer) per connection stayed allocated for the connection's life (idle
    // memory per connection). Its timer is on the heap and dropped once the handshake is done:
    // pinned in this future, it was part of every idle connection's task.
    let mut handshake_deadline = Some(Box::pin(tokio::time::sleep(
        shared.limits.handshake_timeout,
    )));

    // Whether the peer may still be sending after we stop reading.
    let mut peer_sending = true;
    let mut routes = RouteCache::default();
    // The flags decide; the notifications only wake this task. Made once: a fresh `Notified`
    // per frame registered and removed a waiter (a lock each) twice per inbound frame. Polled
    // only to register a waker the first time or when the task's waker changed: a poll of a
    // waiting `Notified` takes its `Notify`'s lock, three locks per frame for nothing
    // (BENCHMARKS.md, "Performance 3, second pass").
    let terminated = terminate.notified();
    let failed = out.failed_notified();
    let handshaken = conn.handshake_notified();
    tokio::pin!(terminated, failed, handshaken);
    let mut registered: Option<Waker> = None;
    loop {
        let turn = {
            let next = frames.next();
            tokio::pin!(next);
            poll_fn(|cx| {
                let fresh = !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
                if fresh {
                    registered = Some(cx.waker().clone());
                }
                // A notification completes only once its flag is up.
                if terminate.is_fired() || (fresh && terminated.as_mut().poll(cx).is_ready()) {
                    return Poll::Ready(Turn::Terminated);
                }
                // Cleaned up right after the loop.
                if out.has_failed() || (fresh && failed.as_mut().poll(cx).is_ready()) {
                    return Poll::Ready(Turn::Failed);
                }
                // The handshake completes inside a text message this loop hands the profile
                // (or, for a profile that completes it from a task of its own, while the loop
                // waits on the socket): either way this is seen before the next frame is read.
                // So the connection receives every channel frame the host sends once the
                // message that completed its handshake has been handled, and whatever its own
                // later frames cause (an echo of its first channel frame included).
                if !attached
                    && (conn.is_handshaken() || (fresh && handshaken.as_mut().poll(cx).is_ready()))
                {
                    return Poll::Ready(Turn::Handshaken);
                }
                // Dropped once the handshake is seen above.
                if let Some(deadline) = handshake_deadline.as_mut() {
                    if deadline.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Turn::HandshakeLate);
                    }
                }
                next.as_mut().poll(cx).map(Turn::Frame)
            })
            .await
        };
        let incoming = match turn {
            Turn::Terminated | Turn::Failed => break,
            Turn::Handshaken => {
                shared.registry.attach_sink(conn.clone());
                attached = true;
                handshake_deadline = None;
                if conn.has_bulk_credit() {
                    // Its bulk frames may wait in credit ledgers, which pay for them.
                    frames.keep_payments();
                }
                continue;
            }
            Turn::HandshakeLate => {
                conn.close(CloseCode::POLICY, "handshake timeout");
                break;
            }
            Turn::Frame(incoming) => incoming,
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
            Ok(Incoming::Text(text)) => {
                let text = match frames.text(&text) {
                    Ok(text) => text,
                    Err(v) => {
                        out.close(v.code, v.reason);
                        break;
                    }
                };
                // The writer holds bulk frames back while this runs (`writer::reader_first`).
                live.answering(true);
                let ((), inline) =
                    out.inline_scope(|| on_text(&conn, session.as_mut(), shared, text));
                live.answering(false);
                if inline.frames > 0 {
                    shared.metrics.outbound_inline(inline.frames, inline.bytes);
                }
            }
            Ok(Incoming::Binary(data, payment)) => {
                shared.metrics.inbound(MessageKind::Binary, data.len());
                if !conn.is_handshaken() {
                    match session.binary_before_handshake() {
                        Some(reply) => {
                            shared.metrics.protocol_error();
                            let _ = conn.send_text(reply);
                        }
                        None => send_protocol_error(
                            &conn,
                            shared,
                            ProtocolErrorCode::HandshakeRequired,
                            "the first frame must be a system.handshake request",
                            Map::new(),
                        ),
                    }
                    conn.close(CloseCode::POLICY, "handshake required");
                    break;
                }
                // The bytes received, by address (a pointer would not be `Send`).
                let received = (data.as_ptr() as usize, data.len());
                if let Some(data) = session.on_binary(data) {
                    // The payment is for the bytes received, not for others a session returns.
                    let payment =
                        payment.filter(|_| (data.as_ptr() as usize, data.len()) == received);
                    // The refusal is answered before any wait: it is not kept in the reader's
                    // state across the wait for room.
                    let room = match shared.registry.route(&conn, data, payment, &mut routes) {
                        Ok(room) => room,
                        Err(refusal) => {
                            match session.channel_refused(&refusal) {
                                Some(reply) => {
                                    shared.metrics.protocol_error();
                                    let _ = conn.send_text(reply);
                                }
                                None => answer_refusal(&conn, shared, &refusal),
                            }
                            None
                        }
                    };
                    if let Some(room) = room {
                        let _paused = live.pause();
                        // Nothing else is watched meanwhile, a failure included: the loop cleans
                        // it up once the frame is delivered (the failed queue refuses every
                        // frame from the latch on, so nothing reaches the connection before).
                        // A second `select!` on `failed` here would keep the compiler from
                        // inlining its poll into the loop above: a call on every frame.
                        room.await;
                    }
                }
            }
        }
        if !out.is_open() {
            break;
        }
    }
    // The failure cleanup, when the loop ended on a failure (or on `terminate`, which the
    // writer fires right after a failed write). Nothing else cleans up after a failure, and
    // nothing is sent to the connection in between: its queue refuses every frame from the
    // latch on.
    failure.if_failed(out);
    // Only this loop attaches the connection, so nothing makes it a sink again after this,
    // even a handshake completed later by a task that outlives the connection.
    shared.registry.detach_sink(id);
    session.on_close();
    shared.forget(id);
    (peer_sending, Some(failure))
}

/// What one turn of the read loop met first, in this order.
enum Turn {
    /// The connection's tasks are ending.
    Terminated,
    /// The connection failed (its queue's latch).
    Failed,
    /// The handshake completed: the connection becomes a channel sink.
    Handshaken,
    /// No handshake within the limit.
    HandshakeLate,
    /// A frame, or the end of reading.
    Frame(Result<Incoming, ReadEnd>),
}

fn on_text(conn: &Connection, session: &mut dyn TextSession, shared: &Shared, text: &str) {
    shared.metrics.inbound(MessageKind::Text, text.len());
    let limit = shared.limits.max_text_bytes;
    if text.len() > limit {
        match session.too_large(text.as_bytes(), limit) {
            Some(reply) => {
                shared.metrics.protocol_error();
                let _ = conn.send_text(reply);
            }
            None => answer_too_large(conn, shared, text, limit),
        }
        return;
    }
    session.on_text(text);
}

/// A text message over the soft limit: answered, and the socket stays open. When the message
/// is a request with a usable id, the answer is its error response; otherwise an event. The
/// envelope module owns the reply's shape (one copy of the rule, fuzzed there).
fn answer_too_large(conn: &Connection, shared: &Shared, text: &str, limit: usize) {
    shared.metrics.protocol_error();
    let reply = too_large_reply(text, limit);
    let _ = conn.send_text(reply);
}

/// Answers a channel frame the router refused: a `protocol_error` event with its channel and
/// seq, counted. The connection stays open.
fn answer_refusal(conn: &Connection, shared: &Shared, refusal: &ChannelRefusal) {
    shared.metrics.protocol_error();
    let _ = conn.send_text(refusal.error_event());
}

/// Sends a `protocol_error` event and counts it.
fn send_protocol_error(
    conn: &Connection,
    shared: &Shared,
    code: ProtocolErrorCode,
    message: &str,
    extra: Map<String, serde_json::Value>,
) {
    shared.metrics.protocol_error();
    let _ = conn.send_text(protocol_error_event(code, message, extra));
}

//! The connection's reader: reads messages, routes them by opcode, and queues every answer
//! (pongs, close echoes, protocol errors) on the outbound path; it never writes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Map;

use super::terminate::Terminate;
use crate::protocol::close::CloseCode;
use crate::protocol::envelope::too_large_reply;
use crate::protocol::error::{protocol_error_event, ProtocolErrorCode};
use crate::protocol::Role;
use crate::server::frame_reader::{FrameReader, Incoming, ReadEnd};
use crate::server::handle::{Connection, ConnectionId};
use crate::server::liveness::Liveness;
use crate::server::outbound::{FailReason, MessageKind, Outbound};
use crate::server::profile::TextSession;
use crate::server::registry::{ChannelRefusal, RouteCache};
use crate::server::shared::Shared;

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
/// peer may still be sending (so the caller lingers to discard).
pub(super) async fn serve_admitted(
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
    let mut routes = RouteCache::default();
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
                    // The refusal is answered before any wait: it is not kept in the reader's
                    // state across the wait for room.
                    let room = match shared.registry.route(&conn, data, &mut routes) {
                        Ok(room) => room,
                        Err(refusal) => {
                            answer_refusal(&conn, shared, &refusal);
                            None
                        }
                    };
                    if let Some(room) = room {
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

/// Answers a channel frame the router refused: a `protocol_error` event with its channel and
/// seq, counted. The connection stays open.
pub(crate) fn answer_refusal(conn: &Connection, shared: &Shared, refusal: &ChannelRefusal) {
    shared.metrics.protocol_error();
    let _ = conn.send_text(refusal.event());
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

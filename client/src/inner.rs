//! What a [`Client`](super::Client) shares between its clones and the transport's handlers:
//! the [`ConnectionMachine`], the requests waiting for answers, the subscribers and streams,
//! and the reactions to what the transport reports. The decisions are the machine's; this file
//! only carries them out (sends, wakes waiters, emits events).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{json, Map, Value};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch, Notify};

use super::backlog::{Backlog, BacklogSender};
use super::error::ClientError;
use super::events::{
    ClientEvent, ReceivedHistoryEntry, ReceivedSessionEvent, ReceivedSessionEventKind,
    ResumeOutcome,
};
use super::machine::{wire_error, ConnectionMachine, HandshakeStep};
use super::routes::{ChannelMessage, ChannelRoutes};
use super::settings::ClientOptions;
use super::subscribers::{lock, Subscribers};
use super::transport::{ConnectionState, Room, Subscription, Transport, TransportError};

/// Where the client is in its connection's life. `Closed` keeps the reason, so requests and
/// `connect` can report why (a refusal, a failed handshake) instead of a bare "not connected".
#[derive(Debug, Clone)]
pub(crate) enum Phase {
    Idle,
    Handshaking,
    Ready,
    Reconnecting,
    Closed(ClientError),
}

/// A request on the wire, waiting for its answer.
pub(crate) struct Pending {
    pub(crate) method: String,
    pub(crate) reply: oneshot::Sender<Result<Value, ClientError>>,
}

pub(crate) struct Core {
    pub(crate) machine: ConnectionMachine,
    pub(crate) pending: HashMap<String, Pending>,
    pub(crate) state: ConnectionState,
}

pub(crate) struct Inner {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) options: ClientOptions,
    pub(crate) core: Mutex<Core>,
    pub(crate) phase: watch::Sender<Phase>,
    pub(crate) events: Subscribers<ClientEvent>,
    pub(crate) event_streams: Mutex<Vec<BacklogSender<ClientEvent>>>,
    pub(crate) channels: ChannelRoutes,
    pub(crate) backlog: Arc<Backlog>,
    /// Woken on every credit grant and every connection change, for bulk sends that wait.
    pub(crate) credit: Notify,
    pub(crate) states: Subscribers<ConnectionState>,
    pub(crate) next_id: AtomicU64,
    // Captured by `connect`, so handlers running on foreign threads can still spawn.
    pub(crate) runtime: Mutex<Option<Handle>>,
    pub(crate) transport_subscriptions: Mutex<Vec<Subscription>>,
}

impl Inner {
    pub(crate) fn on_transport_state(self: &Arc<Self>, state: ConnectionState) {
        match state {
            ConnectionState::Connected | ConnectionState::VersionSkew => self.start_handshake(),
            ConnectionState::Connecting => {
                self.fail_pending();
                self.phase.send_if_modified(|phase| {
                    let was_up = matches!(phase, Phase::Ready | Phase::Handshaking);
                    if was_up {
                        *phase = Phase::Reconnecting;
                    }
                    was_up
                });
                self.set_state(ConnectionState::Connecting);
            }
            ConnectionState::Disconnected => {
                self.fail_pending();
                let reason = match (self.transport.last_close(), self.transport.last_error()) {
                    (Some(close), _) if close.is_refusal() => ClientError::Refused { close },
                    (_, Some(error)) => ClientError::Transport(error),
                    (Some(close), None) => ClientError::Transport(TransportError::Io(format!(
                        "the server closed the connection ({close})"
                    ))),
                    (None, None) => ClientError::NotConnected,
                };
                // A reason recorded earlier (a failed handshake, `disconnect`) is the better one.
                self.phase.send_if_modified(|phase| {
                    if matches!(phase, Phase::Closed(_)) {
                        return false;
                    }
                    *phase = Phase::Closed(reason);
                    true
                });
                self.set_state(ConnectionState::Disconnected);
            }
        }
    }

    fn start_handshake(self: &Arc<Self>) {
        let (frame, attempt) = {
            let mut core = lock(&self.core);
            core.pending.clear();
            core.machine.socket_opened()
        };
        self.credit.notify_waiters();
        self.phase.send_replace(Phase::Handshaking);
        self.set_state(ConnectionState::Connecting);
        // The handshake takes no room: it is small, and frames an old socket still holds
        // room for (its writer finishing a close) must not keep it from going out.
        if let Err(error) = self
            .transport
            .send_text_in(frame.to_string(), Room::unbounded())
        {
            // The transport reports the break itself; the next `connected` starts over.
            tracing::debug!(%error, "could not send the handshake");
            return;
        }
        let weak = Arc::downgrade(self);
        let limit = self.options.handshake_timeout;
        self.spawn(async move {
            tokio::time::sleep(limit).await;
            if let Some(inner) = weak.upgrade() {
                let expired = lock(&inner.core).machine.handshake_timed_out(attempt);
                if expired {
                    inner.fail_handshake(ClientError::Timeout {
                        method: "system.handshake".into(),
                        after: limit,
                    });
                }
            }
        });
    }

    pub(crate) fn on_frame(self: &Arc<Self>, frame: &Value) {
        let Some(frame) = frame.as_object() else {
            return;
        };
        if let Some(event) = frame.get("event").and_then(Value::as_str) {
            self.on_event_frame(event, frame);
        } else if frame.contains_key("method") {
            self.refuse_request(frame);
        } else if let Some(id) = frame.get("id").and_then(Value::as_str) {
            self.on_response(id, frame);
        } else {
            tracing::warn!("dropped an inbound frame that is neither event, request nor response");
        }
    }

    pub(crate) fn on_binary(&self, message: &Bytes) {
        self.channels.route_binary(message);
    }

    fn on_event_frame(&self, event: &str, frame: &Map<String, Value>) {
        let payload = frame.get("payload").cloned().unwrap_or(Value::Null);
        let seq = frame.get("seq").and_then(Value::as_u64);
        let (true, Some(seq)) = (event.starts_with("session."), seq) else {
            self.on_notice(event, &payload);
            self.emit(ClientEvent::Notice {
                event: event.to_owned(),
                payload,
            });
            return;
        };
        let fresh = lock(&self.core).machine.session_event(seq);
        if !fresh {
            tracing::debug!(seq, event, "dropped a session event already delivered");
            return;
        }
        let size = event.len() + json_size(&payload);
        self.emit_sized(
            ClientEvent::Session(ReceivedSessionEvent {
                seq,
                kind: ReceivedSessionEventKind::parse(event, &payload),
            }),
            size,
        );
    }

    /// Channel notices: credit grants feed the machine, drops reach the channel's streams.
    fn on_notice(&self, event: &str, payload: &Value) {
        let channel = payload.get("channel").and_then(Value::as_str);
        match (event, channel) {
            ("channel.credit", Some(channel)) => {
                let bytes = payload.get("bytes").and_then(Value::as_u64).unwrap_or(0);
                let counted = lock(&self.core).machine.credit_granted(channel, bytes);
                if counted {
                    self.credit.notify_waiters();
                }
            }
            ("channel.dropped", Some(channel)) => {
                let count = payload.get("count").and_then(Value::as_u64).unwrap_or(0);
                self.channels
                    .route(channel, ChannelMessage::Dropped { count }, 16);
            }
            _ => {}
        }
    }

    /// The server sends no requests today; answer any so the peer is not left waiting.
    fn refuse_request(&self, frame: &Map<String, Value>) {
        let Some(id) = frame.get("id").and_then(Value::as_str) else {
            return;
        };
        let method = frame.get("method").and_then(Value::as_str).unwrap_or("");
        let reply = json!({
            "id": id,
            "error": {
                "code": "method_not_found",
                "message": format!("this client serves no method `{method}`"),
                "effect_state": "none",
            }
        });
        if let Err(error) = self.transport.send(&reply) {
            tracing::debug!(%error, "could not refuse a server request");
        }
    }

    fn on_response(self: &Arc<Self>, id: &str, frame: &Map<String, Value>) {
        let outcome = match (frame.get("result"), frame.get("error")) {
            (Some(result), None) => Ok(result.clone()),
            (None, Some(error)) => Err(wire_error(error.clone())),
            _ => {
                tracing::warn!(
                    id,
                    "dropped a response with neither or both of result and error"
                );
                return;
            }
        };
        let mut core = lock(&self.core);
        if core.machine.awaits(id) {
            let step = core.machine.handshake_answered(id, outcome);
            drop(core);
            return match step {
                Some(HandshakeStep::Ready { info, outcome }) => {
                    self.ready(info.version_skew, outcome)
                }
                Some(HandshakeStep::Failed(error)) => self.fail_handshake(error),
                None => {}
            };
        }
        let Some(Pending { method, reply }) = core.pending.remove(id) else {
            tracing::debug!(id, "dropped a response nobody waits for");
            return;
        };
        if let Ok(result) = &outcome {
            core.machine.answered(&method, result);
        }
        drop(core);
        let _ = reply.send(outcome.map_err(|error| ClientError::Remote { method, error }));
    }

    fn ready(self: &Arc<Self>, skew: bool, outcome: ResumeOutcome) {
        let state = if skew {
            ConnectionState::VersionSkew
        } else {
            ConnectionState::Connected
        };
        // The state first: `connect()` returns as soon as the phase is `Ready`, and by then
        // `state()` must already say `connected` / `version_skew`.
        self.set_state(state);
        self.phase.send_replace(Phase::Ready);
        self.credit.notify_waiters();
        self.emit(ClientEvent::Ready {
            outcome,
            version_skew: skew,
        });
        if outcome.needs_history() {
            let inner = Arc::clone(self);
            self.spawn(async move { inner.refetch_history(outcome).await });
        }
    }

    pub(crate) fn fail_handshake(self: &Arc<Self>, error: ClientError) {
        tracing::info!(%error, "handshake failed; disconnecting");
        lock(&self.core).machine.socket_closed();
        self.phase.send_replace(Phase::Closed(error.clone()));
        self.emit(ClientEvent::HandshakeFailed(error));
        let transport = Arc::clone(&self.transport);
        self.spawn(async move { transport.disconnect().await });
    }

    async fn refetch_history(self: Arc<Self>, outcome: ResumeOutcome) {
        let fetched = self
            .request("session.history", json!({}), self.options.request_timeout)
            .await
            .and_then(|result| {
                serde_json::from_value::<Vec<ReceivedHistoryEntry>>(
                    result.get("entries").cloned().unwrap_or(Value::Null),
                )
                .map_err(|error| ClientError::MalformedResponse {
                    method: "session.history".into(),
                    reason: error.to_string(),
                })
            });
        self.emit(match fetched {
            Ok(entries) => ClientEvent::HistoryRefetched { outcome, entries },
            Err(error) => ClientEvent::HistoryRefetchFailed { outcome, error },
        });
    }

    /// To the handlers, then to every live event stream (dropped streams are forgotten).
    pub(crate) fn emit(&self, event: ClientEvent) {
        let size = event_size(&event);
        self.emit_sized(event, size);
    }

    fn emit_sized(&self, event: ClientEvent, size: usize) {
        self.events.emit(&event);
        let mut streams = lock(&self.event_streams);
        streams.retain(|stream| stream.send(event.clone(), size));
    }

    fn fail_pending(&self) {
        let drained: Vec<Pending> = {
            let mut core = lock(&self.core);
            core.machine.socket_closed();
            core.pending.drain().map(|(_, pending)| pending).collect()
        };
        self.credit.notify_waiters();
        for Pending { method, reply } in drained {
            let _ = reply.send(Err(ClientError::ConnectionLost { method }));
        }
    }

    fn set_state(&self, next: ConnectionState) {
        let changed = {
            let mut core = lock(&self.core);
            let changed = core.state != next;
            core.state = next;
            changed
        };
        if changed {
            self.states.emit(&next);
            self.emit(ClientEvent::State(next));
        }
    }

    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let handle = lock(&self.runtime)
            .clone()
            .or_else(|| Handle::try_current().ok());
        match handle {
            Some(handle) => {
                handle.spawn(task);
            }
            None => tracing::error!("no tokio runtime to run a client task on"),
        }
    }
}

/// What an event holds in memory, roughly: its strings and a fixed cost per JSON node. Counted
/// against the client's backlog while it waits in a stream.
fn event_size(event: &ClientEvent) -> usize {
    const NODE: usize = 16;
    match event {
        ClientEvent::Notice { event, payload } => event.len() + json_size(payload),
        ClientEvent::HistoryRefetched { entries, .. } => entries
            .iter()
            .map(|entry| NODE + entry.text.len() + entry.turn_id.as_ref().map_or(0, String::len))
            .sum(),
        _ => 4 * NODE,
    }
}

/// A JSON value's strings plus a fixed cost per node.
pub(crate) fn json_size(value: &Value) -> usize {
    const NODE: usize = 16;
    match value {
        Value::String(text) => NODE + text.len(),
        Value::Array(items) => NODE + items.iter().map(json_size).sum::<usize>(),
        Value::Object(map) => {
            NODE + map
                .iter()
                .map(|(key, value)| key.len() + json_size(value))
                .sum::<usize>()
        }
        _ => NODE,
    }
}

//! The handshake layer: [`Client`] turns any [`Transport`] into request/response calls and a
//! stream of session events, and keeps the session across reconnects.
//!
//! - Every time the transport reports `connected`, the first frame sent is `system.handshake`;
//!   requests wait until its result arrives. After a reconnect the handshake carries
//!   `resume: {session_id, epoch, after_seq}`, where `after_seq` is the highest session `seq`
//!   already delivered to the application, and replayed duplicates are dropped.
//! - Responses are matched to requests by `id`; each request has a timeout.
//! - A request whose method needs a feature the server did not announce fails locally with
//!   `unsupported_feature` and nothing is sent.
//! - On a `gap` or `reset` resume outcome the history is fetched again and handed to the
//!   application as [`ClientEvent::HistoryRefetched`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::error::{ClientError, ErrorCode, WireError};
use super::events::{ClientEvent, HistoryEntry, ResumeOutcome, SessionEvent, SessionEventKind};
use super::features;
use super::resume::{ResumePoint, SessionCursor};
use super::subscribers::{lock, Subscribers};
use super::transport::{ConnectionState, Subscription, Transport, TransportError};
use crate::protocol::catalog::Method;
use crate::protocol::version::{
    incompatible_error, Compatibility, VersionPair, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION,
};

/// The name this client announces in its handshake.
pub const CLIENT_NAME: &str = "carrier-cli";

/// How a [`Client`] introduces itself and how long it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// `client.name` in the handshake.
    pub name: String,
    /// `client.version` in the handshake (an app version; never compared).
    pub version: String,
    /// How long a request waits for its answer (including waiting out a reconnect).
    pub request_timeout: Duration,
    /// How long a handshake may take before the client gives up and disconnects.
    pub handshake_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            name: CLIENT_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            request_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// A `{name, version}` pair, as the server names itself: the protocol's [`AppInfo`].
///
/// [`AppInfo`]: crate::protocol::methods::AppInfo
pub use crate::protocol::methods::AppInfo as PeerInfo;
/// The `system.handshake` result as the client reads it: the protocol's tolerant reader.
pub use crate::protocol::methods::HandshakeInfo;

/// The client side of the agent protocol over any [`Transport`]. Cheap to clone; clones share
/// one connection.
///
/// - Every time the transport reports `connected`, the first frame sent is `system.handshake`
///   (protocol 1.0, client `carrier-cli`); requests wait until its result arrives. After a
///   reconnect the handshake carries `resume: {session_id, epoch, after_seq}`, where `after_seq`
///   is the highest session `seq` already delivered, and replayed duplicates are dropped.
/// - Responses are matched to requests by `id`; each request has a timeout.
/// - A request whose method needs a feature the server did not announce fails locally with
///   `unsupported_feature` ([`ClientError::Preflight`]) and nothing is sent.
/// - Every handshake outcome reaches [`on_event`](Client::on_event) handlers as
///   [`ClientEvent::Ready`]; on `gap` or `reset` the history is fetched again and delivered as
///   [`ClientEvent::HistoryRefetched`].
/// - The state is `connecting` until the handshake result arrives, then `connected`, or
///   `version_skew` when the server's minor version differs.
/// - A failed handshake (e.g. `version_incompatible`, on the first connect or after a
///   reconnect to a restarted server) is final: [`ClientEvent::HandshakeFailed`], state
///   `disconnected`, no redial, and every request fails with that error until the application
///   calls [`connect`](Client::connect) again.
///
/// ```no_run
/// use std::sync::Arc;
/// use carrier::client::{Client, ClientEvent, SessionEventKind, WsClientTransport, WsOptions};
/// use serde_json::json;
///
/// # async fn run() -> Result<(), carrier::client::ClientError> {
/// let transport = WsClientTransport::new(WsOptions::new("ws://127.0.0.1:7070/").token("…"));
/// let client = Client::new(Arc::new(transport));
/// let _events = client.on_event(Box::new(|event: &ClientEvent| {
///     if let ClientEvent::Session(event) = event {
///         if let SessionEventKind::TextDelta { delta, .. } = &event.kind {
///             print!("{delta}");
///         }
///     }
/// }));
/// let info = client.connect().await?;
/// println!("bound to {} on {} {}", info.session_id, info.server.name, info.server.version);
/// client.request("session.submit", json!({"prompt": "hello"})).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Handler for [`ClientEvent`]s.
pub type EventHandler = Box<dyn Fn(&ClientEvent) + Send + Sync>;

/// Where the client is in its connection's life. `Closed` keeps the reason, so requests and
/// `connect` can report why (a refusal, a failed handshake) instead of a bare "not connected".
#[derive(Debug, Clone)]
enum Phase {
    Idle,
    Handshaking,
    Ready,
    Reconnecting,
    Closed(ClientError),
}

struct Inner {
    transport: Arc<dyn Transport>,
    options: ClientOptions,
    core: Mutex<Core>,
    phase: watch::Sender<Phase>,
    events: Subscribers<ClientEvent>,
    states: Subscribers<ConnectionState>,
    next_id: AtomicU64,
    // Captured by `connect`, so handlers running on foreign threads can still spawn.
    runtime: Mutex<Option<Handle>>,
    transport_subscriptions: Mutex<Vec<Subscription>>,
}

struct Core {
    pending: HashMap<String, Pending>,
    handshake: Option<HandshakeInfo>,
    cursor: SessionCursor,
    state: ConnectionState,
    // True between a handshake result and the next state change. Sending a request checks it
    // under this lock, and the transport reports leaving `connected` before it accepts frames
    // for a new socket, so no request can overtake the next handshake.
    ready: bool,
    attempt: u64,
}

enum Pending {
    Handshake {
        attempt: u64,
        asked_to_resume: bool,
    },
    Request {
        method: String,
        reply: oneshot::Sender<Result<Value, ClientError>>,
    },
}

/// A request on the wire: its id and where its answer arrives.
type Sent = (String, oneshot::Receiver<Result<Value, ClientError>>);

impl Client {
    /// A client over `transport` with default [`ClientOptions`].
    pub fn new(transport: Arc<dyn Transport>) -> Client {
        Client::with_options(transport, ClientOptions::default())
    }

    /// A client over `transport`. It subscribes to the transport at once; call
    /// [`connect`](Client::connect) to open the connection.
    pub fn with_options(transport: Arc<dyn Transport>, options: ClientOptions) -> Client {
        let (phase, _) = watch::channel(Phase::Idle);
        let inner = Arc::new(Inner {
            transport: Arc::clone(&transport),
            options,
            core: Mutex::new(Core {
                pending: HashMap::new(),
                handshake: None,
                cursor: SessionCursor::default(),
                state: ConnectionState::Disconnected,
                ready: false,
                attempt: 0,
            }),
            phase,
            events: Subscribers::new(),
            states: Subscribers::new(),
            next_id: AtomicU64::new(1),
            runtime: Mutex::new(Handle::try_current().ok()),
            transport_subscriptions: Mutex::new(Vec::new()),
        });
        // Weak: the transport keeps its handlers, and the handlers must not keep the client.
        let weak: Weak<Inner> = Arc::downgrade(&inner);
        let on_frame = weak.clone();
        let messages = transport.on_message(Box::new(move |frame| {
            if let Some(inner) = on_frame.upgrade() {
                inner.on_frame(frame);
            }
        }));
        let states = transport.on_state_change(Box::new(move |state| {
            if let Some(inner) = weak.upgrade() {
                inner.on_transport_state(state);
            }
        }));
        lock(&inner.transport_subscriptions).extend([messages, states]);
        Client { inner }
    }

    /// Connects the transport and performs the handshake. Resolves with the handshake result,
    /// or with why it failed: [`ClientError::Refused`] for a wrong token or role,
    /// [`ClientError::Remote`] with `version_incompatible`, a transport error, or a timeout.
    pub async fn connect(&self) -> Result<HandshakeInfo, ClientError> {
        let inner = &self.inner;
        if let Ok(handle) = Handle::try_current() {
            *lock(&inner.runtime) = Some(handle);
        }
        let mut phase = inner.phase.subscribe();
        let ready = matches!(*phase.borrow(), Phase::Ready);
        if ready {
            if let Some(info) = self.handshake() {
                return Ok(info);
            }
        }
        inner.phase.send_if_modified(|phase| {
            let closed = matches!(phase, Phase::Closed(_));
            if closed {
                *phase = Phase::Idle;
            }
            closed
        });
        inner.transport.connect().await?;
        let idle = matches!(*phase.borrow(), Phase::Idle);
        if idle && inner.transport.state().is_open() {
            // Already open before this client subscribed: no state change will come.
            inner.on_transport_state(ConnectionState::Connected);
        }
        let settled = tokio::time::timeout(
            inner.options.handshake_timeout,
            phase.wait_for(|phase| matches!(phase, Phase::Ready | Phase::Closed(_))),
        )
        .await
        .map(|waited| waited.map(|phase| phase.clone()));
        match settled {
            Ok(Ok(Phase::Ready)) => self.handshake().ok_or(ClientError::NotConnected),
            Ok(Ok(Phase::Closed(error))) => Err(error),
            Ok(_) => Err(ClientError::NotConnected),
            Err(_) => {
                let error = ClientError::Timeout {
                    method: "system.handshake".into(),
                    after: inner.options.handshake_timeout,
                };
                inner.phase.send_replace(Phase::Closed(error.clone()));
                inner.transport.disconnect().await;
                Err(error)
            }
        }
    }

    /// Closes the connection and stops reconnecting. Outstanding requests fail with
    /// [`ClientError::ConnectionLost`]. The resume point is kept, so a later `connect` resumes.
    pub async fn disconnect(&self) {
        self.inner
            .phase
            .send_replace(Phase::Closed(ClientError::NotConnected));
        self.inner.transport.disconnect().await;
    }

    /// The client's state: `connecting` until the handshake result arrives, then `connected`
    /// or `version_skew`.
    pub fn state(&self) -> ConnectionState {
        lock(&self.inner.core).state
    }

    /// The latest handshake result (its `session_id` follows `sessions.start`/`switch`).
    pub fn handshake(&self) -> Option<HandshakeInfo> {
        lock(&self.inner.core).handshake.clone()
    }

    /// Where a reconnect would resume from.
    pub fn resume_point(&self) -> Option<ResumePoint> {
        lock(&self.inner.core).cursor.point().cloned()
    }

    /// The transport underneath (e.g. for binary channel frames).
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.inner.transport
    }

    /// Calls `method` with `params` and waits for the result, using the default timeout.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.inner
            .request(method, params, self.inner.options.request_timeout)
            .await
    }

    /// Calls `method` with `params` and waits at most `timeout` (which includes waiting for a
    /// reconnect to finish).
    pub async fn request_with_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        self.inner.request(method, params, timeout).await
    }

    /// Registers a handler for session events, resume outcomes and other notices. Handlers run
    /// on the transport's task and must not block.
    pub fn on_event(&self, handler: EventHandler) -> Subscription {
        self.inner.events.subscribe(Arc::from(handler))
    }

    /// Registers a handler for the client's state changes.
    pub fn on_state_change(
        &self,
        handler: Box<dyn Fn(ConnectionState) + Send + Sync>,
    ) -> Subscription {
        let handler: Arc<dyn Fn(&ConnectionState) + Send + Sync> =
            Arc::new(move |state: &ConnectionState| handler(*state));
        self.inner.states.subscribe(handler)
    }
}

impl Inner {
    async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        if method == "system.handshake" {
            return Err(ClientError::ReservedMethod);
        }
        let deadline = Instant::now() + timeout;
        let timed_out = || ClientError::Timeout {
            method: method.to_owned(),
            after: timeout,
        };
        let mut phase = self.phase.subscribe();
        let (id, answer) = loop {
            let settled = tokio::time::timeout_at(
                deadline,
                phase.wait_for(|phase| !matches!(phase, Phase::Handshaking | Phase::Reconnecting)),
            )
            .await
            .map_err(|_| timed_out())?
            .map(|phase| phase.clone())
            .map_err(|_| ClientError::NotConnected)?;
            match settled {
                Phase::Ready => {}
                Phase::Closed(error) => return Err(error),
                _ => return Err(ClientError::NotConnected),
            }
            if let Some(sent) = self.send_request(method, &params)? {
                break sent;
            }
            // The connection changed between the phase check and the send; wait for the phase
            // to catch up, then look again.
            tokio::time::timeout_at(deadline, phase.changed())
                .await
                .map_err(|_| timed_out())?
                .map_err(|_| ClientError::NotConnected)?;
        };
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(ClientError::ConnectionLost {
                method: method.to_owned(),
            }),
            Err(_) => {
                lock(&self.core).pending.remove(&id);
                Err(timed_out())
            }
        }
    }

    /// Sends one request if the connection is ready: `Ok(None)` when it is not (yet).
    fn send_request(&self, method: &str, params: &Value) -> Result<Option<Sent>, ClientError> {
        let mut core = lock(&self.core);
        if !core.ready {
            return Ok(None);
        }
        if let Some(info) = &core.handshake {
            if let Some(error) =
                features::preflight(method, params, info.protocol_version, &info.features)
            {
                return Err(ClientError::Preflight {
                    method: method.to_owned(),
                    error,
                });
            }
        }
        let id = format!("c{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let frame = json!({ "id": id, "method": method, "params": params });
        // Sent under the lock: see `Core::ready`.
        match self.transport.send(&frame) {
            Ok(()) => {}
            // The socket just went away and the transport has not said so yet; nothing was
            // sent, so the request can wait for the reconnect like any other.
            Err(TransportError::NotConnected) => return Ok(None),
            Err(error) => return Err(error.into()),
        }
        let (reply, answer) = oneshot::channel();
        core.pending.insert(
            id.clone(),
            Pending::Request {
                method: method.to_owned(),
                reply,
            },
        );
        Ok(Some((id, answer)))
    }

    fn on_transport_state(self: &Arc<Self>, state: ConnectionState) {
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
                let reason = match self.transport.last_close() {
                    Some(close) if close.is_refusal() => ClientError::Refused { close },
                    _ => ClientError::NotConnected,
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
            core.ready = false;
            core.attempt += 1;
            let attempt = core.attempt;
            core.pending
                .retain(|_, pending| !matches!(pending, Pending::Handshake { .. }));
            let mut params = json!({
                "protocol_version": PROTOCOL_VERSION,
                "min_compatible_protocol": MIN_COMPATIBLE_PROTOCOL,
                "client": { "name": self.options.name, "version": self.options.version },
            });
            if let (Some(point), Some(params)) = (core.cursor.point(), params.as_object_mut()) {
                params.insert("resume".into(), json!(point));
            }
            let id = format!("hs{attempt}");
            let asked_to_resume = core.cursor.point().is_some();
            core.pending.insert(
                id.clone(),
                Pending::Handshake {
                    attempt,
                    asked_to_resume,
                },
            );
            let frame = json!({ "id": id, "method": "system.handshake", "params": params });
            (frame, attempt)
        };
        self.phase.send_replace(Phase::Handshaking);
        self.set_state(ConnectionState::Connecting);
        if let Err(error) = self.transport.send(&frame) {
            // The transport reports the break itself; the next `connected` starts over.
            tracing::debug!(%error, "could not send the handshake");
            return;
        }
        let weak = Arc::downgrade(self);
        let limit = self.options.handshake_timeout;
        self.spawn(async move {
            tokio::time::sleep(limit).await;
            if let Some(inner) = weak.upgrade() {
                inner.handshake_timed_out(attempt, limit);
            }
        });
    }

    fn handshake_timed_out(self: &Arc<Self>, attempt: u64, limit: Duration) {
        let expired = {
            let mut core = lock(&self.core);
            let before = core.pending.len();
            core.pending.retain(|_, pending| {
                !matches!(pending, Pending::Handshake { attempt: a, .. } if *a == attempt)
            });
            core.pending.len() != before
        };
        if expired {
            self.fail_handshake(ClientError::Timeout {
                method: "system.handshake".into(),
                after: limit,
            });
        }
    }

    fn on_frame(self: &Arc<Self>, frame: &Value) {
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

    fn on_event_frame(&self, event: &str, frame: &Map<String, Value>) {
        let payload = frame.get("payload").cloned().unwrap_or(Value::Null);
        let seq = frame.get("seq").and_then(Value::as_u64);
        let (true, Some(seq)) = (event.starts_with("session."), seq) else {
            self.events.emit(&ClientEvent::Notice {
                event: event.to_owned(),
                payload,
            });
            return;
        };
        let fresh = lock(&self.core).cursor.accept(seq);
        if !fresh {
            tracing::debug!(seq, event, "dropped a session event already delivered");
            return;
        }
        self.events.emit(&ClientEvent::Session(SessionEvent {
            seq,
            kind: SessionEventKind::parse(event, &payload),
        }));
    }

    /// The server sends no requests today (SPEC section 4); answer any so the peer is not left
    /// waiting.
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
        let outcome: Result<Value, WireError> = match (frame.get("result"), frame.get("error")) {
            (Some(result), None) => Ok(result.clone()),
            (None, Some(error)) => Err(serde_json::from_value(error.clone()).unwrap_or_else(
                |_| WireError {
                    code: ErrorCode::ProtocolError.into(),
                    message: format!("unreadable error object: {error}"),
                    effect_state: None,
                    data: None,
                },
            )),
            _ => {
                tracing::warn!(
                    id,
                    "dropped a response with neither or both of result and error"
                );
                return;
            }
        };
        let pending = lock(&self.core).pending.remove(id);
        match pending {
            None => tracing::debug!(id, "dropped a response nobody waits for"),
            Some(Pending::Handshake {
                asked_to_resume, ..
            }) => match outcome {
                Ok(result) => self.finish_handshake(result, asked_to_resume),
                Err(error) => self.fail_handshake(ClientError::Remote {
                    method: "system.handshake".into(),
                    error,
                }),
            },
            Some(Pending::Request { method, reply }) => {
                if let Ok(result) = &outcome {
                    // The catalog says which methods' success rebinds the connection.
                    let rebinds =
                        Method::from_name(&method).is_some_and(|m| m.spec().rebinds_session);
                    if rebinds {
                        self.rebind(result);
                    }
                }
                let _ = reply.send(outcome.map_err(|error| ClientError::Remote { method, error }));
            }
        }
    }

    fn finish_handshake(self: &Arc<Self>, result: Value, asked_to_resume: bool) {
        let mut info: HandshakeInfo = match serde_json::from_value(result) {
            Ok(info) => info,
            Err(error) => {
                return self.fail_handshake(ClientError::MalformedResponse {
                    method: "system.handshake".into(),
                    reason: error.to_string(),
                })
            }
        };
        // The handshake layer judges the versions itself (SPEC 4 and 11): a server that answers
        // with a pair this client cannot talk to is refused like the server refuses a client,
        // and `version_skew` is ours to set, whatever the result's flag says.
        let ours = VersionPair::CURRENT;
        let skew = match VersionPair::new(info.protocol_version, info.min_compatible_protocol) {
            Err(_) => {
                return self.fail_handshake(ClientError::MalformedResponse {
                    method: "system.handshake".into(),
                    reason: format!(
                        "min_compatible_protocol {} is above protocol_version {}",
                        info.min_compatible_protocol, info.protocol_version
                    ),
                })
            }
            Ok(theirs) => match ours.check(&theirs) {
                Compatibility::Compatible { skew } => skew,
                Compatibility::Incompatible(why) => {
                    return self.fail_handshake(ClientError::Preflight {
                        method: "system.handshake".into(),
                        error: incompatible_error(theirs, ours, why).into(),
                    })
                }
            },
        };
        info.version_skew = skew;
        let state = if skew {
            ConnectionState::VersionSkew
        } else {
            ConnectionState::Connected
        };
        let outcome = {
            let mut core = lock(&self.core);
            let outcome =
                core.cursor
                    .bind(asked_to_resume, info.resume, &info.session_id, &info.epoch);
            core.handshake = Some(info.clone());
            core.ready = true;
            outcome
        };
        // The state first: `connect()` returns as soon as the phase is `Ready`, and by then
        // `state()` must already say `connected` / `version_skew`.
        self.set_state(state);
        self.phase.send_replace(Phase::Ready);
        self.events.emit(&ClientEvent::Ready {
            outcome,
            version_skew: skew,
        });
        if outcome.needs_history() {
            let inner = Arc::clone(self);
            self.spawn(async move { inner.refetch_history(outcome).await });
        }
    }

    fn fail_handshake(self: &Arc<Self>, error: ClientError) {
        tracing::info!(%error, "handshake failed; disconnecting");
        lock(&self.core).ready = false;
        self.phase.send_replace(Phase::Closed(error.clone()));
        self.events.emit(&ClientEvent::HandshakeFailed(error));
        let transport = Arc::clone(&self.transport);
        self.spawn(async move { transport.disconnect().await });
    }

    async fn refetch_history(self: Arc<Self>, outcome: ResumeOutcome) {
        let fetched = self
            .request("session.history", json!({}), self.options.request_timeout)
            .await
            .and_then(|result| {
                serde_json::from_value::<Vec<HistoryEntry>>(
                    result.get("entries").cloned().unwrap_or(Value::Null),
                )
                .map_err(|error| ClientError::MalformedResponse {
                    method: "session.history".into(),
                    reason: error.to_string(),
                })
            });
        self.events.emit(&match fetched {
            Ok(entries) => ClientEvent::HistoryRefetched { outcome, entries },
            Err(error) => ClientEvent::HistoryRefetchFailed { outcome, error },
        });
    }

    fn rebind(&self, result: &Value) {
        let Some(session_id) = result.get("session_id").and_then(Value::as_str) else {
            return;
        };
        let mut core = lock(&self.core);
        core.cursor.rebind(session_id);
        if let Some(info) = core.handshake.as_mut() {
            info.session_id = session_id.to_owned();
        }
    }

    fn fail_pending(&self) {
        let drained: Vec<Pending> = {
            let mut core = lock(&self.core);
            core.ready = false;
            core.pending.drain().map(|(_, pending)| pending).collect()
        };
        for pending in drained {
            if let Pending::Request { method, reply } = pending {
                let _ = reply.send(Err(ClientError::ConnectionLost { method }));
            }
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
        }
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
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

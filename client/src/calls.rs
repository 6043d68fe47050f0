//! [`Client`]: the agent protocol over any [`Transport`] — typed calls, session events as a
//! stream, and the session kept across reconnects. Its channel API is in `channels`, its
//! setup in `settings`.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::runtime::Handle;
use tokio::sync::{watch, Notify};

use super::backlog::{backlog_stream, Backlog, BacklogStream};
use super::error::ClientError;
use super::events::{ClientEvent, Decision};
use super::inner::{Core, Inner, Phase};
use super::machine::ConnectionMachine;
use super::resume::ResumePoint;
use super::routes::ChannelRoutes;
use super::settings::ClientOptions;
use super::subscribers::{lock, Subscribers};
use super::transport::{ConnectionState, Subscription, Transport};
use carrier_protocol::catalog::{def, MethodDef};
use carrier_protocol::methods::{AbortParams, PermissionRespondParams, SubmitParams};

/// A channel as the handshake describes it (with a bulk channel's `credit`).
pub use carrier_protocol::channel_info::ChannelInfo;
/// A `{name, version}` pair, as the server (and this client) names itself.
pub use carrier_protocol::methods::AppInfo;
/// The `system.handshake` result as the client reads it: the protocol's tolerant reader.
pub use carrier_protocol::methods::HandshakeInfo;

/// The client side of the agent protocol over any [`Transport`]. Cheap to clone; clones share
/// one connection.
///
/// - Requests are typed by the protocol's catalog: [`call::<M>`](Client::call) takes `M`'s
///   params and returns its result; [`submit`](Client::submit) and
///   [`respond`](Client::respond) cover a turn.
/// - Session events arrive on [`events`](Client::events) streams (or handlers), each channel's
///   frames on [`channel`](Client::channel) streams; channel sends number their own `seq`.
/// - Every time the transport reports `connected`, the first frame sent is `system.handshake`;
///   requests wait until its result arrives. After a reconnect the handshake resumes the
///   session from the last delivered `seq`, and replayed duplicates are dropped; on `gap` or
///   `reset` the history is fetched again ([`ClientEvent::HistoryRefetched`]).
/// - A request whose method needs a feature the server did not announce fails locally with
///   `unsupported_feature` ([`ClientError::Preflight`]) and nothing is sent.
/// - Sends take room in the transport's bounded outbound buffer: the async ones wait for it,
///   the `try_` ones fail with [`TransportError::BufferFull`](super::TransportError::BufferFull).
/// - A failed handshake (e.g. `version_incompatible`) is final: [`ClientEvent::HandshakeFailed`],
///   state `disconnected`, no redial, and every request fails with that error until
///   [`connect`](Client::connect) is called again.
///
/// ```no_run
/// use std::sync::Arc;
/// use carrier_client::{Client, ClientEvent, ReceivedSessionEventKind, WsClientTransport, WsOptions};
/// use futures_util::StreamExt;
///
/// # async fn run() -> Result<(), carrier_client::ClientError> {
/// let transport = WsClientTransport::new(WsOptions::new("ws://127.0.0.1:7070/").token("…"));
/// let client = Client::new(Arc::new(transport));
/// let mut events = client.events();
/// client.connect().await?;
/// let turn = client.submit("hello").await?;
/// while let Some(event) = events.next().await {
///     let ClientEvent::Session(event) = event else { continue };
///     match event.kind {
///         ReceivedSessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => print!("{delta}"),
///         ReceivedSessionEventKind::TurnCompleted { turn_id, .. } if turn_id == turn => break,
///         _ => {}
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

/// Handler for [`ClientEvent`]s.
pub type EventHandler = Box<dyn Fn(&ClientEvent) + Send + Sync>;

/// A stream of [`ClientEvent`]s: see [`Client::events`].
pub type EventStream = BacklogStream<ClientEvent>;

impl Client {
    /// A client over `transport` with default [`ClientOptions`].
    pub fn new(transport: Arc<dyn Transport>) -> Client {
        Client::with_options(transport, ClientOptions::default())
    }

    /// A client over `transport`. It subscribes to the transport at once; call
    /// [`connect`](Client::connect) to open the connection.
    pub fn with_options(transport: Arc<dyn Transport>, options: ClientOptions) -> Client {
        let (phase, _) = watch::channel(Phase::Idle);
        let backlog = Backlog::new(options.inbound_backlog);
        transport.pace_inbound(Arc::clone(&backlog));
        let machine = ConnectionMachine::new(AppInfo {
            name: options.name.clone(),
            version: options.version.clone(),
        });
        let inner = Arc::new(Inner {
            transport: Arc::clone(&transport),
            options,
            core: Mutex::new(Core {
                machine,
                pending: HashMap::new(),
                state: ConnectionState::Disconnected,
            }),
            phase,
            events: Subscribers::new(),
            event_streams: Mutex::new(Vec::new()),
            channels: ChannelRoutes::new(&backlog),
            backlog,
            credit: Notify::new(),
            states: Subscribers::new(),
            next_id: AtomicU64::new(1),
            runtime: Mutex::new(Handle::try_current().ok()),
            transport_subscriptions: Mutex::new(Vec::new()),
        });
        // Weak: the transport keeps its handlers, and the handlers must not keep the client.
        let weak: Weak<Inner> = Arc::downgrade(&inner);
        let (on_text, on_binary) = (weak.clone(), weak.clone());
        let subscriptions = [
            transport.on_message(Box::new(move |frame| {
                if let Some(inner) = on_text.upgrade() {
                    inner.on_frame(frame);
                }
            })),
            transport.on_binary(Box::new(move |message| {
                if let Some(inner) = on_binary.upgrade() {
                    inner.on_binary(message);
                }
            })),
            transport.on_state_change(Box::new(move |state| {
                if let Some(inner) = weak.upgrade() {
                    inner.on_transport_state(state);
                }
            })),
        ];
        lock(&inner.transport_subscriptions).extend(subscriptions);
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
        lock(&self.inner.core).machine.handshake().cloned()
    }

    /// Where a reconnect would resume from.
    pub fn resume_point(&self) -> Option<ResumePoint> {
        lock(&self.inner.core).machine.resume_point().cloned()
    }

    /// The transport underneath.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.inner.transport
    }

    /// Calls the catalog method `M` with its typed params and returns its typed result.
    ///
    /// ```no_run
    /// # async fn run(client: carrier_client::Client) -> Result<(), carrier_client::ClientError> {
    /// use carrier_protocol::catalog::def;
    /// use carrier_protocol::methods::{Empty, HistoryParams};
    ///
    /// let status = client.call::<def::SessionStatus>(Empty {}).await?;
    /// let history = client.call::<def::SessionHistory>(HistoryParams { limit: Some(10) }).await?;
    /// println!("{:?}: {} entries", status.state, history.entries.len());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call<M: MethodDef>(&self, params: M::Params) -> Result<M::Result, ClientError>
    where
        M::Params: Serialize,
    {
        let method = M::METHOD.name();
        let params =
            serde_json::to_value(&params).map_err(|error| ClientError::MalformedResponse {
                method: method.to_owned(),
                reason: format!("cannot serialize the params: {error}"),
            })?;
        let result = self.request(method, params).await?;
        serde_json::from_value(result).map_err(|error| ClientError::MalformedResponse {
            method: method.to_owned(),
            reason: error.to_string(),
        })
    }

    /// `session.submit {prompt}`: starts a turn and returns its `turn_id` (the output streams
    /// as session events).
    pub async fn submit(&self, prompt: impl Into<String>) -> Result<String, ClientError> {
        let params = SubmitParams {
            prompt: prompt.into(),
            options: None,
        };
        Ok(self.call::<def::SessionSubmit>(params).await?.turn_id)
    }

    /// `session.abort`: ends the turn `turn_id` (the id [`submit`](Client::submit) returned).
    /// The agent stops and the turn ends with `turn_completed {aborted: true}`; an open
    /// permission prompt of the turn is resolved as denied. Fails with `not_found` when that
    /// turn is not running (it ended already).
    pub async fn abort(&self, turn_id: impl Into<String>) -> Result<(), ClientError> {
        let params = AbortParams {
            turn_id: Some(turn_id.into()),
        };
        self.call::<def::SessionAbort>(params).await.map(drop)
    }

    /// `session.permission.respond`: answers the permission prompt `request_id`.
    pub async fn respond(
        &self,
        request_id: impl Into<String>,
        decision: Decision,
    ) -> Result<(), ClientError> {
        let params = PermissionRespondParams::decide(request_id, decision);
        self.call::<def::SessionPermissionRespond>(params)
            .await
            .map(drop)
    }

    /// `session.permission.respond` naming one of the prompt's `options` (an ACP agent's;
    /// protocol 1.2, feature `agent_updates`): answers the permission prompt `request_id` with
    /// the option `option_id`.
    pub async fn respond_option(
        &self,
        request_id: impl Into<String>,
        option_id: impl Into<String>,
    ) -> Result<(), ClientError> {
        let params = PermissionRespondParams::choose(request_id, option_id);
        self.call::<def::SessionPermissionRespond>(params)
            .await
            .map(drop)
    }

    /// Calls `method` by name with JSON `params` (for methods outside the catalog, or tools
    /// that pass JSON through), using the default timeout.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.inner
            .request(method, params, self.inner.options.request_timeout)
            .await
    }

    /// [`request`](Client::request), waiting at most `timeout` (which includes waiting for a
    /// reconnect to finish).
    pub async fn request_with_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        self.inner.request(method, params, timeout).await
    }

    /// Session events, connection states ([`ClientEvent::State`]: connecting, connected,
    /// reconnecting after a break, disconnected), resume outcomes and other notices, from now
    /// on, as a stream. What it holds unread counts against
    /// [`ClientOptions::inbound_backlog`]: past it the connection stops reading (responses
    /// included) until the stream is read or dropped.
    pub fn events(&self) -> EventStream {
        let (tx, rx) = backlog_stream(&self.inner.backlog);
        lock(&self.inner.event_streams).push(tx);
        rx
    }

    /// Bytes received for this client's streams and not yet read from them. Once it passes
    /// [`ClientOptions::inbound_backlog`] the connection stops reading until it drops again.
    pub fn inbound_held(&self) -> usize {
        self.inner.backlog.held()
    }

    /// Registers a handler for the same events as [`events`](Client::events). Handlers run on
    /// the transport's task and must not block.
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

//! A [`Transport`] over any socket a [`Connector`] can open, with the reconnect policy of
//! docs/protocol.md, "Client behaviour", built in.
//!
//! The policy lives here, not in the WebSocket code, so it is exercised by the same in-memory
//! sockets the reference tests use, and a new socket kind (a pipe, native messaging) only has to
//! implement [`Connector`] to get it.
//!
//! Per open socket there is exactly one writer task, which owns the socket's write half and
//! drains its queue; `send` only pushes onto that queue, so it is synchronous and frames leave
//! in the order they were sent. The queue is bounded in bytes ([`OutboundBudget`]): every text
//! or binary frame holds room for its bytes until it is written, and a send without room fails
//! (or, through [`Transport::reserve`], waits). One supervisor task per `connect()` reads inbound frames,
//! notices breaks and runs the reconnect loop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::backlog::Backlog;
use super::backoff::Backoff;
use super::budget::OutboundBudget;
use super::socket::{
    control, echo_code, write_all, Connector, Incoming, Outgoing, OwedPong, Queued, Socket,
    SocketReader,
};
use super::subscribers::{lock, Subscribers};
use super::transport::Room;
use super::transport::{
    BinaryHandler, CloseInfo, ConnectionState, MessageHandler, StateHandler, Subscription,
    Transport, TransportError,
};

/// A [`Transport`] that reconnects after unexpected breaks.
///
/// - `connect()` dials once; a failure is returned and nothing is retried in the background.
/// - After a break (read or write error, or a peer close with any code but 1008) the state goes
///   to `connecting` and attempts follow after [`Backoff`] delays (1 s, 2 s, 4 s, 8 s, 16 s, then
///   every 30 s), measured with `tokio::time`, so `tokio::time::pause()` controls them. A
///   successful attempt resets the schedule and reports `connected` again.
/// - A peer close with 1008 (unauthorized, role refused) ends in `disconnected` with no retry;
///   [`last_close`](Transport::last_close) tells why.
/// - A message too large for the client ([`TransportError::MessageTooLarge`],
///   [`TransportError::ParsedTooLarge`]) is answered with close 1009 and ends in
///   `disconnected` with no retry; [`last_error`](Transport::last_error) tells why.
/// - `disconnect()` (or dropping the transport) sends close 1000 and stops everything.
/// - The outbound queue holds at most [`DEFAULT_OUTBOUND_BUDGET`] bytes of frames (see
///   [`with_outbound_budget`](Self::with_outbound_budget)); a `send` past it fails with
///   [`TransportError::BufferFull`], and [`Transport::reserve`] waits for room instead.
/// - [`without_reconnect`](Self::without_reconnect) makes a break final: state `disconnected`,
///   the reason in [`last_close`](Transport::last_close) or
///   [`last_error`](Transport::last_error).
pub struct ReconnectingTransport<C: Connector> {
    shared: Arc<Shared<C>>,
}

struct Shared<C> {
    connector: C,
    state: Mutex<ConnectionState>,
    state_handlers: Subscribers<ConnectionState>,
    message_handlers: Subscribers<Value>,
    binary_handlers: Subscribers<Bytes>,
    // The open socket's queue; `None` whenever no socket is open, which is what makes `send`
    // fail instead of queueing into a dead socket. Cleared before `connecting` is reported and
    // set before `connected` is reported.
    outbound: Mutex<Option<mpsc::UnboundedSender<Queued>>>,
    budget: OutboundBudget,
    reconnect: bool,
    backlog: Mutex<Option<Arc<Backlog>>>,
    last_close: Mutex<Option<CloseInfo>>,
    last_error: Mutex<Option<TransportError>>,
    running: Mutex<Option<Running>>,
    // Serializes connect/disconnect so two callers cannot start two supervisors.
    lifecycle: tokio::sync::Mutex<()>,
}

struct Running {
    stop: oneshot::Sender<()>,
    supervisor: JoinHandle<()>,
}

/// An installed socket: its read half, the handles of its writer task, and the pong it owes.
struct Live {
    reader: Box<dyn SocketReader>,
    queue: mpsc::UnboundedSender<Queued>,
    writer: JoinHandle<Result<(), TransportError>>,
    pong: Arc<OwedPong>,
}

/// Why a socket stopped being read.
enum End {
    Stopped,
    Closed(Option<CloseInfo>),
    Broken(TransportError),
}

/// How long `disconnect()` waits for the close frame to be written.
const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// The default bound of the outbound queue: 8 MiB of frames not yet written.
pub const DEFAULT_OUTBOUND_BUDGET: usize = 8 << 20;

/// Lets a writer that was handed a close frame write it, within [`CLOSE_FLUSH_TIMEOUT`]: a peer
/// that stopped reading cannot keep the old socket open.
fn end_writer_after_close(mut writer: JoinHandle<Result<(), TransportError>>) {
    tokio::spawn(async move {
        if tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, &mut writer)
            .await
            .is_err()
        {
            writer.abort();
        }
    });
}

impl<C: Connector> ReconnectingTransport<C> {
    /// A disconnected transport that will open sockets with `connector`, reconnecting after
    /// breaks, with an outbound queue of [`DEFAULT_OUTBOUND_BUDGET`] bytes.
    pub fn new(connector: C) -> Self {
        Self::build(connector, DEFAULT_OUTBOUND_BUDGET)
    }

    /// The same transport with an outbound queue of at most `bytes` (at least 1; a frame
    /// larger than the whole budget is sent once the queue is empty). Configure before the
    /// transport is shared.
    pub fn with_outbound_budget(mut self, bytes: usize) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.budget = OutboundBudget::new(bytes);
        }
        self
    }

    /// The same transport, but a break is final (for one-shot tools such as a pipe).
    /// Configure before the transport is shared.
    pub fn without_reconnect(mut self) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.reconnect = false;
        }
        self
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.shared.budget.queued()
    }

    fn build(connector: C, budget: usize) -> Self {
        ReconnectingTransport {
            shared: Arc::new(Shared {
                connector,
                state: Mutex::new(ConnectionState::Disconnected),
                state_handlers: Subscribers::new(),
                message_handlers: Subscribers::new(),
                binary_handlers: Subscribers::new(),
                outbound: Mutex::new(None),
                budget: OutboundBudget::new(budget),
                reconnect: true,
                backlog: Mutex::new(None),
                last_close: Mutex::new(None),
                last_error: Mutex::new(None),
                running: Mutex::new(None),
                lifecycle: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The connector this transport dials with.
    pub fn connector(&self) -> &C {
        &self.shared.connector
    }
}

impl<C: Connector> Drop for ReconnectingTransport<C> {
    fn drop(&mut self) {
        // The supervisor holds the shared state, so without this it would keep reconnecting
        // for a transport nobody can reach any more.
        if let Some(running) = lock(&self.shared.running).take() {
            let _ = running.stop.send(());
        }
    }
}

impl<C: Connector> Transport for ReconnectingTransport<C> {
    fn state(&self) -> ConnectionState {
        *lock(&self.shared.state)
    }

    fn connect(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(Shared::connect(&self.shared))
    }

    fn disconnect(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shared.disconnect())
    }

    fn send(&self, frame: &Value) -> Result<(), TransportError> {
        if !frame.is_object() {
            return Err(TransportError::NotAnObject);
        }
        let text = serde_json::to_string(frame).map_err(|e| TransportError::Io(e.to_string()))?;
        let room = self.shared.budget.try_reserve(text.len())?;
        self.shared.enqueue(Outgoing::Text(text), room)
    }

    fn on_message(&self, handler: MessageHandler) -> Subscription {
        self.shared.message_handlers.subscribe(Arc::from(handler))
    }

    fn on_state_change(&self, handler: StateHandler) -> Subscription {
        let handler: Arc<dyn Fn(&ConnectionState) + Send + Sync> =
            Arc::new(move |state: &ConnectionState| handler(*state));
        self.shared.state_handlers.subscribe(handler)
    }

    fn send_binary(&self, frame: Bytes) -> Result<(), TransportError> {
        let room = self.shared.budget.try_reserve(frame.len())?;
        self.shared.enqueue(Outgoing::Binary(frame), room)
    }

    fn on_binary(&self, handler: BinaryHandler) -> Subscription {
        self.shared.binary_handlers.subscribe(Arc::from(handler))
    }

    fn last_close(&self) -> Option<CloseInfo> {
        lock(&self.shared.last_close).clone()
    }

    fn last_error(&self) -> Option<TransportError> {
        lock(&self.shared.last_error).clone()
    }

    fn reserve(&self, bytes: usize) -> BoxFuture<'_, Result<Room, TransportError>> {
        Box::pin(self.shared.budget.reserve(bytes))
    }

    fn try_reserve(&self, bytes: usize) -> Result<Room, TransportError> {
        self.shared.budget.try_reserve(bytes)
    }

    fn send_text_in(&self, text: String, room: Room) -> Result<(), TransportError> {
        self.shared.enqueue(Outgoing::Text(text), room)
    }

    fn send_binary_in(&self, frame: Bytes, room: Room) -> Result<(), TransportError> {
        self.shared.enqueue(Outgoing::Binary(frame), room)
    }

    fn pace_inbound(&self, backlog: Arc<Backlog>) {
        *lock(&self.shared.backlog) = Some(backlog);
    }
}

impl<C: Connector> Shared<C> {
    async fn connect(self: &Arc<Self>) -> Result<(), TransportError> {
        let _lifecycle = self.lifecycle.lock().await;
        {
            let mut running = lock(&self.running);
            // A supervisor that reported `disconnected` on its own (a refusal) is finishing and
            // touches nothing any more; anything else is a live connection.
            if running.is_some() && *lock(&self.state) != ConnectionState::Disconnected {
                return Ok(());
            }
            *running = None;
        }
        *lock(&self.last_close) = None;
        *lock(&self.last_error) = None;
        self.set_state(ConnectionState::Connecting);
        let socket = match self.connector.connect().await {
            Ok(socket) => socket,
            Err(error) => {
                self.set_state(ConnectionState::Disconnected);
                return Err(error);
            }
        };
        let live = self.install(socket);
        self.set_state(ConnectionState::Connected);
        let (stop, stopped) = oneshot::channel();
        let supervisor = tokio::spawn(Arc::clone(self).supervise(live, stopped));
        *lock(&self.running) = Some(Running { stop, supervisor });
        Ok(())
    }

    async fn disconnect(&self) {
        let _lifecycle = self.lifecycle.lock().await;
        let running = lock(&self.running).take();
        if let Some(running) = running {
            let _ = running.stop.send(());
            if let Err(error) = running.supervisor.await {
                tracing::warn!(%error, "transport supervisor ended abnormally");
            }
        }
        *lock(&self.outbound) = None;
        self.set_state(ConnectionState::Disconnected);
    }

    fn enqueue(&self, message: Outgoing, room: Room) -> Result<(), TransportError> {
        match lock(&self.outbound).as_ref() {
            Some(queue) => queue
                .send(Queued::Message(message, room))
                .map_err(|_| TransportError::NotConnected),
            None => Err(TransportError::NotConnected),
        }
    }

    fn set_state(&self, next: ConnectionState) {
        let changed = {
            let mut state = lock(&self.state);
            let changed = *state != next;
            *state = next;
            changed
        };
        if changed {
            self.state_handlers.emit(&next);
        }
    }

    /// Starts the socket's writer task and opens the send queue.
    fn install(&self, socket: Socket) -> Live {
        let (queue, pending) = mpsc::unbounded_channel();
        let pong = Arc::new(OwedPong::default());
        let writer = tokio::spawn(write_all(socket.writer, pending, Arc::clone(&pong)));
        *lock(&self.outbound) = Some(queue.clone());
        Live {
            reader: socket.reader,
            queue,
            writer,
            pong,
        }
    }

    async fn supervise(self: Arc<Self>, mut live: Live, mut stop: oneshot::Receiver<()>) {
        let mut backoff = Backoff::new();
        loop {
            let end = tokio::select! {
                _ = &mut stop => End::Stopped,
                end = self.pump(&mut live) => end,
            };
            *lock(&self.outbound) = None;
            match end {
                End::Stopped => {
                    let _ = live.queue.send(control(Outgoing::Close(CloseInfo {
                        code: 1000,
                        reason: String::new(),
                    })));
                    drop(live.queue);
                    let _ = tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, live.writer).await;
                    return;
                }
                End::Closed(info) => {
                    // Echo the close (RFC 6455 section 5.5.1); best effort, the peer may be gone.
                    let _ = live.queue.send(control(Outgoing::Close(CloseInfo {
                        code: echo_code(info.as_ref()),
                        reason: String::new(),
                    })));
                    end_writer_after_close(live.writer);
                    let refused = info.as_ref().is_some_and(CloseInfo::is_refusal);
                    tracing::info!(close = ?info, "peer closed the connection");
                    *lock(&self.last_close) = info;
                    if refused || !self.reconnect {
                        self.set_state(ConnectionState::Disconnected);
                        return;
                    }
                }
                End::Broken(error) if error.is_oversize() => {
                    tracing::info!(%error, "closing the connection: a message too large");
                    // 1009 (RFC 6455 §7.4.1): the message is too big to process. No reconnect:
                    // the server would send it again on the next connection.
                    let _ = live.queue.send(control(Outgoing::Close(CloseInfo {
                        code: 1009,
                        reason: String::new(),
                    })));
                    let Live { reader, writer, .. } = live;
                    drop(reader);
                    end_writer_after_close(writer);
                    *lock(&self.last_error) = Some(error);
                    self.set_state(ConnectionState::Disconnected);
                    return;
                }
                End::Broken(error) => {
                    tracing::info!(%error, "connection broke");
                    // Both halves go now, so the socket closes at once (a connection failed
                    // for a protocol violation must not linger through the reconnect delay).
                    let Live { reader, writer, .. } = live;
                    writer.abort();
                    drop(reader);
                    *lock(&self.last_error) = Some(error);
                    if !self.reconnect {
                        self.set_state(ConnectionState::Disconnected);
                        return;
                    }
                }
            }
            self.set_state(ConnectionState::Connecting);
            live = loop {
                let delay = backoff.next_delay();
                tracing::debug!(?delay, "reconnecting after a delay");
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(delay) => {}
                }
                let attempt = tokio::select! {
                    _ = &mut stop => return,
                    attempt = self.connector.connect() => attempt,
                };
                match attempt {
                    Ok(socket) => {
                        backoff.reset();
                        break self.install(socket);
                    }
                    Err(error) => tracing::debug!(%error, "reconnect attempt failed"),
                }
            };
            *lock(&self.last_close) = None;
            *lock(&self.last_error) = None;
            self.set_state(ConnectionState::Connected);
        }
    }

    /// Delivers inbound messages until the socket ends.
    async fn pump(&self, live: &mut Live) -> End {
        loop {
            tokio::select! {
                // Reads first: a peer that closes (say with 1008) and hangs up makes the next
                // write fail too, and the close frame is the one that says why.
                biased;
                read = live.reader.read() => {
                    if let Some(end) = self.deliver(live, read) {
                        return end;
                    }
                    // The application's streams are over their budget: read on once it has
                    // caught up (a write failure still ends the socket meanwhile).
                    let backlog = lock(&self.backlog).clone();
                    if let Some(backlog) = backlog {
                        tokio::select! {
                            biased;
                            () = backlog.room() => {}
                            written = &mut live.writer => return self.writer_ended(live, written),
                        }
                    }
                }
                written = &mut live.writer => return self.writer_ended(live, written),
            }
        }
    }

    fn writer_ended(
        &self,
        live: &mut Live,
        written: Result<Result<(), TransportError>, tokio::task::JoinError>,
    ) -> End {
        let error = match written {
            Ok(Err(error)) => error,
            Ok(Ok(())) => TransportError::Io("the writer stopped".into()),
            Err(error) => TransportError::Io(format!("the writer task failed: {error}")),
        };
        self.drain_after_write_failure(live, error)
    }

    /// Handles one read; `Some` when the socket ended.
    fn deliver(&self, live: &Live, read: Result<Incoming, TransportError>) -> Option<End> {
        match read {
            Ok(Incoming::Text(text)) => self.deliver_text(&text),
            Ok(Incoming::Binary(payload)) => self.binary_handlers.emit(&payload),
            Ok(Incoming::Ping(payload)) => {
                if live.pong.owe(payload) {
                    let _ = live.queue.send(Queued::Pong);
                }
            }
            Ok(Incoming::Close(info)) => return Some(End::Closed(info)),
            Err(error) => return Some(End::Broken(error)),
        }
        None
    }

    /// After a failed write, delivers what was already received (it may end with the peer's
    /// close frame, which explains the failure better than the write error).
    fn drain_after_write_failure(&self, live: &mut Live, error: TransportError) -> End {
        while let Some(read) = live.reader.read().now_or_never() {
            if let Some(end) = self.deliver(live, read) {
                return match end {
                    End::Broken(_) => End::Broken(error),
                    other => other,
                };
            }
        }
        End::Broken(error)
    }

    fn deliver_text(&self, text: &[u8]) {
        match serde_json::from_slice::<Value>(text) {
            Ok(frame) if frame.is_object() => self.message_handlers.emit(&frame),
            Ok(_) => tracing::warn!(
                bytes = text.len(),
                "dropped an inbound text frame that is JSON but not an object"
            ),
            // The content is not logged: it may carry prompts or tokens.
            Err(error) => tracing::warn!(
                bytes = text.len(),
                %error,
                "dropped an inbound text frame that is not JSON"
            ),
        }
    }
}

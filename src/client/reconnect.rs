//! A [`Transport`] over any socket a [`Connector`] can open, with the reconnect policy of
//! SPEC section 11 built in.
//!
//! The policy lives here, not in the WebSocket code, so it is exercised by the same in-memory
//! sockets the reference tests use, and a new socket kind (a pipe, native messaging) only has to
//! implement [`Connector`] to get it.
//!
//! Per open socket there is exactly one writer task, which owns the socket's write half and
//! drains an unbounded queue; `send` only pushes onto that queue, so it is synchronous and frames
//! leave in the order they were sent. One supervisor task per `connect()` reads inbound frames,
//! notices breaks and runs the reconnect loop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::backoff::Backoff;
use super::subscribers::{lock, Subscribers};
use super::transport::{
    BinaryHandler, CloseInfo, ConnectionState, MessageHandler, StateHandler, Subscription,
    Transport, TransportError,
};
use crate::protocol::close::CloseCode;

/// One message handed to a socket's write half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    /// A text frame (one serialized JSON object).
    Text(String),
    /// A binary frame.
    Binary(Bytes),
    /// The answer to an inbound ping, with its payload.
    Pong(Bytes),
    /// A close frame; nothing is written after it.
    Close(CloseInfo),
}

/// One message read from a socket's read half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A whole (reassembled) text message.
    Text(Bytes),
    /// A whole (reassembled) binary message.
    Binary(Bytes),
    /// A ping; the transport answers it with [`Outbound::Pong`].
    Ping(Bytes),
    /// The peer closed the socket, with its code and reason when it sent one.
    Close(Option<CloseInfo>),
}

/// The read half of an open socket.
pub trait SocketReader: Send + 'static {
    /// The next inbound message. An error means the socket is broken.
    fn read(&mut self) -> BoxFuture<'_, Result<Inbound, TransportError>>;
}

/// The write half of an open socket, owned by the socket's single writer task.
pub trait SocketWriter: Send + 'static {
    /// Writes (and flushes) one message. An error means the socket is broken.
    fn write(&mut self, message: Outbound) -> BoxFuture<'_, Result<(), TransportError>>;
}

/// An open socket, split in its two halves.
pub struct Socket {
    /// Where inbound messages come from.
    pub reader: Box<dyn SocketReader>,
    /// Where outbound messages go.
    pub writer: Box<dyn SocketWriter>,
}

/// Opens sockets: called once by `connect()` and again for every reconnect attempt.
pub trait Connector: Send + Sync + 'static {
    /// Dials once. No retries here; the caller owns the retry policy.
    fn connect(&self) -> BoxFuture<'_, Result<Socket, TransportError>>;
}

/// A [`Transport`] that reconnects after unexpected breaks.
///
/// - `connect()` dials once; a failure is returned and nothing is retried in the background.
/// - After a break (read or write error, or a peer close with any code but 1008) the state goes
///   to `connecting` and attempts follow after [`Backoff`] delays (1 s, 2 s, 4 s, 8 s, 16 s, then
///   every 30 s), measured with `tokio::time`, so `tokio::time::pause()` controls them. A
///   successful attempt resets the schedule and reports `connected` again.
/// - A peer close with 1008 (unauthorized, role refused) ends in `disconnected` with no retry;
///   [`last_close`](Transport::last_close) tells why.
/// - `disconnect()` (or dropping the transport) sends close 1000 and stops everything.
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
    outbound: Mutex<Option<mpsc::UnboundedSender<Outbound>>>,
    last_close: Mutex<Option<CloseInfo>>,
    running: Mutex<Option<Running>>,
    // Serializes connect/disconnect so two callers cannot start two supervisors.
    lifecycle: tokio::sync::Mutex<()>,
}

struct Running {
    stop: oneshot::Sender<()>,
    supervisor: JoinHandle<()>,
}

/// An installed socket: its read half and the handles of its writer task.
struct Live {
    reader: Box<dyn SocketReader>,
    queue: mpsc::UnboundedSender<Outbound>,
    writer: JoinHandle<Result<(), TransportError>>,
}

/// Why a socket stopped being read.
enum End {
    Stopped,
    Closed(Option<CloseInfo>),
    Broken(TransportError),
}

/// How long `disconnect()` waits for the close frame to be written.
const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

impl<C: Connector> ReconnectingTransport<C> {
    /// A disconnected transport that will open sockets with `connector`.
    pub fn new(connector: C) -> Self {
        ReconnectingTransport {
            shared: Arc::new(Shared {
                connector,
                state: Mutex::new(ConnectionState::Disconnected),
                state_handlers: Subscribers::new(),
                message_handlers: Subscribers::new(),
                binary_handlers: Subscribers::new(),
                outbound: Mutex::new(None),
                last_close: Mutex::new(None),
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
        self.shared.enqueue(Outbound::Text(text))
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
        self.shared.enqueue(Outbound::Binary(frame))
    }

    fn on_binary(&self, handler: BinaryHandler) -> Subscription {
        self.shared.binary_handlers.subscribe(Arc::from(handler))
    }

    fn last_close(&self) -> Option<CloseInfo> {
        lock(&self.shared.last_close).clone()
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

    fn enqueue(&self, message: Outbound) -> Result<(), TransportError> {
        match lock(&self.outbound).as_ref() {
            Some(queue) => queue
                .send(message)
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
        let writer = tokio::spawn(write_all(socket.writer, pending));
        *lock(&self.outbound) = Some(queue.clone());
        Live {
            reader: socket.reader,
            queue,
            writer,
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
                    let _ = live.queue.send(Outbound::Close(CloseInfo {
                        code: 1000,
                        reason: String::new(),
                    }));
                    drop(live.queue);
                    let _ = tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, live.writer).await;
                    return;
                }
                End::Closed(info) => {
                    // Echo the close (RFC 6455 section 5.5.1); best effort, the peer may be gone.
                    let _ = live.queue.send(Outbound::Close(CloseInfo {
                        code: echo_code(info.as_ref()),
                        reason: String::new(),
                    }));
                    // The writer ends after the echo; bound it so a peer that stopped reading
                    // cannot keep the old socket open.
                    let mut writer = live.writer;
                    tokio::spawn(async move {
                        if tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, &mut writer)
                            .await
                            .is_err()
                        {
                            writer.abort();
                        }
                    });
                    let refused = info.as_ref().is_some_and(CloseInfo::is_refusal);
                    tracing::info!(close = ?info, "peer closed the connection");
                    *lock(&self.last_close) = info;
                    if refused {
                        self.set_state(ConnectionState::Disconnected);
                        return;
                    }
                }
                End::Broken(error) => {
                    tracing::info!(%error, "connection broke");
                    // Both halves go now, so the socket closes at once (a connection failed
                    // for a protocol violation must not linger through the reconnect delay).
                    let Live { reader, writer, .. } = live;
                    writer.abort();
                    drop(reader);
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
                }
                written = &mut live.writer => {
                    let error = match written {
                        Ok(Err(error)) => error,
                        Ok(Ok(())) => TransportError::Io("the writer stopped".into()),
                        Err(error) => TransportError::Io(format!("the writer task failed: {error}")),
                    };
                    return self.drain_after_write_failure(live, error);
                }
            }
        }
    }

    /// Handles one read; `Some` when the socket ended.
    fn deliver(&self, live: &Live, read: Result<Inbound, TransportError>) -> Option<End> {
        match read {
            Ok(Inbound::Text(text)) => self.deliver_text(&text),
            Ok(Inbound::Binary(payload)) => self.binary_handlers.emit(&payload),
            Ok(Inbound::Ping(payload)) => {
                let _ = live.queue.send(Outbound::Pong(payload));
            }
            Ok(Inbound::Close(info)) => return Some(End::Closed(info)),
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

/// The code to echo for a peer's close: its own, unless it is one a peer may not send (the
/// protocol's rule: reserved, unassigned, 1005/1006/1015, or outside the valid ranges).
fn echo_code(info: Option<&CloseInfo>) -> u16 {
    match info.map(|info| CloseCode(info.code)) {
        Some(code) if code.may_be_sent() => code.as_u16(),
        _ => CloseCode::NORMAL.as_u16(),
    }
}

/// The socket's single writer: drains the queue in order until a close is written, the queue is
/// dropped, or a write fails.
async fn write_all(
    mut writer: Box<dyn SocketWriter>,
    mut pending: mpsc::UnboundedReceiver<Outbound>,
) -> Result<(), TransportError> {
    while let Some(message) = pending.recv().await {
        let closing = matches!(message, Outbound::Close(_));
        writer.write(message).await?;
        if closing {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(code: u16) -> CloseInfo {
        CloseInfo {
            code,
            reason: String::new(),
        }
    }

    #[test]
    fn a_close_is_echoed_with_its_code_unless_that_code_must_not_be_sent() {
        assert_eq!(echo_code(Some(&close(1001))), 1001);
        assert_eq!(echo_code(Some(&close(1008))), 1008);
        assert_eq!(echo_code(Some(&close(4000))), 4000);
        for reserved in [1004, 1005, 1006, 1015, 1016, 2000, 2999, 999, 5000] {
            assert_eq!(echo_code(Some(&close(reserved))), 1000, "{reserved}");
        }
        assert_eq!(echo_code(None), 1000);
    }
}

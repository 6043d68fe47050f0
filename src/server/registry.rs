//! The payload-channel registry (SPEC section 7): named, host-declared channels, the
//! connections that receive them, inbound routing and the host-side [`ChannelHandle`].
//!
//! Outbound frames are encoded once and shared by every receiving connection: the payload
//! `Bytes` is reference-counted, never copied per receiver. Inbound binary payloads reach the
//! handler as a slice of the received message.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use dashmap::{DashMap, DashSet};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::bulk::BulkFrame;
use super::connection::send_protocol_error;
use super::outbound::DeliveryError;
use super::profile::{Connection, ConnectionId};
use super::shared::Shared;
use crate::protocol::channel::{ChannelDescriptor, DeliveryClass};
use crate::protocol::channel_frame::{self, ChannelFrameError, EncodedFrame, FrameBody};
use crate::protocol::error::ProtocolErrorCode;
use crate::protocol::Role;

/// Default per-connection budget of a lossy channel's queued frames.
pub const DEFAULT_LOSSY_BUDGET: usize = 1 << 20;

/// A host-side channel operation that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// Another open channel already has this name.
    #[error("a channel named {0:?} is already registered")]
    NameTaken(String),
    /// The name is empty or longer than 255 bytes.
    #[error("channel names are 1 to 255 bytes of UTF-8, got {0} bytes")]
    InvalidName(usize),
    /// The event is not in the descriptor's `events`.
    #[error("event {event:?} is not declared on channel {channel:?}")]
    UndeclaredEvent {
        /// Channel name.
        channel: String,
        /// The event.
        event: String,
    },
    /// Binary on a channel that did not declare it.
    #[error("channel {0:?} does not declare binary frames")]
    BinaryNotDeclared(String),
    /// The channel was closed.
    #[error("channel {0:?} is closed")]
    Closed(String),
    /// No admitted, handshaken connection with that id.
    #[error("no connection {0}")]
    UnknownConnection(ConnectionId),
    /// The frame could not be encoded.
    #[error(transparent)]
    Encode(#[from] ChannelFrameError),
    /// A synchronous send on a bulk channel whose window is full (on the connection, or on one
    /// of the receivers of a broadcast): nothing was queued. The async sends wait instead.
    #[error("channel {0:?}: the bulk window is full; nothing was queued")]
    WindowFull(String),
    /// A bulk send was made on a channel that is not `bulk`.
    #[error("channel {0:?} is not a bulk channel")]
    NotBulk(String),
    /// The connection did not take the frame (closed, or failed as a slow reader).
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

/// What a client sent on a channel, or that it went away.
#[derive(Debug, Clone, PartialEq)]
pub enum InboundBody {
    /// Opaque bytes: a slice of the received message, not a copy.
    Binary(Bytes),
    /// A declared event.
    Event {
        /// Event name.
        event: String,
        /// Event payload.
        payload: Value,
    },
    /// The connection, which had sent on this channel, has ended.
    Disconnected,
}

/// One inbound channel message with the connection it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    /// The sending connection.
    pub connection: ConnectionId,
    /// The client's own seq for this channel (0 for `Disconnected`).
    pub seq: u32,
    /// What arrived.
    pub body: InboundBody,
}

type Handler = Arc<dyn Fn(Inbound) + Send + Sync>;

enum Sink {
    Handler(Handler),
    Stream(mpsc::Sender<Inbound>),
}

struct ChannelEntry {
    descriptor: ChannelDescriptor,
    name: Arc<str>,
    lossy_budget: AtomicUsize,
    /// The server's outbound seq, shared by binary and event frames, across all connections.
    seq: AtomicU32,
    /// Held while a frame is numbered and queued, so every receiver sees seqs in order.
    send_lock: Mutex<()>,
    /// Held by a bulk send from numbering its frame until every receiver has queued it, across
    /// the waits for room, so a bulk channel's frames keep their order on every connection.
    bulk_order: tokio::sync::Mutex<()>,
    closed: AtomicBool,
    sink: Mutex<Option<Arc<Sink>>>,
    /// Connections that have sent on this channel: told when they disconnect.
    senders: DashSet<ConnectionId>,
}

/// The registry of channels and of the connections that receive them. Cheap to clone.
#[derive(Clone, Default)]
pub struct ChannelRegistry {
    inner: Arc<RegistryInner>,
}

#[derive(Default)]
struct RegistryInner {
    channels: DashMap<String, Arc<ChannelEntry>>,
    /// Handshaken connections: the only channel sinks. A snapshot replaced on attach/detach,
    /// so a broadcast iterates it without holding a lock (a send that fails a connection
    /// detaches it from inside the loop).
    sinks: std::sync::RwLock<Arc<Vec<Connection>>>,
    /// The same connections by id, for targeted sends. Entries are cloned out, never held.
    by_id: DashMap<ConnectionId, Connection>,
}

impl ChannelRegistry {
    /// Declares a channel. Its name must be free (a closed channel frees its name).
    pub fn register(&self, descriptor: ChannelDescriptor) -> Result<ChannelHandle, ChannelError> {
        let len = descriptor.name.len();
        if len == 0 || len > channel_frame::MAX_CHANNEL_NAME {
            return Err(ChannelError::InvalidName(len));
        }
        let entry = Arc::new(ChannelEntry {
            name: Arc::from(descriptor.name.as_str()),
            lossy_budget: AtomicUsize::new(DEFAULT_LOSSY_BUDGET),
            descriptor,
            seq: AtomicU32::new(0),
            send_lock: Mutex::new(()),
            bulk_order: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
            sink: Mutex::new(None),
            senders: DashSet::new(),
        });
        match self.inner.channels.entry(entry.descriptor.name.clone()) {
            dashmap::Entry::Occupied(_) => {
                Err(ChannelError::NameTaken(entry.descriptor.name.clone()))
            }
            dashmap::Entry::Vacant(v) => {
                v.insert(entry.clone());
                Ok(ChannelHandle {
                    entry,
                    registry: Arc::downgrade(&self.inner),
                })
            }
        }
    }

    /// The declared descriptors, sorted by name.
    pub fn descriptors(&self) -> Vec<ChannelDescriptor> {
        let mut v: Vec<_> = self
            .inner
            .channels
            .iter()
            .map(|e| e.descriptor.clone())
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Ids of the connections that currently receive channel frames.
    pub fn sinks(&self) -> Vec<ConnectionId> {
        self.snapshot().iter().map(Connection::id).collect()
    }

    fn snapshot(&self) -> Arc<Vec<Connection>> {
        self.inner
            .sinks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn sink(&self, id: ConnectionId) -> Option<Connection> {
        self.inner.by_id.get(&id).map(|c| c.value().clone())
    }

    pub(crate) fn attach_sink(&self, conn: Connection) {
        let mut sinks = self.inner.sinks.write().unwrap_or_else(|e| e.into_inner());
        // Copy-on-write: the list is copied only while a broadcast holds the current snapshot;
        // otherwise it grows in place. Rebuilding it on every attach cost O(n) per connection
        // and left a trail of freed lists in the heap (issue 7: ~0.8 KiB resident per
        // connection at 1,000 connections).
        let list = Arc::make_mut(&mut *sinks);
        list.retain(|c| c.id() != conn.id());
        list.push(conn.clone());
        drop(sinks);
        self.inner.by_id.insert(conn.id(), conn);
    }

    /// Stops sending channel frames to a connection. Safe to call from inside a send.
    pub(crate) fn remove_sink(&self, id: ConnectionId) {
        self.inner.by_id.remove(&id);
        let mut sinks = self.inner.sinks.write().unwrap_or_else(|e| e.into_inner());
        if sinks.iter().any(|c| c.id() == id) {
            // Copy-on-write, as in `attach_sink`: a broadcast iterating the old snapshot keeps it.
            Arc::make_mut(&mut *sinks).retain(|c| c.id() != id);
        }
    }

    /// The connection has ended: remove it and tell the channels it sent on.
    pub(crate) fn detach_sink(&self, id: ConnectionId) {
        self.remove_sink(id);
        let entries: Vec<Arc<ChannelEntry>> = self
            .inner
            .channels
            .iter()
            .map(|e| e.value().clone())
            .collect();
        for entry in entries {
            if entry.senders.remove(&id).is_some() {
                entry.deliver_now(Inbound {
                    connection: id,
                    seq: 0,
                    body: InboundBody::Disconnected,
                });
            }
        }
    }

    /// Routes one inbound binary message of a handshaken connection. Every refusal is answered
    /// with a `protocol_error` event carrying the channel and seq; the connection stays open.
    ///
    /// Synchronous on purpose: a handler sink and a stream with room take the message at once.
    /// Only a full stream returns the rest of the delivery, which the reader awaits before it
    /// reads on (backpressure). An `async fn` here would make every connection's reader
    /// future carry this state for its whole life (~380 bytes per connection, issue 7).
    pub(crate) fn route(
        &self,
        conn: &Connection,
        msg: Bytes,
        shared: &Shared,
    ) -> Option<Backpressure> {
        let refuse =
            |code: ProtocolErrorCode, message: &str, channel: Option<&str>, seq: Option<u32>| {
                let mut extra = Map::new();
                if let Some(c) = channel {
                    extra.insert("channel".into(), Value::from(c));
                }
                if let Some(s) = seq {
                    extra.insert("seq".into(), Value::from(s));
                }
                send_protocol_error(conn, shared, code, message, extra);
            };
        let frame = match channel_frame::decode(msg.clone()) {
            Ok(f) => f,
            Err(e) => {
                let header = channel_frame::peek(&msg).ok();
                refuse(
                    ProtocolErrorCode::MalformedFrame,
                    &e.to_string(),
                    header.as_ref().map(|h| h.channel),
                    header.as_ref().map(|h| h.seq),
                );
                return None;
            }
        };
        let (channel, seq) = (frame.channel.as_str(), frame.seq);
        if conn.role() < Role::Drive {
            refuse(
                ProtocolErrorCode::Forbidden,
                "observe connections may not send channel frames",
                Some(channel),
                Some(seq),
            );
            return None;
        }
        let Some(entry) = self.inner.channels.get(channel).map(|e| e.clone()) else {
            refuse(
                ProtocolErrorCode::UnknownChannel,
                "no channel with this name is registered",
                Some(channel),
                Some(seq),
            );
            return None;
        };
        let body = match frame.body {
            FrameBody::Binary(bytes) if entry.descriptor.binary => InboundBody::Binary(bytes),
            FrameBody::Binary(_) => {
                refuse(
                    ProtocolErrorCode::BinaryNotDeclared,
                    "this channel does not accept binary frames",
                    Some(channel),
                    Some(seq),
                );
                return None;
            }
            FrameBody::Event { event, payload } if entry.descriptor.declares(&event) => {
                InboundBody::Event { event, payload }
            }
            FrameBody::Event { event, .. } => {
                let message = format!("event {event:?} is not declared on this channel");
                refuse(
                    ProtocolErrorCode::UndeclaredEvent,
                    &message,
                    Some(channel),
                    Some(seq),
                );
                return None;
            }
        };
        // Once per connection and channel: a read of the set is cheaper than a write per frame.
        if !entry.senders.contains(&conn.id()) {
            entry.senders.insert(conn.id());
        }
        entry.deliver(Inbound {
            connection: conn.id(),
            seq,
            body,
        })
    }
}

/// The rest of a delivery to a full inbound stream: the reader awaits it before reading on.
pub(crate) type Backpressure = Pin<Box<dyn Future<Output = ()> + Send>>;

impl ChannelEntry {
    fn current_sink(&self) -> Option<Arc<Sink>> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Delivers with backpressure: a full stream returns the wait for room, which pauses the
    /// sending connection's reader.
    fn deliver(&self, msg: Inbound) -> Option<Backpressure> {
        match self.current_sink().as_deref() {
            Some(Sink::Handler(h)) => h(msg),
            Some(Sink::Stream(tx)) => match tx.try_send(msg) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
                Err(mpsc::error::TrySendError::Full(msg)) => {
                    let tx = tx.clone();
                    return Some(Box::pin(async move {
                        let _ = tx.send(msg).await;
                    }));
                }
            },
            None => tracing::debug!(channel = %self.name, "inbound frame with no handler"),
        }
        None
    }

    /// Delivers without waiting (disconnect notices come from synchronous cleanup).
    fn deliver_now(&self, msg: Inbound) {
        match self.current_sink().as_deref() {
            Some(Sink::Handler(h)) => h(msg),
            Some(Sink::Stream(tx)) => {
                if let Err(mpsc::error::TrySendError::Full(msg)) = tx.try_send(msg) {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let _ = tx.send(msg).await;
                    });
                }
            }
            None => {}
        }
    }
}

/// The host's side of one registered channel.
#[derive(Clone)]
pub struct ChannelHandle {
    entry: Arc<ChannelEntry>,
    /// Weak: a channel's own handler usually captures its handle (echo, relay), and the
    /// registry owns that handler, so a strong link here would be a cycle that keeps the whole
    /// registry, its channels and their handlers alive after the transport is dropped.
    registry: Weak<RegistryInner>,
}

impl Drop for RegistryInner {
    /// Breaks the entry → handler → handle → entry cycle of self-referencing handlers, so that
    /// dropping the last registry frees every channel and handler.
    fn drop(&mut self) {
        for entry in self.channels.iter() {
            *entry.sink.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

impl ChannelHandle {
    /// The registry, while the transport that owns it lives.
    fn registry(&self) -> Option<ChannelRegistry> {
        self.registry
            .upgrade()
            .map(|inner| ChannelRegistry { inner })
    }

    /// Connections that currently receive this channel (none once the registry is gone).
    fn sinks(&self) -> Arc<Vec<Connection>> {
        self.registry().map(|r| r.snapshot()).unwrap_or_default()
    }

    /// The channel's descriptor.
    pub fn descriptor(&self) -> &ChannelDescriptor {
        &self.entry.descriptor
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.entry.descriptor.name
    }

    /// Sets the per-connection byte budget of a lossy channel (default 1 MiB).
    pub fn set_lossy_budget(&self, bytes: usize) {
        self.entry
            .lossy_budget
            .store(bytes.max(1), Ordering::Release);
    }

    /// Handles inbound frames with a callback, run on the sending connection's reader task
    /// (keep it short; spawn for slow work). Replaces any previous handler or stream.
    pub fn on_inbound(&self, handler: impl Fn(Inbound) + Send + Sync + 'static) {
        *self.entry.sink.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Arc::new(Sink::Handler(Arc::new(handler))));
    }

    /// Receives inbound frames as a stream. A full stream (`capacity` waiting) pauses the
    /// sending connection's reader: backpressure, not loss. Replaces any previous handler.
    pub fn inbound(&self, capacity: usize) -> mpsc::Receiver<Inbound> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        *self.entry.sink.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Arc::new(Sink::Stream(tx)));
        rx
    }

    fn check(&self, body: &FrameBody) -> Result<(), ChannelError> {
        let d = &self.entry.descriptor;
        if self.entry.closed.load(Ordering::Acquire) {
            return Err(ChannelError::Closed(d.name.clone()));
        }
        match body {
            FrameBody::Binary(_) if !d.binary => {
                Err(ChannelError::BinaryNotDeclared(d.name.clone()))
            }
            FrameBody::Event { event, .. } if !d.declares(event) => {
                Err(ChannelError::UndeclaredEvent {
                    channel: d.name.clone(),
                    event: event.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    fn next_seq(&self) -> u32 {
        self.entry.seq.fetch_add(1, Ordering::AcqRel)
    }

    fn queue(&self, conn: &Connection, frame: &EncodedFrame) -> Result<(), DeliveryError> {
        match self.entry.descriptor.delivery {
            DeliveryClass::Reliable => conn.send_binary(frame.head.clone(), frame.body.clone()),
            DeliveryClass::Lossy => conn.outbound().send_lossy(
                &self.entry.name,
                self.entry.lossy_budget.load(Ordering::Acquire),
                frame.head.clone(),
                frame.body.clone(),
            ),
            DeliveryClass::Bulk => conn.outbound().send_bulk(
                BulkFrame {
                    channel: self.entry.name.clone(),
                    head: frame.head.clone(),
                    body: frame.body.clone(),
                },
                self.entry.descriptor.bulk_window,
            ),
        }
    }

    fn is_bulk(&self) -> bool {
        self.entry.descriptor.delivery == DeliveryClass::Bulk
    }

    fn window(&self) -> usize {
        self.entry.descriptor.bulk_window
    }

    fn has_room(&self, conn: &Connection) -> bool {
        conn.outbound()
            .bulk_has_room(&self.entry.name, self.window())
    }

    /// The synchronous sends of a bulk channel: refused with [`ChannelError::WindowFull`] (and
    /// nothing queued) when a receiver's window is full, or while an async bulk send of this
    /// channel waits for room (it holds the channel's order).
    fn sync_bulk(&self, receivers: &[Connection], body: &FrameBody) -> Result<u32, ChannelError> {
        let full = || ChannelError::WindowFull(self.name().to_string());
        let _bulk = self.entry.bulk_order.try_lock().map_err(|_| full())?;
        let _order = self.order();
        if !receivers.iter().all(|c| self.has_room(c) || !c.is_open()) {
            return Err(full());
        }
        let (seq, frame) = self.number_and_encode(body)?;
        for conn in receivers {
            let _ = self.queue(conn, &frame);
        }
        Ok(seq)
    }

    /// Sends `body` to one connection of a bulk channel, waiting while the channel's window on
    /// that connection is full, and returns the frame's seq once it is queued. Errors when the
    /// connection closes before there is room ([`DeliveryError::Closed`]), or when the channel
    /// is not bulk. Cancel-safe: dropping the future before it resolves queues nothing.
    ///
    /// Streaming a file in 64 KiB frames at the pace the client reads it:
    ///
    /// ```no_run
    /// # async fn stream(handle: carrier::server::ChannelHandle, to: carrier::server::ConnectionId)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// use tokio::io::AsyncReadExt;
    /// let mut file = tokio::fs::File::open("model.bin").await?;
    /// let mut chunk = vec![0u8; 64 * 1024];
    /// loop {
    ///     let n = file.read(&mut chunk).await?;
    ///     if n == 0 {
    ///         break;
    ///     }
    ///     let body = carrier::protocol::channel_frame::FrameBody::Binary(
    ///         bytes::Bytes::copy_from_slice(&chunk[..n]),
    ///     );
    ///     handle.send_bulk_to(to, body).await?; // waits while the window is full
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn send_bulk_to(
        &self,
        connection: ConnectionId,
        body: FrameBody,
    ) -> Result<u32, ChannelError> {
        self.check(&body)?;
        if !self.is_bulk() {
            return Err(ChannelError::NotBulk(self.name().to_string()));
        }
        let conn = self
            .registry()
            .and_then(|r| r.sink(connection))
            .ok_or(ChannelError::UnknownConnection(connection))?;
        loop {
            // The wait for room holds nothing: sends to other connections go on meanwhile.
            conn.outbound()
                .bulk_room(&self.entry.name, self.window())
                .await?;
            // Numbered and queued at once, so this connection sees the channel's seqs in order
            // (a broadcast part way through its receivers holds `bulk_order` until done).
            let _bulk = self.entry.bulk_order.lock().await;
            let _order = self.order();
            if !self.has_room(&conn) {
                continue; // another sender took the room first: wait again
            }
            let (seq, frame) = self.number_and_encode(&body)?;
            self.queue(&conn, &frame)?;
            return Ok(seq);
        }
    }

    /// Sends `body` to every handshaken connection (but `except`) of a bulk channel, encoded
    /// once, waiting for each receiver's window in turn; receivers that close meanwhile are
    /// skipped. Returns the frame's seq once every receiver has queued it. Dropping the future
    /// part way leaves the frame queued on the receivers that had room until then.
    pub async fn broadcast_bulk_except(
        &self,
        except: Option<ConnectionId>,
        body: FrameBody,
    ) -> Result<u32, ChannelError> {
        self.check(&body)?;
        if !self.is_bulk() {
            return Err(ChannelError::NotBulk(self.name().to_string()));
        }
        let _bulk = self.entry.bulk_order.lock().await;
        let (seq, frame) = {
            let _order = self.order();
            self.number_and_encode(&body)?
        };
        for conn in self.sinks().iter().filter(|c| Some(c.id()) != except) {
            if conn
                .outbound()
                .bulk_room(&self.entry.name, self.window())
                .await
                .is_ok()
            {
                let _ = self.queue(conn, &frame);
            }
        }
        Ok(seq)
    }

    /// [`Self::broadcast_bulk_except`] to every handshaken connection.
    pub async fn broadcast_bulk(&self, body: FrameBody) -> Result<u32, ChannelError> {
        self.broadcast_bulk_except(None, body).await
    }

    /// Bytes of this (bulk) channel queued on `connection` now: at most the window plus one
    /// frame.
    pub fn bulk_queued_bytes(&self, connection: ConnectionId) -> Option<usize> {
        let conn = self.registry().and_then(|r| r.sink(connection))?;
        Some(conn.outbound().bulk_queued_bytes(&self.entry.name))
    }

    /// Sends to every handshaken connection; the frame is encoded once. Returns its seq.
    /// Connections that cannot take it fail on their own; the send still succeeds.
    pub fn broadcast(&self, body: FrameBody) -> Result<u32, ChannelError> {
        self.fan_out(None, body)
    }

    /// Sends to every handshaken connection except `except` (used by relays).
    pub fn broadcast_except(
        &self,
        except: ConnectionId,
        body: FrameBody,
    ) -> Result<u32, ChannelError> {
        self.fan_out(Some(except), body)
    }

    /// Held while a frame is numbered and queued, so every receiver sees seqs in order.
    fn order(&self) -> std::sync::MutexGuard<'_, ()> {
        self.entry
            .send_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the channel's next server seq and encodes the frame once. Call under [`Self::order`].
    fn number_and_encode(&self, body: &FrameBody) -> Result<(u32, EncodedFrame), ChannelError> {
        let seq = self.next_seq();
        Ok((
            seq,
            channel_frame::encode(&self.entry.descriptor.name, seq, body)?,
        ))
    }

    /// Numbers, encodes once and queues a frame for every sink but `except`, under the send
    /// lock so every receiver sees this channel's seqs in order.
    fn fan_out(&self, except: Option<ConnectionId>, body: FrameBody) -> Result<u32, ChannelError> {
        self.check(&body)?;
        if self.is_bulk() {
            let receivers: Vec<Connection> = self
                .sinks()
                .iter()
                .filter(|c| Some(c.id()) != except)
                .cloned()
                .collect();
            return self.sync_bulk(&receivers, &body);
        }
        let _order = self.order();
        let (seq, frame) = self.number_and_encode(&body)?;
        for sink in self.sinks().iter() {
            if Some(sink.id()) != except {
                let _ = self.queue(sink, &frame);
            }
        }
        Ok(seq)
    }

    /// Broadcasts an event.
    pub fn send_event(&self, event: &str, payload: Value) -> Result<u32, ChannelError> {
        self.broadcast(FrameBody::Event {
            event: event.to_string(),
            payload,
        })
    }

    /// Broadcasts opaque bytes (shared, not copied, per receiver).
    pub fn send_binary(&self, payload: Bytes) -> Result<u32, ChannelError> {
        self.broadcast(FrameBody::Binary(payload))
    }

    /// Sends to one connection. Returns the frame's seq.
    pub fn send_to(&self, connection: ConnectionId, body: FrameBody) -> Result<u32, ChannelError> {
        self.check(&body)?;
        let conn = self
            .registry()
            .and_then(|r| r.sink(connection))
            .ok_or(ChannelError::UnknownConnection(connection))?;
        if self.is_bulk() {
            return self.sync_bulk(std::slice::from_ref(&conn), &body);
        }
        let _order = self.order();
        let (seq, frame) = self.number_and_encode(&body)?;
        self.queue(&conn, &frame)?;
        Ok(seq)
    }

    /// Closes the channel: frees its name, refuses further sends, and inbound frames for it
    /// get `unknown_channel`.
    pub fn close(&self) {
        self.entry.closed.store(true, Ordering::Release);
        if let Some(registry) = self.registry() {
            registry
                .inner
                .channels
                .remove_if(&self.entry.descriptor.name, |_, e| {
                    Arc::ptr_eq(e, &self.entry)
                });
        }
        *self.entry.sink.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether `close()` was called.
    pub fn is_closed(&self) -> bool {
        self.entry.closed.load(Ordering::Acquire)
    }
}

//! The host's side of one registered channel: [`ChannelHandle`] and its sends (reliable,
//! lossy and bulk, to one connection or to all).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use super::entry::{ChannelEntry, Sink};
use super::error::ChannelError;
use super::map::ChannelMap;
use super::message::Inbound;
use crate::protocol::channel::{ChannelDescriptor, DeliveryClass};
use crate::protocol::channel_frame::{self, EncodedFrame, FrameBody};
use crate::server::handle::{Connection, ConnectionId};
use crate::server::outbound::{BulkFrame, DeliveryError};

/// The host's side of one registered channel.
#[derive(Clone)]
pub struct ChannelHandle {
    entry: Arc<ChannelEntry>,
    /// Weak: a channel's own handler usually captures its handle (echo, relay), and the
    /// registry owns that handler, so a strong link here would be a cycle that keeps the whole
    /// registry, its channels and their handlers alive after the transport is dropped.
    registry: Weak<ChannelMap>,
}

impl ChannelHandle {
    pub(super) fn new(entry: Arc<ChannelEntry>, registry: Weak<ChannelMap>) -> Self {
        ChannelHandle { entry, registry }
    }

    /// The registry, while the transport that owns it lives.
    fn registry(&self) -> Option<Arc<ChannelMap>> {
        self.registry.upgrade()
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

    /// Broadcasts an event to every handshaken connection; returns the frame's seq.
    ///
    /// With no connection (none yet, or the transport not started or stopped) the send still
    /// succeeds and reaches no one: a periodic sender needs no lifecycle checks. It fails only
    /// for the channel itself: an event its descriptor does not declare
    /// ([`ChannelError::UndeclaredEvent`]), a channel closed with [`ChannelHandle::close`]
    /// ([`ChannelError::Closed`]: the usual way to end such a loop; stopping the transport does
    /// not close its channels, so a restarted transport keeps them), or a frame that cannot be
    /// encoded. A connection that cannot take the frame fails on its own, as for
    /// [`ChannelHandle::broadcast`].
    pub fn send_event(&self, event: &str, payload: Value) -> Result<u32, ChannelError> {
        self.broadcast(FrameBody::Event {
            event: event.to_string(),
            payload,
        })
    }

    /// Sends an event to one connection (the targeted form of [`ChannelHandle::send_event`]).
    /// Returns the frame's seq.
    pub fn send_event_to(
        &self,
        connection: ConnectionId,
        event: &str,
        payload: Value,
    ) -> Result<u32, ChannelError> {
        self.send_to(
            connection,
            FrameBody::Event {
                event: event.to_string(),
                payload,
            },
        )
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

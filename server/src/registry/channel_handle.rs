//! The host's side of one registered channel: [`ChannelHandle`] and its sends (reliable,
//! lossy and bulk, to one connection or to all). The bulk sends, and what every send does on a
//! bulk channel, are in `bulk`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use super::entry::{ChannelEntry, Sink};
use super::error::ChannelError;
use super::map::ChannelMap;
use super::message::ChannelInbound;
use crate::handle::{Connection, ConnectionId};
use crate::outbound::{BulkFrame, DeliveryError};
use carrier_protocol::channel::{ChannelDescriptor, DeliveryClass};
use carrier_protocol::channel_frame::{self, EncodedFrame, FrameBody};

mod bulk;

/// The host's side of one registered channel.
///
/// # What a send promises
///
/// A send returns the frame's seq once the frame is queued for its receivers; it fails when
/// it queued nothing (or, for a targeted send, when its one receiver did not take it). A frame
/// the carrier has queued is then written, or its loss is reported to the receiver: as
/// `channel.dropped {channel, count}` on a lossy channel, or by the end of the connection, whose
/// client reads the close code that says why (such as 1013 for a reader too slow for its
/// budget or a stalled bulk receiver, counted in `carrier_delivery_failures_total`, or 1001
/// when the carrier stops or hears no pong). Nothing is dropped otherwise.
///
/// | send | `reliable` | `lossy` | `bulk` |
/// |---|---|---|---|
/// | [`send_to`](Self::send_to), [`send_event_to`](Self::send_event_to) | queued, or an error: the connection is closing ([`DeliveryError::Closed`]), or was failed now as a slow reader ([`DeliveryError::Overflow`]) | as reliable; the channel's oldest frames queued for the connection may be dropped for this one, and the receiver is told | queued, or [`ChannelError::WindowFull`] (nothing queued), or [`DeliveryError::Closed`] |
/// | [`send_binary`](Self::send_binary), [`send_event`](Self::send_event), [`broadcast`](Self::broadcast), [`broadcast_except`](Self::broadcast_except) | queued for every receiver; a receiver past its budget is failed (1013, counted), the others still get the frame | as reliable, dropping as above | for every receiver, or for none: [`ChannelError::WindowFull`] names the receivers whose window is full |
/// | [`send_bulk_to`](Self::send_bulk_to), [`broadcast_bulk`](Self::broadcast_bulk), [`broadcast_bulk_except`](Self::broadcast_bulk_except) | [`ChannelError::NotBulk`] | [`ChannelError::NotBulk`] | wait for room, then queued; cancel-safe |
///
/// A refused bulk send took no seq and queued nothing anywhere, so the host makes the same
/// call again later (or awaits the async form) without any receiver getting the frame twice.
/// A receiver whose bulk window stays full with none of it written for 10 s (it stopped
/// reading) is failed (1013, `bulk receiver stalled`, counted) by the next bulk send that finds
/// it so, synchronous or async: it holds the channel's sends for at most that long.
///
/// A broadcast's receivers are the handshaken connections that are open when it is sent. A
/// connection whose close is queued (the carrier is stopping, it heard no pong, it failed) takes
/// no more frames on any channel, and a broadcast goes on without it; its client learns from
/// the close. A host that must know which connections got a frame sends to each with the
/// targeted forms, which fail for such a connection.
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
    pub fn on_inbound(&self, handler: impl Fn(ChannelInbound) + Send + Sync + 'static) {
        *self.entry.sink.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Arc::new(Sink::Handler(Arc::new(handler))));
    }

    /// Receives inbound frames as a stream. A full stream (`capacity` waiting) pauses the
    /// sending connection's reader: backpressure, not loss. Replaces any previous handler.
    pub fn inbound(&self, capacity: usize) -> mpsc::Receiver<ChannelInbound> {
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

    /// Sends to every handshaken connection; the frame is encoded once. Returns its seq.
    /// On a reliable or lossy channel, a connection that cannot take the frame (past its byte
    /// budget) fails on its own (1013) and the send still succeeds; on a bulk channel the frame
    /// goes to every receiver or, when one has a full window, to none
    /// ([`ChannelError::WindowFull`]). See [the table](Self#what-a-send-promises).
    pub fn broadcast(&self, body: FrameBody) -> Result<u32, ChannelError> {
        self.fan_out(None, body)
    }

    /// [`Self::broadcast`] to every handshaken connection except `except` (used by relays).
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
        let sinks = self.sinks();
        let receivers = sinks.iter().filter(|c| Some(c.id()) != except);
        if self.is_bulk() {
            return self.sync_bulk(receivers, false, &body);
        }
        let _order = self.order();
        let (seq, frame) = self.number_and_encode(&body)?;
        for conn in receivers {
            // Refused only by a connection that is closing (no longer a receiver) or that this
            // frame put past its budget: that one is failed (1013) and its reader counts it.
            let _ = self.queue(conn, &frame);
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
    /// encoded, or, on a bulk channel, a receiver's full window ([`ChannelError::WindowFull`]:
    /// nothing was queued, send it again later). A connection that cannot take the frame
    /// otherwise fails on its own, as for [`ChannelHandle::broadcast`].
    pub fn send_event(&self, event: &str, payload: Value) -> Result<u32, ChannelError> {
        self.broadcast(FrameBody::Event {
            event: event.to_string(),
            payload,
        })
    }

    /// Sends an event to one connection (the targeted form of [`ChannelHandle::send_event`]).
    /// Returns the frame's seq; fails as [`ChannelHandle::send_to`] does.
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

    /// Broadcasts opaque bytes (shared, not copied, per receiver), as
    /// [`ChannelHandle::broadcast`] does.
    pub fn send_binary(&self, payload: Bytes) -> Result<u32, ChannelError> {
        self.broadcast(FrameBody::Binary(payload))
    }

    /// Sends to one connection. Returns the frame's seq once it is queued there. Fails when
    /// the connection is not (or no longer) a receiver ([`ChannelError::UnknownConnection`]),
    /// is closing ([`DeliveryError::Closed`]) or was failed by this frame as a slow reader
    /// ([`DeliveryError::Overflow`], 1013), or, on a bulk channel, when its window is full
    /// ([`ChannelError::WindowFull`]: nothing was queued; [`Self::send_bulk_to`] waits instead).
    pub fn send_to(&self, connection: ConnectionId, body: FrameBody) -> Result<u32, ChannelError> {
        self.check(&body)?;
        let conn = self
            .registry()
            .and_then(|r| r.sink(connection))
            .ok_or(ChannelError::UnknownConnection(connection))?;
        if self.is_bulk() {
            return self.sync_bulk(std::iter::once(&conn), true, &body);
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

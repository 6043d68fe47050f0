//! The sends of a `bulk` channel (docs/protocol.md, "Bulk channels"): the synchronous forms,
//! which queue a frame for all of their receivers or for none, and the async forms, which wait
//! for room. Every one of them queues a frame whole or not at all, and takes the frame's seq
//! only when it queues it, so a refused or cancelled send can be made again without a receiver
//! getting the frame twice or a gap in the channel's order.
//!
//! `entry.bulk_order` is held by every bulk send from the moment it checks for room until its
//! frame is queued. While it is held no other send of the channel can queue, and a window only
//! gains room (its connection's writer releases what it writes), so room found stays there.

use super::ChannelHandle;
use crate::handle::{Connection, ConnectionId};
use crate::registry::error::ChannelError;
use carrier_protocol::channel_frame::FrameBody;

impl ChannelHandle {
    fn window(&self) -> usize {
        self.entry.descriptor.bulk_window
    }

    /// The synchronous sends of a bulk channel (`send_to`, `broadcast` and their forms): the frame
    /// is queued for every open receiver, or, when one of them has a full window, for none
    /// ([`ChannelError::WindowFull`] names those, and no seq is taken). A receiver whose queue is
    /// closed is not one any more: a broadcast leaves it out, a `targeted` send fails with
    /// [`crate::DeliveryError::Closed`]. A receiver found stalled (full for 10 s, nothing
    /// written) is failed here and then counts as closed.
    ///
    /// All or nothing, because a frame given to only some receivers would have to be sent to
    /// the others again later, with a new seq and behind the frames sent meanwhile: out of
    /// order for a transfer. Refused whole, the same call is simply made again.
    pub(super) fn sync_bulk<'c>(
        &self,
        receivers: impl Iterator<Item = &'c Connection>,
        targeted: bool,
        body: &FrameBody,
    ) -> Result<u32, ChannelError> {
        // Held by an async send waiting for room: the refusal names the full receivers, if any
        // of ours are among those it waits for.
        let order = self.entry.bulk_order.try_lock();
        let mut open = Vec::new();
        let mut full = Vec::new();
        for conn in receivers {
            match conn
                .outbound()
                .try_bulk_room(&self.entry.name, self.window())
            {
                Ok(true) => open.push(conn),
                Ok(false) => full.push(conn.id()),
                Err(e) if targeted => return Err(e.into()),
                Err(_) => {}
            }
        }
        if !full.is_empty() || order.is_err() {
            return Err(ChannelError::WindowFull {
                channel: self.name().to_string(),
                receivers: full,
            });
        }
        let _seq_order = self.order();
        let (seq, frame) = self.number_and_encode(body)?;
        for conn in open {
            // Room was found under `bulk_order`, so only a close since can refuse the frame.
            if let Err(e) = self.queue(conn, &frame) {
                if targeted {
                    return Err(e.into());
                }
            }
        }
        Ok(seq)
    }

    /// Sends `body` to one connection of a bulk channel, waiting while the channel's window on
    /// that connection is full, and returns the frame's seq once it is queued. Errors when the
    /// connection closes before there is room ([`crate::DeliveryError::Closed`]; a
    /// receiver that stopped reading is failed after 10 s of a full window with nothing
    /// written, and the send then fails the same way), or when the channel is not bulk
    /// ([`ChannelError::NotBulk`]). Cancel-safe: dropping the future before it resolves queues
    /// nothing and takes no seq.
    ///
    /// Streaming a file in 64 KiB frames at the pace the client reads it:
    ///
    /// ```no_run
    /// # async fn stream(handle: carrier_server::ChannelHandle, to: carrier_server::ConnectionId)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// use tokio::io::AsyncReadExt;
    /// let mut file = tokio::fs::File::open("model.bin").await?;
    /// let mut chunk = vec![0u8; 64 * 1024];
    /// loop {
    ///     let n = file.read(&mut chunk).await?;
    ///     if n == 0 {
    ///         break;
    ///     }
    ///     let body = carrier_protocol::channel_frame::FrameBody::Binary(
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
            let _bulk = self.entry.bulk_order.lock().await;
            if !conn
                .outbound()
                .try_bulk_room(&self.entry.name, self.window())?
            {
                continue; // another sender took the room first: wait again
            }
            let _order = self.order();
            let (seq, frame) = self.number_and_encode(&body)?;
            self.queue(&conn, &frame)?;
            return Ok(seq);
        }
    }

    /// Sends `body` to every handshaken connection (but `except`) of a bulk channel, encoded
    /// once: waits until each receiver's window has room, then queues the frame for all of them
    /// at once and returns its seq. Receivers that close meanwhile are left out (a receiver
    /// that stopped reading is failed after 10 s of a full window with nothing written, and
    /// then left out too). Cancel-safe: dropping the future before it resolves queues the frame
    /// for no one and takes no seq, so it can be sent again without a duplicate.
    ///
    /// The channel's other bulk sends wait meanwhile (they keep its order), so every receiver
    /// goes at the pace of the slowest one; a host that wants each receiver at its own pace
    /// sends to each with [`Self::send_bulk_to`] from a task of its own.
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
        let receivers: Vec<Connection> = self
            .sinks()
            .iter()
            .filter(|c| Some(c.id()) != except)
            .cloned()
            .collect();
        let mut open = Vec::with_capacity(receivers.len());
        for conn in receivers {
            // Room found here stays while `bulk_order` is held (see the module's doc).
            if conn
                .outbound()
                .bulk_room(&self.entry.name, self.window())
                .await
                .is_ok()
            {
                open.push(conn);
            }
        }
        let _order = self.order();
        let (seq, frame) = self.number_and_encode(&body)?;
        for conn in &open {
            // Only a receiver that closed since its room was found refuses: it is left out.
            let _ = self.queue(conn, &frame);
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
}

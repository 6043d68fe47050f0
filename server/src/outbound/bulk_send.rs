//! The bulk lane's door on the queue: a bulk frame is queued within its channel's window on
//! the connection (outside the connection's byte budget), and a sender waits for room rather
//! than fail the connection. The lane itself, and when its frames are written, is `bulk`.

use tokio::time::Instant;

use super::error::{DeliveryError, FailReason};
use super::item::BulkFrame;
use super::queue::OutboundPath;

impl OutboundPath {
    /// Queues a frame of a bulk channel whose window on this connection is `window` bytes: taken
    /// while the channel's queued bytes are under the window (so it holds at most the window plus
    /// one frame), refused with [`DeliveryError::WindowFull`] otherwise. Bulk bytes are not
    /// part of the connection's budget.
    pub(crate) fn send_bulk(&self, frame: BulkFrame, window: usize) -> Result<(), DeliveryError> {
        {
            let mut q = self.lock();
            if q.closed {
                return Err(DeliveryError::Closed);
            }
            let ahead = q.items.len();
            q.bulk
                .push(frame, window, ahead)
                .map_err(|_| DeliveryError::WindowFull)?;
        }
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Resolves once `channel` has room in its window here, or with [`DeliveryError::Closed`]
    /// once the connection takes no more frames. Room may be gone again by the time the caller
    /// sends (another sender): [`OutboundPath::send_bulk`] then says so and the caller waits again.
    ///
    /// A window that stays full with none of its frames written for `BULK_STALL` (10 s) fails the
    /// connection ([`FailReason::BulkStalled`], close 1013) and this returns
    /// [`DeliveryError::Closed`]: a receiver that stopped reading lets its senders go.
    pub(crate) async fn bulk_room(
        &self,
        channel: &str,
        window: usize,
    ) -> Result<(), DeliveryError> {
        loop {
            let notified = self.inner.bulk_room.notified();
            tokio::pin!(notified);
            // Registered before the check, so a release in between is not missed.
            notified.as_mut().enable();
            let stalled_at = {
                let q = self.lock();
                if q.closed {
                    return Err(DeliveryError::Closed);
                }
                if q.bulk.has_room(channel, window) {
                    return Ok(());
                }
                q.bulk.stalled_at(channel)
            };
            let Some(stalled_at) = stalled_at else {
                notified.await;
                continue;
            };
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(stalled_at) => {
                    let still = {
                        let q = self.lock();
                        !q.closed
                            && !q.bulk.has_room(channel, window)
                            && q.bulk.stalled_at(channel).is_some_and(|t| t <= Instant::now())
                    };
                    if still {
                        self.fail_once(FailReason::BulkStalled);
                        return Err(DeliveryError::Closed);
                    }
                }
            }
        }
    }

    /// The synchronous form of [`OutboundPath::bulk_room`]: whether `channel` has room in its
    /// window here now (`Ok(false)`: full), or [`DeliveryError::Closed`] once the connection
    /// takes no more frames. The stall rule holds here too: a window full with none of its
    /// frames written for `BULK_STALL` fails the connection now ([`FailReason::BulkStalled`]),
    /// so a receiver that stopped reading is let go by a host that only sends synchronously,
    /// instead of refusing that host's sends to every receiver for ever.
    pub(crate) fn try_bulk_room(
        &self,
        channel: &str,
        window: usize,
    ) -> Result<bool, DeliveryError> {
        let stalled = {
            let q = self.lock();
            if q.closed {
                return Err(DeliveryError::Closed);
            }
            if q.bulk.has_room(channel, window) {
                return Ok(true);
            }
            q.bulk
                .stalled_at(channel)
                .is_some_and(|t| t <= Instant::now())
        };
        if stalled {
            self.fail_once(FailReason::BulkStalled);
            return Err(DeliveryError::Closed);
        }
        Ok(false)
    }

    /// Bytes of bulk channel `channel` queued on this connection (its window's fill).
    pub(crate) fn bulk_queued_bytes(&self, channel: &str) -> usize {
        self.lock().bulk.queued(channel)
    }
}

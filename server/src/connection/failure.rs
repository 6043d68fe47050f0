//! [`FailureCleanup`]: what a failed connection's reader does about the failure, once.
//!
//! The outbound queue latches a failure ([`OutboundPath::fail_once`]) from inside whichever send
//! overflowed, or from the writer's failed write; it records the reason, refuses every later
//! frame and wakes the tasks waiting in [`OutboundPath::failed`], nothing more. The cleanup is the
//! reader's: the reader already wakes on the failure, it is the task that made the connection a
//! channel sink, and it runs inside nobody else's operation, so no send ever calls back up into
//! the registry or the metrics.

use crate::handle::ConnectionId;
use crate::outbound::{FailReason, OutboundPath};
use crate::shared::Shared;

use super::terminate::Terminate;

/// The cleanup of one admitted connection's failure; runs at most once.
pub(super) struct FailureCleanup<'a> {
    id: ConnectionId,
    shared: &'a Shared,
    terminate: &'a Terminate,
    done: bool,
}

impl<'a> FailureCleanup<'a> {
    pub(super) fn new(id: ConnectionId, shared: &'a Shared, terminate: &'a Terminate) -> Self {
        FailureCleanup {
            id,
            shared,
            terminate,
            done: false,
        }
    }

    /// The connection failed for `reason`: it stops being a channel sink, the failure is
    /// counted, and a write error ends the connection's tasks. Every call after the first does
    /// nothing.
    ///
    /// The connection receives no channel frame after the failure whenever this runs: the latch
    /// closed its queue before anyone was woken, so every send to it since was refused. Removing
    /// the sink spares the registry those refused sends.
    fn run(&mut self, reason: FailReason) {
        if self.done {
            return;
        }
        self.done = true;
        self.shared.metrics.delivery_failure();
        self.shared.registry.remove_sink(self.id);
        tracing::debug!(conn = %self.id, ?reason, "connection failed");
        // A write error leaves nothing worth draining; a slow reader still gets its close.
        if reason == FailReason::WriteError {
            self.terminate.fire();
        }
    }

    /// Runs the cleanup if the connection has failed. The reader asks when its loop ends (woken
    /// by the failure, or ending for another reason first) and once more after the writer has
    /// ended, for a failure of the writer's last writes.
    pub(super) fn if_failed(&mut self, out: &OutboundPath) {
        if let Some(reason) = out.failure() {
            self.run(reason);
        }
    }
}

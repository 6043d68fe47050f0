//! [`Terminate`]: how a connection's two tasks end each other.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Ends the connection's tasks: set by the writer once its close frame has had its grace
/// period, by a failure, or by a forced `stop()`.
#[derive(Default)]
pub(crate) struct Terminate {
    notify: Notify,
    done: AtomicBool,
}

impl Terminate {
    pub(crate) fn fire(&self) {
        self.done.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether [`Terminate::fire`] was called.
    pub(crate) fn is_fired(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// A notification of [`Terminate::fire`], for a waiter that checks [`Terminate::is_fired`]
    /// itself. It completes only once the flag is up (`fire` sets it first).
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    pub(crate) async fn wait(&self) {
        loop {
            let n = self.notify.notified();
            if self.done.load(Ordering::Acquire) {
                return;
            }
            n.await;
        }
    }
}

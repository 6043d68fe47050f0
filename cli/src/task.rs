//! [`AbortOnDrop`]: a spawned task that ends with the command that spawned it.

/// Aborts its task when dropped, so a helper task (a stdin reader, a sender) stops however the
/// command that spawned it ends — its answer, an error, or a panic.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

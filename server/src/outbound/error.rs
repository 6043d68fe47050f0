//! Why a send was refused, and why a connection failed.

/// Why a send did not queue its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The connection is closing or closed; nothing more is sent on it.
    #[error("the connection is closed")]
    Closed,
    /// The queue was already past its byte budget; the connection has been failed (1013).
    #[error("the reader is too slow: outbound queue over its byte budget; connection failed")]
    Overflow,
    /// The bulk channel's window on this connection is full; nothing was queued. Wait for room
    /// (the async bulk sends do) or try again later.
    #[error("the bulk channel's window on this connection is full")]
    WindowFull,
}

/// Why a connection failed: the first failure is latched, and the connection ends with the
/// matching close code ([`Connection::failure`](crate::Connection::failure) reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// The outbound queue went over its byte budget (close 1013).
    SlowReader,
    /// Writing to the socket failed (close 1011).
    WriteError,
    /// A bulk channel's window stayed full with none of its frames written for 10 s: the
    /// receiver stopped reading (close 1013, `bulk receiver stalled`).
    BulkStalled,
}

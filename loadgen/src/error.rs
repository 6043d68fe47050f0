//! Why a load run could not be done.

use crate::target::TargetError;

/// Why a run could not be done (per-message failures are counted in [`Report::errors`](crate::Report::errors)).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The URL is not an allowed target.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The plan is out of bounds.
    #[error("invalid plan: {0}")]
    Plan(String),
    /// A connection could not be opened or upgraded.
    #[error("connect failed: {0}")]
    Connect(String),
    /// The listener is not this user's (or cannot be attributed): nothing was sent to it, the
    /// token least of all.
    #[error(transparent)]
    Listener(carrier::discovery::listener::DialError),
    /// The server closed the connection (with this close code, if any).
    #[error("the server closed the connection (code {0:?})")]
    Closed(Option<u16>),
    /// A socket error.
    #[error("I/O error: {0}")]
    Io(String),
    /// The server answered a request with an error, or refused a frame.
    #[error("the server refused: {0}")]
    Rejected(String),
    /// The server's answer was not what was sent.
    #[error("unexpected reply: {0}")]
    Unexpected(String),
    /// The run's time bound was reached.
    #[error("the run's time bound was reached")]
    TimedOut,
    /// Reading the server's memory or CPU time from `/proc` failed.
    #[error("cannot read /proc/{0}: {1}")]
    Proc(u32, String),
}

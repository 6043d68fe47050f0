//! The socket's write half as the outbound path holds it (`socket` uses it; the queue keeps it).

use std::sync::Mutex;

use tokio::io::AsyncWrite;

/// The write half of a connection's stream, and what the writer may ask of its socket.
pub(crate) trait SocketWrite: AsyncWrite + Send + Unpin {
    /// Keeps the socket's buffers small once the connection carries bulk traffic
    /// (`connection::writer`). Nothing for a stream that is not a TCP socket.
    fn limit_buffers(&self) {}

    /// Whether bytes from the peer wait in the socket, not yet read by the connection's
    /// reader. `false` where the stream cannot tell.
    fn has_unread(&self) -> bool {
        false
    }
}

/// Where the socket lives: the writer polls it through `socket::SocketRef`, the reader writes
/// inline. The two never use it at the same time (`socket`'s docs), so the lock is never
/// contended; it is what lets either reach it.
pub(super) type SocketSlot = Mutex<Option<Box<dyn SocketWrite>>>;

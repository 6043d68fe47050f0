//! The socket's read half as `fastwebsockets` reads it: at most [`READ_CHUNK`] bytes a read.
//!
//! `fastwebsockets` reads into one `BytesMut` with all the room it has, and reserves room for
//! the next frame before parsing it. When a read has filled that buffer and fewer bytes are
//! parsed than are left, `BytesMut` cannot move the rest to the front and doubles instead. A
//! client the scheduler leaves waiting finds megabytes in its socket (say from a server that
//! pings at line rate): each read fills the buffer and each fill doubles it, up to the size of
//! the socket's receive queue (`net.ipv4.tcp_rmem`'s maximum, tens of MiB on many systems).
//! With at most [`READ_CHUNK`] bytes a read, the buffer's size depends on the frames, not on
//! how long the client was not run: it reads only when the buffer does not hold the frame being
//! read, so the buffer holds that frame (within
//! [`WsOptions::max_message_bytes`](super::WsOptions::max_message_bytes), checked before room
//! is reserved for it) and at most one chunk after it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The most one read hands over. At least two of them fit before a buffer of small frames would
/// have to grow (`BytesMut` moves the unparsed bytes to the front once as many have been parsed),
/// so the buffer settles at 128 KiB however full the socket is; large enough that a message of
/// megabytes still takes few reads.
pub(crate) const READ_CHUNK: usize = 64 << 10;

/// An [`AsyncRead`] that returns at most [`READ_CHUNK`] bytes a read.
pub(crate) struct ReadChunks<R> {
    inner: R,
}

impl<R> ReadChunks<R> {
    pub(crate) fn new(inner: R) -> Self {
        ReadChunks { inner }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for ReadChunks<R> {
    // One `unsafe`: marking the bytes the inner reader filled (see its SAFETY comment).
    #[allow(unsafe_code)]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let inner = Pin::new(&mut self.get_mut().inner);
        if buf.remaining() <= READ_CHUNK {
            return inner.poll_read(cx, buf);
        }
        // The first READ_CHUNK bytes of `buf`'s unfilled part, as they are: zeroing them first
        // (the safe way) cost 64 KiB of memset per read however little had arrived
        // (BENCHMARKS.md, "The client's reads").
        let mut chunk = buf.take(READ_CHUNK);
        let start = chunk.filled().as_ptr();
        let polled = inner.poll_read(cx, &mut chunk);
        // A reader that swapped in another buffer would make the bytes below not `buf`'s.
        assert_eq!(
            chunk.filled().as_ptr(),
            start,
            "the read half kept its buffer"
        );
        let filled = chunk.filled().len();
        // SAFETY: `chunk` is a view of the start of `buf`'s unfilled part (checked above), and
        // the inner reader initialized and filled its first `filled` bytes — as `tokio::io::Take`
        // does for its limit.
        unsafe { buf.assume_init(filled) };
        buf.advance(filled);
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_read_hands_over_at_most_one_chunk_however_much_is_waiting() {
        let waiting = vec![7u8; 3 * READ_CHUNK + 5];
        let mut reader = ReadChunks::new(&waiting[..]);
        let mut buffer = bytes::BytesMut::with_capacity(8 * READ_CHUNK);
        let mut reads = Vec::new();
        loop {
            let n = reader.read_buf(&mut buffer).await.expect("read");
            if n == 0 {
                break;
            }
            reads.push(n);
        }
        assert_eq!(reads, [READ_CHUNK, READ_CHUNK, READ_CHUNK, 5]);
        assert_eq!(&buffer[..], &waiting[..], "every byte, in order");
        // A smaller buffer is filled as far as it goes.
        let mut small = [0u8; 10];
        assert_eq!(
            ReadChunks::new(&waiting[..]).read(&mut small).await.ok(),
            Some(10)
        );
    }
}

//! The connection's socket, held by its outbound path, and the inline write: the connection's
//! reader writes an answer itself when nothing is queued and the writer holds nothing.
//!
//! Both writers go through the queue's lock, so there is still one path onto the wire with one
//! latch:
//! - the writer task writes only frames it took from the queue (`Queue::writer_busy` is set
//!   while it holds any), and the close after a failure, which comes after the queue closed;
//! - an inline write happens under the queue's lock, only when the queue is open and empty, its
//!   bulk lane empty and the writer holds nothing, and it makes one non-blocking attempt. What
//!   the socket does not take at once is queued as the first item ([`OutItem::Rest`]), so the
//!   writer finishes that frame before anything else, and a write error fails the connection
//!   through [`OutboundPath::fail_once`] like the writer's own.
//!
//! Why: a `system.ping` answered through the writer task cost a wake-up of that task, a queue
//! buffer and a second turn of the scheduler per message (the profile: BENCHMARKS.md).

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWrite;

use super::item::{MessageKind, OutItem};
use super::queue::{OutboundPath, Queue};
use super::stream::SocketWrite;
use crate::frame_writer::{frame_header, Opcode};

/// Frames larger than this are never written inline: the writer writes them as before. A
/// partial inline write queues the frame's rest without copying its payload, but a large frame
/// written by the reader would delay the next message it reads.
const INLINE_MAX: usize = 16 * 1024;

/// Inline frames up to this size (header included) are copied into one buffer and written with
/// one plain write.
const GATHER_MAX: usize = 1024;

thread_local! {
    /// The buffer an inline frame of at most [`GATHER_MAX`] bytes is gathered in.
    static GATHER: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(GATHER_MAX));
    /// The outbound path whose reader is handling a message on this thread now (its address;
    /// 0: none), and the frames and bytes written inline meanwhile, for the reader to count.
    static INLINE: Cell<(usize, u64, u64)> = const { Cell::new((0, 0, 0)) };
}

/// Frames and bytes written inline during an [`OutboundPath::inline_scope`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InlineWritten {
    pub(crate) frames: u64,
    pub(crate) bytes: u64,
}

/// Restores the thread's previous scope, also if the handler panics.
struct ScopeGuard((usize, u64, u64));

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        INLINE.with(|c| c.set(self.0));
    }
}

impl OutboundPath {
    /// Hands the socket to the path: from now on the writer polls it through [`SocketRef`] and
    /// the reader may write inline.
    pub(crate) fn attach_socket(&self, socket: Box<dyn SocketWrite>) -> SocketRef {
        *self.socket() = Some(socket);
        SocketRef(self.clone())
    }

    fn socket(&self) -> MutexGuard<'_, Option<Box<dyn SocketWrite>>> {
        // Poisoned only by a panic inside a socket call: the socket is as usable as before.
        self.inner.socket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` (the reader handling one message) with inline writes allowed for this path's
    /// text answers sent from inside it on this thread; returns what was written inline, for
    /// the caller's metrics.
    pub(crate) fn inline_scope<R>(&self, f: impl FnOnce() -> R) -> (R, InlineWritten) {
        let me = Arc::as_ptr(&self.inner) as usize;
        let _restore = ScopeGuard(INLINE.with(|c| c.replace((me, 0, 0))));
        let r = f();
        let (_, frames, bytes) = INLINE.with(|c| c.get());
        (r, InlineWritten { frames, bytes })
    }

    /// Whether `item` may be written inline now: a text message sent from inside this path's
    /// [`OutboundPath::inline_scope`], small, with nothing queued and the writer idle.
    pub(super) fn may_inline(&self, q: &Queue, item: &OutItem) -> bool {
        let OutItem::Message {
            kind: MessageKind::Text,
            head,
            body,
            ..
        } = item
        else {
            return false;
        };
        head.len() + body.len() <= INLINE_MAX
            && !q.closed
            && !q.writer_busy
            && q.items.is_empty()
            && q.bulk.is_empty()
            && INLINE.with(|c| c.get().0) == Arc::as_ptr(&self.inner) as usize
    }

    /// Writes `item` (a text message [`OutboundPath::may_inline`] allowed) with one
    /// non-blocking attempt; the caller holds the queue's lock. Returns what is left to queue: nothing,
    /// the rest of the frame, or the whole item when the socket took none of it; or the error.
    pub(super) fn write_inline(&self, item: OutItem) -> io::Result<Option<OutItem>> {
        let OutItem::Message { head, body, .. } = &item else {
            return Ok(Some(item));
        };
        let len = head.len() + body.len();
        let (header, hlen) = frame_header(Opcode::Text, len);
        let written = {
            let mut socket = self.socket();
            let Some(socket) = socket.as_mut() else {
                return Ok(Some(item));
            };
            let mut cx = Context::from_waker(Waker::noop());
            // The writer is idle (it waits on the queue, not on the socket), so no waker of its
            // is replaced here: it registers its own when it next writes.
            let polled = if hlen + len <= GATHER_MAX {
                // One buffer: a plain `send`, which skips the file layer a `writev` goes
                // through (BENCHMARKS.md, "Performance 3, second pass").
                GATHER.with(|g| {
                    let mut buf = g.borrow_mut();
                    buf.clear();
                    buf.extend_from_slice(&header[..hlen]);
                    buf.extend_from_slice(head);
                    buf.extend_from_slice(body);
                    Pin::new(&mut **socket).poll_write(&mut cx, &buf)
                })
            } else if socket.is_write_vectored() {
                let slices = [
                    IoSlice::new(&header[..hlen]),
                    IoSlice::new(head),
                    IoSlice::new(body),
                ];
                Pin::new(&mut **socket).poll_write_vectored(&mut cx, &slices)
            } else {
                // A stream without vectored writes would take the header alone: not worth a
                // syscall of its own, the writer batches instead.
                return Ok(Some(item));
            };
            match polled {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => 0,
            }
        };
        if written == 0 {
            return Ok(Some(item));
        }
        // Counted once begun: the writer does not count the rest it writes.
        INLINE.with(|c| {
            let (me, frames, bytes) = c.get();
            c.set((me, frames + 1, bytes + len as u64));
        });
        if written == hlen + len {
            return Ok(None);
        }
        Ok(Some(rest_of(&header[..hlen], head, body, written)))
    }
}

/// The unwritten end of a frame of which `written` bytes went out: its header's and head's
/// remainder, and the body's, sliced without copying the payload (only a header cut in two is
/// copied, with its head).
fn rest_of(header: &[u8], head: &Bytes, body: &Bytes, written: usize) -> OutItem {
    if written < header.len() {
        let mut first = BytesMut::with_capacity(header.len() - written + head.len());
        first.extend_from_slice(&header[written..]);
        first.extend_from_slice(head);
        return OutItem::Rest {
            head: first.freeze(),
            body: body.clone(),
        };
    }
    let past = written - header.len();
    if past < head.len() {
        return OutItem::Rest {
            head: head.slice(past..),
            body: body.clone(),
        };
    }
    OutItem::Rest {
        head: Bytes::new(),
        body: body.slice(past - head.len()..),
    }
}

/// The writer task's handle on the socket held by the path: each call locks the slot for its
/// own duration (uncontended: the module docs). Dropping it (the writer ended) drops the
/// socket, whoever still holds the path.
pub(crate) struct SocketRef(OutboundPath);

impl Drop for SocketRef {
    fn drop(&mut self) {
        let socket = self.0.socket().take();
        drop(socket);
    }
}

impl SocketRef {
    /// See [`SocketWrite::limit_buffers`].
    pub(crate) fn limit_buffers(&self) {
        if let Some(s) = self.0.socket().as_ref() {
            s.limit_buffers();
        }
    }

    /// See [`SocketWrite::has_unread`].
    pub(crate) fn has_unread(&self) -> bool {
        self.0.socket().as_ref().is_some_and(|s| s.has_unread())
    }

    /// Whether the path still accepts frames (reading has not ended).
    pub(crate) fn path_open(&self) -> bool {
        self.0.is_open()
    }

    fn poll_with<T>(
        &self,
        f: impl FnOnce(Pin<&mut (dyn SocketWrite + '_)>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match self.0.socket().as_mut() {
            Some(s) => f(Pin::new(&mut **s)),
            None => Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
        }
    }
}

impl AsyncWrite for SocketRef {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_with(|s| s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_with(|s| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.0
            .socket()
            .as_ref()
            .is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_with(|s| s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_with(|s| s.poll_shutdown(cx))
    }
}

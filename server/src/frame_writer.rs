//! Server-to-client WebSocket frame writing.
//!
//! Server frames are never masked, so a frame is a 2–10 byte header followed by the payload.
//! Small frames are gathered into one buffer and written with one syscall per batch; large
//! payloads are written straight from their shared `Bytes` with a vectored write, never copied.

use std::future::{poll_fn, Future};
use std::io::IoSlice;
use std::pin::Pin;
use std::task::Poll;

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Parts at or below this size are copied into the batch buffer; larger ones are written in place
/// with a vectored write (buffered bytes + the part, one syscall).
///
/// Perf: this was 16 KiB, so a 16 KiB channel echo copied its payload into the batch
/// buffer and the buffer stayed 16 KiB+ per connection afterwards. At 1 KiB (fastwebsockets'
/// own vectored-write threshold) payloads of channel frames are never copied, and the buffer
/// only ever holds headers and small text frames. Measured in BENCHMARKS.md.
const COPY_MAX: usize = 1024;
/// The batch buffer is released after a batch that grew it past this, so idle connections
/// do not pin memory. Small enough that the ~1 KiB handshake result does not stay allocated on
/// every idle connection; large enough that pings, pongs and short responses reuse it.
const KEEP_MAX: usize = 512;

/// WebSocket opcodes (RFC 6455 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opcode {
    Continuation = 0x0,
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xA,
}

impl Opcode {
    /// The opcode of a frame's first byte, `None` for the reserved values.
    pub(crate) fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    /// Close, ping and pong: at most 125 bytes, never fragmented (§5.5).
    pub(crate) fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// The header of an unmasked, final frame of `len` payload bytes: the buffer and how much of it
/// is used (2, 4 or 10 bytes).
pub(crate) fn frame_header(op: Opcode, len: usize) -> ([u8; 10], usize) {
    let mut head = [0u8; 10];
    head[0] = 0x80 | op as u8;
    let n = if len < 126 {
        head[1] = len as u8;
        2
    } else if len <= u16::MAX as usize {
        head[1] = 126;
        head[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        head[1] = 127;
        head[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    (head, n)
}

/// Writes frames to one socket, batching small ones.
pub(crate) struct FrameWriter<W> {
    io: W,
    buf: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub(crate) fn new(io: W) -> Self {
        FrameWriter {
            io,
            buf: Vec::new(),
        }
    }

    /// The stream it writes to.
    pub(crate) fn get_ref(&self) -> &W {
        &self.io
    }

    /// Queues one frame whose payload is `parts` written back to back.
    ///
    /// The header is queued at once; only the write is a future (one level of state less in the
    /// writer's task, which every connection holds: BENCHMARKS.md, "Performance 3, second pass").
    pub(crate) fn frame<'a>(
        &'a mut self,
        op: Opcode,
        parts: &'a [&'a [u8]],
    ) -> impl Future<Output = std::io::Result<()>> + 'a {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let (head, n) = frame_header(op, len);
        self.buf.extend_from_slice(&head[..n]);
        self.raw(parts)
    }

    /// Queues bytes as they are: the rest of a frame already begun.
    pub(crate) async fn raw(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
        for part in parts {
            if part.len() <= COPY_MAX {
                self.buf.extend_from_slice(part);
            } else {
                write_all_vectored(&mut self.io, &self.buf, part).await?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Writes what is buffered and flushes the socket.
    pub(crate) async fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.io.write_all(&self.buf).await?;
            self.buf.clear();
        }
        if self.buf.capacity() > KEEP_MAX {
            self.buf = Vec::new();
        }
        self.io.flush().await
    }

    /// Flushes and shuts the write side down (TCP FIN).
    pub(crate) async fn shutdown(&mut self) -> std::io::Result<()> {
        self.flush().await?;
        self.io.shutdown().await
    }
}

/// Writes `a` then `b` with vectored writes until both are out. Keeps only an offset between
/// writes (no slice array), so the writer's state stays small.
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    io: &mut W,
    a: &[u8],
    b: &[u8],
) -> std::io::Result<()> {
    let mut done = 0;
    poll_fn(|cx| loop {
        let (first, second) = match a.get(done..) {
            Some(rest) if !rest.is_empty() => (rest, b),
            _ => (b.get(done - a.len()..).unwrap_or_default(), &[][..]),
        };
        if first.is_empty() {
            return Poll::Ready(Ok(()));
        }
        let slices = [IoSlice::new(first), IoSlice::new(second)];
        match std::task::ready!(Pin::new(&mut *io).poll_write_vectored(cx, &slices)) {
            Ok(0) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) => return Poll::Ready(Err(e)),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn headers_for_each_length_class() {
        for len in [0usize, 125, 126, 65535, 65536, 100_000] {
            let mut w = FrameWriter::new(Vec::new());
            let payload = vec![7u8; len];
            w.frame(Opcode::Binary, &[&payload[..len / 2], &payload[len / 2..]])
                .await
                .unwrap();
            w.flush().await.unwrap();
            let out = w.io;
            assert_eq!(out[0], 0x82);
            let (hl, decoded) = match out[1] {
                126 => (4, u16::from_be_bytes([out[2], out[3]]) as usize),
                127 => (
                    10,
                    u64::from_be_bytes(out[2..10].try_into().unwrap()) as usize,
                ),
                n => (2, n as usize),
            };
            assert_eq!(decoded, len);
            assert_eq!(out.len(), hl + len);
            assert!(out[hl..].iter().all(|&b| b == 7));
        }
    }
}

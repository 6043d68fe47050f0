//! stdin read in chunks on a thread of its own (`carrier pipe`, `carrier acp`), and those
//! chunks as an async reader again ([`ChunkReader`]).

use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::{mpsc, oneshot};

use crate::client::failure::Failure;

/// stdin → chunks, one read per chunk (so typed lines go out at once; a file fills every
/// chunk); each waits for room in a queue of one before the next read.
///
/// A thread of its own rather than `tokio::io::stdin`: a blocking read that never returns (an
/// open terminal) would keep the runtime from shutting down after a failure.
fn read_stdin(
    mut input: impl Read,
    chunk: usize,
    out: &mpsc::Sender<Bytes>,
) -> Result<(), Failure> {
    let mut buffer = vec![0u8; chunk];
    loop {
        let n = match input.read(&mut buffer) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::runtime(format!("reading stdin: {e}"))),
        };
        if n == 0 {
            return Ok(());
        }
        if out
            .blocking_send(Bytes::copy_from_slice(&buffer[..n]))
            .is_err()
        {
            // The sender stopped; the coordinator reports why.
            return Ok(());
        }
    }
}

/// What the stdin thread hands over: its chunks, and its outcome once it ends.
pub(crate) type Stdin = (
    mpsc::Receiver<Bytes>,
    oneshot::Receiver<Result<(), Failure>>,
);

/// Starts [`read_stdin`] on its own thread.
pub(crate) fn spawn_stdin(
    input: impl Read + Send + 'static,
    chunk: usize,
) -> Result<Stdin, Failure> {
    let (chunks_tx, chunks) = mpsc::channel(1);
    let (done_tx, done) = oneshot::channel();
    std::thread::Builder::new()
        .name("carrier-stdin".into())
        .spawn(move || {
            let _ = done_tx.send(read_stdin(input, chunk, &chunks_tx));
        })
        .map_err(|e| Failure::runtime(format!("cannot start the stdin reader: {e}")))?;
    Ok((chunks, done))
}

/// The chunks of [`spawn_stdin`] as an [`AsyncRead`], for readers that take one (a line
/// reader); the end of the chunks is the end of input.
pub(crate) struct ChunkReader {
    chunks: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl ChunkReader {
    pub(crate) fn new(chunks: mpsc::Receiver<Bytes>) -> Self {
        ChunkReader {
            chunks,
            current: Bytes::new(),
        }
    }
}

impl AsyncRead for ChunkReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        while self.current.is_empty() {
            match self.chunks.poll_recv(cx) {
                Poll::Ready(Some(chunk)) => self.current = chunk,
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
        let n = self.current.len().min(buf.remaining());
        buf.put_slice(&self.current[..n]);
        self.current.advance(n);
        Poll::Ready(Ok(()))
    }
}

//! The read buffer of one connection, and the per-thread pool its memory comes from.
//!
//! The buffer belongs to a connection only while bytes are arriving: whenever the socket has
//! nothing more to give, its memory goes back to a small per-thread pool and the connection keeps
//! at most the few bytes of a partial header. An idle connection holds no read buffer at all.

use std::cell::RefCell;

/// Size of the pooled read buffer: one read takes whatever the socket holds up to this, so
/// pipelined small frames cost one read syscall per batch rather than per frame.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// Read buffers kept per thread for reuse.
const POOL_PER_THREAD: usize = 4;
/// Unparsed bytes a waiting connection keeps in a small buffer of its own; the most is a partial
/// control frame (14 + 125 bytes), since a data frame's body moves to its own buffer at once.
const CARRY_MAX: usize = 256;

/// The read buffer: pooled memory, `mem[start..end]` not yet parsed.
#[derive(Default)]
pub(super) struct ReadBuffer {
    mem: Option<Box<[u8]>>,
    start: usize,
    end: usize,
    /// Unparsed bytes kept while the pooled memory is back in the pool.
    carry: Vec<u8>,
}

thread_local! {
    static POOL: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

impl ReadBuffer {
    /// A buffer holding `leftover`: bytes already read past the upgrade request.
    pub(super) fn new(leftover: Vec<u8>) -> Self {
        ReadBuffer {
            carry: leftover,
            ..Default::default()
        }
    }

    pub(super) fn data(&self) -> &[u8] {
        match &self.mem {
            Some(mem) => &mem[self.start..self.end],
            None => &self.carry,
        }
    }

    /// The unread bytes, to change in place (a payload unmasked where it was read).
    pub(super) fn data_mut(&mut self) -> &mut [u8] {
        match &mut self.mem {
            Some(mem) => &mut mem[self.start..self.end],
            None => &mut self.carry,
        }
    }

    pub(super) fn consume(&mut self, n: usize) {
        match &self.mem {
            Some(_) => self.start += n,
            None => {
                self.carry.drain(..n);
            }
        }
    }

    /// Room to read into at the end, taking pooled memory back first.
    #[inline]
    pub(super) fn room(&mut self) -> &mut [u8] {
        let mem = self.mem.get_or_insert_with(|| {
            POOL.with(|p| p.borrow_mut().pop())
                .unwrap_or_else(|| vec![0u8; READ_CHUNK].into_boxed_slice())
        });
        if !self.carry.is_empty() {
            let n = self.carry.len();
            mem[..n].copy_from_slice(&self.carry);
            self.start = 0;
            self.end = n;
            self.carry = Vec::new();
        } else if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == mem.len() {
            mem.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut mem[self.end..]
    }

    /// `n` bytes were read into [`Self::room`].
    #[inline]
    pub(super) fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// Nothing arrives for now: the pooled memory goes back unless too much is unparsed.
    #[inline]
    pub(super) fn park(&mut self) {
        let unparsed = self.end - self.start;
        if unparsed > CARRY_MAX {
            return;
        }
        if let Some(mem) = self.mem.take() {
            self.carry = mem[self.start..self.end].to_vec();
            self.start = 0;
            self.end = 0;
            POOL.with(|p| {
                let mut pool = p.borrow_mut();
                if pool.len() < POOL_PER_THREAD {
                    pool.push(mem);
                }
            });
        }
    }
}

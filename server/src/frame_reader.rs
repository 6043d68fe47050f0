//! Reading client frames (RFC 6455 §5) with every bound checked before memory is committed.
//!
//! A frame's header is parsed from a small read buffer; only then, once the announced length
//! has passed the message cap (1009 past it) and been paid for — from the connection's
//! allowance or the process-wide [`InboundBudget`], see `inbound` — is a buffer of that size
//! allocated for the payload. The part of the payload already read is copied into it and the
//! rest is read straight into it, never past what is paid for, so a message is in memory once,
//! and what a handler receives is a slice of that buffer (zero-copy). A message past the
//! allowance is first paid for its first bytes there, and reserves the rest once they came.
//! Fragments are reassembled into one buffer with the same cap.
//!
//! Bytes are read into a buffer the connection holds only while they arrive (`read_buffer`,
//! with its per-thread pool); headers are parsed from it (`header`).
//!
//! A refused or failed connection reads on only to let the peer see its close: [`FrameReader::
//! discard_until_close`] parses headers and throws payload bytes away as they arrive.

mod header;
mod read_buffer;

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::time::Instant;

use super::control::{self, violation, Control, Violation};
use super::frame_writer::Opcode;
use super::inbound_budget::{
    self, Allowance, InboundBudget, Late, MessageBuf, Pace, Payment, Permit,
};
use super::liveness::Liveness;
use super::outbound::MessageKind;
use carrier_protocol::close::CloseCode;
use header::{parse_header, Header};
use read_buffer::{ReadBuffer, READ_CHUNK};

/// A body with at most this many bytes left is read through the read buffer (which may also
/// pick up the frames after it); a longer one is read straight into its own buffer.
const DIRECT_MIN: usize = READ_CHUNK / 2;

type Source = Box<dyn AsyncRead + Send + Unpin>;

/// What the reader hands the connection.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A complete binary message, unmasked; with a [`Payment`] when the reader keeps them
    /// ([`FrameReader::keep_payments`]).
    Binary(Bytes, Option<Payment>),
    /// A complete text message, unmasked; its UTF-8 is checked as it is read
    /// ([`FrameReader::text`]). Handled in place and dropped (its bytes are only ever lent), so
    /// it is not made into `Bytes`, which took an allocation of its own per message.
    Text(Text),
    /// Answer with a pong carrying this payload.
    Ping(Bytes),
    /// A pong: nothing to do.
    Pong,
    /// The peer closes with this code (1000 when it sent none).
    Close(CloseCode, String),
}

/// A received text message: in its own buffer with the permits that paid for it (given back
/// when it is dropped), or lent where it was read ([`FrameReader::text`]).
pub(crate) struct Text(TextBytes);

enum TextBytes {
    Own {
        data: MessageBuf,
        _permit: Permit,
    },
    /// A single-frame message read whole with its header: its payload, unmasked, is `len`
    /// bytes at `start` in the read buffer, which gives those bytes up only when the
    /// reader is asked for the next message.
    Lent {
        start: usize,
        len: usize,
    },
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            TextBytes::Own { data, .. } => write!(f, "Text({} bytes)", data.len()),
            TextBytes::Lent { len, .. } => write!(f, "Text({len} bytes, lent)"),
        }
    }
}

/// Why reading ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadEnd {
    /// The peer broke the protocol: close with this code and reason.
    Violation(Violation),
    /// End of stream or a read error: nothing more will arrive.
    Closed,
}

impl From<Violation> for ReadEnd {
    fn from(v: Violation) -> Self {
        ReadEnd::Violation(v)
    }
}

/// The message being received: one buffer, paid for, growing by fragments.
struct Message {
    kind: MessageKind,
    data: MessageBuf,
    permit: Permit,
    /// Bytes `permit` pays for: the message may grow to this without paying more, and no byte
    /// past it is read until more is paid.
    paid: usize,
    /// What the message reserves from the shared budget once it is past its allowance: its
    /// length when it is one frame, the cap when it is fragmented (its size is not known).
    reserve: usize,
    /// Paid from the shared budget, on this clock (else from the connection's allowance, with
    /// no time limit).
    shared: Option<Pace>,
    /// Bytes of `data` known to be valid UTF-8 (text only).
    valid: usize,
}

/// The data frame whose payload is being read into the message buffer.
struct Body {
    fin: bool,
    mask: [u8; 4],
    /// Where the frame's payload starts in the message buffer.
    start: usize,
    remaining: usize,
}

/// Reads one connection's frames. See the module docs.
pub(crate) struct FrameReader {
    src: Source,
    buf: ReadBuffer,
    message: Option<Message>,
    body: Option<Body>,
    cap: usize,
    /// The shared inbound budget of every connection.
    budget: InboundBudget,
    /// This connection's own allowance, tried first (see `inbound`'s module docs).
    allowance: Allowance,
    /// The first bytes of a message past the allowance that are received on the allowance
    /// before it may pay the shared budget (a quarter of the allowance).
    first_bytes: usize,
    /// Whether binary messages come with a [`Payment`] (a connection with bulk credit, whose
    /// bulk frames may move to a credit ledger).
    payments: bool,
    live: Arc<Liveness>,
    /// Bytes of the read buffer holding a text message lent to the caller ([`TextBytes::Lent`]),
    /// consumed when the next message is asked for.
    lent: usize,
}

impl FrameReader {
    /// `leftover`: bytes already read past the upgrade request. `allowance`: bytes of messages
    /// this connection may hold without the shared `budget`.
    pub(crate) fn new(
        src: Source,
        leftover: Vec<u8>,
        cap: usize,
        budget: InboundBudget,
        allowance: usize,
        live: Arc<Liveness>,
    ) -> Self {
        FrameReader {
            src,
            buf: ReadBuffer::new(leftover),
            message: None,
            body: None,
            cap,
            budget,
            allowance: Allowance::new(allowance),
            first_bytes: (allowance / 4).max(1),
            payments: false,
            live,
            lent: 0,
        }
    }

    /// Binary messages come with a [`Payment`] from now on.
    pub(crate) fn keep_payments(&mut self) {
        self.payments = true;
    }

    /// When the message in progress must receive its next byte, if it holds shared budget.
    fn due(&self) -> Option<(Instant, Late)> {
        let m = self.message.as_ref()?;
        let pace = m.shared?;
        Some(pace.deadline(m.data.len(), Instant::now()))
    }

    /// [`Self::fill`], and a message that holds shared budget must keep its pace.
    async fn fill_message(&mut self) -> Result<(), ReadEnd> {
        let Some((deadline, rule)) = self.due() else {
            return self.fill().await;
        };
        // Boxed: the timer is needed only by a message on the shared budget, and pinned here it
        // would size every connection's reader task, idle ones included (BENCHMARKS.md,
        // "Performance 3, second pass").
        match Box::pin(tokio::time::timeout_at(deadline, self.fill())).await {
            Ok(r) => r,
            Err(_) => Err(late(rule)),
        }
    }

    /// Pays for `extra` more bytes of a message, of which `ready` are already read: from the
    /// allowance when they fit there. Otherwise the message shows first that its bytes are
    /// coming: its next [`Self::first_bytes`] are received on the allowance (unless they are
    /// already here), and only then does it reserve `reserve` bytes from the shared budget
    /// ([`Self::leave_allowance`]). So a header that announces a large message and nothing
    /// more holds nothing of the shared budget, and is not in line for it. Only when the
    /// allowance cannot pay even those first bytes (the connection's earlier messages hold it)
    /// does the message reserve from the shared budget at once, waiting for it if need be.
    /// Returns the permit, the bytes it pays for, and whether it is from the shared budget; or,
    /// when the shared budget has no room now, the bytes to wait for there
    /// ([`Self::wait_shared`]). Waiting holds nothing of the shared budget, so waits never hold
    /// each other up.
    fn try_pay(
        allowance: &Allowance,
        budget: &InboundBudget,
        first_bytes: usize,
        (extra, ready, reserve): (usize, usize, usize),
    ) -> Result<(Permit, usize, bool), usize> {
        if let Some(p) = allowance.try_take(extra) {
            return Ok((p, extra, false));
        }
        let first = extra.min(first_bytes);
        if ready < first {
            if let Some(p) = allowance.try_take(first) {
                return Ok((p, first, false));
            }
        }
        match budget.try_take(reserve) {
            Some(p) => Ok((p, reserve, true)),
            None => Err(reserve),
        }
    }

    /// Waits for `n` bytes of the shared budget (the wait is not the client's: its liveness
    /// clock is paused, and no pace clock runs). On the heap: a rare wait, which held in the
    /// reader's state would size every connection's task, idle ones included (BENCHMARKS.md,
    /// "Performance 3, second pass").
    fn wait_shared<'a>(
        budget: &'a InboundBudget,
        live: &'a Liveness,
        n: usize,
    ) -> Pin<Box<impl Future<Output = Permit> + Send + 'a>> {
        Box::pin(async move {
            let _paused = live.pause();
            budget.take(n).await
        })
    }

    /// The message has received on its allowance all that was paid there, and more of it is
    /// coming: it reserves the rest from the shared budget, and its allowance goes back. Its
    /// clock starts now, for the bytes from here on. Cancel-safe: nothing changes until the
    /// permits are held.
    async fn leave_allowance(&mut self, frame_remaining: usize) -> Result<(), ReadEnd> {
        let Some(m) = self.message.as_ref() else {
            return Ok(());
        };
        let reserve = m.reserve;
        let permit = match self.budget.try_take(reserve) {
            Some(p) => p,
            None => Self::wait_shared(&self.budget, &self.live, reserve).await,
        };
        let Some(m) = self.message.as_mut() else {
            return Ok(());
        };
        let have = m.data.len();
        m.permit = permit;
        m.paid = reserve;
        m.shared = Some(Pace::start(have));
        m.data
            .reserve(frame_remaining.min(reserve - have), reserve)
            .map_err(|_| no_memory())
    }

    /// Reads more bytes into the read buffer; `Closed` at end of stream.
    async fn fill(&mut self) -> Result<(), ReadEnd> {
        match poll_fn(|cx| self.poll_fill(cx)).await {
            Ok(0) | Err(_) => Err(ReadEnd::Closed),
            Ok(_) => {
                self.live.received();
                Ok(())
            }
        }
    }

    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let room = self.buf.room();
        let mut rb = ReadBuf::new(room);
        match Pin::new(&mut self.src).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                self.buf.filled(n);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let n = rb.filled().len();
                self.buf.filled(n);
                if n == 0 {
                    self.buf.park();
                }
                Poll::Pending
            }
        }
    }

    /// The next message or control frame. Cancel-safe: a call dropped at any await leaves the
    /// reader able to go on (or to discard).
    pub(crate) async fn next(&mut self) -> Result<Incoming, ReadEnd> {
        self.give_up_lent();
        loop {
            if self.body.is_some() {
                self.read_body().await?;
                if let Some(message) = self.finish_frame()? {
                    return Ok(message);
                }
                continue;
            }
            let Some(h) = parse_header(self.buf.data())? else {
                self.fill_message().await?;
                continue;
            };
            if h.opcode.is_control() {
                // Bounded to 125 bytes by `parse_header`.
                let total = h.size + h.len as usize;
                if self.buf.data().len() < total {
                    // Between fragments of a message that holds shared budget, a control frame
                    // sent a byte at a time must not hold the budget past the message's pace.
                    self.fill_message().await?;
                    continue;
                }
                let mut payload = self.buf.data()[h.size..total].to_vec();
                fastwebsockets::unmask(&mut payload, h.mask);
                self.buf.consume(total);
                return Ok(match control::classify(h.opcode, &payload)? {
                    Control::Ping(_) => Incoming::Ping(Bytes::from(payload)),
                    Control::Pong => Incoming::Pong,
                    Control::Close { code, reason } => Incoming::Close(code, reason.to_owned()),
                });
            }
            if let Some(text) = self.lend_text(&h)? {
                return Ok(Incoming::Text(text));
            }
            self.start_data(h).await?;
            if let Some(message) = self.finish_frame()? {
                return Ok(message);
            }
        }
    }

    /// A text message in one frame that is already read whole is unmasked where it is, and lent
    /// to the caller from there: no buffer of its own, no permits (the read buffer is the
    /// connection's already), no copy. `None` for any other frame.
    fn lend_text(&mut self, h: &Header) -> Result<Option<Text>, ReadEnd> {
        if h.opcode != Opcode::Text || !h.fin || self.message.is_some() {
            return Ok(None);
        }
        let Ok(len) = usize::try_from(h.len) else {
            return Ok(None);
        };
        let total = h.size + len;
        if len > self.cap || self.buf.data().len() < total {
            return Ok(None);
        }
        let payload = &mut self.buf.data_mut()[h.size..total];
        fastwebsockets::unmask(payload, h.mask);
        // Its UTF-8 is checked once, where it is read as text ([`Self::text`]).
        self.lent = total;
        Ok(Some(Text(TextBytes::Lent { start: h.size, len })))
    }

    /// The read buffer gives up the bytes of the text message it lent last, if any: the caller
    /// asked for more, so it is done with that one.
    fn give_up_lent(&mut self) {
        self.buf.consume(std::mem::take(&mut self.lent));
    }

    /// The text of a message this reader returned, or the violation to close with (1007) when
    /// its bytes are not UTF-8. A message in one frame read whole is checked here, once, as it
    /// becomes `&str` (checking it on arrival too was a second pass over every `system.ping`);
    /// one gathered in a buffer was checked as its fragments came, so an invalid one failed
    /// at its fragment, and is checked again here.
    pub(crate) fn text<'a>(&'a self, text: &'a Text) -> Result<&'a str, Violation> {
        let bytes = match &text.0 {
            TextBytes::Own { data, .. } => data.as_ref(),
            TextBytes::Lent { start, len } => self
                .buf
                .data()
                .get(*start..*start + *len)
                .unwrap_or_default(),
        };
        std::str::from_utf8(bytes)
            .map_err(|_| violation(CloseCode::INVALID_PAYLOAD, "invalid UTF-8"))
    }

    /// Checks a data frame's header against the message sequence and the cap, pays for its
    /// payload and moves the bytes already read into the message buffer. The header is consumed
    /// only once paid for, so a cancelled wait leaves it in place.
    async fn start_data(&mut self, h: Header) -> Result<(), ReadEnd> {
        let kind = match (h.opcode, self.message.is_some()) {
            (Opcode::Continuation, false) => {
                return Err(violation(
                    CloseCode::PROTOCOL_ERROR,
                    "continuation frame without a message",
                )
                .into())
            }
            (Opcode::Text | Opcode::Binary, true) => {
                return Err(violation(
                    CloseCode::PROTOCOL_ERROR,
                    "new message before the previous one ended",
                )
                .into())
            }
            (Opcode::Text, false) => Some(MessageKind::Text),
            (Opcode::Binary, false) => Some(MessageKind::Binary),
            _ => None,
        };
        let have = self.message.as_ref().map_or(0, |m| m.data.len());
        let len = usize::try_from(h.len).unwrap_or(usize::MAX);
        if len > self.cap.saturating_sub(have) {
            return Err(violation(CloseCode::TOO_BIG, "message over the size cap").into());
        }
        // This frame's payload bytes already read.
        let ready = len.min(self.buf.data().len().saturating_sub(h.size));
        if let Some(kind) = kind {
            // A fragmented message that leaves the allowance reserves the whole cap from the
            // shared budget at once, so it never waits there while holding some of it (two such
            // waits could otherwise hold each other up).
            let reserve = if h.fin { len } else { self.cap };
            let (permit, paid, shared) = match Self::try_pay(
                &self.allowance,
                &self.budget,
                self.first_bytes,
                (len, ready, reserve),
            ) {
                Ok(paid) => paid,
                Err(n) => (
                    Self::wait_shared(&self.budget, &self.live, n).await,
                    n,
                    true,
                ),
            };
            self.message = Some(Message {
                kind,
                data: MessageBuf::with_capacity(len.min(paid)).map_err(|_| no_memory())?,
                paid,
                reserve,
                permit,
                // The clock starts once the permits are held: the wait for them is not the
                // client's.
                shared: shared.then(|| Pace::start(0)),
                valid: 0,
            });
        } else if let Some(m) = self.message.as_ref() {
            let need = have + len;
            if need > m.paid {
                // A fragment past what the message has paid for (it is on the allowance).
                let extra = need - m.paid;
                let (more, paid, shared) = match Self::try_pay(
                    &self.allowance,
                    &self.budget,
                    self.first_bytes,
                    (extra, ready, self.cap),
                ) {
                    Ok(paid) => paid,
                    Err(n) => (
                        Self::wait_shared(&self.budget, &self.live, n).await,
                        n,
                        true,
                    ),
                };
                if let Some(m) = self.message.as_mut() {
                    m.reserve = self.cap;
                    if shared {
                        // The shared reserve covers the whole message; the allowance goes back.
                        // Its clock starts now, for the bytes from this fragment on.
                        m.permit = more;
                        m.paid = self.cap;
                        m.shared = Some(Pace::start(have));
                    } else {
                        m.permit.merge(more);
                        m.paid += paid;
                    }
                }
            }
            if let Some(m) = self.message.as_mut() {
                // Grow to what is paid for (on the allowance, not by doubling past it).
                m.data
                    .reserve(len.min(m.paid - have), m.paid)
                    .map_err(|_| no_memory())?;
            }
        }
        self.buf.consume(h.size);
        let Some(m) = self.message.as_mut() else {
            return Ok(());
        };
        let start = m.data.len();
        let ready = ready.min(m.paid - start);
        m.data.extend_from_slice(&self.buf.data()[..ready]);
        self.buf.consume(ready);
        self.body = Some(Body {
            fin: h.fin,
            mask: h.mask,
            start,
            remaining: len - ready,
        });
        Ok(())
    }

    /// Reads the rest of the current body.
    async fn read_body(&mut self) -> Result<(), ReadEnd> {
        loop {
            let (Some(body), Some(m)) = (self.body.as_mut(), self.message.as_mut()) else {
                return Ok(());
            };
            if body.remaining == 0 {
                return Ok(());
            }
            let room = m.paid - m.data.len();
            if room == 0 {
                let remaining = body.remaining;
                self.leave_allowance(remaining).await?;
                continue;
            }
            // Bytes of the body already read (past what was paid for when they came).
            let ready = body.remaining.min(room).min(self.buf.data().len());
            if ready > 0 {
                m.data.extend_from_slice(&self.buf.data()[..ready]);
                self.buf.consume(ready);
                body.remaining -= ready;
                continue;
            }
            if body.remaining < DIRECT_MIN {
                // Through the read buffer: the same syscall may bring the next frames.
                self.fill_message().await?;
                continue;
            }
            // Straight into the message's buffer, never past what is paid for.
            let remaining = body.remaining.min(room);
            let due = m
                .shared
                .map(|pace| pace.deadline(m.data.len(), Instant::now()));
            let read = async {
                match m.data.heap_mut() {
                    Some(v) => self.src.read_buf(&mut v.limit(remaining)).await,
                    None => match m.data.mapped_spare(remaining) {
                        Some(spare) => self.src.read(spare).await,
                        None => Ok(0),
                    },
                }
            };
            let read = match due {
                // Boxed for the reason `fill_message` gives.
                Some((deadline, rule)) => {
                    match Box::pin(tokio::time::timeout_at(deadline, read)).await {
                        Ok(r) => r,
                        Err(_) => return Err(late(rule)),
                    }
                }
                None => read.await,
            };
            match read {
                Ok(0) | Err(_) => return Err(ReadEnd::Closed),
                Ok(n) => {
                    m.data.commit(n);
                    body.remaining -= n;
                    self.live.received();
                }
            }
        }
    }

    /// The current body is complete: unmask it, check text, and hand over the message when this
    /// was its last frame.
    fn finish_frame(&mut self) -> Result<Option<Incoming>, ReadEnd> {
        let Some(body) = self.body.as_ref() else {
            return Ok(None);
        };
        if body.remaining > 0 {
            return Ok(None);
        }
        let (fin, mask, start) = (body.fin, body.mask, body.start);
        self.body = None;
        let Some(m) = self.message.as_mut() else {
            return Ok(None);
        };
        fastwebsockets::unmask(m.data.tail_mut(start), mask);
        if m.kind == MessageKind::Text {
            check_utf8(m, fin)?;
        }
        if !fin {
            return Ok(None);
        }
        let Some(mut m) = self.message.take() else {
            return Ok(None);
        };
        m.permit.shrink_to(m.data.resident());
        if self.payments && m.kind == MessageKind::Binary {
            let (bytes, payment) = inbound_budget::freeze_with_payment(m.data, m.permit);
            return Ok(Some(Incoming::Binary(bytes, payment)));
        }
        if m.kind == MessageKind::Text {
            return Ok(Some(Incoming::Text(Text(TextBytes::Own {
                data: m.data,
                _permit: m.permit,
            }))));
        }
        let bytes = inbound_budget::freeze(m.data, m.permit);
        Ok(Some(Incoming::Binary(bytes, None)))
    }

    /// After a close was sent: reads and throws away what the peer still sends until its
    /// close frame, the end of the stream or an invalid frame. Holds nothing but the pooled read
    /// buffer while bytes arrive; a message in progress is dropped (its memory returns).
    pub(crate) async fn discard_until_close(&mut self) {
        self.give_up_lent();
        let mut skip = self.body.take().map_or(0, |b| b.remaining as u64);
        self.message = None;
        loop {
            if skip > 0 {
                let n = usize::try_from(skip)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.data().len());
                self.buf.consume(n);
                skip -= n as u64;
                if skip > 0 && self.fill().await.is_err() {
                    return;
                }
                continue;
            }
            match parse_header(self.buf.data()) {
                Err(_) => return,
                Ok(None) => {
                    if self.fill().await.is_err() {
                        return;
                    }
                }
                Ok(Some(h)) if h.opcode == Opcode::Close => return,
                Ok(Some(h)) => {
                    self.buf.consume(h.size);
                    skip = h.len;
                }
            }
        }
    }
}

/// A message that holds shared budget fell behind: the close names the rule it broke (the
/// numbers are [`inbound::STALL_TIMEOUT`], [`inbound::PACE_GRACE`] and [`inbound::MIN_RATE`]).
fn late(rule: Late) -> ReadEnd {
    let reason = match rule {
        Late::Stalled => "message stalled: no bytes for 10 s",
        Late::TooSlow => "message too slow: under 256 KiB/s on average after 3 s",
    };
    ReadEnd::Violation(violation(CloseCode::POLICY, reason))
}

/// The OS refused memory for a message the budget had room for.
fn no_memory() -> ReadEnd {
    ReadEnd::Violation(violation(CloseCode::TOO_BIG, "no memory for the message"))
}

/// Validates the text bytes added since the last check. An incomplete sequence at the end is
/// fine until the final fragment.
fn check_utf8(m: &mut Message, fin: bool) -> Result<(), Violation> {
    let invalid = violation(CloseCode::INVALID_PAYLOAD, "invalid UTF-8");
    match std::str::from_utf8(&m.data.as_ref()[m.valid..]) {
        Ok(_) => {
            m.valid = m.data.len();
            Ok(())
        }
        Err(e) if e.error_len().is_none() && !fin => {
            m.valid += e.valid_up_to();
            Ok(())
        }
        Err(_) => Err(invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    use tokio::io::{AsyncWriteExt, DuplexStream};
    use tokio::time::Instant;

    use crate::inbound_budget::{MIN_RATE, PACE_GRACE, STALL_TIMEOUT};

    const MASK: [u8; 4] = [0x11, 0x22, 0x33, 0x44];

    /// A masked client frame.
    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![(if fin { 0x80 } else { 0 }) | opcode];
        head_len(&mut f, payload.len() as u64);
        f.extend_from_slice(&MASK);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
        f
    }

    fn head_len(f: &mut Vec<u8>, len: u64) {
        if len < 126 {
            f.push(0x80 | len as u8);
        } else if len <= 0xFFFF {
            f.push(0x80 | 126);
            f.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            f.push(0x80 | 127);
            f.extend_from_slice(&len.to_be_bytes());
        }
    }

    fn reader(cap: usize, budget: usize) -> (FrameReader, DuplexStream, InboundBudget) {
        reader_with_allowance(cap, budget, 0)
    }

    fn reader_with_allowance(
        cap: usize,
        budget: usize,
        allowance: usize,
    ) -> (FrameReader, DuplexStream, InboundBudget) {
        let (client, server) = tokio::io::duplex(1 << 20);
        let budget = InboundBudget::new(budget);
        let r = FrameReader::new(
            Box::new(server),
            Vec::new(),
            cap,
            budget.clone(),
            allowance,
            Arc::new(Liveness::new()),
        );
        (r, client, budget)
    }

    /// A binary message read alongside something else (a text message's bytes are lent by
    /// the reader: [`read_message`]).
    fn message(r: Result<Incoming, ReadEnd>) -> (MessageKind, Bytes) {
        match r {
            Ok(Incoming::Binary(b, _)) => (MessageKind::Binary, b),
            other => panic!("expected a binary message, got {other:?}"),
        }
    }

    /// The next message, its bytes copied out.
    async fn read_message(r: &mut FrameReader) -> (MessageKind, Bytes) {
        match r.next().await {
            Ok(Incoming::Binary(b, _)) => (MessageKind::Binary, b),
            Ok(Incoming::Text(t)) => {
                let text = r.text(&t).expect("valid UTF-8");
                (MessageKind::Text, Bytes::copy_from_slice(text.as_bytes()))
            }
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// The code of the violation the next message ends in: refused by the reader, or a text
    /// whose bytes are refused as it is read ([`FrameReader::text`]).
    async fn next_violation_code(r: &mut FrameReader) -> u16 {
        match r.next().await {
            Ok(Incoming::Text(t)) => match r.text(&t) {
                Err(v) => v.code.as_u16(),
                Ok(s) => panic!("expected a violation, got the text {s:?}"),
            },
            other => violation_code(other),
        }
    }

    fn violation_code(r: Result<Incoming, ReadEnd>) -> u16 {
        violation_of(r).code.as_u16()
    }

    /// The violation a read ended with.
    fn violation_of(r: Result<Incoming, ReadEnd>) -> Violation {
        match r {
            Err(ReadEnd::Violation(v)) => v,
            // Not the message's bytes: they may be megabytes.
            Ok(Incoming::Binary(b, _)) => {
                panic!(
                    "expected a violation, got a binary message of {} bytes",
                    b.len()
                )
            }
            other => panic!("expected a violation, got {other:?}"),
        }
    }

    #[test]
    fn header_length_classes_and_refusals() {
        for len in [0u64, 125, 126, 65535, 65536, 1 << 40] {
            let mut f = vec![0x82];
            head_len(&mut f, len);
            f.extend_from_slice(&MASK);
            let h = parse_header(&f).unwrap().unwrap();
            assert_eq!((h.len, h.size, h.mask), (len, f.len(), MASK));
            assert_eq!(parse_header(&f[..f.len() - 1]), Ok(None), "{len}");
        }
        let refused: &[&[u8]] = &[
            &[0xC2, 0x80, 0, 0, 0, 0],                            // RSV1
            &[0x83, 0x80, 0, 0, 0, 0],                            // reserved opcode 3
            &[0x8B, 0x80, 0, 0, 0, 0],                            // reserved opcode 0xB
            &[0x82, 0x00],                                        // unmasked
            &[0x09, 0x80, 0, 0, 0, 0],                            // fragmented ping
            &[0x89, 0x80 | 126, 0, 126, 0, 0, 0, 0],              // ping of 126 bytes
            &[0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // top bit of the length
        ];
        for f in refused {
            assert_eq!(
                parse_header(f).map_err(|v| v.code.as_u16()),
                Err(1002),
                "{f:02x?}"
            );
        }
    }

    #[tokio::test]
    async fn pipelined_frames_in_one_write_all_arrive_in_order() {
        let (mut r, mut c, budget) = reader(1 << 20, 1 << 20);
        let mut wire = Vec::new();
        for i in 0..1000u32 {
            wire.extend(frame(true, 2, &i.to_be_bytes()));
        }
        wire.extend(frame(true, 9, b"p"));
        c.write_all(&wire).await.unwrap();
        for i in 0..1000u32 {
            let (k, b) = read_message(&mut r).await;
            assert_eq!(k, MessageKind::Binary);
            assert_eq!(&b[..], i.to_be_bytes());
        }
        assert!(matches!(r.next().await, Ok(Incoming::Ping(p)) if &p[..] == b"p"));
        assert_eq!(budget.in_use(), 0, "every message's memory was returned");
    }

    #[tokio::test]
    async fn text_read_whole_is_lent_in_place_and_given_up_at_the_next_read() {
        let (mut r, mut c, budget) = reader(1 << 20, 1 << 20);
        let mut wire = Vec::new();
        for i in 0..100u32 {
            wire.extend(frame(true, 1, format!("text {i}").as_bytes()));
        }
        // A message in two frames and a text frame cut by the end of a write: in buffers of
        // their own.
        wire.extend(frame(false, 1, b"two "));
        wire.extend(frame(true, 0, b"frames"));
        let cut = frame(true, 1, b"cut in two");
        wire.extend(&cut[..5]);
        c.write_all(&wire).await.unwrap();
        for i in 0..100u32 {
            let Ok(Incoming::Text(t)) = r.next().await else {
                panic!("expected text {i}");
            };
            assert!(format!("{t:?}").contains("lent"));
            assert_eq!(r.text(&t), Ok(format!("text {i}").as_str()));
        }
        assert_eq!(read_message(&mut r).await.1, &b"two frames"[..]);
        let (read, written) = tokio::join!(read_message(&mut r), c.write_all(&cut[5..]));
        written.unwrap();
        assert_eq!(read.1, &b"cut in two"[..]);
        assert_eq!(budget.in_use(), 0);
        // A lent text that is not valid UTF-8 is refused as it is read.
        c.write_all(&frame(true, 1, &[0xff, 0xfe])).await.unwrap();
        assert_eq!(next_violation_code(&mut r).await, 1007);
    }

    #[tokio::test]
    async fn a_frame_written_one_byte_at_a_time_is_read_whole() {
        let (mut r, mut c, _) = reader(1 << 20, 1 << 20);
        let payload: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
        let wire = frame(true, 2, &payload);
        let writer = tokio::spawn(async move {
            for chunk in wire.chunks(997) {
                c.write_all(chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
            c
        });
        let (_, b) = read_message(&mut r).await;
        assert_eq!(&b[..], &payload[..]);
        drop(writer.await.unwrap());
        assert_eq!(r.next().await.err(), Some(ReadEnd::Closed));
    }

    #[tokio::test]
    async fn an_announced_length_past_the_cap_is_refused_before_anything_is_read() {
        // 60 GiB announced, cap 1 GiB: refused from the header alone (the duplex holds no body).
        let (mut r, mut c, budget) = reader(1 << 30, 1 << 30);
        let mut f = vec![0x82];
        head_len(&mut f, 60 << 30);
        f.extend_from_slice(&MASK);
        c.write_all(&f).await.unwrap();
        assert_eq!(violation_code(r.next().await), 1009);
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn the_cap_is_inclusive_for_single_frames_and_for_fragments() {
        let (mut r, mut c, _) = reader(10, 100);
        c.write_all(&frame(true, 2, &[1; 10])).await.unwrap();
        assert_eq!(read_message(&mut r).await.1.len(), 10);
        c.write_all(&frame(false, 2, &[1; 5])).await.unwrap();
        c.write_all(&frame(true, 0, &[2; 5])).await.unwrap();
        assert_eq!(
            &read_message(&mut r).await.1[..],
            &[1, 1, 1, 1, 1, 2, 2, 2, 2, 2]
        );
        c.write_all(&frame(false, 2, &[1; 5])).await.unwrap();
        c.write_all(&frame(true, 0, &[2; 6])).await.unwrap();
        assert_eq!(violation_code(r.next().await), 1009);

        let (mut r, mut c, _) = reader(10, 100);
        c.write_all(&frame(true, 1, &[b'a'; 11])).await.unwrap();
        assert_eq!(violation_code(r.next().await), 1009);
    }

    #[tokio::test]
    async fn utf8_split_across_fragments_is_fine_and_invalid_fails_fast() {
        let euro = "€".as_bytes();
        let (mut r, mut c, _) = reader(100, 1000);
        c.write_all(&frame(false, 1, &euro[..1])).await.unwrap();
        c.write_all(&frame(false, 0, &euro[1..2])).await.unwrap();
        c.write_all(&frame(true, 0, &euro[2..])).await.unwrap();
        let (k, b) = read_message(&mut r).await;
        assert_eq!((k, &b[..]), (MessageKind::Text, euro));

        // An invalid byte fails at its fragment, before the message ends.
        c.write_all(&frame(false, 1, &[0xff])).await.unwrap();
        assert_eq!(violation_code(r.next().await), 1007);

        // A sequence left incomplete by the last fragment fails.
        let (mut r, mut c, _) = reader(100, 1000);
        c.write_all(&frame(false, 1, &euro[..2])).await.unwrap();
        c.write_all(&frame(true, 0, b"")).await.unwrap();
        assert_eq!(violation_code(r.next().await), 1007);

        let (mut r, mut c, _) = reader(100, 1000);
        c.write_all(&frame(true, 1, &[b'o', b'k', 0xC3]))
            .await
            .unwrap();
        assert_eq!(next_violation_code(&mut r).await, 1007);
    }

    #[tokio::test]
    async fn fragment_sequencing_errors() {
        let (mut r, mut c, _) = reader(100, 1000);
        c.write_all(&frame(true, 0, b"x")).await.unwrap();
        assert_eq!(violation_code(r.next().await), 1002);

        let (mut r, mut c, _) = reader(100, 1000);
        c.write_all(&frame(false, 1, b"x")).await.unwrap();
        c.write_all(&frame(true, 1, b"x")).await.unwrap();
        assert_eq!(violation_code(r.next().await), 1002);
    }

    #[tokio::test]
    async fn control_frames_between_fragments_are_answered() {
        let (mut r, mut c, _) = reader(100, 1000);
        c.write_all(&frame(false, 1, b"he")).await.unwrap();
        c.write_all(&frame(true, 9, b"ping")).await.unwrap();
        c.write_all(&frame(true, 0, b"llo")).await.unwrap();
        c.write_all(&frame(true, 8, b"\x03\xe8bye")).await.unwrap();
        assert!(matches!(r.next().await, Ok(Incoming::Ping(p)) if &p[..] == b"ping"));
        assert_eq!(&read_message(&mut r).await.1[..], b"hello");
        assert!(
            matches!(r.next().await, Ok(Incoming::Close(CloseCode(1000), reason)) if reason == "bye")
        );
    }

    #[tokio::test]
    async fn a_message_waits_for_the_budget_and_is_read_once_memory_is_free() {
        let (mut r, mut c, budget) = reader(1000, 1000);
        let held = budget.try_take(900).unwrap();
        c.write_all(&frame(true, 2, &[7; 500])).await.unwrap();
        let pending = tokio::time::timeout(std::time::Duration::from_millis(50), r.next()).await;
        assert!(
            pending.is_err(),
            "the reader waits while the budget is taken"
        );
        drop(held);
        let (_, b) = read_message(&mut r).await;
        assert_eq!(b.len(), 500);
        assert_eq!(budget.in_use(), 500, "the message holds what it paid for");
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_fragmented_message_pays_for_the_cap_and_returns_the_rest_when_complete() {
        let (mut r, mut c, budget) = reader(1000, 2000);
        c.write_all(&frame(false, 2, &[1; 10])).await.unwrap();
        c.write_all(&frame(true, 0, &[2; 10])).await.unwrap();
        let (_, b) = read_message(&mut r).await;
        assert_eq!(b.len(), 20);
        assert!(budget.in_use() <= 1000 && budget.in_use() >= 20);
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn discarding_skips_payloads_without_holding_them_and_stops_at_the_close() {
        let (mut r, mut c, budget) = reader(1 << 20, 1 << 20);
        let writer = tokio::spawn(async move {
            // A frame announcing far more than the cap: discarding does not care.
            let mut f = vec![0x82];
            head_len(&mut f, 3 << 20);
            f.extend_from_slice(&MASK);
            c.write_all(&f).await.unwrap();
            let chunk = vec![0u8; 64 << 10];
            for _ in 0..48 {
                c.write_all(&chunk).await.unwrap();
            }
            c.write_all(&frame(true, 8, b"")).await.unwrap();
            c.write_all(&frame(true, 2, b"after the close"))
                .await
                .unwrap();
            c
        });
        r.discard_until_close().await;
        assert_eq!(budget.in_use(), 0);
        let _c = writer.await.unwrap();
    }

    #[tokio::test]
    async fn small_messages_are_paid_from_the_allowance_while_the_shared_budget_is_taken() {
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 100);
        let held = budget.try_take(1000).unwrap();
        c.write_all(&frame(true, 2, &[7; 100])).await.unwrap();
        let (_, first) = read_message(&mut r).await;
        assert_eq!(first.len(), 100, "at the allowance: read at once");
        // The allowance is held by the first message: the next one needs the shared budget.
        c.write_all(&frame(true, 2, &[8; 10])).await.unwrap();
        let pending = tokio::time::timeout(std::time::Duration::from_millis(50), r.next()).await;
        assert!(pending.is_err(), "past the allowance the reader waits");
        drop(first);
        let (_, second) = read_message(&mut r).await;
        assert_eq!(
            second.len(),
            10,
            "the allowance is back once the first is dropped"
        );
        drop(held);
    }

    #[tokio::test]
    async fn a_fragmented_message_grows_on_the_allowance_then_pays_the_cap_from_the_shared_budget()
    {
        let (mut r, mut c, budget) = reader_with_allowance(1000, 2000, 100);
        // Two fragments within the allowance: nothing of the shared budget.
        c.write_all(&frame(false, 2, &[1; 60])).await.unwrap();
        c.write_all(&frame(false, 0, &[2; 40])).await.unwrap();
        // A third past it: the cap is reserved from the shared budget.
        c.write_all(&frame(false, 0, &[3; 50])).await.unwrap();
        let pending = tokio::time::timeout(std::time::Duration::from_millis(50), r.next()).await;
        assert!(pending.is_err(), "the message is not complete");
        assert_eq!(budget.in_use(), 1000, "past the allowance it holds the cap");
        c.write_all(&frame(true, 0, &[4; 5])).await.unwrap();
        let (_, b) = read_message(&mut r).await;
        assert_eq!(b.len(), 155);
        assert!(budget.in_use() >= 155 && budget.in_use() <= 1000);
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_fragmented_message_on_the_allowance_holds_nothing_of_the_shared_budget() {
        // The first fragment of a message that never ends: others' messages are not kept waiting.
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 100);
        c.write_all(&frame(false, 1, b"{")).await.unwrap();
        let pending = tokio::time::timeout(std::time::Duration::from_millis(50), r.next()).await;
        assert!(pending.is_err());
        assert_eq!(budget.in_use(), 0);
    }

    /// The first `sent` bytes of a frame of `len` payload bytes.
    fn partial_frame(fin: bool, opcode: u8, len: usize, sent: usize) -> Vec<u8> {
        let mut f = frame(fin, opcode, &vec![0; len]);
        f.truncate(f.len() - (len - sent));
        f
    }

    const MIB: usize = 1 << 20;

    /// Asserts that `elapsed` is `expected`, to the timer's millisecond (the clock is paused).
    fn assert_at(elapsed: Duration, expected: Duration) {
        assert!(
            elapsed >= expected && elapsed <= expected + Duration::from_millis(5),
            "after {elapsed:?}, expected {expected:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_holding_the_shared_budget_that_falls_behind_is_refused_at_the_grace() {
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 0);
        // A header announcing 500 bytes, and 10 of them.
        c.write_all(&partial_frame(true, 2, 500, 10)).await.unwrap();
        let started = Instant::now();
        let v = violation_of(r.next().await);
        assert_at(started.elapsed(), PACE_GRACE);
        assert_eq!(v.code.as_u16(), 1008);
        // The reason's numbers are the rule's.
        let rule = format!(
            "message too slow: under {} KiB/s on average after {} s",
            MIN_RATE >> 10,
            PACE_GRACE.as_secs()
        );
        assert_eq!(v.reason, rule);
        drop(r);
        assert_eq!(budget.in_use(), 0, "the memory returned");
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_ahead_of_its_pace_may_still_not_stall() {
        // 12 s worth of bytes at the minimum rate, at once: by rate alone it could wait 12 s.
        let (mut r, mut c, _) = reader_with_allowance(16 * MIB, 16 * MIB, 0);
        let burst = 12 * MIN_RATE as usize;
        let writer = tokio::spawn(async move {
            c.write_all(&partial_frame(true, 2, 16 * MIB, burst))
                .await
                .unwrap();
            c
        });
        let started = Instant::now();
        let v = violation_of(r.next().await);
        assert_at(started.elapsed(), STALL_TIMEOUT);
        let rule = format!(
            "message stalled: no bytes for {} s",
            STALL_TIMEOUT.as_secs()
        );
        assert_eq!(v.reason, rule);
        drop(writer.await.unwrap());
    }

    /// Sends a frame of `len` payload bytes at `rate` bytes per second, in 64 KiB chunks on a
    /// fixed schedule.
    async fn send_paced(c: &mut DuplexStream, len: usize, rate: f64) {
        let wire = frame(true, 2, &vec![6; len]);
        let chunk = 64 << 10;
        let mut ticks = tokio::time::interval(Duration::from_secs_f64(chunk as f64 / rate));
        for part in wire.chunks(chunk) {
            ticks.tick().await;
            if c.write_all(part).await.is_err() {
                return;
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_just_above_the_minimum_rate_is_read_whole_and_one_just_below_is_refused() {
        let rate = MIN_RATE as f64;
        // 8 s worth at 1.1 × the rate: 7.3 s, well past the grace.
        let len = 8 * MIN_RATE as usize;
        let (mut r, mut c, _) = reader_with_allowance(16 * MIB, 16 * MIB, 0);
        let started = Instant::now();
        let (read, ()) = tokio::join!(r.next(), send_paced(&mut c, len, rate * 1.1));
        assert_eq!(message(read).1.len(), len);
        assert!(started.elapsed() > Duration::from_secs(7));
        // At 0.9 × the rate: refused once the grace is over.
        let (mut r, mut c, _) = reader_with_allowance(16 * MIB, 16 * MIB, 0);
        let started = Instant::now();
        let ((read, elapsed), ()) = tokio::join!(
            async {
                let read = r.next().await;
                let elapsed = started.elapsed();
                drop(r); // the connection is closed: the sender's writes fail
                (read, elapsed)
            },
            send_paced(&mut c, len, rate * 0.9)
        );
        assert_eq!(violation_code(read), 1008);
        assert!(
            elapsed >= PACE_GRACE && elapsed < PACE_GRACE + Duration::from_millis(100),
            "refused after {elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_the_shared_budget_does_not_count_against_a_message() {
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 0);
        let held = budget.try_take(1000).unwrap();
        let f = frame(true, 2, &[3; 500]);
        let (first, rest) = f.split_at(20);
        c.write_all(first).await.unwrap();
        let driver = async {
            // The reader waits 20 s for memory, then the rest comes 2 s after it got it.
            tokio::time::sleep(Duration::from_secs(20)).await;
            drop(held);
            tokio::time::sleep(Duration::from_secs(2)).await;
            c.write_all(rest).await.unwrap();
        };
        let (read, ()) = tokio::join!(r.next(), driver);
        assert_eq!(message(read).1.len(), 500);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fragmented_message_starts_its_clock_when_it_moves_to_the_shared_budget() {
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 100);
        c.write_all(&frame(false, 2, &[1; 60])).await.unwrap();
        let started = Instant::now();
        let driver = async {
            // On the allowance there is no clock: 10 s between fragments is fine.
            tokio::time::sleep(Duration::from_secs(10)).await;
            c.write_all(&frame(false, 0, &[2; 50])).await.unwrap();
        };
        let (read, ()) = tokio::join!(r.next(), driver);
        assert_eq!(violation_code(read), 1008);
        assert_at(started.elapsed(), Duration::from_secs(10) + PACE_GRACE);
        drop(r);
        assert_eq!(budget.in_use(), 0, "the memory returned");
    }

    #[tokio::test(start_paused = true)]
    async fn a_control_frame_left_unfinished_inside_a_shared_message_does_not_hold_the_budget() {
        // A fragment holding the shared budget, then the first byte of a ping's header and its
        // second byte 8 s later (the rest never comes): the budget used to be held for as long as
        // the ping's header stayed unfinished.
        let (mut r, mut c, _) = reader_with_allowance(1000, 1000, 0);
        c.write_all(&frame(false, 2, &[1; 10])).await.unwrap();
        let ping = frame(true, 9, b"ping");
        c.write_all(&ping[..1]).await.unwrap();
        let started = Instant::now();
        let driver = async {
            tokio::time::sleep(Duration::from_secs(8)).await;
            let _ = c.write_all(&ping[1..2]).await;
            c
        };
        let read = async {
            let read = tokio::time::timeout(Duration::from_secs(60), r.next()).await;
            (read, started.elapsed())
        };
        let ((read, elapsed), _c) = tokio::join!(read, driver);
        let v = violation_of(read.expect("refused, not left waiting"));
        assert_eq!(v.code.as_u16(), 1008);
        assert_at(elapsed, PACE_GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_on_the_allowance_may_pause() {
        let (mut r, mut c, _budget) = reader_with_allowance(1000, 1000, 1000);
        let mut f = frame(true, 2, &[0; 500]);
        let rest = f.split_off(f.len() - 490);
        c.write_all(&f).await.unwrap();
        let early = tokio::time::timeout(STALL_TIMEOUT * 3, r.next()).await;
        assert!(early.is_err(), "no stall limit on the allowance");
        c.write_all(&rest).await.unwrap();
        let (_, b) = read_message(&mut r).await;
        assert_eq!(b.len(), 500);
    }

    #[tokio::test]
    async fn a_header_past_the_allowance_holds_nothing_of_the_shared_budget_until_its_bytes_come() {
        // Allowance 100: a message past it receives its first 25 bytes there first.
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 100);
        let wire = frame(true, 2, &[9; 500]);
        let (head, body) = wire.split_at(wire.len() - 500);
        c.write_all(head).await.unwrap();
        let pending = tokio::time::timeout(Duration::from_millis(50), r.next()).await;
        assert!(pending.is_err(), "nothing of the message has come");
        assert_eq!(
            budget.in_use(),
            0,
            "a header alone holds nothing of the shared budget"
        );
        c.write_all(&body[..25]).await.unwrap();
        let pending = tokio::time::timeout(Duration::from_millis(50), r.next()).await;
        assert!(pending.is_err(), "the message is not complete");
        assert_eq!(
            budget.in_use(),
            500,
            "its first bytes came: it reserves its length"
        );
        c.write_all(&body[25..]).await.unwrap();
        let (_, b) = read_message(&mut r).await;
        assert_eq!(&b[..], &[9; 500][..]);
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_continuation_header_alone_holds_nothing_of_the_shared_budget() {
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 100);
        c.write_all(&frame(false, 2, &[1; 10])).await.unwrap();
        let next = frame(true, 0, &[2; 300]);
        c.write_all(&next[..next.len() - 300]).await.unwrap();
        let pending = tokio::time::timeout(Duration::from_millis(50), r.next()).await;
        assert!(pending.is_err());
        assert_eq!(budget.in_use(), 0);
        c.write_all(&next[next.len() - 300..]).await.unwrap();
        let (_, b) = read_message(&mut r).await;
        assert_eq!(b.len(), 310);
        assert!(
            budget.in_use() >= 310,
            "past the allowance it is paid from the shared budget"
        );
    }

    #[tokio::test]
    async fn a_header_whose_first_bytes_came_with_it_reserves_at_once() {
        // The first bytes are already read: no stop on the allowance, one buffer from the start.
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 100);
        c.write_all(&partial_frame(true, 2, 500, 30)).await.unwrap();
        let pending = tokio::time::timeout(Duration::from_millis(50), r.next()).await;
        assert!(pending.is_err());
        assert_eq!(budget.in_use(), 500);
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_waiting_on_its_allowance_for_its_first_bytes_starts_no_clock() {
        let (mut r, mut c, budget) = reader_with_allowance(1000, 1000, 100);
        let wire = frame(true, 2, &[4; 500]);
        let (head, body) = wire.split_at(wire.len() - 500);
        let (head, body) = (head.to_vec(), body.to_vec());
        c.write_all(&head).await.unwrap();
        let driver = async {
            // Longer than the stall rule: on the allowance there is no clock.
            tokio::time::sleep(STALL_TIMEOUT * 2).await;
            c.write_all(&body[..25]).await.unwrap();
            // On the shared budget now: the rest comes within the grace.
            tokio::time::sleep(PACE_GRACE / 2).await;
            c.write_all(&body[25..]).await.unwrap();
        };
        let (read, ()) = tokio::join!(r.next(), driver);
        assert_eq!(message(read).1.len(), 500);
        assert_eq!(
            budget.in_use(),
            0,
            "the message was dropped with its memory"
        );
    }
}

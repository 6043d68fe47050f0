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

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::time::Instant;

use super::control::{self, violation, Control, Violation};
use super::frame_writer::Opcode;
use super::inbound_budget::{self, InboundBudget, Late, MessageBuf, Pace, Payment, Permit};
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
    /// A complete message: unmasked, and for text checked to be UTF-8; with a [`Payment`] when
    /// the reader keeps them ([`FrameReader::keep_payments`]).
    Message(MessageKind, Bytes, Option<Payment>),
    /// Answer with a pong carrying this payload.
    Ping(Bytes),
    /// A pong: nothing to do.
    Pong,
    /// The peer closes with this code (1000 when it sent none).
    Close(CloseCode, String),
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
    allowance: InboundBudget,
    /// The first bytes of a message past the allowance that are received on the allowance
    /// before it may pay the shared budget (a quarter of the allowance).
    first_bytes: usize,
    /// Whether binary messages come with a [`Payment`] (a connection with bulk credit, whose
    /// bulk frames may move to a credit ledger).
    payments: bool,
    live: Arc<Liveness>,
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
            allowance: InboundBudget::new(allowance),
            first_bytes: (allowance / 4).max(1),
            payments: false,
            live,
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
        match tokio::time::timeout_at(deadline, self.fill()).await {
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
    /// Returns the permit, the bytes it pays for, and whether it is from the shared budget.
    /// Waiting holds nothing of the shared budget, so waits never hold each other up.
    /// (An associated function: a future holding `&self` would not be `Send`.)
    async fn pay(
        allowance: &InboundBudget,
        budget: &InboundBudget,
        live: &Liveness,
        first_bytes: usize,
        (extra, ready, reserve): (usize, usize, usize),
    ) -> (Permit, usize, bool) {
        if let Some(p) = allowance.try_take(extra) {
            return (p, extra, false);
        }
        let first = extra.min(first_bytes);
        if ready < first {
            if let Some(p) = allowance.try_take(first) {
                return (p, first, false);
            }
        }
        (
            Self::take_shared(budget, live, reserve).await,
            reserve,
            true,
        )
    }

    /// `n` bytes of the shared budget, waiting for them if need be (the wait is not the
    /// client's: its liveness clock is paused, and no pace clock runs).
    async fn take_shared(budget: &InboundBudget, live: &Liveness, n: usize) -> Permit {
        match budget.try_take(n) {
            Some(p) => p,
            None => {
                let _paused = live.pause();
                budget.take(n).await
            }
        }
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
        let permit = Self::take_shared(&self.budget, &self.live, reserve).await;
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
            self.start_data(h).await?;
            if let Some(message) = self.finish_frame()? {
                return Ok(message);
            }
        }
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
            let (permit, paid, shared) = Self::pay(
                &self.allowance,
                &self.budget,
                &self.live,
                self.first_bytes,
                (len, ready, reserve),
            )
            .await;
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
                let (more, paid, shared) = Self::pay(
                    &self.allowance,
                    &self.budget,
                    &self.live,
                    self.first_bytes,
                    (extra, ready, self.cap),
                )
                .await;
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
                Some((deadline, rule)) => match tokio::time::timeout_at(deadline, read).await {
                    Ok(r) => r,
                    Err(_) => return Err(late(rule)),
                },
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
            return Ok(Some(Incoming::Message(m.kind, bytes, payment)));
        }
        let bytes = inbound_budget::freeze(m.data, m.permit);
        Ok(Some(Incoming::Message(m.kind, bytes, None)))
    }

    /// After a close was sent: reads and throws away what the peer still sends until its
    /// close frame, the end of the stream or an invalid frame. Holds nothing but the pooled read
    /// buffer while bytes arrive; a message in progress is dropped (its memory returns).
    pub(crate) async fn discard_until_close(&mut self) {
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
mod tests;

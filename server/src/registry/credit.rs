//! Inbound credit on bulk channels (protocol 1.1, feature `bulk_credit`; the README's "Inbound
//! credit").
//!
//! A connection that announced protocol 1.1 or later may send `credit` bytes of frame bodies on
//! each bulk channel (the channel's bulk window) before it hears more. Its bulk frames are not
//! a reason to pause its reader: when the host's inbound stream is full, they wait here, in a
//! [`CreditLedger`] per connection and channel, and a task hands them on in order as the
//! stream makes room. A frame past its remaining credit is refused before it gets here.
//!
//! Memory. Credit counts bodies, which says nothing of what a frame holds (an empty body spends
//! none), so a waiting frame is charged to its ledger's own account at what it really holds:
//! its buffer plus [`FRAME_OVERHEAD`] for its place here and its bookkeeping. Its inbound
//! permits go back as it starts waiting, so buffered credit never holds the shared inbound
//! budget that other clients' large messages wait for; it pays the inbound budget again when
//! the host takes it. The account holds [`account_bytes`]: twice the credit and 16 KiB, room
//! for a whole credit's worth of frames of 1 KiB or more with their bookkeeping. A connection
//! that sends its credit in smaller frames fills it sooner, and its reader then waits until
//! the host has taken some: it is paced, never refused. So a ledger holds at most
//! `account_bytes(credit)`, whatever the frames.
//!
//! A connection that closes leaves nothing here: the frames still waiting for the host are
//! dropped (counted in `carrier_bulk_frames_dropped_total`, and logged), and the host is told
//! the connection ended right away. A client that needs its last frames to reach the host
//! waits for its credit to come back before it closes.
//!
//! Grant policy (ours; the wire only says grants add up): a frame is *consumed* once the host
//! has it — its handler returned, or it entered the host's inbound stream. Consumed bytes are
//! granted back with one `channel.credit` event once they reach a quarter of the credit, or at
//! once when nothing of the connection is left waiting here. So a client whose frames the host
//! takes as they come gets each frame's bytes back straight away, a client whose frames pile up
//! hears in steps of a quarter of its credit, and no client is ever left waiting with credit
//! owed to it (when nothing waits here, all of it has been granted back).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, Notify};

use super::message::{Backpressure, ChannelInbound, InboundBody};
use crate::handle::Connection;
use crate::inbound_budget::{InboundBudget, Payment, Permit};
use carrier_protocol::envelope::encode_event;
use carrier_protocol::events::ChannelCredit;

/// What a frame waiting in a ledger holds besides its buffer and its event name: its place in
/// the queue (which keeps up to twice the slots in use), the message's owner and payment
/// handle, and the allocator's headers and granules. `server/tests/bulk_credit_memory.rs` checks it
/// against a counting allocator (a waiting empty frame held about 250 bytes there).
pub(crate) const FRAME_OVERHEAD: usize = 512;

/// The account of a ledger of `credit` bytes: what its waiting frames may hold at once.
pub(crate) fn account_bytes(credit: usize) -> usize {
    credit.saturating_mul(2).saturating_add(16 << 10)
}

/// One connection's credit on one bulk channel, and its frames waiting for the host.
pub(super) struct CreditLedger {
    channel: Arc<str>,
    /// The credit announced in the handshake: what the connection may have outstanding.
    credit: usize,
    conn: Connection,
    /// Pays for the frames waiting here (see the module docs); its permits travel with them.
    account: InboundBudget,
    /// The budget a frame pays again once the host takes it (`None`: a registry that is not
    /// a transport's, whose messages are not paid for).
    inbound: Option<InboundBudget>,
    /// Frames dropped because their connection closed, for every ledger of the registry.
    dropped: Arc<AtomicU64>,
    /// Wakes the task handing frames on when the connection closes.
    closing: Notify,
    state: Mutex<LedgerState>,
}

/// A frame waiting for the host.
struct Waiting {
    msg: ChannelInbound,
    /// Its body's bytes: what it spent of the credit.
    bytes: usize,
    /// Its charge to the ledger's account, returned once it is handed on or dropped.
    charge: Permit,
    /// What pays for its buffer, moved to `charge` while it waits (`None`: its buffer stays on
    /// its inbound permits, and `charge` covers its bookkeeping only).
    payment: Option<Payment>,
}

#[derive(Default)]
struct LedgerState {
    /// Bytes the connection may still send before it hears more (our view: grants in flight
    /// are already counted).
    remaining: usize,
    /// Bytes the host consumed that were not granted back yet.
    ungranted: usize,
    /// Frames waiting for room in the host's stream.
    waiting: VecDeque<Waiting>,
    /// Whether a task is handing the waiting frames on (it also holds one in flight).
    forwarding: bool,
    /// The connection has ended: nothing waits here any more.
    closed: bool,
    /// The connection's disconnect notice, for the forwarding task to deliver once it has let
    /// go of its frame.
    notice: Option<ChannelInbound>,
}

impl CreditLedger {
    pub(super) fn new(
        channel: Arc<str>,
        credit: usize,
        conn: Connection,
        inbound: Option<InboundBudget>,
        dropped: Arc<AtomicU64>,
    ) -> Self {
        CreditLedger {
            channel,
            credit,
            conn,
            account: InboundBudget::new(account_bytes(credit)),
            inbound,
            dropped,
            closing: Notify::new(),
            state: Mutex::new(LedgerState {
                remaining: credit,
                ..LedgerState::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes the frames waiting here are charged now.
    pub(super) fn buffered(&self) -> usize {
        self.account.in_use()
    }

    /// Spends `bytes` of credit for a frame just received, or returns the remaining credit when
    /// the frame does not fit (it is then refused, and nothing is spent).
    pub(super) fn spend(&self, bytes: usize) -> Result<(), usize> {
        let mut st = self.lock();
        if bytes > st.remaining {
            return Err(st.remaining);
        }
        st.remaining -= bytes;
        Ok(())
    }

    /// Hands a frame whose credit is spent to a stream sink: straight into the stream when
    /// nothing of this connection waits before it and the stream has room, otherwise behind
    /// the frames already waiting here, charged to the account. Only when the account has no
    /// room for it does the reader wait (the returned future), until the host has taken
    /// enough.
    pub(super) fn deliver(
        self: &Arc<Self>,
        tx: &mpsc::Sender<ChannelInbound>,
        msg: ChannelInbound,
        bytes: usize,
        payment: Option<Payment>,
    ) -> Option<Backpressure> {
        let mut st = self.lock();
        let msg = if st.waiting.is_empty() && !st.forwarding {
            match tx.try_send(msg) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {
                    drop(st);
                    self.consumed(bytes);
                    return None;
                }
                Err(mpsc::error::TrySendError::Full(msg)) => msg,
            }
        } else {
            msg
        };
        let cost = cost(&msg, payment.as_ref());
        if let Some(charge) = self.account.try_take(cost) {
            self.push(&mut st, tx, msg, bytes, charge, payment);
            return None;
        }
        drop(st);
        let (ledger, tx) = (self.clone(), tx.clone());
        Some(Box::pin(async move {
            let charge = ledger.account.take(cost).await;
            let mut st = ledger.lock();
            ledger.push(&mut st, &tx, msg, bytes, charge, payment);
        }))
    }

    /// Queues a frame with its charge, which pays for its buffer from now on.
    fn push(
        self: &Arc<Self>,
        st: &mut LedgerState,
        tx: &mpsc::Sender<ChannelInbound>,
        msg: ChannelInbound,
        bytes: usize,
        charge: Permit,
        payment: Option<Payment>,
    ) {
        if st.closed {
            // Not reached: the reader delivers nothing once its connection has ended.
            self.count_dropped(1);
            return;
        }
        if let Some(p) = &payment {
            p.repay(Permit::unpaid());
        }
        st.waiting.push_back(Waiting {
            msg,
            bytes,
            charge,
            payment,
        });
        if !st.forwarding {
            st.forwarding = true;
            tokio::spawn(forward(self.clone(), tx.clone()));
        }
    }

    /// The connection ended: the frames waiting here are dropped (counted), and its disconnect
    /// notice goes to the host. Returns the notice when no task is handing frames on (the
    /// caller delivers it); otherwise that task delivers it once it has let go of its frame.
    pub(super) fn disconnected(&self, msg: ChannelInbound) -> Option<ChannelInbound> {
        let (dropped, notice) = {
            let mut st = self.lock();
            st.closed = true;
            let dropped = std::mem::take(&mut st.waiting);
            if st.forwarding {
                debug_assert!(matches!(msg.body, InboundBody::Disconnected));
                st.notice = Some(msg);
                (dropped, None)
            } else {
                (dropped, Some(msg))
            }
        };
        self.closing.notify_one();
        self.count_dropped(dropped.len());
        notice
    }

    fn count_dropped(&self, frames: usize) {
        if frames == 0 {
            return;
        }
        self.dropped.fetch_add(frames as u64, Ordering::Relaxed);
        tracing::warn!(
            channel = %self.channel,
            connection = %self.conn.id(),
            frames,
            "bulk frames dropped: their connection closed before the host took them"
        );
    }

    /// The host took `bytes` of frame bodies: grant them back when the policy says so.
    pub(super) fn consumed(&self, bytes: usize) {
        let grant = {
            let mut st = self.lock();
            st.ungranted += bytes;
            let idle = st.waiting.is_empty() && !st.forwarding;
            if st.ungranted == 0 || (st.ungranted < self.credit.div_ceil(4) && !idle) {
                return;
            }
            let grant = std::mem::take(&mut st.ungranted);
            st.remaining += grant;
            grant
        };
        let notice = ChannelCredit {
            channel: self.channel.to_string(),
            bytes: grant as u64,
        };
        // Encoding a string and a number cannot fail; a connection that is gone needs no grant.
        if let Ok(text) = encode_event("channel.credit", None, &notice) {
            let _ = self.conn.send_text(text);
        }
    }

    /// Hands one waiting frame to the host's stream: a place in the stream first, then the
    /// inbound budget for its buffer, and only then is its charge here returned, so it is paid
    /// for all along. Returns whether the host has it (`false`: the host dropped its stream).
    async fn hand_on(&self, tx: &mpsc::Sender<ChannelInbound>, frame: Waiting) -> bool {
        let Ok(place) = tx.reserve().await else {
            return false;
        };
        if let (Some(payment), Some(inbound)) = (&frame.payment, &self.inbound) {
            let n = payment.resident();
            let permit = match inbound.try_take(n) {
                Some(p) => p,
                None => inbound.take(n).await,
            };
            payment.repay(permit);
        }
        let Waiting { msg, charge, .. } = frame;
        drop(charge);
        place.send(msg);
        true
    }
}

/// What a waiting frame is charged: its buffer (when its payment moves here), its event name
/// (a copy of part of the body) and [`FRAME_OVERHEAD`].
fn cost(msg: &ChannelInbound, payment: Option<&Payment>) -> usize {
    let name = match &msg.body {
        InboundBody::Event(e) => e.event().len(),
        InboundBody::Binary(_) | InboundBody::Disconnected => 0,
    };
    FRAME_OVERHEAD + name + payment.map_or(0, Payment::resident)
}

/// Hands a ledger's waiting frames to the host's stream, in order, until none is left or the
/// connection closes (then it drops the frame it holds and delivers the disconnect notice).
async fn forward(ledger: Arc<CreditLedger>, tx: mpsc::Sender<ChannelInbound>) {
    loop {
        let next = {
            let mut st = ledger.lock();
            if st.closed {
                st.forwarding = false;
                Err(st.notice.take())
            } else {
                match st.waiting.pop_front() {
                    Some(next) => Ok(next),
                    None => {
                        st.forwarding = false;
                        return;
                    }
                }
            }
        };
        let next = match next {
            Ok(next) => next,
            Err(notice) => {
                if let Some(notice) = notice {
                    let _ = tx.send(notice).await;
                }
                return;
            }
        };
        let bytes = next.bytes;
        let handed = tokio::select! {
            biased;
            () = ledger.closing.notified() => None,
            handed = ledger.hand_on(&tx, next) => Some(handed),
        };
        let Some(_) = handed else {
            // The connection closed while its frame waited for the host: dropped with it.
            ledger.count_dropped(1);
            continue;
        };
        // Consumed, or dropped with the host's stream: either way its credit comes back.
        // Granted only after `forwarding` is known: the last frame's grant sees the ledger
        // idle on the next turn, so it is flushed below.
        ledger.consumed(bytes);
        let idle = {
            let mut st = ledger.lock();
            let idle = st.waiting.is_empty() && !st.closed;
            if idle {
                st.forwarding = false;
                // A burst's slots are not kept once it is over (their memory was charged to
                // the frames that are gone).
                st.waiting = VecDeque::new();
            }
            idle
        };
        if idle {
            // Whatever is still owed goes back.
            ledger.consumed(0);
            return;
        }
    }
}

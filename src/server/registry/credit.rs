//! Inbound credit on bulk channels (protocol 1.1, feature `bulk_credit`; the README's "Inbound
//! credit").
//!
//! A connection that announced protocol 1.1 or later may send `credit` bytes of frame bodies on
//! each bulk channel (the channel's bulk window) before it hears more. Its bulk frames are never
//! a reason to pause its reader: when the host's inbound stream is full, they wait here, in a
//! [`CreditLedger`] per connection and channel, and a task hands them on in order as the
//! stream makes room. The ledger holds at most the credit (the connection cannot send more
//! than it was granted, and a frame past its remaining credit is refused before it gets here),
//! and each frame's bytes stay paid from the inbound budget they were received on until the
//! host drops them.
//!
//! Grant policy (ours; the wire only says grants add up): a frame is *consumed* once the host
//! has it — its handler returned, or it entered the host's inbound stream. Consumed bytes are
//! granted back with one `channel.credit` event once they reach a quarter of the credit, or at
//! once when nothing of the connection is left waiting here. So a client whose frames the host
//! takes as they come gets each frame's bytes back straight away, a client whose frames pile up
//! hears in steps of a quarter of its credit, and no client is ever left waiting with credit
//! owed to it (when nothing waits here, all of it has been granted back).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use super::message::{Inbound, InboundBody};
use crate::protocol::envelope::encode_event;
use crate::protocol::events::ChannelCredit;
use crate::server::handle::Connection;

/// One connection's credit on one bulk channel, and its frames waiting for the host.
pub(super) struct CreditLedger {
    channel: Arc<str>,
    /// The credit announced in the handshake: what the connection may have outstanding.
    credit: usize,
    conn: Connection,
    state: Mutex<LedgerState>,
}

#[derive(Default)]
struct LedgerState {
    /// Bytes the connection may still send before it hears more (our view: grants in flight
    /// are already counted).
    remaining: usize,
    /// Bytes the host consumed that were not granted back yet.
    ungranted: usize,
    /// Frames waiting for room in the host's stream, with their bodies' sizes.
    waiting: VecDeque<(Inbound, usize)>,
    /// Whether a task is handing the waiting frames on (it also holds one in flight).
    forwarding: bool,
}

impl CreditLedger {
    pub(super) fn new(channel: Arc<str>, credit: usize, conn: Connection) -> Self {
        CreditLedger {
            channel,
            credit,
            conn,
            state: Mutex::new(LedgerState {
                remaining: credit,
                ..LedgerState::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Hands a frame that has been paid for to a stream sink without ever waiting: straight into
    /// the stream when nothing of this connection waits before it and the stream has room,
    /// otherwise behind the frames already waiting here.
    pub(super) fn deliver(
        self: &Arc<Self>,
        tx: &mpsc::Sender<Inbound>,
        msg: Inbound,
        bytes: usize,
    ) {
        let mut st = self.lock();
        if st.waiting.is_empty() && !st.forwarding {
            match tx.try_send(msg) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {
                    drop(st);
                    self.consumed(bytes);
                    return;
                }
                Err(mpsc::error::TrySendError::Full(msg)) => st.waiting.push_back((msg, bytes)),
            }
        } else {
            st.waiting.push_back((msg, bytes));
        }
        if !st.forwarding {
            st.forwarding = true;
            tokio::spawn(forward(self.clone(), tx.clone()));
        }
    }

    /// The connection ended: its disconnect notice goes to the host after the frames still
    /// waiting here. Returns the notice back when nothing waits (the caller delivers it).
    pub(super) fn disconnected(&self, msg: Inbound) -> Option<Inbound> {
        let mut st = self.lock();
        if st.waiting.is_empty() && !st.forwarding {
            return Some(msg);
        }
        debug_assert!(matches!(msg.body, InboundBody::Disconnected));
        st.waiting.push_back((msg, 0));
        None
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
}

/// Hands a ledger's waiting frames to the host's stream, in order, until none is left.
async fn forward(ledger: Arc<CreditLedger>, tx: mpsc::Sender<Inbound>) {
    loop {
        let next = {
            let mut st = ledger.lock();
            match st.waiting.pop_front() {
                Some(next) => next,
                None => {
                    st.forwarding = false;
                    return;
                }
            }
        };
        let (msg, bytes) = next;
        // A host that dropped its stream: the frame is dropped, and its credit comes back.
        let _ = tx.send(msg).await;
        // Granted only after `forwarding` is known: the last frame's grant sees the ledger
        // idle on the next turn, so it is flushed below.
        ledger.consumed(bytes);
        let mut st = ledger.lock();
        if st.waiting.is_empty() {
            st.forwarding = false;
            drop(st);
            // Idle now: whatever is still owed goes back.
            ledger.consumed(0);
            return;
        }
    }
}

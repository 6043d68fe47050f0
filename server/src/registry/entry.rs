//! One registered channel ([`ChannelEntry`]) and what it delivers to the host: [`ChannelInbound`]
//! messages, handed to a callback or a stream.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use dashmap::{DashMap, DashSet};
use tokio::sync::mpsc;

use super::credit::CreditLedger;
use super::message::{Backpressure, ChannelInbound};
use crate::handle::{Connection, ConnectionId};
use crate::inbound_budget::{InboundBudget, Payment};
use carrier_protocol::channel::ChannelDescriptor;

/// Default per-connection budget of a lossy channel's queued frames.
pub const DEFAULT_LOSSY_BUDGET: usize = 1 << 20;

pub(super) type Handler = Arc<dyn Fn(ChannelInbound) + Send + Sync>;

/// Where a channel's inbound messages go.
pub(super) enum Sink {
    Handler(Handler),
    Stream(mpsc::Sender<ChannelInbound>),
}

/// One registered channel: its descriptor, its outbound numbering and its inbound sink.
pub(super) struct ChannelEntry {
    pub(super) descriptor: ChannelDescriptor,
    pub(super) name: Arc<str>,
    pub(super) lossy_budget: AtomicUsize,
    /// The server's outbound seq, shared by binary and event frames, across all connections.
    pub(super) seq: AtomicU32,
    /// Held while a frame is numbered and queued, so every receiver sees seqs in order.
    pub(super) send_lock: Mutex<()>,
    /// Held by a bulk send from numbering its frame until every receiver has queued it, across
    /// the waits for room, so a bulk channel's frames keep their order on every connection.
    pub(super) bulk_order: tokio::sync::Mutex<()>,
    pub(super) closed: AtomicBool,
    pub(super) sink: Mutex<Option<Arc<Sink>>>,
    /// Connections that have sent on this channel: told when they disconnect.
    pub(super) senders: DashSet<ConnectionId>,
    /// A bulk channel's inbound credit, per connection that has credit and has sent on it.
    pub(super) ledgers: DashMap<ConnectionId, Arc<CreditLedger>>,
}

impl ChannelEntry {
    /// A fresh, open channel with no sink.
    pub(super) fn new(descriptor: ChannelDescriptor) -> Self {
        ChannelEntry {
            name: Arc::from(descriptor.name.as_str()),
            lossy_budget: AtomicUsize::new(DEFAULT_LOSSY_BUDGET),
            descriptor,
            seq: AtomicU32::new(0),
            send_lock: Mutex::new(()),
            bulk_order: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
            sink: Mutex::new(None),
            senders: DashSet::new(),
            ledgers: DashMap::new(),
        }
    }

    /// The credit ledger of `conn` on this (bulk) channel, made on its first frame. `inbound`
    /// pays for its frames once the host takes them; `dropped` counts the frames of closed
    /// connections.
    pub(super) fn ledger(
        &self,
        conn: &Connection,
        inbound: Option<&InboundBudget>,
        dropped: &Arc<AtomicU64>,
    ) -> Arc<CreditLedger> {
        self.ledgers
            .entry(conn.id())
            .or_insert_with(|| {
                Arc::new(CreditLedger::new(
                    self.name.clone(),
                    self.descriptor.bulk_window,
                    conn.clone(),
                    inbound.cloned(),
                    dropped.clone(),
                ))
            })
            .clone()
    }

    /// Delivers a bulk frame of a connection with credit. Its credit (already spent) bounds
    /// what waits in `ledger` for a full stream, and the ledger's account what that holds: the
    /// reader waits only for a frame the account has no room for (a credit spent in tiny
    /// frames), see `credit`.
    pub(super) fn deliver_credited(
        &self,
        ledger: &Arc<CreditLedger>,
        msg: ChannelInbound,
        bytes: usize,
        payment: Option<Payment>,
    ) -> Option<Backpressure> {
        match self.current_sink().as_deref() {
            Some(Sink::Handler(h)) => {
                h(msg);
                ledger.consumed(bytes);
                None
            }
            Some(Sink::Stream(tx)) => ledger.deliver(tx, msg, bytes, payment),
            None => {
                tracing::debug!(channel = %self.name, "inbound frame with no handler");
                ledger.consumed(bytes);
                None
            }
        }
    }

    /// Bytes the credit ledgers of this channel hold for the host.
    pub(super) fn buffered_credit(&self) -> usize {
        self.ledgers.iter().map(|l| l.buffered()).sum()
    }

    fn current_sink(&self) -> Option<Arc<Sink>> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Delivers with backpressure: a full stream returns the wait for room, which pauses the
    /// sending connection's reader.
    pub(super) fn deliver(&self, msg: ChannelInbound) -> Option<Backpressure> {
        match self.current_sink().as_deref() {
            Some(Sink::Handler(h)) => h(msg),
            Some(Sink::Stream(tx)) => match tx.try_send(msg) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
                Err(mpsc::error::TrySendError::Full(msg)) => {
                    let tx = tx.clone();
                    return Some(Box::pin(async move {
                        let _ = tx.send(msg).await;
                    }));
                }
            },
            None => tracing::debug!(channel = %self.name, "inbound frame with no handler"),
        }
        None
    }

    /// Tells the host that a connection ended. Its frames still waiting in its credit ledger
    /// are dropped (and counted) first.
    pub(super) fn disconnected(&self, msg: ChannelInbound) {
        let msg = match self.ledgers.remove(&msg.connection) {
            Some((_, ledger)) => ledger.disconnected(msg),
            None => Some(msg),
        };
        if let Some(msg) = msg {
            self.deliver_now(msg);
        }
    }

    /// Delivers without waiting (disconnect notices come from synchronous cleanup).
    pub(super) fn deliver_now(&self, msg: ChannelInbound) {
        match self.current_sink().as_deref() {
            Some(Sink::Handler(h)) => h(msg),
            Some(Sink::Stream(tx)) => {
                if let Err(mpsc::error::TrySendError::Full(msg)) = tx.try_send(msg) {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let _ = tx.send(msg).await;
                    });
                }
            }
            None => {}
        }
    }
}

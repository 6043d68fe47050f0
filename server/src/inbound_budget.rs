//! The process-wide bound on inbound message memory.
//!
//! Every data frame a client sends is received into a buffer of its own, and that buffer is
//! paid for in advance from one [`InboundBudget`] shared by every connection of a transport: a
//! permit per byte of the buffer's capacity, taken before the buffer is allocated. The permits
//! travel with the message — the `Bytes` a handler, a channel or an outbound queue holds is a
//! view of that buffer — and return to the budget only when the last view is dropped. So the
//! bytes clients have sent that the carrier still holds, wherever they went, never exceed the
//! budget. A connection whose next message does not fit waits for room: its reader pauses (TCP
//! pushes back on the client) instead of failing. Who pays can change while the bytes are held
//! ([`Payment`]): a bulk frame that waits for its host within its sender's credit is charged to
//! its credit ledger instead (`registry::credit`), and pays the budget again once the host
//! takes it.
//!
//! A message can always fit: the configuration refuses a budget below the message cap.
//!
//! Small messages do not compete for it. Each connection has an allowance of its own
//! ([`CONNECTION_ALLOWANCE`], a second, per-connection budget) that pays for any message that
//! fits in what is left of it: the handshake, requests, pings, most channel frames. So
//! connections that hold the shared budget (large or unfinished messages) delay other
//! connections' large messages only; they can never keep another client from handshaking or
//! being answered (four clients that each began a fragmented message once held the whole
//! budget, and no other client could even handshake). The carrier's inbound memory is therefore
//! at most the shared budget plus one allowance per connection.
//!
//! A larger message earns its place in the shared budget by sending: its first bytes (a quarter
//! of the allowance) are received on the allowance, and only then does it reserve its length
//! there — at once when those bytes came with its header. So a header that announces 16 MiB and
//! sends nothing holds nothing of the shared budget and stands in no line for it: a thousand of
//! them used to take their turns at holding it, each until the grace cut it, while another
//! client's 200 KiB message waited. Only a connection whose allowance its own earlier messages
//! hold reserves at once.
//!
//! Holding the shared budget costs sending. A message paid from it is on a clock ([`Pace`])
//! from the moment it got its permits — time spent waiting for them does not count, and a
//! fragmented message that grew on the allowance starts its clock when it moves to the shared
//! budget. After a grace of [`PACE_GRACE`] (3 s) it must have arrived at [`MIN_RATE`]
//! (256 KiB/s) on average since then, and it may never go [`STALL_TIMEOUT`] (10 s) without a
//! byte; otherwise its connection is closed with 1008 and the memory returns. In one deadline:
//! with `B` bytes of the message received since the clock started at `t0`, the next byte is due
//! before `t0 + max(3 s, B ÷ 256 KiB/s)` and before 10 s after the last one. So a client that
//! trickles bytes to keep its share loses it at the grace, no message holds the budget longer
//! than the grace or, if longer, the time its cap takes at the minimum rate (64 s at the
//! default 16 MiB cap), and a token holder delays other clients' large messages only while it
//! really sends. Honest clients are far from it: on loopback a 16 MiB message arrives in
//! milliseconds (a 16 MiB echo's round trip took 30 ms in a release build).
//!
//! Why these numbers: the grace is how long a message that has sent little may pause, short so
//! that tricklers let go within seconds. The rate sets how long a message that has sent a lot
//! may pause, and honest clients do pause: one too busy to write finds its message's first
//! few MiB already in the socket buffers when the message gets its permits, then writes
//! nothing more until it is scheduled again. With 1 MiB/s, `server/tests/it/hostile_clients.rs`'s sixteen
//! debug-build clients echoing 15 MiB each on a loaded machine were closed: their messages had
//! 3.9 MB in at once and the next bytes 4 to 5.6 s later. At 256 KiB/s those 3.9 MB earn 14 s,
//! so such a client may pause as long as the 10 s stall rule allows, as before this rule.
//!
//! The reader is never paused by the carrier while a message is in progress (it waits for a
//! handler's room only between messages, and for permits before the clock starts), so the
//! time counted is all the client's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio::time::Instant;

/// Permits for `n` bytes of inbound buffer, returned when dropped.
pub(crate) struct Permit(Held);

/// What a [`Permit`] holds, by the budget that paid it.
enum Held {
    None,
    /// From an [`InboundBudget`] (the shared budget, a credit account).
    Budget(OwnedSemaphorePermit),
    /// From a connection's [`Allowance`].
    Allowance(AllowancePermit),
    /// From both (never made by the reader as it is, kept so a merge never loses bytes).
    Both(Box<(Permit, Permit)>),
}

impl Permit {
    /// A permit for nothing: what a [`Payment`] holds while another budget pays for it.
    pub(crate) fn unpaid() -> Self {
        Permit(Held::None)
    }

    /// Bytes this permit pays for.
    pub(crate) fn bytes(&self) -> usize {
        match &self.0 {
            Held::None => 0,
            Held::Budget(p) => p.num_permits(),
            Held::Allowance(p) => p.n,
            Held::Both(pair) => pair.0.bytes() + pair.1.bytes(),
        }
    }

    /// Adds `other`'s bytes to this permit.
    pub(crate) fn merge(&mut self, other: Permit) {
        let mine = std::mem::replace(&mut self.0, Held::None);
        self.0 = match (mine, other.0) {
            (Held::Budget(mut mine), Held::Budget(more))
                if Arc::ptr_eq(mine.semaphore(), more.semaphore()) =>
            {
                mine.merge(more);
                Held::Budget(mine)
            }
            (Held::Allowance(mut mine), Held::Allowance(mut more))
                if Arc::ptr_eq(&mine.free, &more.free) =>
            {
                mine.n += std::mem::take(&mut more.n);
                Held::Allowance(mine)
            }
            (Held::None, more) => more,
            (mine, Held::None) => mine,
            (mine, more) => Held::Both(Box::new((Permit(mine), Permit(more)))),
        };
    }

    /// Gives back all but `keep` bytes (a message that came out smaller than reserved).
    pub(crate) fn shrink_to(&mut self, keep: usize) {
        match &mut self.0 {
            Held::None => {}
            Held::Budget(p) => {
                let extra = p.num_permits().saturating_sub(keep);
                if extra > 0 {
                    drop(p.split(extra));
                }
            }
            Held::Allowance(p) => {
                let extra = p.n.saturating_sub(keep);
                if extra > 0 {
                    p.n -= extra;
                    p.free.fetch_add(extra, Ordering::Release);
                }
            }
            Held::Both(pair) => {
                let first = pair.0.bytes().min(keep);
                pair.1.shrink_to(keep - first);
                pair.0.shrink_to(first);
            }
        }
    }
}

/// Bytes of a connection's [`Allowance`], given back when dropped.
struct AllowancePermit {
    free: Arc<AtomicUsize>,
    n: usize,
}

impl Drop for AllowancePermit {
    fn drop(&mut self) {
        if self.n > 0 {
            self.free.fetch_add(self.n, Ordering::Release);
        }
    }
}

/// A connection's own allowance (see the module docs): only its reader takes from it, and never
/// waits for it, so it is a counter of free bytes. (As a semaphore, like the shared budget, it
/// took a lock to give back the bytes of every message: BENCHMARKS.md, "Performance 3, second
/// pass".)
pub(crate) struct Allowance {
    free: Arc<AtomicUsize>,
}

impl Allowance {
    pub(crate) fn new(bytes: usize) -> Self {
        Allowance {
            free: Arc::new(AtomicUsize::new(bytes)),
        }
    }

    /// Bytes of it free now.
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        self.free.load(Ordering::Acquire)
    }

    /// `n` bytes of it, or `None` when they are not free right now.
    pub(crate) fn try_take(&self, n: usize) -> Option<Permit> {
        if n == 0 {
            return Some(Permit::unpaid());
        }
        let mut free = self.free.load(Ordering::Acquire);
        loop {
            let left = free.checked_sub(n)?;
            match self
                .free
                .compare_exchange_weak(free, left, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    return Some(Permit(Held::Allowance(AllowancePermit {
                        free: self.free.clone(),
                        n,
                    })))
                }
                Err(now) => free = now,
            }
        }
    }
}

/// Bytes of messages one connection may hold without the shared budget (see the module docs).
pub(crate) const CONNECTION_ALLOWANCE: usize = 64 * 1024;

/// How long a message paid from the shared budget may go without receiving a byte.
pub(crate) const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a message paid from the shared budget may take before [`MIN_RATE`] applies.
pub(crate) const PACE_GRACE: Duration = Duration::from_secs(3);

/// The average rate, in bytes per second, at which a message paid from the shared budget must
/// arrive once [`PACE_GRACE`] is over.
pub(crate) const MIN_RATE: u64 = 256 << 10;

/// The clock of a message that holds shared budget (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pace {
    /// When the message got its shared permits.
    since: Instant,
    /// Bytes of the message received before then (a fragmented message that grew on the
    /// allowance): they do not count towards its rate.
    before: usize,
}

/// Which rule a late message broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Late {
    /// No byte for [`STALL_TIMEOUT`].
    Stalled,
    /// Under [`MIN_RATE`] on average after [`PACE_GRACE`].
    TooSlow,
}

impl Pace {
    /// Starts the clock now, for a message of which `received` bytes are already in.
    pub(crate) fn start(received: usize) -> Self {
        Pace {
            since: Instant::now(),
            before: received,
        }
    }

    /// When the next byte is due, with `received` bytes of the message in and the wait for it
    /// starting `now` (just after the last bytes were read), and the rule that sets it.
    pub(crate) fn deadline(&self, received: usize, now: Instant) -> (Instant, Late) {
        let counted = received.saturating_sub(self.before) as u64;
        let earned = Duration::from_micros(counted.saturating_mul(1_000_000) / MIN_RATE);
        let paced = self.since + earned.max(PACE_GRACE);
        let stalled = now + STALL_TIMEOUT;
        if stalled < paced {
            (stalled, Late::Stalled)
        } else {
            (paced, Late::TooSlow)
        }
    }
}

/// The shared budget. Cheap to clone.
#[derive(Clone)]
pub(crate) struct InboundBudget {
    sem: Arc<Semaphore>,
    total: usize,
}

impl InboundBudget {
    pub(crate) fn new(bytes: usize) -> Self {
        let total = bytes.min(Semaphore::MAX_PERMITS);
        InboundBudget {
            sem: Arc::new(Semaphore::new(total)),
            total,
        }
    }

    /// Bytes currently paid for by live inbound buffers.
    pub(crate) fn in_use(&self) -> usize {
        self.total - self.sem.available_permits()
    }

    /// Permits for `n` bytes at once, or `None` when they are not free right now.
    pub(crate) fn try_take(&self, n: usize) -> Option<Permit> {
        if n == 0 {
            return Some(Permit::unpaid());
        }
        let n32 = u32::try_from(n).ok()?;
        match self.sem.clone().try_acquire_many_owned(n32) {
            Ok(p) => Some(Permit(Held::Budget(p))),
            Err(TryAcquireError::NoPermits) | Err(TryAcquireError::Closed) => None,
        }
    }

    /// Waits for permits for `n` bytes. Waiters are served in order, so a large message is not
    /// starved by a stream of small ones. `n` must not exceed the budget (the configuration
    /// guarantees it for any message within the cap).
    pub(crate) async fn take(&self, n: usize) -> Permit {
        if n == 0 {
            return Permit::unpaid();
        }
        let n32 = u32::try_from(n.min(self.total)).unwrap_or(u32::MAX);
        match self.sem.clone().acquire_many_owned(n32).await {
            Ok(p) => Permit(Held::Budget(p)),
            // The semaphore is never closed; an unpaid buffer is still bounded by the cap.
            Err(_) => Permit::unpaid(),
        }
    }
}

/// Messages of at least this many bytes get a mapping of their own rather than heap memory.
/// Freed heap memory stays resident in the allocator's arenas (one per thread), so with heap
/// buffers the resident size under many large messages grew to well past the budget (87 MiB
/// against 64 MiB in `server/tests/it/hostile_clients.rs`); a mapping is returned to the OS when dropped
/// (61 MiB there). Smaller messages stay on the heap, where a buffer is reused without page
/// faults (a 1 MiB echo costs no mapping).
pub(crate) const MAP_MIN: usize = 4 << 20;

/// The buffer one message is received into: exactly the memory its permits pay for.
pub(crate) enum MessageBuf {
    Heap(Vec<u8>),
    /// An anonymous mapping of `map.len()` bytes (pages are committed as they are written)
    /// holding `len` bytes of the message.
    Mapped {
        map: memmap2::MmapMut,
        len: usize,
    },
}

impl MessageBuf {
    /// A buffer with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> std::io::Result<Self> {
        if capacity >= MAP_MIN {
            Ok(MessageBuf::Mapped {
                map: memmap2::MmapMut::map_anon(capacity)?,
                len: 0,
            })
        } else {
            Ok(MessageBuf::Heap(Vec::with_capacity(capacity)))
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            MessageBuf::Heap(v) => v.len(),
            MessageBuf::Mapped { len, .. } => *len,
        }
    }

    /// Makes room for `additional` more bytes of a message of at most `max` bytes (a fragmented
    /// one, whose size is not known in advance). A heap buffer grows by doubling, so a message
    /// sent in tiny fragments is not copied once per fragment; one that reaches [`MAP_MIN`]
    /// moves, once, to a mapping as large as the message may get (address space only: pages
    /// are committed as they are written).
    pub(crate) fn reserve(&mut self, additional: usize, max: usize) -> std::io::Result<()> {
        let MessageBuf::Heap(v) = self else {
            return Ok(());
        };
        let needed = v.len() + additional;
        if needed <= v.capacity() {
            return Ok(());
        }
        if needed >= MAP_MIN {
            let mut map = memmap2::MmapMut::map_anon(max.max(needed))?;
            map[..v.len()].copy_from_slice(v);
            *self = MessageBuf::Mapped { len: v.len(), map };
            return Ok(());
        }
        let target = needed.max(v.capacity() * 2).min(max.max(needed));
        v.reserve_exact(target - v.len());
        Ok(())
    }

    /// Room for up to `n` more bytes of a mapped buffer, to read into; `None` for a heap one.
    pub(crate) fn mapped_spare(&mut self, n: usize) -> Option<&mut [u8]> {
        match self {
            MessageBuf::Heap(_) => None,
            MessageBuf::Mapped { map, len } => {
                let end = (*len + n).min(map.len());
                Some(&mut map[*len..end])
            }
        }
    }

    /// Counts `n` bytes read into [`Self::mapped_spare`].
    pub(crate) fn commit(&mut self, n: usize) {
        if let MessageBuf::Mapped { len, .. } = self {
            *len += n;
        }
    }

    /// The heap buffer, to read into directly.
    pub(crate) fn heap_mut(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            MessageBuf::Heap(v) => Some(v),
            MessageBuf::Mapped { .. } => None,
        }
    }

    /// Appends `bytes`; the caller made room for them.
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        match self {
            MessageBuf::Heap(v) => v.extend_from_slice(bytes),
            MessageBuf::Mapped { map, len } => {
                map[*len..*len + bytes.len()].copy_from_slice(bytes);
                *len += bytes.len();
            }
        }
    }

    /// The message's bytes from `start` on, for unmasking in place.
    pub(crate) fn tail_mut(&mut self, start: usize) -> &mut [u8] {
        match self {
            MessageBuf::Heap(v) => &mut v[start..],
            MessageBuf::Mapped { map, len } => &mut map[start..*len],
        }
    }

    /// Memory it really holds: a heap buffer its capacity, a mapping the pages written.
    pub(crate) fn resident(&self) -> usize {
        match self {
            MessageBuf::Heap(v) => v.capacity(),
            MessageBuf::Mapped { map, len } => len.next_multiple_of(4096).min(map.len()),
        }
    }
}

impl AsRef<[u8]> for MessageBuf {
    fn as_ref(&self) -> &[u8] {
        match self {
            MessageBuf::Heap(v) => v,
            MessageBuf::Mapped { map, len } => &map[..*len],
        }
    }
}

/// A received message's buffer with the permits that paid for it.
struct Paid {
    data: MessageBuf,
    _permit: Permit,
}

impl AsRef<[u8]> for Paid {
    fn as_ref(&self) -> &[u8] {
        self.data.as_ref()
    }
}

/// Freezes a received buffer into `Bytes` that keep its permits until the last view is dropped.
/// The permits must cover what the buffer holds ([`MessageBuf::resident`]).
pub(crate) fn freeze(data: MessageBuf, permit: Permit) -> Bytes {
    if data.len() == 0 {
        return Bytes::new();
    }
    Bytes::from_owner(Paid {
        data,
        _permit: permit,
    })
}

/// A received message's buffer whose payer can change while it is held (see [`Payment`]).
struct Payable {
    data: MessageBuf,
    permit: std::sync::Mutex<Permit>,
}

/// The owner `Bytes` keeps: the buffer it shares with a [`Payment`].
struct PayableView(Arc<Payable>);

impl AsRef<[u8]> for PayableView {
    fn as_ref(&self) -> &[u8] {
        self.0.data.as_ref()
    }
}

/// A handle on what pays for a frozen message, to hand the bill to someone else: a bulk frame
/// that waits for its host within its sender's credit is charged to its credit ledger instead
/// (`registry::credit`), so it holds nothing of the inbound budget while it waits, and pays
/// the inbound budget again once the host takes it. Whoever pays, the buffer is paid exactly
/// once, until the last view of it (or this handle) is dropped.
pub(crate) struct Payment(Arc<Payable>);

impl Payment {
    /// Memory the message's buffer really holds ([`MessageBuf::resident`]).
    pub(crate) fn resident(&self) -> usize {
        self.0.data.resident()
    }

    /// Pays with `permit` from now on; the permit that paid until now is dropped (its bytes go
    /// back to its budget). `Permit::unpaid()` leaves the paying to the caller, who must then
    /// hold the memory's worth of another budget for as long as it holds this handle.
    pub(crate) fn repay(&self, permit: Permit) {
        let old = std::mem::replace(
            &mut *self.0.permit.lock().unwrap_or_else(|e| e.into_inner()),
            permit,
        );
        drop(old);
    }
}

impl std::fmt::Debug for Payment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payment")
            .field("resident", &self.resident())
            .finish()
    }
}

/// [`freeze`], with a [`Payment`] to change who pays later (`None` for an empty message, which
/// holds nothing). One allocation more than [`freeze`]: made only for messages that may need it.
pub(crate) fn freeze_with_payment(data: MessageBuf, permit: Permit) -> (Bytes, Option<Payment>) {
    if data.len() == 0 {
        return (Bytes::new(), None);
    }
    let payable = Arc::new(Payable {
        data,
        permit: std::sync::Mutex::new(permit),
    });
    let payment = Payment(payable.clone());
    (Bytes::from_owner(PayableView(payable)), Some(payment))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_return_when_the_last_view_is_dropped() {
        let budget = InboundBudget::new(100);
        let p = budget.try_take(60).unwrap();
        assert!(budget.try_take(41).is_none());
        let bytes = freeze(MessageBuf::Heap(vec![1u8; 60]), p);
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(budget.in_use(), 60, "a slice still holds the buffer");
        drop(slice);
        assert_eq!(budget.in_use(), 0);
        assert!(budget.try_take(100).is_some());
    }

    #[test]
    fn shrink_returns_the_unused_part() {
        let budget = InboundBudget::new(100);
        let mut p = budget.try_take(80).unwrap();
        p.shrink_to(30);
        assert_eq!(p.bytes(), 30);
        assert_eq!(budget.in_use(), 30);
    }

    #[test]
    fn the_allowance_is_taken_up_to_its_size_and_given_back_by_its_permits() {
        let allowance = Allowance::new(100);
        let a = allowance.try_take(60).unwrap();
        // At the limit and one past it.
        assert!(allowance.try_take(41).is_none());
        let mut b = allowance.try_take(40).unwrap();
        assert_eq!(allowance.free(), 0);
        assert!(allowance.try_take(1).is_none());
        // Merged, the bytes are given back once, together.
        b.merge(a);
        assert_eq!(b.bytes(), 100);
        b.shrink_to(30);
        assert_eq!((b.bytes(), allowance.free()), (30, 70));
        // Held by the buffer it paid for, until its last view goes.
        let bytes = freeze(MessageBuf::Heap(vec![1u8; 30]), b);
        let slice = bytes.slice(1..2);
        drop(bytes);
        assert_eq!(allowance.free(), 70);
        drop(slice);
        assert_eq!(allowance.free(), 100);
        assert!(allowance.try_take(0).is_some_and(|p| p.bytes() == 0));
    }

    #[test]
    fn a_permit_merged_from_two_budgets_keeps_both_until_dropped() {
        let allowance = Allowance::new(100);
        let budget = InboundBudget::new(100);
        let mut p = allowance.try_take(50).unwrap();
        p.merge(budget.try_take(20).unwrap());
        assert_eq!(p.bytes(), 70);
        p.shrink_to(60);
        assert_eq!((allowance.free(), budget.in_use()), (50, 10));
        drop(p);
        assert_eq!((allowance.free(), budget.in_use()), (100, 0));
    }

    #[test]
    fn large_buffers_are_mapped_and_hold_what_was_written() {
        let mut m = MessageBuf::with_capacity(MAP_MIN).unwrap();
        assert!(matches!(m, MessageBuf::Mapped { .. }));
        m.extend_from_slice(&[5; 10]);
        assert_eq!((m.len(), m.resident()), (10, 4096));
        assert_eq!(m.as_ref(), &[5; 10]);
        let mut h = MessageBuf::with_capacity(10).unwrap();
        h.extend_from_slice(&[1; 10]);
        h.reserve(1, 15).unwrap();
        assert!(
            matches!(&h, MessageBuf::Heap(v) if v.capacity() == 15),
            "doubling, never past the cap"
        );
        h.reserve(MAP_MIN, 4 * MAP_MIN).unwrap();
        assert!(matches!(&h, MessageBuf::Mapped { map, len: 10 } if map.len() == 4 * MAP_MIN));
        assert_eq!(h.as_ref(), &[1; 10]);
    }

    #[tokio::test(start_paused = true)]
    async fn due_at_the_grace_then_at_its_bytes_over_the_rate_and_never_past_a_stall() {
        let pace = Pace::start(1000);
        let t0 = Instant::now();
        // Bytes worth `secs` seconds at the minimum rate, after the 1000 from before the clock.
        let worth = |secs: u64| 1000 + (secs * MIN_RATE) as usize;
        assert_eq!(
            pace.deadline(1000, t0),
            (t0 + PACE_GRACE, Late::TooSlow),
            "bytes from before the clock started do not count"
        );
        assert_eq!(
            pace.deadline(worth(2), t0),
            (t0 + PACE_GRACE, Late::TooSlow),
            "2 s worth in: the grace still sets it"
        );
        assert_eq!(
            pace.deadline(worth(5), t0 + Duration::from_secs(1)),
            (t0 + Duration::from_secs(5), Late::TooSlow),
            "5 s worth in: due 5 s after the start"
        );
        assert_eq!(
            pace.deadline(worth(15), t0 + Duration::from_secs(1)),
            (t0 + Duration::from_secs(11), Late::Stalled),
            "far ahead of the rate: 10 s after the last byte"
        );
    }

    #[tokio::test]
    async fn a_waiter_gets_room_when_it_is_freed() {
        let budget = InboundBudget::new(10);
        let held = budget.try_take(10).unwrap();
        let b = budget.clone();
        let waiter = tokio::spawn(async move { b.take(5).await.bytes() });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(held);
        assert_eq!(waiter.await.unwrap(), 5);
    }
}

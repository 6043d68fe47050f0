//! The one outbound path of a connection.
//!
//! Every frame a connection sends — responses, session events, channel frames, protocol errors,
//! pings, pongs and the close — is queued here and written by the connection's single writer
//! task. The queue is bounded in bytes, not frames: a reader that falls behind by more than the
//! budget fails the connection (1013) instead of growing the server's memory. Failure is latched:
//! [`OutboundPath::fail_once`] takes effect exactly once, however many sends fail after it, and
//! wakes whoever waits in [`OutboundPath::failed`] (the connection's reader, which cleans up).
//!
//! - `queue` — [`OutboundPath`]: the queue, its byte budget and the failure latch.
//! - `lossy` — the lossy lane: a lossy channel drops its own oldest frames.
//! - `pong` — pongs owed to a peer that does not read coalesce.
//! - `bulk` — the bulk lane (frames apart, each channel within its window); `bulk_send` — its
//!   sends and the wait for room.
//! - `batch` — what the writer takes next, and what it releases once written.
//! - `socket` — the reader's inline write of an answer when nothing is queued and the writer is
//!   idle, and the writer's handle on the socket; `stream` — the socket as the path holds it.
//! - `item` — what the queue holds and what each item costs; `error` — why a send was refused.

mod batch;
mod bulk;
mod bulk_send;
mod error;
mod item;
mod lossy;
mod pong;
mod queue;
mod socket;
mod stream;

pub use error::{DeliveryError, FailReason};
pub use item::ITEM_OVERHEAD;
pub(crate) use item::{BulkFrame, MessageKind, OutItem};
pub(crate) use lossy::dropped_notice;
pub(crate) use queue::OutboundPath;
pub(crate) use socket::SocketRef;
pub(crate) use stream::SocketWrite;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use bytes::Bytes;
    use futures_util::FutureExt;

    use super::batch::take_batch;
    use super::pong::MAX_PENDING_PONGS;
    use super::socket;
    use super::*;
    use carrier_protocol::close::CloseCode;

    #[test]
    fn a_send_is_refused_only_once_the_queue_is_already_over_budget() {
        let out = OutboundPath::new(1000);
        // What the connection's reader waits on to clean up: it learns of the failure once.
        let mut failed = Box::pin(out.failed_notified());
        assert_eq!((&mut failed).now_or_never(), None);
        assert!(!out.has_failed());
        // One message far larger than the budget is taken: the queue was under it.
        assert!(out.send_text(Bytes::from(vec![b'a'; 5000])).is_ok());
        assert_eq!(out.queued_bytes(), 5000 + ITEM_OVERHEAD);
        // The next one finds the queue over budget: the connection fails, once.
        assert_eq!(
            out.send_text(Bytes::from_static(b"x")),
            Err(DeliveryError::Overflow)
        );
        for _ in 0..10 {
            assert_eq!(
                out.send_text(Bytes::from_static(b"x")),
                Err(DeliveryError::Closed)
            );
        }
        assert!(!out.fail_once(FailReason::WriteError));
        assert_eq!(failed.now_or_never(), Some(()));
        assert!(out.has_failed());
        assert_eq!(out.queued_bytes(), 0);
        assert_eq!(out.failure(), Some(FailReason::SlowReader));
    }

    #[test]
    fn small_frames_are_charged_their_overhead() {
        // 1000 bytes of budget hold three empty frames, not a thousand.
        let out = OutboundPath::new(3 * ITEM_OVERHEAD);
        for _ in 0..4 {
            out.send_text(Bytes::new()).unwrap();
        }
        assert_eq!(out.send_text(Bytes::new()), Err(DeliveryError::Overflow));
    }

    #[test]
    fn pongs_keep_their_place_and_past_the_limit_the_newest_answers_the_latest_ping() {
        let out = OutboundPath::new(100 * ITEM_OVERHEAD);
        out.send_text(Bytes::from_static(b"before")).unwrap();
        for i in 0..1000u32 {
            out.pong(Bytes::from(i.to_be_bytes().to_vec()));
        }
        out.send_text(Bytes::from_static(b"after")).unwrap();
        assert_eq!(
            out.queued_bytes(),
            2 * ITEM_OVERHEAD + 11 + MAX_PENDING_PONGS * (ITEM_OVERHEAD + 4)
        );
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        futures_util::FutureExt::now_or_never(out.next_batch(&mut batch, &mut drops)).unwrap();
        let pongs: Vec<u32> = batch
            .iter()
            .filter_map(|i| match i {
                OutItem::Pong(p) => Some(u32::from_be_bytes(p[..].try_into().unwrap())),
                _ => None,
            })
            .collect();
        // The first fifteen pings each get their pong; the sixteenth answers the latest.
        let mut expected: Vec<u32> = (0..MAX_PENDING_PONGS as u32 - 1).collect();
        expected.push(999);
        assert_eq!(pongs, expected);
        assert!(matches!(&batch[0], OutItem::Message { head, .. } if &head[..] == b"before"));
        assert!(
            matches!(batch.last(), Some(OutItem::Message { head, .. }) if &head[..] == b"after")
        );
        // Once the writer took them, pings are answered one by one again.
        out.pong(Bytes::from_static(b"x"));
        out.pong(Bytes::from_static(b"y"));
        batch.clear();
        futures_util::FutureExt::now_or_never(out.next_batch(&mut batch, &mut drops)).unwrap();
        assert_eq!(batch.len(), 2);
        assert_eq!(out.failure(), None);
    }

    #[test]
    fn lossy_drops_oldest_of_its_channel_only() {
        let out = OutboundPath::new(1 << 20);
        let mic: Arc<str> = Arc::from("mic");
        out.send_text(Bytes::from_static(b"reliable")).unwrap();
        let frame = 10 + ITEM_OVERHEAD;
        for i in 0..5u8 {
            out.send_lossy(&mic, 3 * frame, Bytes::new(), Bytes::from(vec![i; 10]))
                .unwrap();
        }
        // 5 frames with room for 3: the two oldest were dropped.
        assert_eq!(out.queued_bytes(), 8 + ITEM_OVERHEAD + 3 * frame);
        let mut batch = Vec::new();
        let mut drops = Vec::new();
        futures_util::FutureExt::now_or_never(out.next_batch(&mut batch, &mut drops)).unwrap();
        assert_eq!(batch.len(), 4);
        assert_eq!(drops, vec![(mic.clone(), 2)]);
        match &batch[1] {
            OutItem::Message { body, .. } => assert_eq!(body[0], 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn concurrent_sends_and_writes_never_fail_a_reader_that_keeps_up() {
        // The writer releases bytes as fast as they are queued, so at most a few sends are
        // ever outstanding: a spurious overflow can only come from a miscount.
        let out = OutboundPath::new(1000 + 10 * ITEM_OVERHEAD);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (out, stop) = (out.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut batch, mut drops) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Acquire) {
                    let _ = futures_util::FutureExt::now_or_never(
                        out.next_batch(&mut batch, &mut drops),
                    );
                    for item in batch.drain(..) {
                        out.written(&item);
                    }
                }
            })
        };
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let out = out.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        if out.send_text(Bytes::from_static(b"0123456789")).is_err() {
                            return false;
                        }
                        // Keep the queue short: wait for the writer to catch up.
                        while out.queued_bytes() > 2 * ITEM_OVERHEAD && out.failure().is_none() {
                            std::thread::yield_now();
                        }
                    }
                    true
                })
            })
            .collect();
        let ok = senders.into_iter().all(|s| s.join().unwrap());
        stop.store(true, Ordering::Release);
        writer.join().unwrap();
        assert!(ok, "a healthy connection failed: {:?}", out.failure());
        assert_eq!(out.failure(), None);
    }

    #[test]
    fn close_stops_further_sends() {
        let out = OutboundPath::new(1000);
        out.close(CloseCode::NORMAL, "bye");
        assert_eq!(
            out.send_text(Bytes::from_static(b"late")),
            Err(DeliveryError::Closed)
        );
        assert!(!out.is_open());
    }

    #[test]
    fn the_frame_owed_to_bulk_never_goes_ahead_of_a_frame_queued_before_it() {
        // 20 agent frames, then one bulk frame: the bulk frame comes last (it used to go after
        // the 15th, overtaking five frames queued before it).
        let out = OutboundPath::new(1 << 20);
        let file: Arc<str> = Arc::from("file");
        for i in 0..20u8 {
            out.send_text(Bytes::from(vec![i])).unwrap();
        }
        let bulk = BulkFrame {
            channel: file.clone(),
            head: Bytes::new(),
            body: Bytes::from_static(b"B"),
        };
        out.send_bulk(bulk, 1 << 20).unwrap();
        let mut order = Vec::new();
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            take_batch(&mut out.lock(), &mut batch, &mut drops);
            for item in batch.drain(..) {
                order.push(match &item {
                    OutItem::Bulk(_) => 255,
                    OutItem::Message { head, .. } => head[0],
                    other => panic!("unexpected {other:?}"),
                });
                out.written(&item);
            }
        }
        let expected: Vec<u8> = (0..20).chain([255]).collect();
        assert_eq!(order, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_synchronous_look_for_bulk_room_lets_a_stalled_receiver_go() {
        let out = OutboundPath::new(1 << 20);
        let file: Arc<str> = Arc::from("file");
        let frame = || BulkFrame {
            channel: file.clone(),
            head: Bytes::new(),
            body: Bytes::from_static(b"chunk"),
        };
        assert_eq!(out.try_bulk_room("file", 1), Ok(true), "an empty window");
        out.send_bulk(frame(), 1).unwrap();
        assert_eq!(
            out.try_bulk_room("file", 1),
            Ok(false),
            "full, not yet stalled"
        );
        tokio::time::advance(bulk::BULK_STALL - std::time::Duration::from_millis(1)).await;
        assert_eq!(out.try_bulk_room("file", 1), Ok(false));
        assert_eq!(out.failure(), None);
        tokio::time::advance(std::time::Duration::from_millis(1)).await;
        assert_eq!(
            out.try_bulk_room("file", 1),
            Err(DeliveryError::Closed),
            "full for the stall time with nothing written"
        );
        assert_eq!(out.failure(), Some(FailReason::BulkStalled));
        assert_eq!(out.try_bulk_room("other", 1), Err(DeliveryError::Closed));
    }

    mod lanes {
        //! For any interleaving of sends on the agent protocol, a reliable, a lossy and a bulk channel
        //! with the writer taking batches in between, every lane reaches the socket in its send order,
        //! and only bulk frames are ever overtaken (docs/protocol.md, "Channels", numbering).
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Lane {
            Agent,
            Reliable,
            Lossy,
            Bulk,
        }

        #[derive(Debug, Clone)]
        enum Op {
            Send(Lane),
            /// The writer takes one batch and writes it.
            Take,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => Just(Op::Send(Lane::Agent)),
                2 => Just(Op::Send(Lane::Reliable)),
                2 => Just(Op::Send(Lane::Lossy)),
                4 => Just(Op::Send(Lane::Bulk)),
                2 => Just(Op::Take),
            ]
        }

        fn id_of(item: &OutItem) -> (Lane, u32) {
            let (lane, body) = match item {
                OutItem::Bulk(f) => (Lane::Bulk, &f.body),
                OutItem::Message {
                    head, body, lossy, ..
                } => {
                    let lane = match (lossy.is_some(), &head[..]) {
                        (true, _) => Lane::Lossy,
                        (false, b"r") => Lane::Reliable,
                        _ => Lane::Agent,
                    };
                    (lane, body)
                }
                other => panic!("unexpected item {other:?}"),
            };
            (lane, u32::from_be_bytes(body[..4].try_into().unwrap()))
        }

        fn take_and_write(out: &OutboundPath, written: &mut Vec<(Lane, u32)>) {
            let (mut batch, mut drops) = (Vec::new(), Vec::new());
            take_batch(&mut out.lock(), &mut batch, &mut drops);
            for item in &batch {
                written.push(id_of(item));
                out.written(item);
            }
        }

        proptest! {
            #[test]
            fn every_lane_keeps_its_order_and_only_bulk_is_overtaken(
                ops in proptest::collection::vec(op(), 1..400),
                bulk_window_frames in 1usize..8,
                lossy_frames in 1usize..4,
            ) {
                let out = OutboundPath::new(1 << 30);
                let lossy: Arc<str> = Arc::from("live");
                let bulk: Arc<str> = Arc::from("file");
                let frame_cost = ITEM_OVERHEAD + 4;
                let mut sent: Vec<(Lane, u32)> = Vec::new();
                let mut written = Vec::new();
                for (n, op) in ops.iter().enumerate() {
                    let body = Bytes::from((n as u32).to_be_bytes().to_vec());
                    match op {
                        Op::Take => take_and_write(&out, &mut written),
                        Op::Send(lane) => {
                            let accepted = match lane {
                                Lane::Agent => out.send_binary(Bytes::from_static(b"a"), body).is_ok(),
                                Lane::Reliable => out.send_binary(Bytes::from_static(b"r"), body).is_ok(),
                                Lane::Lossy => out
                                    .send_lossy(&lossy, lossy_frames * frame_cost, Bytes::new(), body)
                                    .is_ok(),
                                Lane::Bulk => out
                                    .send_bulk(
                                        BulkFrame { channel: bulk.clone(), head: Bytes::new(), body },
                                        bulk_window_frames * frame_cost,
                                    )
                                    .is_ok(),
                            };
                            if accepted {
                                sent.push((*lane, n as u32));
                            }
                        }
                    }
                }
                // The writer drains what is left.
                for _ in 0..ops.len() + 1 {
                    take_and_write(&out, &mut written);
                }
                prop_assert_eq!(out.queued_bytes(), 0);
                prop_assert_eq!(out.bulk_queued_bytes("file"), 0);
                for lane in [Lane::Agent, Lane::Reliable, Lane::Lossy, Lane::Bulk] {
                    let of = |v: &[(Lane, u32)]| -> Vec<u32> {
                        v.iter().filter(|(l, _)| *l == lane).map(|(_, n)| *n).collect()
                    };
                    let (s, w) = (of(&sent), of(&written));
                    prop_assert!(w.windows(2).all(|p| p[0] < p[1]), "{:?} out of order: {:?}", lane, w);
                    if lane == Lane::Lossy {
                        prop_assert!(w.iter().all(|n| s.contains(n)));
                    } else {
                        prop_assert_eq!(s, w, "{:?} lost frames", lane);
                    }
                }
                // Across lanes, frames other than bulk keep the connection's order: none of them
                // is ever overtaken.
                let others: Vec<u32> = written
                    .iter()
                    .filter(|(l, _)| *l != Lane::Bulk)
                    .map(|(_, n)| *n)
                    .collect();
                prop_assert!(others.windows(2).all(|p| p[0] < p[1]), "{:?}", written);
                // And no bulk frame goes ahead of a frame queued before it.
                for (at, (lane, n)) in written.iter().enumerate() {
                    if *lane == Lane::Bulk {
                        let older_after = written[at..]
                            .iter()
                            .find(|(l, m)| *l != Lane::Bulk && m < n);
                        prop_assert!(older_after.is_none(), "bulk {} overtook {:?}: {:?}", n, older_after, written);
                    }
                }
            }
        }
    }

    /// A socket that takes at most `room` more bytes, then would block: what a peer that stopped
    /// reading leaves a connection with.
    struct Filling {
        taken: Arc<std::sync::Mutex<Vec<u8>>>,
        room: usize,
    }

    impl tokio::io::AsyncWrite for Filling {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            if self.room == 0 {
                return std::task::Poll::Pending;
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.taken.lock().unwrap().extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }
        fn poll_write_vectored(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            if self.room == 0 {
                return std::task::Poll::Pending;
            }
            let mut n = 0;
            for b in bufs {
                let k = b.len().min(self.room);
                self.room -= k;
                self.taken.lock().unwrap().extend_from_slice(&b[..k]);
                n += k;
            }
            std::task::Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    impl SocketWrite for Filling {}

    fn filling(room: usize) -> (Box<Filling>, Arc<std::sync::Mutex<Vec<u8>>>) {
        let taken = Arc::new(std::sync::Mutex::new(Vec::new()));
        (
            Box::new(Filling {
                taken: taken.clone(),
                room,
            }),
            taken,
        )
    }

    /// The bytes of the items a batch holds, as the writer would put them on the wire after what
    /// the socket already took (only a frame's rest and whole text frames here).
    fn wire_of(batch: &[OutItem]) -> Vec<u8> {
        let mut wire = Vec::new();
        for item in batch {
            match item {
                OutItem::Rest { head, body } => {
                    wire.extend_from_slice(head);
                    wire.extend_from_slice(body);
                }
                OutItem::Message { head, body, .. } => {
                    wire.push(0x81);
                    wire.push((head.len() + body.len()) as u8);
                    wire.extend_from_slice(head);
                    wire.extend_from_slice(body);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        wire
    }

    #[test]
    fn an_answer_is_written_inline_only_from_the_readers_scope_with_nothing_queued() {
        let out = OutboundPath::new(1 << 20);
        let (socket, taken) = filling(1 << 20);
        let _writer = out.attach_socket(socket);
        // Outside the reader's scope: queued for the writer.
        out.send_text(Bytes::from_static(b"queued")).unwrap();
        assert!(taken.lock().unwrap().is_empty());
        // Inside it, with something queued: queued too, behind it.
        let ((), inline) =
            out.inline_scope(|| out.send_text(Bytes::from_static(b"behind")).unwrap());
        assert_eq!(inline, socket::InlineWritten::default());
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        out.next_batch(&mut batch, &mut drops)
            .now_or_never()
            .unwrap();
        assert_eq!(wire_of(&batch), b"\x81\x06queued\x81\x06behind");
        // The writer holds that batch: still no inline write.
        let ((), inline) = out.inline_scope(|| out.send_text(Bytes::from_static(b"x")).unwrap());
        assert_eq!(inline.frames, 0);
        for item in &batch {
            out.written(item);
        }
        batch.clear();
        out.next_batch(&mut batch, &mut drops)
            .now_or_never()
            .unwrap();
        assert_eq!(wire_of(&batch), b"\x81\x01x");
        for item in &batch {
            out.written(item);
        }
        // The writer asks for its next batch (so it holds nothing) and waits: now inline.
        batch.clear();
        assert!(out
            .next_batch(&mut batch, &mut drops)
            .now_or_never()
            .is_none());
        let ((), inline) = out.inline_scope(|| out.send_text(Bytes::from_static(b"now")).unwrap());
        assert_eq!((inline.frames, inline.bytes), (1, 3));
        assert_eq!(&taken.lock().unwrap()[..], b"\x81\x03now");
        assert_eq!(out.queued_bytes(), 0);
        // Binary frames never go inline.
        let ((), inline) = out.inline_scope(|| {
            out.send_binary(Bytes::from_static(b"b"), Bytes::new())
                .unwrap()
        });
        assert_eq!(inline.frames, 0);
    }

    /// A path whose socket takes `room` bytes, and what it took of one inline answer `text`
    /// (counted as one frame of its length).
    fn answered_into(room: usize, text: Bytes) -> (OutboundPath, SocketRef, Vec<u8>) {
        let out = OutboundPath::new(1 << 20);
        let (socket, taken) = filling(room);
        let writer = out.attach_socket(socket);
        let len = text.len() as u64;
        let ((), inline) = out.inline_scope(|| out.send_text(text).unwrap());
        assert_eq!((inline.frames, inline.bytes), (1, len));
        let taken = taken.lock().unwrap().clone();
        (out, writer, taken)
    }

    #[test]
    fn what_the_socket_does_not_take_is_queued_first_and_survives_a_failure() {
        // Room for the header and 8 bytes of the first answer.
        let (out, _writer, taken) = answered_into(10, Bytes::from(vec![b'a'; 100]));
        assert_eq!(taken, [&[0x81u8, 100][..], &[b'a'; 8][..]].concat());
        assert_eq!(out.queued_bytes(), 92 + ITEM_OVERHEAD);
        // A later answer goes behind the rest (the queue is no longer empty: not inline).
        let ((), inline) = out.inline_scope(|| out.send_text(Bytes::from_static(b"next")).unwrap());
        assert_eq!(inline.frames, 0);
        // The connection fails before the writer gets to them: the rest stays, the rest goes.
        assert!(out.fail_once(FailReason::SlowReader));
        assert_eq!(out.queued_bytes(), 92 + ITEM_OVERHEAD);
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        out.next_batch(&mut batch, &mut drops)
            .now_or_never()
            .unwrap();
        assert_eq!(wire_of(&batch), vec![b'a'; 92]);
        // Nothing is written inline after the failure.
        let ((), inline) = out.inline_scope(|| {
            assert_eq!(
                out.send_text(Bytes::from_static(b"late")),
                Err(DeliveryError::Closed)
            )
        });
        assert_eq!(inline.frames, 0);
    }

    #[test]
    fn an_answer_past_the_gathered_size_goes_out_vectored_and_its_rest_is_queued() {
        // Up to 1 KiB an answer is gathered into one buffer for one plain write; past it the
        // header and payload go out in one vectored write, partly here.
        let (out, _writer, taken) = answered_into(10, Bytes::from(vec![b'z'; 2000]));
        let head = [0x81u8, 126, (2000u16 >> 8) as u8, (2000u16 & 0xff) as u8];
        assert_eq!(taken, [&head[..], &[b'z'; 6][..]].concat());
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        out.next_batch(&mut batch, &mut drops)
            .now_or_never()
            .unwrap();
        assert_eq!(wire_of(&batch), vec![b'z'; 1994]);
    }

    #[test]
    fn a_header_cut_in_two_is_finished_before_its_payload() {
        let out = OutboundPath::new(1 << 20);
        let (socket, taken) = filling(1);
        let _writer = out.attach_socket(socket);
        let ((), _) = out.inline_scope(|| out.send_text(Bytes::from_static(b"hello")).unwrap());
        assert_eq!(&taken.lock().unwrap()[..], b"\x81");
        let (mut batch, mut drops) = (Vec::new(), Vec::new());
        out.next_batch(&mut batch, &mut drops)
            .now_or_never()
            .unwrap();
        assert_eq!(wire_of(&batch), b"\x05hello");
    }
}

//! The `fanout` mode: one sender, N receivers on a relay channel.
//!
//! Each frame's payload starts with the send time (ns since the run's start) and the frame's
//! index, so a receiver measures send → receive latency itself. The sender stays at most
//! [`FANOUT_WINDOW`] frames ahead of the slowest receiver.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fastwebsockets::OpCode;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::client::open_all;
use super::client::BenchSocket;
use super::cpu::{cpu_since, process_cpu_time};
use super::error::LoadError;
use super::latency::Latencies;
use super::plan::{Plan, FANOUT_WINDOW};
use super::report::Outcome;
use super::target::Target;
use carrier::protocol::channel_frame;

/// Bytes at the start of each payload: send time (u64 ns) and frame index (u64).
const STAMP: usize = 16;

/// Delivery progress shared by the receivers and the sender.
struct Progress {
    /// Frames each receiver has taken; `u64::MAX` once it gave up (so it holds no one back).
    received: Vec<AtomicU64>,
    /// Rung by receivers after each frame.
    moved: Notify,
}

impl Progress {
    fn slowest(&self) -> u64 {
        self.received
            .iter()
            .map(|r| r.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Waits until every receiver has taken at least `n` frames.
    async fn reached(&self, n: u64) {
        loop {
            let moved = self.moved.notified();
            if self.slowest() >= n {
                return;
            }
            moved.await;
        }
    }
}

struct ReceiverResult {
    completed: u64,
    latencies: Latencies,
    error: Option<LoadError>,
    finished: Instant,
}

pub(crate) async fn run(
    plan: &Plan,
    target: &Target,
    deadline: Instant,
) -> Result<Outcome, LoadError> {
    if plan.size < STAMP {
        return Err(LoadError::Plan(format!(
            "fanout needs size >= {STAMP} (each payload carries a timestamp and an index)"
        )));
    }
    let mut sockets =
        tokio::time::timeout_at(deadline, open_all(plan, target, plan.connections + 1))
            .await
            .map_err(|_| LoadError::TimedOut)??;
    let Some(mut sender) = sockets.pop() else {
        return Err(LoadError::Plan("no sender connection".into()));
    };
    let warmup = plan.warmup as u64;
    let total = warmup + plan.messages as u64;
    let progress = Arc::new(Progress {
        received: (0..sockets.len()).map(|_| AtomicU64::new(0)).collect(),
        moved: Notify::new(),
    });
    let epoch = Instant::now();
    let channel: Arc<str> = Arc::from(plan.channel_name());
    let mut receivers = Vec::with_capacity(sockets.len());
    for (i, socket) in sockets.into_iter().enumerate() {
        let (progress, channel) = (progress.clone(), channel.clone());
        let capacity = plan.messages;
        receivers.push(tokio::spawn(async move {
            let r = tokio::time::timeout_at(
                deadline,
                receive(
                    socket, i, &progress, &channel, epoch, warmup, total, capacity,
                ),
            )
            .await
            .unwrap_or_else(|_| ReceiverResult {
                completed: 0,
                latencies: Latencies::default(),
                error: Some(LoadError::TimedOut),
                finished: Instant::now(),
            });
            // A receiver that stopped early must not hold the sender back.
            progress.received[i].store(u64::MAX, Ordering::Release);
            progress.moved.notify_one();
            r
        }));
    }

    let encoded = channel_frame::encode_binary(&channel, 0, Bytes::from(vec![0x5A; plan.size]))
        .map_err(|e| LoadError::Plan(e.to_string()))?;
    let seq_at = encoded.head.len() - 4;
    let body_at = encoded.head.len();
    let mut frame = encoded.to_vec();
    let mut started = epoch;
    let mut cpu_start = None;
    let mut send_error = None;
    for n in 0..total {
        if n == warmup {
            // Measure from the moment every receiver has taken the warm-up frames.
            if tokio::time::timeout_at(deadline, progress.reached(warmup))
                .await
                .is_err()
            {
                send_error = Some(LoadError::TimedOut);
                break;
            }
            started = Instant::now();
            cpu_start = plan.server_pid.and_then(|p| process_cpu_time(p).ok());
        }
        let window = n.saturating_sub(FANOUT_WINDOW as u64 - 1);
        if tokio::time::timeout_at(deadline, progress.reached(window))
            .await
            .is_err()
        {
            send_error = Some(LoadError::TimedOut);
            break;
        }
        let stamp = epoch.elapsed().as_nanos() as u64;
        frame[seq_at..seq_at + 4].copy_from_slice(&(n as u32).to_be_bytes());
        frame[body_at..body_at + 8].copy_from_slice(&stamp.to_be_bytes());
        frame[body_at + 8..body_at + 16].copy_from_slice(&n.to_be_bytes());
        if let Err(e) = sender.send(OpCode::Binary, &frame).await {
            send_error = Some(e);
            break;
        }
    }

    let mut out = Outcome {
        completed: 0,
        errors: 0,
        timed_out: matches!(send_error, Some(LoadError::TimedOut)),
        elapsed: Duration::ZERO,
        latencies: Latencies::with_capacity(plan.connections * plan.messages),
        first_error: send_error.as_ref().map(ToString::to_string),
        memory: None,
        server_cpu: None,
        mixed: None,
    };
    out.errors += u64::from(send_error.is_some());
    let mut last = started;
    for task in receivers {
        match task.await {
            Ok(r) => {
                out.completed += r.completed;
                out.latencies.merge(r.latencies);
                last = last.max(r.finished);
                if let Some(e) = r.error {
                    out.errors += 1;
                    out.timed_out |= matches!(e, LoadError::TimedOut);
                    out.first_error.get_or_insert_with(|| e.to_string());
                }
            }
            Err(e) => {
                out.errors += 1;
                out.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    out.elapsed = last.saturating_duration_since(started);
    out.server_cpu = cpu_since(plan.server_pid, cpu_start);
    if Instant::now() < deadline {
        sender.close().await;
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn receive(
    mut socket: BenchSocket,
    index: usize,
    progress: &Progress,
    channel: &str,
    epoch: Instant,
    warmup: u64,
    total: u64,
    capacity: usize,
) -> ReceiverResult {
    let mut r = ReceiverResult {
        completed: 0,
        latencies: Latencies::with_capacity(capacity),
        error: None,
        finished: Instant::now(),
    };
    let mut expected = 0u64;
    while expected < total {
        let msg = match socket.recv().await {
            Ok(m) => m,
            Err(e) => {
                r.error = Some(e);
                break;
            }
        };
        if msg.opcode != OpCode::Binary {
            continue;
        }
        let now = epoch.elapsed().as_nanos() as u64;
        let body = match channel_frame::peek(&msg.payload) {
            Ok(h) if h.channel == channel && msg.payload.len() >= h.body_offset + STAMP => {
                &msg.payload[h.body_offset..]
            }
            Ok(h) => {
                r.error = Some(LoadError::Unexpected(format!("frame on {:?}", h.channel)));
                break;
            }
            Err(e) => {
                r.error = Some(LoadError::Unexpected(e.to_string()));
                break;
            }
        };
        let mut word = [0u8; 8];
        word.copy_from_slice(&body[..8]);
        let sent = u64::from_be_bytes(word);
        word.copy_from_slice(&body[8..16]);
        let n = u64::from_be_bytes(word);
        if n != expected {
            r.error = Some(LoadError::Unexpected(format!(
                "frame {n} arrived when {expected} was due"
            )));
            break;
        }
        expected += 1;
        if n >= warmup {
            r.latencies
                .record(Duration::from_nanos(now.saturating_sub(sent)));
            r.completed += 1;
        }
        progress.received[index].store(expected, Ordering::Release);
        progress.moved.notify_one();
    }
    r.finished = Instant::now();
    socket.close().await;
    r
}

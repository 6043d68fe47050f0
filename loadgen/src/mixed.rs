//! The `mixed` mode: what a user of a carrier feels when a large transfer runs
//! beside the agent protocol on the same connection.
//!
//! On each connection, first `system.ping`s alone (the idle latency), then a bulk transfer of
//! [`Plan::transfer_bytes`] in frames of [`Plan::size`] bytes to an `echo` channel (at most
//! [`Plan::window`] frames in flight, echoes read at [`Plan::read_rate`] or as fast as they
//! come) while the same closed-loop pings run on the same connection. The report gives both
//! latencies, the transfer's rate and the errors. Run it against a `bulk` echo channel
//! (`--channel NAME:echo:bulk` on the server) and against a `reliable` one (`NAME:echo`, one
//! FIFO per connection) to see what the delivery class changes.
//!
//! Each connection is split: a reader task takes echoes (checked for order and size) and ping
//! responses; the transfer and the pings share the write half.
//!
//! The transfer is at least [`Plan::transfer_bytes`] and goes on until [`IDLE_PINGS`] pings
//! have been measured during it too, so both p99s rest on as many samples (a 256 MiB transfer
//! alone lasted ~0.3 s and carried 70–220 pings: its p99 was one or two samples). Against a
//! server that gives credit on the channel (protocol 1.1) the transfer counts it: a frame goes
//! only when the credit covers its body.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fastwebsockets::{FragmentCollectorRead, Frame, OpCode, Payload, WebSocketWrite};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{ReadHalf, WriteHalf};
use tokio::sync::{oneshot, Mutex, Notify};
use tokio::time::Instant;

use super::client::{handshake_frame, response_outcome, upgrade};
use super::cpu::{cpu_since, process_cpu_time};
use super::error::LoadError;
use super::latency::Latencies;
use super::plan::{Plan, MAX_TRANSFER};
use super::report::{MixedReport, Outcome};
use super::target::Target;
use carrier::protocol::channel_frame;

/// Pings measured on each connection before the transfer starts.
pub const IDLE_PINGS: usize = 1000;
/// The pause between one ping's response and the next ping.
pub(crate) const PING_GAP: Duration = Duration::from_millis(1);

/// The request waiting for its response: its id, and where to say it came.
type Waiting = Option<(String, oneshot::Sender<Result<(), LoadError>>)>;
type Read = FragmentCollectorRead<ReadHalf<TokioIo<Upgraded>>>;
type Write = Arc<Mutex<WebSocketWrite<WriteHalf<TokioIo<Upgraded>>>>>;

/// What the reader and the two senders of one connection share.
struct Shared {
    /// Frames echoed back so far.
    echoed: AtomicU64,
    /// Woken when an echo arrives (the transfer waits on its window).
    progress: Notify,
    /// The ping (or handshake) waiting for its response.
    ping: std::sync::Mutex<Waiting>,
    /// The reader stopped (an error, or the connection ended).
    dead: AtomicBool,
    /// The server gave credit on the channel (its handshake said so): the transfer counts it.
    credited: AtomicBool,
    /// Bytes of frame bodies the transfer may still send, when credited.
    credit: tokio::sync::Semaphore,
    /// Enough pings were measured during the transfer: it may end.
    enough: AtomicBool,
}

/// Takes a grant of credit on `channel` from a text frame: the handshake result's descriptor
/// or a `channel.credit` event. Other frames are left alone.
fn note_credit(shared: &Shared, payload: &[u8], channel: &str) {
    if !payload.windows(6).any(|w| w == b"credit") {
        return;
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return;
    };
    let bytes = if v["event"] == "channel.credit" && v["payload"]["channel"] == channel {
        v["payload"]["bytes"].as_u64()
    } else {
        let described = v["result"]["channels"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == channel))
            .and_then(|c| c["credit"].as_u64());
        if described.is_some() {
            shared.credited.store(true, Ordering::Release);
        }
        described
    };
    if let Some(n) = bytes {
        shared
            .credit
            .add_permits((n as usize).min(tokio::sync::Semaphore::MAX_PERMITS / 2));
        shared.progress.notify_waiters();
    }
}

async fn send(write: &Write, opcode: OpCode, payload: Vec<u8>) -> Result<(), LoadError> {
    let frame = Frame::new(true, opcode, None, Payload::Owned(payload));
    write
        .lock()
        .await
        .write_frame(frame)
        .await
        .map_err(LoadError::from)
}

/// One ping round trip on a split connection.
async fn ping(write: &Write, shared: &Shared, n: u64) -> Result<Duration, LoadError> {
    let id = format!("m{n}");
    let (tx, rx) = oneshot::channel();
    *shared.ping.lock().unwrap_or_else(|e| e.into_inner()) = Some((id.clone(), tx));
    let frame = format!("{{\"id\":\"{id}\",\"method\":\"system.ping\",\"params\":{{}}}}");
    let sent = Instant::now();
    send(write, OpCode::Text, frame.into_bytes()).await?;
    match rx.await {
        Ok(result) => result.map(|()| sent.elapsed()),
        Err(_) => Err(LoadError::Closed(None)),
    }
}

/// Reads echoes and ping responses until the connection ends or `frames` echoes arrived and
/// `stop` is set.
async fn reader(
    mut read: Read,
    shared: Arc<Shared>,
    channel: String,
    size: usize,
    read_rate: Option<u64>,
) -> Result<(), LoadError> {
    // The pace counts from the first echo (the idle pings come before the transfer).
    let mut started = None;
    let mut bytes = 0u64;
    let result = loop {
        let frame = match read
            .read_frame(&mut |_| async { Ok::<_, std::convert::Infallible>(()) })
            .await
        {
            Ok(f) => f,
            Err(e) => break Err(LoadError::from(e)),
        };
        match frame.opcode {
            OpCode::Text => {
                note_credit(&shared, &frame.payload, &channel);
                let mut slot = shared.ping.lock().unwrap_or_else(|e| e.into_inner());
                let answers = slot
                    .as_ref()
                    .and_then(|(id, _)| response_outcome(&frame.payload, id.as_bytes()));
                if let Some(outcome) = answers {
                    if let Some((_, tx)) = slot.take() {
                        let _ = tx.send(outcome);
                    }
                } else if String::from_utf8_lossy(&frame.payload).contains("protocol_error") {
                    break Err(LoadError::Rejected(
                        String::from_utf8_lossy(&frame.payload).into_owned(),
                    ));
                }
            }
            OpCode::Binary => {
                let header = match channel_frame::peek(&frame.payload) {
                    Ok(h) => h,
                    Err(e) => break Err(LoadError::Unexpected(e.to_string())),
                };
                let body = &frame.payload[header.body_offset..];
                let expected = shared.echoed.load(Ordering::Acquire);
                if header.channel != channel || body.len() != size {
                    break Err(LoadError::Unexpected(format!(
                        "frame on {:?} with {} bytes",
                        header.channel,
                        body.len()
                    )));
                }
                if body.len() >= 8 && body[..8] != expected.to_le_bytes() {
                    break Err(LoadError::Unexpected(format!(
                        "echo out of order: frame {expected} expected"
                    )));
                }
                bytes += body.len() as u64;
                shared.echoed.fetch_add(1, Ordering::AcqRel);
                shared.progress.notify_waiters();
                let first = *started.get_or_insert_with(Instant::now);
                if let Some(rate) = read_rate.filter(|r| *r > 0) {
                    let due = first + Duration::from_secs_f64(bytes as f64 / rate as f64);
                    tokio::time::sleep_until(due).await;
                }
            }
            OpCode::Close => {
                let code = (frame.payload.len() >= 2)
                    .then(|| u16::from_be_bytes([frame.payload[0], frame.payload[1]]));
                break Err(LoadError::Closed(code));
            }
            _ => {}
        }
    };
    shared.dead.store(true, Ordering::Release);
    shared.progress.notify_waiters();
    if let Some((_, tx)) = shared.ping.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = tx.send(Err(LoadError::Closed(None)));
    }
    result
}

/// Sends the transfer: at least `frames` frames and on until `shared.enough` (at most
/// [`MAX_TRANSFER`] bytes), at most `window` ahead of the echoes and, when credited,
/// within the credit. Returns the frames sent.
async fn transfer(
    write: Write,
    shared: Arc<Shared>,
    channel: String,
    size: usize,
    frames: u64,
    window: u64,
) -> Result<u64, LoadError> {
    let cap = (MAX_TRANSFER / size.max(1) as u64).max(frames);
    let encoded = channel_frame::encode_binary(&channel, 0, Bytes::from(vec![0x5A; size]))
        .map_err(|e| LoadError::Plan(e.to_string()))?;
    let mut template = encoded.to_vec();
    let (seq_at, body_at) = (encoded.head.len() - 4, encoded.head.len());
    let mut sent = 0u64;
    for n in 0..cap {
        if n >= frames && shared.enough.load(Ordering::Acquire) {
            break;
        }
        loop {
            let progress = shared.progress.notified();
            if shared.dead.load(Ordering::Acquire) {
                return Err(LoadError::Closed(None));
            }
            if n < shared.echoed.load(Ordering::Acquire) + window {
                if !shared.credited.load(Ordering::Acquire) {
                    break;
                }
                if let Ok(p) = shared.credit.try_acquire_many(size as u32) {
                    p.forget();
                    break;
                }
            }
            progress.await;
        }
        template[seq_at..seq_at + 4].copy_from_slice(&(n as u32).to_be_bytes());
        if size >= 8 {
            template[body_at..body_at + 8].copy_from_slice(&n.to_le_bytes());
        }
        send(&write, OpCode::Binary, template.clone()).await?;
        sent = n + 1;
    }
    // Done once every echo is back.
    loop {
        let progress = shared.progress.notified();
        if shared.echoed.load(Ordering::Acquire) >= sent {
            return Ok(sent);
        }
        if shared.dead.load(Ordering::Acquire) {
            return Err(LoadError::Closed(None));
        }
        progress.await;
    }
}

/// What one connection measured.
struct ConnResult {
    idle: Latencies,
    busy: Latencies,
    echoed_bytes: u64,
    elapsed: Duration,
    error: Option<LoadError>,
}

async fn connection(plan: Plan, target: Target) -> ConnResult {
    let mut r = ConnResult {
        idle: Latencies::with_capacity(IDLE_PINGS),
        busy: Latencies::default(),
        echoed_bytes: 0,
        elapsed: Duration::ZERO,
        error: None,
    };
    if let Err(e) = drive(&plan, &target, &mut r).await {
        r.error = Some(e);
    }
    r
}

async fn drive(plan: &Plan, target: &Target, r: &mut ConnResult) -> Result<(), LoadError> {
    // The client's dialer keeps the socket's unsent bytes small (TCP_NOTSENT_LOWAT), as the
    // project's clients do: a ping written after the transfer's frames waits behind little of
    // them in the socket.
    let ws = upgrade(target, plan.connect_timeout).await?;
    let (read, write) = ws.split(tokio::io::split);
    let read = FragmentCollectorRead::new(read);
    let write: Write = Arc::new(Mutex::new(write));
    let shared = Arc::new(Shared {
        echoed: AtomicU64::new(0),
        progress: Notify::new(),
        ping: std::sync::Mutex::new(None),
        dead: AtomicBool::new(false),
        credited: AtomicBool::new(false),
        credit: tokio::sync::Semaphore::new(0),
        enough: AtomicBool::new(false),
    });
    let channel = plan.channel_name().to_string();
    let reading = tokio::spawn(reader(
        read,
        shared.clone(),
        channel.clone(),
        plan.size,
        plan.read_rate,
    ));
    let result = measure(plan, &write, &shared, channel, r).await;
    if shared.dead.load(Ordering::Acquire) {
        if let Ok(Err(e)) = reading.await {
            return Err(e);
        }
    } else {
        let _ = send(&write, OpCode::Close, 1000u16.to_be_bytes().to_vec()).await;
        reading.abort();
    }
    result
}

async fn measure(
    plan: &Plan,
    write: &Write,
    shared: &Arc<Shared>,
    channel: String,
    r: &mut ConnResult,
) -> Result<(), LoadError> {
    // The handshake is the first request; its response comes through the ping slot.
    {
        let (tx, rx) = oneshot::channel();
        let (id, frame) = handshake_frame();
        *shared.ping.lock().unwrap_or_else(|e| e.into_inner()) = Some((id, tx));
        send(write, OpCode::Text, frame.into_bytes()).await?;
        rx.await.map_err(|_| LoadError::Closed(None))??;
    }
    let mut n = 0u64;
    for _ in 0..IDLE_PINGS {
        r.idle.record(ping(write, shared, n).await?);
        n += 1;
        tokio::time::sleep(PING_GAP).await;
    }
    let frames = plan.transfer_bytes.div_ceil(plan.size.max(1) as u64);
    let started = Instant::now();
    let mut sending = tokio::spawn(transfer(
        write.clone(),
        shared.clone(),
        channel,
        plan.size,
        frames,
        plan.window as u64,
    ));
    let done = loop {
        tokio::select! {
            done = &mut sending => break done,
            latency = ping(write, shared, n) => {
                r.busy.record(latency?);
                n += 1;
                if r.busy.len() >= IDLE_PINGS {
                    shared.enough.store(true, Ordering::Release);
                }
                tokio::time::sleep(PING_GAP).await;
            }
        }
    };
    r.elapsed = started.elapsed();
    r.echoed_bytes = shared.echoed.load(Ordering::Acquire) * plan.size as u64;
    done.map_err(|e| LoadError::Io(e.to_string()))?.map(|_| ())
}

pub(crate) async fn run(
    plan: &Plan,
    target: &Target,
    deadline: Instant,
) -> Result<Outcome, LoadError> {
    let tasks: Vec<_> = (0..plan.connections)
        .map(|_| tokio::spawn(connection(plan.clone(), target.clone())))
        .collect();
    let cpu_start = plan.server_pid.and_then(|p| process_cpu_time(p).ok());
    let mut idle = Latencies::default();
    let mut busy = Latencies::default();
    let (mut errors, mut first_error, mut bytes, mut elapsed) = (0u64, None, 0u64, Duration::ZERO);
    let mut timed_out = false;
    for task in tasks {
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(r)) => {
                idle.merge(r.idle);
                busy.merge(r.busy);
                bytes += r.echoed_bytes;
                elapsed = elapsed.max(r.elapsed);
                if let Some(e) = r.error {
                    errors += 1;
                    first_error.get_or_insert_with(|| e.to_string());
                }
            }
            Ok(Err(e)) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
            Err(_) => {
                errors += 1;
                timed_out = true;
                first_error.get_or_insert_with(|| LoadError::TimedOut.to_string());
            }
        }
    }
    let idle_pings = idle.len() as u64;
    let busy_pings = busy.len() as u64;
    let idle_summary = idle.summary();
    let busy_summary = busy.clone().summary();
    let secs = elapsed.as_secs_f64();
    let mixed = MixedReport {
        idle: idle_summary,
        during_transfer: busy_summary,
        idle_pings,
        transfer_pings: busy_pings,
        transfer_bytes: bytes,
        transfer_mb_per_s: if secs > 0.0 {
            bytes as f64 / secs / 1e6
        } else {
            0.0
        },
        p99_ratio: if idle_summary.p99_us > 0 {
            busy_summary.p99_us as f64 / idle_summary.p99_us as f64
        } else {
            0.0
        },
    };
    Ok(Outcome {
        completed: busy_pings,
        errors,
        timed_out,
        elapsed,
        latencies: busy,
        first_error,
        memory: None,
        server_cpu: cpu_since(plan.server_pid, cpu_start),
        mixed: Some(mixed),
    })
}

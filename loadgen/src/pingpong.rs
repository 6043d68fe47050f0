//! The closed-loop modes (`rpc`, `channel`, `raw`): every connection sends one message and
//! waits for its answer before the next, so latency is a true round trip. With
//! [`Plan::window`] above 1 (`channel` and `raw`), a connection keeps that many messages in
//! flight instead: each send stamps its index into the payload, and each echo must come back
//! with the next index expected, so reordering or loss is an error, not a faster number.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fastwebsockets::OpCode;
use tokio::sync::Barrier;
use tokio::time::Instant;

use super::client::{open_all, BenchSocket};
use super::cpu::{cpu_since, process_cpu_time};
use super::error::LoadError;
use super::latency::Latencies;
use super::plan::{Mode, Plan};
use super::report::Outcome;
use super::target::Target;
use carrier::protocol::channel_frame;

/// The message one connection sends over and over, rewritten in place for each send.
pub(crate) enum Script {
    /// A `system.ping` request. `id` is the byte range of the request id (`p`, counter digits,
    /// padding); the digits are the [`ID_DIGITS`] bytes after the `p`.
    Rpc { frame: Vec<u8>, id: (usize, usize) },
    /// A channel frame; the client's seq sits at `seq_at`, the body starts at `body_at`.
    Channel {
        frame: Vec<u8>,
        seq_at: usize,
        body_at: usize,
        channel: String,
        size: usize,
    },
    /// A plain text or binary message.
    Raw { payload: Vec<u8>, opcode: OpCode },
}

/// Digits of the counter inside an rpc id.
const ID_DIGITS: usize = 10;

impl Script {
    pub(crate) fn new(plan: &Plan) -> Result<Script, LoadError> {
        Ok(match plan.mode {
            Mode::Rpc => rpc_frame(plan.size),
            Mode::Channel | Mode::Idle => {
                let payload = Bytes::from(vec![0xA5; plan.size]);
                let encoded = channel_frame::encode_binary(plan.channel_name(), 0, payload)
                    .map_err(|e| LoadError::Plan(e.to_string()))?;
                Script::Channel {
                    seq_at: encoded.head.len() - 4,
                    body_at: encoded.head.len(),
                    frame: encoded.to_vec(),
                    channel: plan.channel_name().to_string(),
                    size: plan.size,
                }
            }
            Mode::Raw | Mode::IdleRaw | Mode::Fanout | Mode::Mixed => {
                let binary = plan.binary || plan.mode == Mode::IdleRaw;
                Script::Raw {
                    payload: vec![b'x'; plan.size],
                    opcode: if binary { OpCode::Binary } else { OpCode::Text },
                }
            }
        })
    }

    /// Sends message number `n` and waits for its answer.
    pub(crate) async fn round_trip(
        &mut self,
        socket: &mut BenchSocket,
        n: u64,
    ) -> Result<(), LoadError> {
        match self {
            Script::Rpc { frame, id } => {
                write_digits(&mut frame[id.0 + 1..id.0 + 1 + ID_DIGITS], n);
                socket.request(&frame[id.0..id.1], frame).await
            }
            Script::Channel {
                frame,
                seq_at,
                channel,
                size,
                ..
            } => {
                frame[*seq_at..*seq_at + 4].copy_from_slice(&(n as u32).to_be_bytes());
                socket.send(OpCode::Binary, frame).await?;
                await_echo(socket, channel, *size).await.map(drop)
            }
            Script::Raw { payload, opcode } => {
                socket.send(*opcode, payload).await?;
                await_raw_echo(socket, payload.len()).await.map(drop)
            }
        }
    }
}

impl Script {
    /// Sends message number `n` without waiting (windowed runs), its index stamped into the
    /// first [`INDEX_BYTES`] payload bytes when the payload has room for them.
    pub(crate) async fn send_indexed(
        &mut self,
        socket: &mut BenchSocket,
        n: u64,
    ) -> Result<(), LoadError> {
        match self {
            Script::Channel {
                frame,
                seq_at,
                body_at,
                ..
            } => {
                frame[*seq_at..*seq_at + 4].copy_from_slice(&(n as u32).to_be_bytes());
                stamp(&mut frame[*body_at..], n);
                socket.send(OpCode::Binary, frame).await
            }
            Script::Raw { payload, opcode } => {
                stamp(payload, n);
                socket.send(*opcode, payload).await
            }
            Script::Rpc { .. } => Err(LoadError::Plan("rpc runs one request at a time".into())),
        }
    }

    /// Waits for the echo of message `n` (the oldest one in flight) and checks its size and
    /// index.
    pub(crate) async fn await_indexed(
        &mut self,
        socket: &mut BenchSocket,
        n: u64,
    ) -> Result<(), LoadError> {
        let (body, size) = match self {
            Script::Channel { channel, size, .. } => {
                (await_echo(socket, channel, *size).await?, *size)
            }
            Script::Raw { payload, .. } => {
                let size = payload.len();
                (await_raw_echo(socket, size).await?, size)
            }
            Script::Rpc { .. } => {
                return Err(LoadError::Plan("rpc runs one request at a time".into()))
            }
        };
        if size >= INDEX_BYTES {
            let got = std::str::from_utf8(&body[..INDEX_BYTES])
                .ok()
                .and_then(|digits| digits.parse::<u64>().ok());
            if got != Some(n) {
                let got = got.map_or("an unreadable index".to_string(), |g| {
                    format!("message {g}")
                });
                return Err(LoadError::Unexpected(format!(
                    "echo of {got} where message {n} was next (reordered or lost)"
                )));
            }
        }
        Ok(())
    }
}

/// Payload bytes that carry a message's index in windowed runs: decimal digits, so a text
/// message stays valid UTF-8.
const INDEX_BYTES: usize = 20;

/// Writes `n` into the first [`INDEX_BYTES`] of `payload` (every `u64` fits in 20 digits), when
/// it has room.
fn stamp(payload: &mut [u8], n: u64) {
    if let Some(head) = payload.get_mut(..INDEX_BYTES) {
        write_digits(head, n);
    }
}

/// Writes the last `digits.len()` decimal digits of `n` into `digits`, zero-padded.
fn write_digits(digits: &mut [u8], mut n: u64) {
    for d in digits.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// `{"id":"p<digits><padding>","method":"system.ping","params":{}}`, padded to `size` bytes.
fn rpc_frame(size: usize) -> Script {
    let head = b"{\"id\":\"p";
    let tail = b"\",\"method\":\"system.ping\",\"params\":{}}";
    let min = head.len() + ID_DIGITS + tail.len();
    let pad = size.saturating_sub(min);
    let mut frame = Vec::with_capacity(min + pad);
    frame.extend_from_slice(head);
    let start = frame.len() - 1; // the `p`
    frame.extend(std::iter::repeat_n(b'0', ID_DIGITS));
    frame.extend(std::iter::repeat_n(b'_', pad));
    let end = frame.len();
    frame.extend_from_slice(tail);
    Script::Rpc {
        frame,
        id: (start, end),
    }
}

/// Reads the next message of a plain echo server and checks it is `size` bytes long.
async fn await_raw_echo(socket: &mut BenchSocket, size: usize) -> Result<Bytes, LoadError> {
    let msg = socket.recv().await?;
    if msg.payload.len() != size {
        return Err(LoadError::Unexpected(format!(
            "echo of {} bytes for {size} sent",
            msg.payload.len()
        )));
    }
    Ok(msg.payload)
}

/// Waits for the echo of a channel frame: a binary frame on `channel` with `size` payload bytes;
/// returns its body. A text frame while waiting is the server refusing ours (`protocol_error`).
async fn await_echo(
    socket: &mut BenchSocket,
    channel: &str,
    size: usize,
) -> Result<Bytes, LoadError> {
    loop {
        let msg = socket.recv().await?;
        if msg.opcode == OpCode::Text {
            let text = String::from_utf8_lossy(&msg.payload);
            if text.contains("protocol_error") {
                return Err(LoadError::Rejected(text.into_owned()));
            }
            continue;
        }
        let header =
            channel_frame::peek(&msg.payload).map_err(|e| LoadError::Unexpected(e.to_string()))?;
        if header.channel != channel || msg.payload.len() - header.body_offset != size {
            return Err(LoadError::Unexpected(format!(
                "frame on {:?} with {} bytes",
                header.channel,
                msg.payload.len() - header.body_offset
            )));
        }
        return Ok(msg.payload.slice(header.body_offset..));
    }
}

/// Per-connection result.
struct ConnResult {
    completed: u64,
    errors: u64,
    timed_out: bool,
    latencies: Latencies,
    first_error: Option<String>,
}

pub(crate) async fn run(
    plan: &Plan,
    target: &Target,
    deadline: Instant,
) -> Result<Outcome, LoadError> {
    let sockets = tokio::time::timeout_at(deadline, open_all(plan, target, plan.connections))
        .await
        .map_err(|_| LoadError::TimedOut)??;
    let start_line = Arc::new(Barrier::new(sockets.len() + 1));
    let mut tasks = Vec::with_capacity(sockets.len());
    for socket in sockets {
        let script = Script::new(plan)?;
        let start_line = start_line.clone();
        let (warmup, messages) = (plan.warmup as u64, plan.messages as u64);
        let window = plan.window;
        tasks.push(tokio::spawn(async move {
            let counts = Counts {
                warmup,
                messages,
                window,
            };
            drive(socket, script, counts, start_line, deadline).await
        }));
    }
    start_line.wait().await;
    let started = Instant::now();
    let cpu_start = plan.server_pid.and_then(|p| process_cpu_time(p).ok());
    let mut out = Outcome {
        completed: 0,
        errors: 0,
        timed_out: false,
        elapsed: Duration::ZERO,
        latencies: Latencies::with_capacity(plan.connections * plan.messages),
        first_error: None,
        memory: None,
        server_cpu: None,
        mixed: None,
    };
    for task in tasks {
        match task.await {
            Ok(r) => {
                out.completed += r.completed;
                out.errors += r.errors;
                out.timed_out |= r.timed_out;
                out.latencies.merge(r.latencies);
                if out.first_error.is_none() {
                    out.first_error = r.first_error;
                }
            }
            Err(e) => {
                out.errors += 1;
                out.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    out.elapsed = started.elapsed();
    out.server_cpu = cpu_since(plan.server_pid, cpu_start);
    Ok(out)
}

/// What one connection sends: warm-up and measured messages, and how many may be in flight.
struct Counts {
    warmup: u64,
    messages: u64,
    window: usize,
}

async fn drive(
    mut socket: BenchSocket,
    mut script: Script,
    counts: Counts,
    start_line: Arc<Barrier>,
    deadline: Instant,
) -> ConnResult {
    let Counts {
        warmup,
        messages,
        window,
    } = counts;
    let mut r = ConnResult {
        completed: 0,
        errors: 0,
        timed_out: false,
        latencies: Latencies::with_capacity(messages as usize),
        first_error: None,
    };
    let fail = |r: &mut ConnResult, e: LoadError| {
        r.errors += 1;
        if matches!(e, LoadError::TimedOut) {
            r.timed_out = true;
        }
        r.first_error.get_or_insert_with(|| e.to_string());
    };
    let mut broken = false;
    for n in 0..warmup {
        match tokio::time::timeout_at(deadline, script.round_trip(&mut socket, n)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                fail(&mut r, e);
                broken = true;
                break;
            }
            Err(_) => {
                fail(&mut r, LoadError::TimedOut);
                broken = true;
                break;
            }
        }
    }
    // Every connection starts measuring at the same moment, even one whose warm-up failed.
    start_line.wait().await;
    if !broken && window > 1 {
        windowed(
            &mut socket,
            &mut script,
            warmup..warmup + messages,
            window,
            deadline,
            &mut r,
        )
        .await;
    } else if !broken {
        for n in warmup..warmup + messages {
            let sent = Instant::now();
            match tokio::time::timeout_at(deadline, script.round_trip(&mut socket, n)).await {
                Ok(Ok(())) => {
                    r.latencies.record(sent.elapsed());
                    r.completed += 1;
                }
                // A refused request leaves the connection usable: count it and go on.
                Ok(Err(e @ LoadError::Rejected(_))) => fail(&mut r, e),
                Ok(Err(e)) => {
                    fail(&mut r, e);
                    break;
                }
                Err(_) => {
                    fail(&mut r, LoadError::TimedOut);
                    break;
                }
            }
        }
    }
    if tokio::time::Instant::now() < deadline {
        socket.close().await;
    }
    r
}

/// The measured phase of a windowed run: up to `window` messages in flight, each echo checked
/// against the oldest one sent. Latency is each message's send → its echo.
async fn windowed(
    socket: &mut BenchSocket,
    script: &mut Script,
    range: std::ops::Range<u64>,
    window: usize,
    deadline: Instant,
    r: &mut ConnResult,
) {
    let mut in_flight = std::collections::VecDeque::with_capacity(window);
    let mut next = range.start;
    let step = async |socket: &mut BenchSocket,
                      script: &mut Script,
                      in_flight: &mut std::collections::VecDeque<(u64, Instant)>,
                      next: &mut u64|
           -> Result<Option<Duration>, LoadError> {
        while in_flight.len() < window && *next < range.end {
            script.send_indexed(socket, *next).await?;
            in_flight.push_back((*next, Instant::now()));
            *next += 1;
        }
        let Some((n, sent)) = in_flight.pop_front() else {
            return Ok(None);
        };
        script.await_indexed(socket, n).await?;
        Ok(Some(sent.elapsed()))
    };
    loop {
        match tokio::time::timeout_at(deadline, step(socket, script, &mut in_flight, &mut next))
            .await
        {
            Ok(Ok(Some(latency))) => {
                r.latencies.record(latency);
                r.completed += 1;
            }
            Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                r.errors += 1;
                r.first_error.get_or_insert_with(|| e.to_string());
                return;
            }
            Err(_) => {
                r.errors += 1;
                r.timed_out = true;
                r.first_error
                    .get_or_insert_with(|| LoadError::TimedOut.to_string());
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_frames_are_padded_to_the_size_and_stay_valid_json() {
        for size in [0usize, 64, 200] {
            let Script::Rpc { frame, id } = rpc_frame(size) else {
                panic!()
            };
            assert_eq!(frame.len(), size.max(55));
            let v: serde_json::Value = serde_json::from_slice(&frame).unwrap();
            assert_eq!(v["method"], "system.ping");
            assert_eq!(v["id"].as_str().unwrap().as_bytes(), &frame[id.0..id.1]);
            assert!(v["id"].as_str().unwrap().starts_with("p0000000000"));
        }
    }

    #[test]
    fn ids_carry_the_counters_last_digits() {
        let mut digits = [b'x'; ID_DIGITS];
        for n in [0u64, 7, 1234567890, 98765432101, u64::MAX] {
            write_digits(&mut digits, n);
            let expected = format!("{:010}", n % 10u64.pow(ID_DIGITS as u32));
            assert_eq!(digits, expected.as_bytes(), "{n}");
        }
    }
}

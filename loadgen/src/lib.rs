//! A load generator for a running carrier (or any WebSocket echo server); BENCHMARKS.md holds
//! its results.
//!
//! N connections × M messages of S bytes against a `ws://` URL on loopback, measured from the
//! client: messages per second, payload MB/s (10^6 bytes) and latency percentiles. Every run is
//! bounded twice — by its message count and by [`Plan::max_duration`] — and refuses any URL
//! that is not loopback ([`target::Target::parse`]).
//!
//! Modes ([`Mode`]):
//!
//! - `rpc` — each connection sends `system.handshake` (protocol 1.0), then `system.ping`
//!   requests one at a time, each waiting for its response. The request `id` is padded so the
//!   whole text frame is S bytes (or the smallest ping frame, when S is smaller).
//! - `channel` — after the handshake, binary channel frames with an S-byte payload on an `echo`
//!   channel (`--channel`), each waiting for its echo.
//! - `fanout` — N receivers and one sender on a `relay` channel: the sender sends M frames of S
//!   bytes, each receiver should get all of them. The sender keeps at most
//!   [`FANOUT_WINDOW`] frames ahead of the slowest receiver, so the run measures the server's
//!   fan-out rate, not its slow-reader policy. Latency is send → receive; throughput counts
//!   delivered (egress) bytes.
//! - `raw` — plain WebSocket echo (text, or binary with [`Plan::binary`]), no handshake: for
//!   any echo server, including the baselines in `benches/baselines/`.
//! - `idle` / `idle-raw` — memory: opens N connections (carrier: admitted and handshaken; raw:
//!   just upgraded), reads the server's `VmRSS` from `/proc/PID/status` ([`Plan::server_pid`]),
//!   then lets each connection carry one S-byte message (carrier: a channel echo; raw: a binary
//!   echo) and reads it again.
//!
//! With [`Plan::server_pid`] the other modes also report the server's CPU time (user + system,
//! from `/proc/PID/stat`) over the measured phase, per message. On a shared machine that is the
//! steadier number: it does not depend on how much CPU other processes left the server.
//!
//! ```no_run
//! # async fn demo() -> Result<(), carrier_loadgen::LoadError> {
//! use carrier_loadgen::{run, Mode, Plan};
//!
//! let plan = Plan {
//!     connections: 10,
//!     messages: 1000,
//!     size: 64,
//!     ..Plan::new(Mode::Rpc, "ws://127.0.0.1:7070/")
//! };
//! let report = run(&plan).await?;
//! println!("{}", report.to_json());
//! # Ok(()) }
//! ```

pub mod args;
mod client;
mod fanout;
mod idle;
mod latency;
mod mixed;
mod pingpong;
pub mod target;

use std::time::Duration;

use serde::Serialize;

pub use idle::vm_rss_kib;
pub use latency::Summary;
pub use mixed::{MixedReport, IDLE_PINGS};
pub use target::{Target, TargetError};

/// How many frames the `fanout` sender may be ahead of its slowest receiver.
pub const FANOUT_WINDOW: usize = 8;
/// The most connections one run opens.
pub const MAX_CONNECTIONS: usize = 10_000;
/// The most messages one run sends in total (connections × messages).
pub const MAX_TOTAL_MESSAGES: usize = 20_000_000;
/// The largest message (the carrier's default hard cap).
pub const MAX_SIZE: usize = 16 << 20;
/// The most messages in flight per connection (`--window`).
pub const MAX_WINDOW: usize = 1024;
/// The most bytes one `mixed` connection transfers.
pub const MAX_TRANSFER: u64 = 16 << 30;
/// The longest a run may last.
pub const MAX_DURATION: Duration = Duration::from_secs(600);

/// What a run does; see the module docs. Also the values of `carrier bench --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `system.ping` round trips after `system.handshake` (text, S-byte frames).
    Rpc,
    /// Binary frames with S-byte payloads on an echo channel, each waiting for its echo.
    Channel,
    /// One sender, N receivers on a relay channel; reports delivered (egress) throughput.
    Fanout,
    /// Plain WebSocket echo, for any echo server (no handshake).
    Raw,
    /// Server memory per admitted, handshaken connection, before and after one message each.
    Idle,
    /// Server memory per plain WebSocket connection, before and after one message each.
    IdleRaw,
    /// `system.ping` latency idle and during a bulk transfer on the same connection.
    Mixed,
}

impl Mode {
    /// Whether the mode speaks the carrier protocol (handshake first).
    pub fn is_carrier(self) -> bool {
        !matches!(self, Mode::Raw | Mode::IdleRaw)
    }
}

/// One load run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What to do.
    pub mode: Mode,
    /// `ws://` URL of the server (loopback only).
    pub url: String,
    /// Sent as `?token=`.
    pub token: Option<String>,
    /// Connections (for `fanout`: receivers, plus one sender).
    pub connections: usize,
    /// Messages per connection (for `fanout`: frames the sender sends).
    pub messages: usize,
    /// Message payload bytes.
    pub size: usize,
    /// Messages per connection sent before measuring (not counted).
    pub warmup: usize,
    /// `raw`: send binary instead of text.
    pub binary: bool,
    /// `channel` and `raw`: messages in flight per connection (1: one round trip at a time).
    /// Each echo must come back in send order, with the index its message carried.
    pub window: usize,
    /// Channel name for `channel` / `fanout` / `idle`.
    pub channel: Option<String>,
    /// The run stops (and reports `timed_out`) after this long.
    pub max_duration: Duration,
    /// Per-connection upgrade (and handshake) timeout.
    pub connect_timeout: Duration,
    /// The server's process id (same machine): its `VmRSS` for the `idle` modes, its CPU time
    /// for the others.
    pub server_pid: Option<u32>,
    /// `idle` modes: pause before each RSS reading, so the server settles.
    pub settle: Duration,
    /// `mixed`: bytes each connection transfers at least to the echo channel (in `size`-byte
    /// frames); the transfer goes on until as many pings were measured during it as idle.
    pub transfer_bytes: u64,
    /// `mixed`: echoes are read at most this many bytes per second (`None`: as they come).
    pub read_rate: Option<u64>,
}

impl Plan {
    /// A plan with the defaults: 1 connection × 1000 messages of 64 bytes, 60 s at most.
    pub fn new(mode: Mode, url: impl Into<String>) -> Self {
        Plan {
            mode,
            url: url.into(),
            token: None,
            connections: 1,
            messages: 1000,
            size: 64,
            warmup: 0,
            binary: false,
            window: 1,
            channel: None,
            max_duration: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            server_pid: None,
            settle: Duration::from_millis(500),
            transfer_bytes: 256 << 20,
            read_rate: None,
        }
    }

    /// The channel this plan uses: the given one, else `relay` for fan-out, `bulk` for mixed,
    /// else `echo`.
    pub fn channel_name(&self) -> &str {
        match (&self.channel, self.mode) {
            (Some(c), _) => c,
            (None, Mode::Fanout) => "relay",
            (None, Mode::Mixed) => "bulk",
            (None, _) => "echo",
        }
    }

    /// Checks the bounds; every run is finite in count, size and time.
    pub fn validate(&self) -> Result<Target, LoadError> {
        let target = Target::parse(&self.url, self.token.as_deref())?;
        let bad = |m: &str| Err(LoadError::Plan(m.to_string()));
        if self.connections == 0 || self.connections > MAX_CONNECTIONS {
            return bad(&format!("connections must be 1..={MAX_CONNECTIONS}"));
        }
        // For fan-out this is the number of deliveries, which is what the receivers record.
        let total = self
            .messages
            .saturating_add(self.warmup)
            .saturating_mul(self.connections);
        if total > MAX_TOTAL_MESSAGES {
            return bad(&format!(
                "connections × (messages + warmup) must be at most {MAX_TOTAL_MESSAGES}"
            ));
        }
        if self.window == 0 || self.window > MAX_WINDOW {
            return bad(&format!("window must be 1..={MAX_WINDOW}"));
        }
        if self.window > 1 && !matches!(self.mode, Mode::Channel | Mode::Raw | Mode::Mixed) {
            return bad("--window applies to the channel, raw and mixed modes");
        }
        if self.mode == Mode::Mixed {
            if self.size < 8 {
                return bad("mixed needs size >= 8 (each frame carries its index)");
            }
            if self.transfer_bytes == 0 || self.transfer_bytes > MAX_TRANSFER {
                return bad(&format!("the transfer must be 1..={MAX_TRANSFER} bytes"));
            }
        }
        if self.size > MAX_SIZE {
            return bad(&format!("size must be at most {MAX_SIZE} bytes"));
        }
        if self.mode == Mode::Fanout && self.size < 8 {
            return bad("fanout needs size >= 16 (the payload carries a timestamp and an index)");
        }
        if self.max_duration.is_zero() || self.max_duration > MAX_DURATION {
            return bad("the duration must be between 1 s and 600 s");
        }
        if self.channel_name().is_empty() || self.channel_name().len() > 255 {
            return bad("channel names are 1 to 255 bytes");
        }
        if matches!(self.mode, Mode::Idle | Mode::IdleRaw) && self.server_pid.is_none() {
            return bad("idle modes need --server-pid (the server's process id)");
        }
        Ok(target)
    }
}

/// Why a run could not be done (per-message failures are counted in [`Report::errors`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The URL is not an allowed target.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The plan is out of bounds.
    #[error("invalid plan: {0}")]
    Plan(String),
    /// A connection could not be opened or upgraded.
    #[error("connect failed: {0}")]
    Connect(String),
    /// The listener is not this user's (or cannot be attributed): nothing was sent to it, the
    /// token least of all.
    #[error(transparent)]
    Listener(carrier::discovery::listener::DialError),
    /// The server closed the connection (with this close code, if any).
    #[error("the server closed the connection (code {0:?})")]
    Closed(Option<u16>),
    /// A socket error.
    #[error("I/O error: {0}")]
    Io(String),
    /// The server answered a request with an error, or refused a frame.
    #[error("the server refused: {0}")]
    Rejected(String),
    /// The server's answer was not what was sent.
    #[error("unexpected reply: {0}")]
    Unexpected(String),
    /// The run's time bound was reached.
    #[error("the run's time bound was reached")]
    TimedOut,
    /// Reading the server's memory or CPU time from `/proc` failed.
    #[error("cannot read /proc/{0}: {1}")]
    Proc(u32, String),
}

/// The server's memory before and after, for the `idle` modes (KiB as `/proc` reports them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemoryReport {
    /// `VmRSS` before any connection was opened.
    pub rss_before_kib: u64,
    /// `VmRSS` with every connection open and idle.
    pub rss_idle_kib: u64,
    /// `VmRSS` after every connection carried one message.
    pub rss_after_message_kib: u64,
    /// (idle − before) / connections, in bytes.
    pub idle_bytes_per_conn: u64,
    /// (after message − before) / connections, in bytes.
    pub after_message_bytes_per_conn: u64,
}

/// What a run measured; printed as one JSON line by `carrier bench`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The mode.
    pub mode: Mode,
    /// The server, without query (so never the token).
    pub url: String,
    /// Connections (for `fanout`: receivers).
    pub connections: usize,
    /// Messages per connection asked for (for `fanout`: frames sent).
    pub messages: usize,
    /// Payload bytes per message.
    pub size: usize,
    /// Messages completed (round trips, or deliveries for `fanout`).
    pub completed: u64,
    /// Failed messages and broken connections.
    pub errors: u64,
    /// Whether the time bound ended the run before every message was done.
    pub timed_out: bool,
    /// Measured wall time in seconds (after connecting and warm-up).
    pub elapsed_s: f64,
    /// `completed / elapsed_s`.
    pub msgs_per_s: f64,
    /// Payload megabytes (10^6) per second: `completed × size / elapsed_s`.
    pub mb_per_s: f64,
    /// Median latency, µs.
    pub p50_us: u32,
    /// 99th percentile latency, µs.
    pub p99_us: u32,
    /// Slowest message, µs.
    pub max_us: u32,
    /// Server CPU seconds (user + system) over the measured phase, with [`Plan::server_pid`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_s: Option<f64>,
    /// Server CPU microseconds per completed message, with [`Plan::server_pid`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_msg: Option<f64>,
    /// The first error seen, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Server memory, for the `idle` modes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryReport>,
    /// Idle and during-transfer ping latency, for the `mixed` mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mixed: Option<MixedReport>,
}

impl Report {
    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// What the mode runners hand back.
pub(crate) struct Outcome {
    completed: u64,
    errors: u64,
    timed_out: bool,
    elapsed: Duration,
    latencies: latency::Latencies,
    first_error: Option<String>,
    memory: Option<MemoryReport>,
    /// Server CPU time over the measured phase, when the server's pid is known.
    server_cpu: Option<Duration>,
    /// The `mixed` mode's own figures.
    mixed: Option<MixedReport>,
}

/// Runs a plan to its end (or its time bound) and reports.
pub async fn run(plan: &Plan) -> Result<Report, LoadError> {
    let target = plan.validate()?;
    let deadline = tokio::time::Instant::now() + plan.max_duration;
    let outcome = match plan.mode {
        Mode::Rpc | Mode::Channel | Mode::Raw => pingpong::run(plan, &target, deadline).await?,
        Mode::Fanout => fanout::run(plan, &target, deadline).await?,
        Mode::Idle | Mode::IdleRaw => idle::run(plan, &target, deadline).await?,
        Mode::Mixed => mixed::run(plan, &target, deadline).await?,
    };
    let secs = outcome.elapsed.as_secs_f64();
    let per_s = |n: f64| if secs > 0.0 { n / secs } else { 0.0 };
    let summary = outcome.latencies.summary();
    let url = format!(
        "ws://{}{}",
        target.host_header,
        target.path_and_query.split('?').next().unwrap_or("/")
    );
    Ok(Report {
        mode: plan.mode,
        url,
        connections: plan.connections,
        messages: plan.messages,
        size: plan.size,
        completed: outcome.completed,
        errors: outcome.errors,
        timed_out: outcome.timed_out,
        elapsed_s: secs,
        msgs_per_s: per_s(outcome.completed as f64),
        mb_per_s: match &outcome.mixed {
            Some(m) => m.transfer_mb_per_s,
            None => per_s(outcome.completed as f64 * plan.size as f64) / 1e6,
        },
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        max_us: summary.max_us,
        server_cpu_s: outcome.server_cpu.map(|d| d.as_secs_f64()),
        server_cpu_us_per_msg: outcome
            .server_cpu
            .filter(|_| outcome.completed > 0)
            .map(|d| d.as_secs_f64() * 1e6 / outcome.completed as f64),
        first_error: outcome.first_error,
        memory: outcome.memory,
        mixed: outcome.mixed,
    })
}

/// The CPU time (user + system, all threads) a process has used so far, from `/proc/PID/stat`
/// (clock ticks of 1/100 s, Linux's `USER_HZ`).
pub fn process_cpu_time(pid: u32) -> Result<Duration, LoadError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| LoadError::Proc(pid, e.to_string()))?;
    // Fields after the command name (which may contain spaces) start at `) `.
    let rest = stat
        .rsplit_once(") ")
        .map(|(_, r)| r)
        .ok_or_else(|| LoadError::Proc(pid, "unreadable stat".into()))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(u), Some(s)) => Ok(Duration::from_millis((u + s) * 10)),
        _ => Err(LoadError::Proc(pid, "no utime/stime".into())),
    }
}

/// Server CPU used between two readings, when the pid is known and readable.
pub(crate) fn cpu_since(pid: Option<u32>, start: Option<Duration>) -> Option<Duration> {
    let now = process_cpu_time(pid?).ok()?;
    Some(now.saturating_sub(start?))
}

/// Opens `n` connections (at most 64 upgrades in flight), handshaking when the mode speaks the
/// carrier protocol. Fails on the first connection that cannot be opened.
pub(crate) async fn open_all(
    plan: &Plan,
    target: &Target,
    n: usize,
) -> Result<Vec<client::BenchSocket>, LoadError> {
    use futures_util::{stream, StreamExt, TryStreamExt};
    let carrier = plan.mode.is_carrier();
    let timeout = plan.connect_timeout;
    stream::iter(0..n)
        .map(|_| async move {
            let mut socket = client::BenchSocket::connect(target, timeout).await?;
            if carrier {
                tokio::time::timeout(timeout, socket.carrier_handshake())
                    .await
                    .map_err(|_| LoadError::Connect("handshake timed out".into()))??;
            }
            Ok::<_, LoadError>(socket)
        })
        .buffered(64)
        .try_collect()
        .await
}

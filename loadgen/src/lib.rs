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
//! - `idle` / `idle-raw` — memory: first opens 8 connections, carries one message on each and
//!   closes them (so the code a connection runs is mapped in before the baseline), reads the
//!   server's `VmRSS` and `RssAnon` from `/proc/PID/status` ([`Plan::server_pid`]), opens N
//!   connections (carrier: admitted and handshaken; raw: just upgraded) and reads them again,
//!   then lets each connection carry one S-byte message (carrier: a channel echo; raw: a binary
//!   echo) and reads `VmRSS` once more.
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
mod cpu;
mod error;
mod fanout;
mod idle;
mod latency;
mod mixed;
mod pingpong;
mod plan;
mod report;
pub mod target;

pub use cpu::process_cpu_time;
pub use error::LoadError;
pub use idle::{rss_anon_kib, vm_rss_kib};
pub use latency::Summary;
pub use mixed::IDLE_PINGS;
pub use plan::{
    Mode, Plan, FANOUT_WINDOW, MAX_CONNECTIONS, MAX_DURATION, MAX_SIZE, MAX_TOTAL_MESSAGES,
    MAX_TRANSFER, MAX_WINDOW,
};
pub use report::{MemoryReport, MixedReport, Report};
pub use target::{Target, TargetError};

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
    let url = match &target.endpoint {
        unix @ carrier::discovery::listener::Endpoint::Unix(_) => unix.to_string(),
        carrier::discovery::listener::Endpoint::Tcp(_) => format!(
            "ws://{}{}",
            target.host_header,
            target.path_and_query.split('?').next().unwrap_or("/")
        ),
    };
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

//! What a run measured: each mode's [`Outcome`], and the [`Report`] `carrier bench` prints.

use std::time::Duration;

use serde::Serialize;

use crate::latency::{Latencies, Summary};
use crate::plan::Mode;

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
    /// `RssAnon` before any connection was opened.
    pub anon_before_kib: u64,
    /// `RssAnon` with every connection open and idle.
    pub anon_idle_kib: u64,
    /// (anonymous idle − anonymous before) / connections, in bytes: the idle figure without
    /// the executable's pages that serving the first connections maps in.
    pub idle_anon_bytes_per_conn: u64,
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
    /// Server CPU seconds (user + system) over the measured phase, with [`Plan::server_pid`](crate::Plan::server_pid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_s: Option<f64>,
    /// Server CPU microseconds per completed message, with [`Plan::server_pid`](crate::Plan::server_pid).
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
    pub(crate) completed: u64,
    pub(crate) errors: u64,
    pub(crate) timed_out: bool,
    pub(crate) elapsed: Duration,
    pub(crate) latencies: Latencies,
    pub(crate) first_error: Option<String>,
    pub(crate) memory: Option<MemoryReport>,
    /// Server CPU time over the measured phase, when the server's pid is known.
    pub(crate) server_cpu: Option<Duration>,
    /// The `mixed` mode's own figures.
    pub(crate) mixed: Option<MixedReport>,
}

/// What the `mixed` mode measured, beside the generic report (whose latency fields are the
/// pings during the transfer and whose MB/s is the transfer's).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MixedReport {
    /// Ping latency on the idle connections, before the transfer.
    pub idle: Summary,
    /// Ping latency during the transfer, on the same connections.
    pub during_transfer: Summary,
    /// Pings measured idle and during the transfer.
    pub idle_pings: u64,
    /// Pings measured during the transfer.
    pub transfer_pings: u64,
    /// Bytes echoed back, all connections.
    pub transfer_bytes: u64,
    /// Echoed payload megabytes (10^6) per second over the transfer.
    pub transfer_mb_per_s: f64,
    /// `during_transfer.p99_us / idle.p99_us`.
    pub p99_ratio: f64,
}

//! `carrier bench`: the command line of the load generator ([`crate`]; BENCHMARKS.md
//! shows how it is run). The binary flattens [`BenchArgs`] into its `bench` subcommand and calls
//! [`run_bench`]. Exit codes are those of every `carrier` command: 0 when every message completed,
//! 1 when the run had errors, timed out or could not connect, 2 for a usage error (a bad
//! plan, a URL that is not loopback).

use std::process::ExitCode;
use std::time::Duration;

use crate::{LoadError, Mode, Plan};

/// `carrier bench URL [--mode M] [-c N] [-m M] [-s S] …`: N connections × M messages of S bytes
/// against a running server on loopback; prints one JSON line (msgs/s, MB/s, p50/p99/max µs,
/// errors).
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The server's WebSocket URL, e.g. ws://127.0.0.1:7070/ (loopback only), or its Unix socket, unix:PATH.
    pub url: String,
    /// Token sent as ?token= (prefer the CARRIER_TOKEN environment variable).
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// What to measure.
    #[arg(long, value_enum, default_value = "rpc")]
    pub mode: Mode,
    /// Connections (fanout: receivers; one more connection sends).
    #[arg(short = 'c', long, default_value_t = 1)]
    pub connections: usize,
    /// Messages per connection (fanout: frames the sender sends).
    #[arg(short = 'm', long, default_value_t = 1000)]
    pub messages: usize,
    /// Payload bytes per message (rpc: the whole text frame, padded through its id). Default 64;
    /// mixed: 65536 (the transfer's frames).
    #[arg(short = 's', long)]
    pub size: Option<usize>,
    /// Unmeasured messages per connection before the measured ones.
    #[arg(long, default_value_t = 0)]
    pub warmup: usize,
    /// raw: send binary messages instead of text.
    #[arg(long)]
    pub binary: bool,
    /// channel, raw and mixed modes: messages in flight per connection (pipelined; 1 = closed
    /// loop). Default 1; mixed: 4 (256 KiB of 64 KiB frames in flight: what the client sends
    /// ahead of a ping is read before it, whatever the carrier does, so a client that wants
    /// answers fast keeps little in flight; `--window 16` shows the cost of more).
    #[arg(long)]
    pub window: Option<usize>,
    /// Channel name (default: echo; fanout: relay).
    #[arg(long)]
    pub channel: Option<String>,
    /// Stop after this many seconds even if messages remain (1..=600).
    #[arg(long, default_value_t = 60)]
    pub duration_secs: u64,
    /// The server's process id: idle modes read its VmRSS, the others its CPU time (/proc).
    #[arg(long, alias = "rss-pid")]
    pub server_pid: Option<u32>,
    /// mixed: bytes each connection transfers at least to the (bulk) echo channel, in SIZE-byte
    /// frames; the transfer goes on until 1,000 pings were measured during it.
    #[arg(long, default_value_t = 256 << 20)]
    pub transfer_bytes: u64,
    /// mixed: read the echoes at most this many bytes per second (default: as they come).
    #[arg(long)]
    pub read_rate: Option<u64>,
    /// idle modes: milliseconds to wait before each memory reading.
    #[arg(long, default_value_t = 500)]
    pub settle_ms: u64,
}

impl BenchArgs {
    /// The load plan these arguments describe.
    pub fn plan(&self) -> Plan {
        Plan {
            token: self.token.clone(),
            connections: self.connections,
            messages: self.messages,
            size: self.size.unwrap_or(match self.mode {
                Mode::Mixed => 64 * 1024,
                _ => 64,
            }),
            warmup: self.warmup,
            binary: self.binary,
            window: self.window.unwrap_or(match self.mode {
                Mode::Mixed => 4,
                _ => 1,
            }),
            channel: self.channel.clone(),
            max_duration: Duration::from_secs(self.duration_secs),
            server_pid: self.server_pid,
            settle: Duration::from_millis(self.settle_ms),
            transfer_bytes: self.transfer_bytes,
            read_rate: self.read_rate,
            ..Plan::new(self.mode, self.url.clone())
        }
    }
}

/// Runs `carrier bench`: prints the report as one JSON line on stdout.
pub async fn run_bench(args: BenchArgs) -> ExitCode {
    match crate::run(&args.plan()).await {
        Ok(report) => {
            println!("{}", report.to_json());
            if report.errors == 0 && !report.timed_out {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e @ (LoadError::Target(_) | LoadError::Plan(_))) => {
            eprintln!("carrier bench: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("carrier bench: {e}");
            ExitCode::from(1)
        }
    }
}

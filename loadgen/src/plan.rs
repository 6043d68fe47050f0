//! What a run is asked to do ([`Plan`], its [`Mode`]) and the bounds every plan is held to.

use std::time::Duration;

use serde::Serialize;

use crate::error::LoadError;
use crate::target::Target;

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

//! Counters behind `GET /metrics` (Prometheus text format).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::outbound::MessageKind;

/// Process-wide counters of one transport. All relaxed atomics: they are statistics.
#[derive(Default, Debug)]
pub struct Metrics {
    connections: AtomicUsize,
    frames_in_text: AtomicU64,
    frames_in_binary: AtomicU64,
    frames_out_text: AtomicU64,
    frames_out_binary: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    protocol_errors: AtomicU64,
    delivery_failures: AtomicU64,
    cleanups: AtomicU64,
}

impl Metrics {
    /// Admitted connections now.
    pub fn connections(&self) -> usize {
        self.connections.load(Relaxed)
    }
    pub(crate) fn connection_opened(&self) {
        self.connections.fetch_add(1, Relaxed);
    }
    pub(crate) fn connection_closed(&self) {
        self.connections.fetch_sub(1, Relaxed);
    }
    pub(crate) fn inbound(&self, kind: MessageKind, bytes: usize) {
        match kind {
            MessageKind::Text => &self.frames_in_text,
            MessageKind::Binary => &self.frames_in_binary,
        }
        .fetch_add(1, Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Relaxed);
    }
    pub(crate) fn outbound(&self, kind: MessageKind, bytes: usize) {
        match kind {
            MessageKind::Text => &self.frames_out_text,
            MessageKind::Binary => &self.frames_out_binary,
        }
        .fetch_add(1, Relaxed);
        self.bytes_out.fetch_add(bytes as u64, Relaxed);
    }
    pub(crate) fn protocol_error(&self) {
        self.protocol_errors.fetch_add(1, Relaxed);
    }
    pub(crate) fn delivery_failure(&self) {
        self.delivery_failures.fetch_add(1, Relaxed);
    }
    pub(crate) fn cleanup_ran(&self) {
        self.cleanups.fetch_add(1, Relaxed);
    }

    /// Delivery failures so far (connections failed by the latched cleanup).
    pub fn delivery_failures(&self) -> u64 {
        self.delivery_failures.load(Relaxed)
    }

    /// Connection cleanups run so far (one per connection that ended, whatever the cause).
    pub fn cleanups(&self) -> u64 {
        self.cleanups.load(Relaxed)
    }

    /// Protocol errors answered so far.
    pub fn protocol_errors(&self) -> u64 {
        self.protocol_errors.load(Relaxed)
    }

    /// Renders the Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(1024);
        let _ = writeln!(
            s,
            "# HELP carrier_connections Admitted WebSocket connections."
        );
        let _ = writeln!(s, "# TYPE carrier_connections gauge");
        let _ = writeln!(s, "carrier_connections {}", self.connections());
        let _ = writeln!(s, "# HELP carrier_frames_total WebSocket data messages.");
        let _ = writeln!(s, "# TYPE carrier_frames_total counter");
        for (dir, kind, c) in [
            ("in", "text", &self.frames_in_text),
            ("in", "binary", &self.frames_in_binary),
            ("out", "text", &self.frames_out_text),
            ("out", "binary", &self.frames_out_binary),
        ] {
            let _ = writeln!(
                s,
                "carrier_frames_total{{direction=\"{dir}\",kind=\"{kind}\"}} {}",
                c.load(Relaxed)
            );
        }
        let _ = writeln!(
            s,
            "# HELP carrier_bytes_total Payload bytes of data messages."
        );
        let _ = writeln!(s, "# TYPE carrier_bytes_total counter");
        let _ = writeln!(
            s,
            "carrier_bytes_total{{direction=\"in\"}} {}",
            self.bytes_in.load(Relaxed)
        );
        let _ = writeln!(
            s,
            "carrier_bytes_total{{direction=\"out\"}} {}",
            self.bytes_out.load(Relaxed)
        );
        for (name, help, c) in [
            (
                "carrier_protocol_errors_total",
                "Frames answered with a protocol error.",
                &self.protocol_errors,
            ),
            (
                "carrier_delivery_failures_total",
                "Connections failed by their outbound path (slow reader or write error).",
                &self.delivery_failures,
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}");
            let _ = writeln!(s, "# TYPE {name} counter");
            let _ = writeln!(s, "{name} {}", c.load(Relaxed));
        }
        s
    }
}

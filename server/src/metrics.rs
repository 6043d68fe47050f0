//! Counters behind `GET /metrics` (Prometheus text format), and the [`Gauge`]s a layer above
//! the server hands it to report beside them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use super::outbound::MessageKind;

/// A figure another layer keeps (e.g. the agent layer's session memory) that `GET /metrics`
/// reports as a Prometheus gauge. Its owner sets it; the server only reads the number when it
/// renders, so reporting it never calls into the layer that owns it. Cheap to clone; clones
/// share the value.
///
/// ```
/// use carrier_server::Gauge;
///
/// let gauge = Gauge::new("example_bytes", "Bytes the example holds.");
/// gauge.set(42);
/// assert_eq!(gauge.get(), 42);
/// ```
#[derive(Debug, Clone)]
pub struct Gauge {
    inner: Arc<GaugeInner>,
}

#[derive(Debug)]
struct GaugeInner {
    name: &'static str,
    help: &'static str,
    value: AtomicU64,
}

impl Gauge {
    /// A gauge at 0. `name` must be a Prometheus metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`) and
    /// `help` one line.
    pub fn new(name: &'static str, help: &'static str) -> Self {
        debug_assert!(
            name.chars().enumerate().all(|(i, c)| c == '_'
                || c == ':'
                || c.is_ascii_alphabetic()
                || (i > 0 && c.is_ascii_digit()))
                && !name.is_empty(),
            "not a metric name: {name:?}"
        );
        debug_assert!(!help.contains('\n'), "help is one line");
        Gauge {
            inner: Arc::new(GaugeInner {
                name,
                help,
                value: AtomicU64::new(0),
            }),
        }
    }

    /// Sets the value.
    pub fn set(&self, value: u64) {
        self.inner.value.store(value, Relaxed);
    }

    /// The value.
    pub fn get(&self) -> u64 {
        self.inner.value.load(Relaxed)
    }

    /// The metric name.
    pub fn name(&self) -> &'static str {
        self.inner.name
    }

    fn render(&self, s: &mut String) {
        let GaugeInner { name, help, .. } = &*self.inner;
        let _ = writeln!(s, "# HELP {name} {help}");
        let _ = writeln!(s, "# TYPE {name} gauge");
        let _ = writeln!(s, "{name} {}", self.get());
    }
}

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
    unix_peers_refused: AtomicU64,
    /// The attached profile's gauges (see [`Gauge`]), replaced at every attach.
    gauges: RwLock<Vec<Gauge>>,
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
    /// Text frames the connection's reader wrote itself (`outbound::socket`).
    pub(crate) fn outbound_inline(&self, frames: u64, bytes: u64) {
        self.frames_out_text.fetch_add(frames, Relaxed);
        self.bytes_out.fetch_add(bytes, Relaxed);
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
    pub(crate) fn unix_peer_refused(&self) {
        self.unix_peers_refused.fetch_add(1, Relaxed);
    }

    /// Connections to the Unix socket refused on their peer's credentials (another user, or
    /// credentials that could not be read or attributed), closed before anything was read.
    pub fn unix_peers_refused(&self) -> u64 {
        self.unix_peers_refused.load(Relaxed)
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

    /// Reports `gauges` from now on, instead of those given before.
    pub(crate) fn show_gauges(&self, gauges: Vec<Gauge>) {
        *self.gauges.write().unwrap_or_else(|e| e.into_inner()) = gauges;
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
            (
                "carrier_unix_peers_refused_total",
                "Connections to the Unix socket refused on their peer's credentials, before a byte was read.",
                &self.unix_peers_refused,
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}");
            let _ = writeln!(s, "# TYPE {name} counter");
            let _ = writeln!(s, "{name} {}", c.load(Relaxed));
        }
        for gauge in self.gauges.read().unwrap_or_else(|e| e.into_inner()).iter() {
            gauge.render(&mut s);
        }
        s
    }
}

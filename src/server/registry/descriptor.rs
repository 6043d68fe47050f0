//! How the host declares a channel: its [`ChannelDescriptor`] and [`DeliveryClass`].

use serde::{Deserialize, Serialize};

/// Outbound delivery class of a channel.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryClass {
    /// Never dropped; a reader past the connection budget is failed (1013).
    #[default]
    Reliable,
    /// Live media: past the channel's per-connection budget the oldest queued frames of the
    /// channel are dropped and the receiver gets `channel.dropped {channel, count}`.
    Lossy,
    /// Large transfers: reliable and in order, but written only when nothing else waits for the
    /// connection, within a window per connection ([`ChannelDescriptor::bulk_window`]) outside
    /// its byte budget. Senders wait for room ([`ChannelHandle::send_bulk_to`]) instead of
    /// failing a slow reader.
    Bulk,
}

/// Default per-connection window of a bulk channel: 1 MiB.
pub const DEFAULT_BULK_WINDOW: usize = 1 << 20;

/// A channel as the host declares it (and as `channels.list` and the handshake show it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChannelDescriptor {
    /// Unique name on the carrier (1..=255 UTF-8 bytes).
    pub name: String,
    /// Event names the channel carries; `["*"]` declares any event.
    pub events: Vec<String>,
    /// Whether opaque binary frames are accepted.
    pub binary: bool,
    /// Outbound delivery class.
    #[serde(default)]
    pub delivery: DeliveryClass,
    /// Bytes of a bulk channel's frames queued per connection before senders wait (the host's
    /// setting; not on the wire). Default [`DEFAULT_BULK_WINDOW`].
    #[serde(skip, default = "default_bulk_window")]
    #[schemars(skip)]
    pub bulk_window: usize,
}

fn default_bulk_window() -> usize {
    DEFAULT_BULK_WINDOW
}

impl ChannelDescriptor {
    /// A reliable channel with the given events and binary flag.
    pub fn new(name: impl Into<String>, events: &[&str], binary: bool) -> Self {
        ChannelDescriptor {
            name: name.into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            binary,
            delivery: DeliveryClass::Reliable,
            bulk_window: DEFAULT_BULK_WINDOW,
        }
    }

    /// Sets a bulk channel's window per connection (at least 1 byte).
    pub fn bulk_window(mut self, bytes: usize) -> Self {
        self.bulk_window = bytes.max(1);
        self
    }

    /// Sets the delivery class.
    pub fn delivery(mut self, delivery: DeliveryClass) -> Self {
        self.delivery = delivery;
        self
    }

    /// Whether `event` is declared.
    pub fn declares(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event)
    }
}

//! Payload channels as the host declares them (docs/protocol.md, "Channels"): the descriptor
//! `channels.list` and the handshake show, and the delivery class that decides what happens to a
//! slow reader.

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
    /// its byte budget. Senders wait for room (the server's `ChannelHandle::send_bulk_to`)
    /// instead of failing a slow reader.
    // The text above is also the JSON Schema's description: the server's `ChannelHandle` is
    // named, not linked (this crate cannot link to it, and a schema reader has no rustdoc).
    Bulk,
}

/// Who may send frames on a channel.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ChannelDirection {
    /// The host and its clients both send (the default; absent on the wire).
    #[default]
    Both,
    /// Only the host sends: a client's frame on the channel is refused with a `protocol_error`
    /// (`forbidden`) and never reaches the host. For what a host publishes (diagnostics,
    /// telemetry, a screen stream) and no client should feed.
    HostToClients,
}

impl ChannelDirection {
    /// Whether clients may send on a channel of this direction.
    pub fn clients_send(self) -> bool {
        self == ChannelDirection::Both
    }

    fn is_both(&self) -> bool {
        *self == ChannelDirection::Both
    }
}

/// Default per-connection window of a bulk channel: 1 MiB.
pub const DEFAULT_BULK_WINDOW: usize = 1 << 20;

/// Whether a channel takes opaque binary frames besides its declared events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// Binary frames are routed to the channel's handler.
    Accepted,
    /// Binary frames are refused with `binary_not_declared`.
    Refused,
}

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
    /// Who may send on the channel: both ways (the default, left out on the wire), or
    /// `host_to_clients`, where a client's frame is refused with `forbidden`.
    #[serde(default, skip_serializing_if = "ChannelDirection::is_both")]
    pub direction: ChannelDirection,
    /// Bytes of a bulk channel's frames queued per connection before senders wait (the host's
    /// setting; not on the wire). Default [`DEFAULT_BULK_WINDOW`].
    #[serde(skip, default = "default_bulk_window")]
    #[schemars(skip)]
    pub bulk_window: usize,
    /// A bulk channel's inbound credit for this connection: bytes of frame bodies it may send on
    /// the channel before it hears more (`channel.credit`). Only in the handshake result of a
    /// connection at protocol 1.1 or later (feature `bulk_credit`); absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credit: Option<u64>,
}

fn default_bulk_window() -> usize {
    DEFAULT_BULK_WINDOW
}

impl ChannelDescriptor {
    /// A reliable channel carrying `events`, taking binary frames or not.
    ///
    /// ```
    /// use carrier_protocol::channel::{Binary, ChannelDescriptor};
    ///
    /// let chat = ChannelDescriptor::new("chat", &["say"], Binary::Refused);
    /// assert!(chat.declares("say") && !chat.binary);
    /// ```
    pub fn new(name: impl Into<String>, events: &[&str], binary: Binary) -> Self {
        ChannelDescriptor {
            name: name.into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            binary: binary == Binary::Accepted,
            delivery: DeliveryClass::Reliable,
            direction: ChannelDirection::Both,
            bulk_window: DEFAULT_BULK_WINDOW,
            credit: None,
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

    /// Makes the channel host → clients only ([`ChannelDirection::HostToClients`]): the host
    /// sends, clients receive, and a client's frame is refused.
    ///
    /// ```
    /// use carrier_protocol::channel::{Binary, ChannelDescriptor, ChannelDirection};
    ///
    /// let diagnostics = ChannelDescriptor::new("diagnostics", &["report"], Binary::Refused)
    ///     .host_to_clients();
    /// assert_eq!(diagnostics.direction, ChannelDirection::HostToClients);
    /// assert_eq!(
    ///     serde_json::to_value(&diagnostics).unwrap()["direction"],
    ///     "host_to_clients"
    /// );
    /// ```
    pub fn host_to_clients(mut self) -> Self {
        self.direction = ChannelDirection::HostToClients;
        self
    }

    /// Whether `event` is declared.
    pub fn declares(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event)
    }
}

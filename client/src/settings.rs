//! How a [`Client`](super::Client) is set up: [`ClientOptions`].

use std::time::Duration;

/// The name this client announces in its handshake.
pub const CLIENT_NAME: &str = "carrier-cli";

/// How a [`Client`](super::Client) introduces itself, how long it waits, and how much it holds for its
/// streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// `client.name` in the handshake.
    pub name: String,
    /// `client.version` in the handshake (an app version; never compared).
    pub version: String,
    /// How long a request waits for its answer (including waiting out a reconnect).
    pub request_timeout: Duration,
    /// How long a handshake may take before the client gives up and disconnects.
    pub handshake_timeout: Duration,
    /// Bytes the client's streams ([`Client::events`](super::Client::events), [`Client::channel`](super::Client::channel)) may hold unread
    /// before the transport stops reading the socket until they are read (default 16 MiB).
    pub inbound_backlog: usize,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            name: CLIENT_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            request_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            inbound_backlog: 16 << 20,
        }
    }
}

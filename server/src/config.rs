//! Carrier configuration and its validation.

use std::time::Duration;

use carrier_protocol::admission::Token;
use carrier_protocol::Role;

/// Every limit of docs/protocol.md, "Limits". All are published in the handshake result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Soft limit on one text message: larger ones are answered `too_large`, the socket stays open.
    pub max_text_bytes: usize,
    /// Hard cap on any reassembled message: larger ones close the socket with 1009. At most
    /// [`MAX_MESSAGE_CAP`].
    pub max_message_bytes: usize,
    /// Memory for messages clients send, shared by every connection: a received message is paid
    /// for from it before its buffer is allocated and gives it back when the carrier drops the
    /// last reference to it (after writing an echo or a relay, or when the handler is done). A
    /// connection whose next message does not fit waits (its reader pauses). At least
    /// `max_message_bytes`.
    pub max_inbound_bytes: usize,
    /// Admitted connections at once; past it, upgrades get HTTP 503.
    pub max_connections: usize,
    /// Outbound bytes queued per connection before a slow reader is failed with 1013.
    pub queue_bytes: usize,
    /// Time from upgrade to a completed handshake before close 1008.
    pub handshake_timeout: Duration,
    /// Interval between server pings.
    pub ping_interval: Duration,
    /// Time to wait for a pong before closing with 1001.
    pub pong_timeout: Duration,
    /// Time `stop()` waits for clients to answer the close before forcing them.
    pub stop_grace: Duration,
    /// Time allowed to receive the HTTP upgrade request's headers.
    pub header_timeout: Duration,
    /// Longest `sessions.start` title, in bytes (`invalid_params` above it). `sessions.list`
    /// cuts any longer title a host directory holds to this length.
    pub max_title_bytes: usize,
    /// Sessions the directory may hold: `sessions.start` past it is `limit_exceeded`.
    pub max_sessions: usize,
    /// Bytes of one reply the carrier keeps (`turn_completed.text` and the history entry);
    /// more is cut at a character boundary and marked `truncated`.
    pub max_reply_bytes: usize,
}

super::setters::with_setters!(Limits {
    max_text_bytes => with_max_text_bytes: usize,
    max_message_bytes => with_max_message_bytes: usize,
    max_inbound_bytes => with_max_inbound_bytes: usize,
    max_connections => with_max_connections: usize,
    queue_bytes => with_queue_bytes: usize,
    handshake_timeout => with_handshake_timeout: Duration,
    ping_interval => with_ping_interval: Duration,
    pong_timeout => with_pong_timeout: Duration,
    stop_grace => with_stop_grace: Duration,
    header_timeout => with_header_timeout: Duration,
    max_title_bytes => with_max_title_bytes: usize,
    max_sessions => with_max_sessions: usize,
    max_reply_bytes => with_max_reply_bytes: usize,
});

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_text_bytes: 1 << 20,
            max_message_bytes: 16 << 20,
            max_inbound_bytes: DEFAULT_MAX_INBOUND,
            max_connections: 1024,
            queue_bytes: 8 << 20,
            handshake_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(20),
            pong_timeout: Duration::from_secs(20),
            stop_grace: Duration::from_secs(3),
            header_timeout: Duration::from_secs(10),
            max_title_bytes: 256,
            max_sessions: 64,
            max_reply_bytes: 1 << 20,
        }
    }
}

/// The largest `max_message_bytes` accepted: 1 GiB. The carrier holds a whole message in memory
/// before handing it over, so a cap is a promise to allocate that much for one client; past a
/// gibibyte no local use needs one message (stream large data in frames, e.g. on a bulk
/// channel), and permits for one message are counted in 32 bits.
pub const MAX_MESSAGE_CAP: usize = 1 << 30;

/// The default `max_inbound_bytes`: 64 MiB, four messages at the default 16 MiB cap.
pub const DEFAULT_MAX_INBOUND: usize = 64 << 20;

/// The largest `max_inbound_bytes` and `queue_bytes` accepted: 64 GiB, more memory than a
/// machine a loopback carrier runs on; a larger value is a typo, not a bound.
pub const MAX_BUDGET: usize = 64 << 30;

/// Whom a carrier admits (docs/protocol.md, "Endpoint and admission"): one of three choices, so a
/// token in open mode, or a reason without it, cannot be configured.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    /// Every connection presents a token minted from the OS random source when the carrier is
    /// built (the default). A failing source refuses the carrier
    /// ([`ConfigError::RandomSource`]); it never runs open instead.
    #[default]
    Mint,
    /// Every connection presents this token (URL-safe characters only).
    Token(Token),
    /// No token: any local process may connect and drive the agent.
    Open {
        /// Why this carrier runs without a token; must not be blank.
        reason: String,
    },
}

/// How a carrier listens and whom it admits.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CarrierConfig {
    /// First port to try on 127.0.0.1 (0: let the OS choose). Default 7070.
    pub port: u16,
    /// How many following ports to try when the port is taken. Default 20.
    pub max_retries: u16,
    /// The token connections present, minted or given, or open mode with its reason.
    pub auth: Auth,
    /// The most a connection may do on this listener.
    pub role: Role,
    /// Extra `Host` names (bare, no port) accepted besides loopback.
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins (exact `scheme://host[:port]`) accepted besides loopback.
    pub allowed_origins: Vec<String>,
    /// Identity the host stamps on turns submitted through this listener.
    pub driver_id: String,
    /// The surface name the host stamps on turns (e.g. `"cli"`, `"web"`).
    pub surface: String,
    /// Message, queue and timing limits.
    pub limits: Limits,
}

super::setters::with_setters!(CarrierConfig {
    port => with_port: u16,
    max_retries => with_max_retries: u16,
    auth => with_auth: Auth,
    role => with_role: Role,
    allowed_hosts => with_allowed_hosts: Vec<String>,
    allowed_origins => with_allowed_origins: Vec<String>,
    driver_id => with_driver_id: String,
    surface => with_surface: String,
    limits => with_limits: Limits,
});

/// The driver identity a carrier stamps on turns unless its host configures another
/// (`CarrierConfig::driver_id`, `carrier serve --driver-id`).
pub const DEFAULT_DRIVER_ID: &str = "local";

impl Default for CarrierConfig {
    fn default() -> Self {
        CarrierConfig {
            port: 7070,
            max_retries: 20,
            auth: Auth::Mint,
            role: Role::Drive,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            driver_id: DEFAULT_DRIVER_ID.to_string(),
            surface: "carrier".to_string(),
            limits: Limits::default(),
        }
    }
}

/// A configuration the carrier refuses at construction (nothing is bound).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// [`Auth::Open`] with a blank reason.
    #[error("open mode needs a non-empty open_reason (--open-reason): say why this carrier runs without a token")]
    OpenWithoutReason,
    /// A token that cannot travel in a URL or a `Sec-WebSocket-Protocol` header.
    #[error("the token must be non-empty and made of URL-safe characters (A-Z a-z 0-9 - . _ ~)")]
    BadToken,
    /// An allowed host or origin entry with the wrong shape.
    #[error("invalid allow-list entry {0:?}: hosts are bare names without port, origins are scheme://host[:port]")]
    BadAllowEntry(String),
    /// A limit of zero or out of range.
    #[error("invalid limit: {0}")]
    BadLimit(&'static str),
    /// The OS random source failed: the carrier refuses to start rather than run open.
    #[error(
        "cannot mint a token: the OS random source failed ({0}); refusing to start without a token"
    )]
    RandomSource(String),
}

impl CarrierConfig {
    /// Checks the admission settings (a token, or open mode with a reason) and the limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match &self.auth {
            Auth::Mint => {}
            Auth::Token(token) if !is_token_safe(token.expose()) => {
                return Err(ConfigError::BadToken)
            }
            Auth::Token(_) => {}
            Auth::Open { reason } if reason.trim().is_empty() => {
                return Err(ConfigError::OpenWithoutReason)
            }
            Auth::Open { .. } => {}
        }
        for h in &self.allowed_hosts {
            if h.is_empty() || h.contains([':', '/', ' ']) && !h.starts_with('[') {
                return Err(ConfigError::BadAllowEntry(h.clone()));
            }
        }
        for o in &self.allowed_origins {
            if !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with('/') {
                return Err(ConfigError::BadAllowEntry(o.clone()));
            }
        }
        let l = &self.limits;
        if l.max_text_bytes == 0 || l.max_message_bytes == 0 {
            return Err(ConfigError::BadLimit("message limits must be positive"));
        }
        if l.max_message_bytes > MAX_MESSAGE_CAP {
            return Err(ConfigError::BadLimit(
                "max_message_bytes is at most 1073741824 (1 GiB): a message is held whole in memory",
            ));
        }
        if l.max_inbound_bytes < l.max_message_bytes {
            return Err(ConfigError::BadLimit(
                "max_inbound_bytes must be at least max_message_bytes, or a message could never be received",
            ));
        }
        if l.max_inbound_bytes > MAX_BUDGET || l.queue_bytes > MAX_BUDGET {
            return Err(ConfigError::BadLimit(
                "max_inbound_bytes and queue_bytes are at most 68719476736 (64 GiB)",
            ));
        }
        if l.max_text_bytes > l.max_message_bytes {
            return Err(ConfigError::BadLimit(
                "max_text_bytes must not exceed max_message_bytes",
            ));
        }
        if l.max_connections == 0 || l.queue_bytes == 0 {
            return Err(ConfigError::BadLimit(
                "max_connections and queue_bytes must be positive",
            ));
        }
        if l.max_title_bytes == 0 || l.max_sessions == 0 || l.max_reply_bytes == 0 {
            return Err(ConfigError::BadLimit(
                "max_title_bytes, max_sessions and max_reply_bytes must be positive",
            ));
        }
        Ok(())
    }
}

/// Unreserved URL characters: valid unescaped in a query and as a header token.
pub(crate) fn is_token_safe(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(reason: &str) -> CarrierConfig {
        CarrierConfig {
            auth: Auth::Open {
                reason: reason.into(),
            },
            ..Default::default()
        }
    }

    #[test]
    fn open_rules() {
        assert_eq!(open("").validate(), Err(ConfigError::OpenWithoutReason));
        assert_eq!(open("  ").validate(), Err(ConfigError::OpenWithoutReason));
        assert_eq!(open("demo").validate(), Ok(()));
    }

    #[test]
    fn debug_of_a_config_never_shows_the_token() {
        let token = "Tk-2b7e151628aed2a6abf7158809cf4f3c";
        let config = CarrierConfig {
            auth: Auth::Token(token.into()),
            ..Default::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains(token), "{shown}");
        assert!(!shown.contains("2b7e1516"), "{shown}");
        assert!(shown.contains("Token(<redacted>)"), "{shown}");
        assert!(!format!("{config:#?}").contains(token));
    }

    #[test]
    fn message_cap_and_inbound_budget_bounds() {
        let with = |max_message_bytes, max_inbound_bytes| CarrierConfig {
            limits: Limits {
                max_message_bytes,
                max_inbound_bytes,
                ..Limits::default()
            },
            ..Default::default()
        };
        assert_eq!(with(MAX_MESSAGE_CAP, MAX_MESSAGE_CAP).validate(), Ok(()));
        assert!(matches!(
            with(MAX_MESSAGE_CAP + 1, MAX_BUDGET).validate(),
            Err(ConfigError::BadLimit(m)) if m.contains("1 GiB")
        ));
        assert!(with(usize::MAX, usize::MAX).validate().is_err());
        assert!(with(16 << 20, (16 << 20) - 1).validate().is_err());
        assert_eq!(with(16 << 20, MAX_BUDGET).validate(), Ok(()));
        assert!(with(16 << 20, MAX_BUDGET + 1).validate().is_err());
    }

    #[test]
    fn token_shape() {
        let with = |token: &str| CarrierConfig {
            auth: Auth::Token(token.into()),
            ..Default::default()
        };
        assert_eq!(with("a b").validate(), Err(ConfigError::BadToken));
        assert_eq!(with("").validate(), Err(ConfigError::BadToken));
        assert_eq!(with("A-z0.9_~").validate(), Ok(()));
    }
}

//! WebSocket close codes (RFC 6455 section 7.4) as the carrier uses them (the close
//! codes listed at the end of docs/protocol.md, "Errors").

use std::fmt;

/// A WebSocket close code. The named constants are the ones the carrier sends; a peer's close
/// may carry any code, so the type holds any `u16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// Normal closure.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// Going away: server stop, or the peer stopped answering pings.
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// Protocol error (RFC 6455), or an incompatible protocol version.
    pub const PROTOCOL_ERROR: CloseCode = CloseCode(1002);
    /// Unsupported data: a data frame of a kind the endpoint cannot accept.
    pub const UNSUPPORTED_DATA: CloseCode = CloseCode(1003);
    /// Invalid payload data, e.g. invalid UTF-8 in a text message.
    pub const INVALID_PAYLOAD: CloseCode = CloseCode(1007);
    /// Policy violation: unauthorized, refused role, handshake missing or late.
    pub const POLICY: CloseCode = CloseCode(1008);
    /// Message too big for the hard cap.
    pub const TOO_BIG: CloseCode = CloseCode(1009);
    /// Internal error: a write to the socket failed.
    pub const INTERNAL: CloseCode = CloseCode(1011);
    /// Try again later: the reader fell past the outbound byte budget.
    pub const TRY_AGAIN_LATER: CloseCode = CloseCode(1013);

    /// The code as sent in a close frame.
    pub const fn as_u16(self) -> u16 {
        self.0
    }

    /// Whether a peer may send this code (RFC 6455 section 7.4 and the IANA registry):
    /// 1000–1003, 1007–1014 and the application ranges 3000–4999. 1004–1006 and 1015 are
    /// reserved or must never be sent on the wire.
    pub const fn may_be_sent(self) -> bool {
        matches!(self.0, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

impl From<CloseCode> for u16 {
    fn from(code: CloseCode) -> u16 {
        code.0
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_codes_may_not_be_sent() {
        for code in [999, 1004, 1005, 1006, 1015, 2999, 5000] {
            assert!(!CloseCode(code).may_be_sent(), "{code}");
        }
        for code in [
            CloseCode::NORMAL,
            CloseCode::PROTOCOL_ERROR,
            CloseCode::TRY_AGAIN_LATER,
            CloseCode(3000),
            CloseCode(4999),
        ] {
            assert!(code.may_be_sent(), "{code}");
        }
    }
}

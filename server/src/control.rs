//! RFC 6455 rules for inbound control frames: pure functions, unit-tested and fuzzed, that say
//! what the reader does with a ping, a pong or a close.
//!
//! The carrier answers pings and closes itself (through the outbound queue, like every frame):
//! a close is echoed with the peer's code but never with an over-long or invalid payload.

use super::frame_writer::Opcode;
use carrier_protocol::close::CloseCode;

/// Largest payload of a control frame (RFC 6455 §5.5).
pub(crate) const MAX_CONTROL_PAYLOAD: usize = 125;

/// A frame the peer was not allowed to send: the connection is closed with `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Violation {
    /// The close code to send.
    pub(crate) code: CloseCode,
    /// The close reason to send.
    pub(crate) reason: &'static str,
}

pub(crate) const fn violation(code: CloseCode, reason: &'static str) -> Violation {
    Violation { code, reason }
}

/// What the reader does with one control frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Control<'a> {
    /// Answer with a pong carrying the same payload.
    Ping(&'a [u8]),
    /// Nothing to do (the read itself counts as liveness).
    Pong,
    /// The peer closes: echo `code` (1000 when it sent none) and end reading.
    Close {
        /// The code to echo.
        code: CloseCode,
        /// The peer's reason, already checked to be UTF-8.
        reason: &'a str,
    },
}

/// Classifies a control frame (`Ping`, `Pong` or `Close`) or says why it is invalid.
/// Data opcodes are not control frames and are refused (the caller never passes them).
pub(crate) fn classify(opcode: Opcode, payload: &[u8]) -> Result<Control<'_>, Violation> {
    if payload.len() > MAX_CONTROL_PAYLOAD {
        return Err(violation(
            CloseCode::PROTOCOL_ERROR,
            "control frame payload over 125 bytes",
        ));
    }
    match opcode {
        Opcode::Ping => Ok(Control::Ping(payload)),
        Opcode::Pong => Ok(Control::Pong),
        Opcode::Close => close(payload),
        Opcode::Text | Opcode::Binary | Opcode::Continuation => {
            Err(violation(CloseCode::PROTOCOL_ERROR, "not a control frame"))
        }
    }
}

fn close(payload: &[u8]) -> Result<Control<'_>, Violation> {
    match payload {
        [] => Ok(Control::Close {
            code: CloseCode::NORMAL,
            reason: "",
        }),
        [_] => Err(violation(
            CloseCode::PROTOCOL_ERROR,
            "close frame with a 1-byte payload",
        )),
        [hi, lo, reason @ ..] => {
            let code = CloseCode(u16::from_be_bytes([*hi, *lo]));
            if !code.may_be_sent() {
                return Err(violation(CloseCode::PROTOCOL_ERROR, "invalid close code"));
            }
            let reason = std::str::from_utf8(reason)
                .map_err(|_| violation(CloseCode::INVALID_PAYLOAD, "close reason is not UTF-8"))?;
            Ok(Control::Close { code, reason })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_payload_is_bounded() {
        assert_eq!(classify(Opcode::Pong, &[0; 125]), Ok(Control::Pong));
        for op in [Opcode::Ping, Opcode::Pong, Opcode::Close] {
            assert_eq!(
                classify(op, &[0; 126]).map_err(|v| v.code.as_u16()),
                Err(1002)
            );
        }
    }

    #[test]
    fn close_payloads() {
        assert_eq!(
            classify(Opcode::Close, b""),
            Ok(Control::Close {
                code: CloseCode(1000),
                reason: ""
            })
        );
        assert_eq!(
            classify(Opcode::Close, b"\x0f\xa0bye"),
            Ok(Control::Close {
                code: CloseCode(4000),
                reason: "bye"
            })
        );
        assert_eq!(
            classify(Opcode::Close, b"\x03").map_err(|v| v.code.as_u16()),
            Err(1002)
        );
        assert_eq!(
            classify(Opcode::Close, b"\x03\xe8\xff").map_err(|v| v.code.as_u16()),
            Err(1007)
        );
        for bad in [
            0u16,
            999,
            1004,
            1005,
            1006,
            1015,
            1016,
            2999,
            5000,
            u16::MAX,
        ] {
            let p = bad.to_be_bytes();
            assert_eq!(
                classify(Opcode::Close, &p).map_err(|v| v.code.as_u16()),
                Err(1002),
                "{bad}"
            );
        }
        for good in [1000u16, 1001, 1002, 1003, 1007, 1011, 1014, 3000, 4999] {
            assert!(
                classify(Opcode::Close, &good.to_be_bytes()).is_ok(),
                "{good}"
            );
        }
    }
}

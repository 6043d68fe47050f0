//! Parsing a client frame's header (RFC 6455 §5.2): a pure function of the bytes read so far.

use crate::control::{self, violation, Violation};
use crate::frame_writer::Opcode;
use carrier_protocol::close::CloseCode;

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) fin: bool,
    pub(crate) opcode: Opcode,
    pub(crate) mask: [u8; 4],
    /// Payload length as announced.
    pub(crate) len: u64,
    /// Header bytes (2 to 14).
    pub(crate) size: usize,
}

/// Parses a client frame header from the start of `buf`: `Ok(None)` until enough bytes are
/// there. Refuses what no client may send whatever its length: reserved bits, reserved opcodes,
/// an unmasked frame (§5.1), a 64-bit length with its top bit set, and a control frame that is
/// fragmented or longer than 125 bytes.
pub(crate) fn parse_header(buf: &[u8]) -> Result<Option<Header>, Violation> {
    let [b0, b1, rest @ ..] = buf else {
        return Ok(None);
    };
    if b0 & 0x70 != 0 {
        return Err(violation(CloseCode::PROTOCOL_ERROR, "reserved bits set"));
    }
    let Some(opcode) = Opcode::from_bits(b0 & 0x0F) else {
        return Err(violation(CloseCode::PROTOCOL_ERROR, "reserved opcode"));
    };
    let fin = b0 & 0x80 != 0;
    if b1 & 0x80 == 0 {
        return Err(violation(
            CloseCode::PROTOCOL_ERROR,
            "unmasked client frame",
        ));
    }
    let ext = match b1 & 0x7F {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    if rest.len() < ext + 4 {
        return Ok(None);
    }
    let len = match ext {
        0 => u64::from(b1 & 0x7F),
        2 => u64::from(u16::from_be_bytes([rest[0], rest[1]])),
        _ => {
            let mut n = [0u8; 8];
            n.copy_from_slice(&rest[..8]);
            u64::from_be_bytes(n)
        }
    };
    if len >> 63 != 0 {
        return Err(violation(
            CloseCode::PROTOCOL_ERROR,
            "frame length with the top bit set",
        ));
    }
    if opcode.is_control() {
        if !fin {
            return Err(violation(
                CloseCode::PROTOCOL_ERROR,
                "fragmented control frame",
            ));
        }
        if len > control::MAX_CONTROL_PAYLOAD as u64 {
            return Err(violation(
                CloseCode::PROTOCOL_ERROR,
                "control frame payload over 125 bytes",
            ));
        }
    }
    let mut mask = [0u8; 4];
    mask.copy_from_slice(&rest[ext..ext + 4]);
    Ok(Some(Header {
        fin,
        opcode,
        mask,
        len,
        size: 2 + ext + 4,
    }))
}

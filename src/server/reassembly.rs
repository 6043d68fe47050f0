//! Message reassembly with a hard cap.
//!
//! fastwebsockets' own fragment collector does not bound a reassembled message, so the carrier
//! reassembles itself: the cap applies to the whole message (SPEC section 3: 1009 past it), and
//! text is checked for UTF-8 as fragments arrive, so an invalid sequence fails fast (1007).
//! An unfragmented message is handed over as the very buffer fastwebsockets read it into
//! (zero-copy); a fragmented one is copied once, into the message buffer.

use bytes::{Bytes, BytesMut};
use fastwebsockets::{Frame, OpCode, Payload};

use super::outbound::{close_code, MessageKind};

/// What one data frame did to the message being reassembled.
#[derive(Debug)]
pub(crate) enum Reassembly {
    /// More fragments are needed.
    Partial,
    /// A complete message.
    Complete(MessageKind, Bytes),
    /// The stream is invalid: close with this code and reason.
    Fail(u16, &'static str),
}

struct Partial {
    kind: MessageKind,
    buf: BytesMut,
    /// Bytes of `buf` known to be valid UTF-8 (text only).
    valid: usize,
}

/// Reassembles data frames into messages of at most `cap` bytes.
pub(crate) struct Reassembler {
    cap: usize,
    partial: Option<Partial>,
}

fn into_bytes(payload: Payload<'_>) -> BytesMut {
    match payload {
        Payload::Bytes(b) => b,
        other => BytesMut::from(&other[..]),
    }
}

impl Reassembler {
    pub(crate) fn new(cap: usize) -> Self {
        Reassembler { cap, partial: None }
    }

    /// Feeds one data frame (text, binary or continuation).
    pub(crate) fn push(&mut self, frame: Frame<'_>) -> Reassembly {
        let kind = match frame.opcode {
            OpCode::Text => Some(MessageKind::Text),
            OpCode::Binary => Some(MessageKind::Binary),
            _ => None,
        };
        match (kind, self.partial.as_mut()) {
            (Some(_), Some(_)) => Reassembly::Fail(
                close_code::PROTOCOL_ERROR,
                "new message before the previous one ended",
            ),
            (None, None) => Reassembly::Fail(
                close_code::PROTOCOL_ERROR,
                "continuation frame without a message",
            ),
            (Some(kind), None) => {
                let payload = into_bytes(frame.payload);
                if payload.len() > self.cap {
                    return Reassembly::Fail(close_code::TOO_BIG, "message over the size cap");
                }
                if frame.fin {
                    if kind == MessageKind::Text && std::str::from_utf8(&payload).is_err() {
                        return Reassembly::Fail(close_code::INVALID_PAYLOAD, "invalid UTF-8");
                    }
                    return Reassembly::Complete(kind, payload.freeze());
                }
                let mut partial = Partial {
                    kind,
                    buf: payload,
                    valid: 0,
                };
                if let Err(fail) = partial.check_utf8(false) {
                    return fail;
                }
                self.partial = Some(partial);
                Reassembly::Partial
            }
            (None, Some(partial)) => {
                if partial.buf.len() + frame.payload.len() > self.cap {
                    self.partial = None;
                    return Reassembly::Fail(close_code::TOO_BIG, "message over the size cap");
                }
                partial.buf.extend_from_slice(&frame.payload);
                if let Err(fail) = partial.check_utf8(frame.fin) {
                    self.partial = None;
                    return fail;
                }
                if !frame.fin {
                    return Reassembly::Partial;
                }
                match self.partial.take() {
                    Some(p) => Reassembly::Complete(p.kind, p.buf.freeze()),
                    None => Reassembly::Partial,
                }
            }
        }
    }
}

impl Partial {
    /// Validates the text bytes added since the last check. An incomplete sequence at the end is
    /// fine until the final fragment.
    fn check_utf8(&mut self, fin: bool) -> Result<(), Reassembly> {
        if self.kind != MessageKind::Text {
            return Ok(());
        }
        match std::str::from_utf8(&self.buf[self.valid..]) {
            Ok(_) => {
                self.valid = self.buf.len();
                Ok(())
            }
            Err(e) if e.error_len().is_none() && !fin => {
                self.valid += e.valid_up_to();
                Ok(())
            }
            Err(_) => Err(Reassembly::Fail(
                close_code::INVALID_PAYLOAD,
                "invalid UTF-8",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(fin: bool, op: OpCode, data: &[u8]) -> Frame<'static> {
        Frame::new(fin, op, None, Payload::Owned(data.to_vec()))
    }

    fn complete(r: Reassembly) -> (MessageKind, Bytes) {
        match r {
            Reassembly::Complete(k, b) => (k, b),
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn cap_is_inclusive_for_fragments() {
        let mut r = Reassembler::new(10);
        assert!(matches!(
            r.push(frame(false, OpCode::Binary, &[1; 5])),
            Reassembly::Partial
        ));
        let (k, b) = complete(r.push(frame(true, OpCode::Continuation, &[2; 5])));
        assert_eq!(k, MessageKind::Binary);
        assert_eq!(b.len(), 10);
        assert!(matches!(
            r.push(frame(false, OpCode::Binary, &[1; 5])),
            Reassembly::Partial
        ));
        assert!(matches!(
            r.push(frame(true, OpCode::Continuation, &[2; 6])),
            Reassembly::Fail(1009, _)
        ));
    }

    #[test]
    fn utf8_split_across_fragments_is_fine_and_invalid_fails_fast() {
        let euro = "€".as_bytes();
        let mut r = Reassembler::new(100);
        assert!(matches!(
            r.push(frame(false, OpCode::Text, &euro[..1])),
            Reassembly::Partial
        ));
        assert!(matches!(
            r.push(frame(false, OpCode::Continuation, &euro[1..2])),
            Reassembly::Partial
        ));
        let (_, b) = complete(r.push(frame(true, OpCode::Continuation, &euro[2..])));
        assert_eq!(&b[..], euro);
        assert!(matches!(
            r.push(frame(false, OpCode::Text, &[0xff])),
            Reassembly::Fail(1007, _)
        ));
        let mut r = Reassembler::new(100);
        assert!(matches!(
            r.push(frame(false, OpCode::Text, &euro[..2])),
            Reassembly::Partial
        ));
        assert!(matches!(
            r.push(frame(true, OpCode::Continuation, b"")),
            Reassembly::Fail(1007, _)
        ));
    }

    #[test]
    fn sequencing_errors() {
        let mut r = Reassembler::new(100);
        assert!(matches!(
            r.push(frame(true, OpCode::Continuation, b"x")),
            Reassembly::Fail(1002, _)
        ));
        assert!(matches!(
            r.push(frame(false, OpCode::Text, b"x")),
            Reassembly::Partial
        ));
        assert!(matches!(
            r.push(frame(true, OpCode::Text, b"x")),
            Reassembly::Fail(1002, _)
        ));
    }
}

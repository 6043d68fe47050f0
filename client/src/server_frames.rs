//! Reading what a server sends, as RFC 6455 §5 requires of a client: a frame no server may send
//! fails the connection instead of being delivered.
//!
//! `fastwebsockets` already refuses reserved bits and reserved opcodes, but in the client role it
//! passes a masked frame through with its payload still masked (§5.1: "A client MUST close a
//! connection if it detects a masked frame"), and its fragment collector drops the mask of every
//! fragment it joins. So messages are reassembled here, from single frames, each checked: no
//! mask, continuations only inside a message, a new message only after the last one ended, the
//! reassembled message within a cap, text valid UTF-8 and within what the client will hold once
//! parsed ([`parsed_bound`]).

use bytes::{Bytes, BytesMut};
use fastwebsockets::{Frame, OpCode, Payload, WebSocketError, WebSocketRead};
use tokio::io::AsyncRead;

use super::parse_bound::parsed_bound;

/// One complete message or control frame from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerMessage {
    /// A text message, valid UTF-8.
    Text(Bytes),
    /// A binary message.
    Binary(Bytes),
    /// A ping, to be answered with a pong carrying this payload.
    Ping(Bytes),
    /// A pong.
    Pong,
    /// A close frame: its code and reason, `None` when it carried no code.
    Close(Option<(u16, String)>),
}

/// Why the server's frames cannot be read on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServerFrameError {
    /// The server sent a frame that RFC 6455 forbids a server to send.
    #[error("the server broke the WebSocket protocol: {0}")]
    Violation(&'static str),
    /// A message larger than the client accepts.
    #[error("the server sent a message over {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// A text message that would take more than the client holds once parsed.
    #[error("the server sent a text message that would take about {estimate} bytes parsed, over {limit}")]
    ParsedTooLarge {
        /// What parsing it would take at most.
        estimate: usize,
        /// The cap.
        limit: usize,
    },
    /// The socket failed or the frame layer refused a frame.
    #[error("{0}")]
    Socket(#[from] WebSocketError),
}

/// One frame as read, before any check.
struct RawFrame {
    fin: bool,
    opcode: OpCode,
    masked: bool,
    payload: Bytes,
}

/// The message being reassembled from fragments.
struct Partial {
    opcode: OpCode,
    data: BytesMut,
}

/// Reads messages off the read half of a client WebSocket. Set the read half's auto-pong and
/// auto-close off: the caller answers pings and closes through its own writer.
pub(crate) struct ServerFrames<R> {
    read: WebSocketRead<R>,
    max_message_bytes: usize,
    max_parsed_bytes: usize,
    partial: Option<Partial>,
}

impl<R: AsyncRead + Unpin> ServerFrames<R> {
    /// Messages of at most `max_message_bytes` (one frame announcing more is refused before it
    /// is read, as is a fragment that would take the message past it), text messages of at
    /// most `max_parsed_bytes` once parsed.
    pub(crate) fn new(
        mut read: WebSocketRead<R>,
        max_message_bytes: usize,
        max_parsed_bytes: usize,
    ) -> Self {
        // fastwebsockets refuses a frame whose length is >= its limit.
        read.set_max_message_size(max_message_bytes.saturating_add(1));
        ServerFrames {
            read,
            max_message_bytes,
            max_parsed_bytes,
            partial: None,
        }
    }

    /// The next message or control frame.
    pub(crate) async fn next(&mut self) -> Result<ServerMessage, ServerFrameError> {
        loop {
            // With auto-pong and auto-close off the read half owes no replies of its own.
            let frame = self
                .read
                .read_frame(&mut |_: Frame<'_>| async { Ok::<(), std::convert::Infallible>(()) })
                .await
                .map_err(|e| match e {
                    WebSocketError::FrameTooLarge => ServerFrameError::TooLarge {
                        limit: self.max_message_bytes,
                    },
                    other => ServerFrameError::Socket(other),
                })?;
            let mut frame = frame;
            let raw = RawFrame {
                fin: frame.fin,
                opcode: frame.opcode,
                masked: is_masked(&mut frame),
                payload: into_bytes(frame.payload),
            };
            if let Some(message) = self.accept(raw)? {
                return Ok(message);
            }
        }
    }

    /// Checks one frame and returns the message it completes, if any.
    fn accept(&mut self, frame: RawFrame) -> Result<Option<ServerMessage>, ServerFrameError> {
        let RawFrame {
            fin,
            opcode,
            masked,
            payload,
        } = frame;
        if masked {
            return Err(ServerFrameError::Violation("a masked frame"));
        }
        match opcode {
            // Copied: the payload (at most 125 bytes) is a slice of the read buffer, which an
            // owed pong would otherwise keep whole.
            OpCode::Ping => Ok(Some(ServerMessage::Ping(Bytes::copy_from_slice(&payload)))),
            OpCode::Pong => Ok(Some(ServerMessage::Pong)),
            OpCode::Close => close(&payload).map(|c| Some(ServerMessage::Close(c))),
            OpCode::Text | OpCode::Binary => {
                if self.partial.is_some() {
                    return Err(ServerFrameError::Violation(
                        "a new message before the previous one ended",
                    ));
                }
                if fin {
                    return self.finish(opcode, payload).map(Some);
                }
                self.partial = Some(Partial {
                    opcode,
                    data: BytesMut::from(&payload[..]),
                });
                Ok(None)
            }
            OpCode::Continuation => {
                let Some(partial) = self.partial.as_mut() else {
                    return Err(ServerFrameError::Violation(
                        "a continuation frame outside a message",
                    ));
                };
                if partial.data.len() + payload.len() > self.max_message_bytes {
                    return Err(ServerFrameError::TooLarge {
                        limit: self.max_message_bytes,
                    });
                }
                partial.data.extend_from_slice(&payload);
                if !fin {
                    return Ok(None);
                }
                match self.partial.take() {
                    Some(Partial { opcode, data }) => self.finish(opcode, data.freeze()).map(Some),
                    None => Ok(None),
                }
            }
        }
    }

    /// A whole message, checked.
    fn finish(&self, opcode: OpCode, payload: Bytes) -> Result<ServerMessage, ServerFrameError> {
        if opcode == OpCode::Text {
            if std::str::from_utf8(&payload).is_err() {
                return Err(ServerFrameError::Violation(
                    "a text message that is not UTF-8",
                ));
            }
            let estimate = parsed_bound(&payload);
            if estimate > self.max_parsed_bytes {
                return Err(ServerFrameError::ParsedTooLarge {
                    estimate,
                    limit: self.max_parsed_bytes,
                });
            }
            return Ok(ServerMessage::Text(payload));
        }
        Ok(ServerMessage::Binary(payload))
    }
}

/// Whether the frame came with a mask. `Frame` keeps its mask private; the header it would
/// write says whether it has one.
fn is_masked(frame: &mut Frame<'_>) -> bool {
    let mut head = [0u8; 16];
    frame.fmt_head(&mut head);
    head[1] & 0x80 != 0
}

fn close(payload: &[u8]) -> Result<Option<(u16, String)>, ServerFrameError> {
    match payload {
        [] => Ok(None),
        [_] => Err(ServerFrameError::Violation("a close frame of one byte")),
        [high, low, reason @ ..] => {
            let reason = std::str::from_utf8(reason)
                .map_err(|_| ServerFrameError::Violation("a close reason that is not UTF-8"))?;
            Ok(Some((u16::from_be_bytes([*high, *low]), reason.to_owned())))
        }
    }
}

/// An unfragmented frame's payload is a slice of the read buffer already; keep it uncopied.
fn into_bytes(payload: Payload<'_>) -> Bytes {
    match payload {
        Payload::Bytes(bytes) => bytes.freeze(),
        Payload::Owned(vec) => Bytes::from(vec),
        other => Bytes::copy_from_slice(&other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> ServerFrames<tokio::io::Empty> {
        reader_holding(usize::MAX)
    }

    fn reader_holding(max_parsed_bytes: usize) -> ServerFrames<tokio::io::Empty> {
        let (read, _) = fastwebsockets::after_handshake_split(
            tokio::io::empty(),
            tokio::io::sink(),
            fastwebsockets::Role::Client,
        );
        ServerFrames::new(read, 8, max_parsed_bytes)
    }

    #[test]
    fn a_text_message_is_taken_up_to_its_parsed_bound_and_refused_past_it() {
        let text = b"[0,{}]";
        let bound = parsed_bound(text);
        assert!(bound > 3 * 128, "three nodes and an object: {bound}");
        let mut at = reader_holding(bound);
        assert_eq!(
            at.accept(frame(true, OpCode::Text, None, text)).ok(),
            Some(Some(ServerMessage::Text(Bytes::from_static(text))))
        );
        let mut past = reader_holding(bound - 1);
        assert!(matches!(
            past.accept(frame(true, OpCode::Text, None, text)),
            Err(ServerFrameError::ParsedTooLarge { estimate, limit })
                if estimate == bound && limit == bound - 1
        ));
        // Fragments count once joined; binary messages are never parsed.
        let mut joined = reader_holding(bound - 1);
        assert_eq!(
            joined.accept(frame(false, OpCode::Text, None, b"[0,")).ok(),
            Some(None)
        );
        assert!(matches!(
            joined.accept(frame(true, OpCode::Continuation, None, b"{}]")),
            Err(ServerFrameError::ParsedTooLarge { .. })
        ));
        assert!(matches!(
            reader_holding(0).accept(frame(true, OpCode::Binary, None, text)),
            Ok(Some(ServerMessage::Binary(_)))
        ));
    }

    fn frame(fin: bool, opcode: OpCode, mask: Option<[u8; 4]>, body: &[u8]) -> RawFrame {
        RawFrame {
            fin,
            opcode,
            masked: mask.is_some(),
            payload: Bytes::copy_from_slice(body),
        }
    }

    #[test]
    fn a_masked_frame_of_any_kind_is_a_violation() {
        for opcode in [OpCode::Text, OpCode::Binary, OpCode::Ping, OpCode::Close] {
            let mut r = reader();
            let result = r.accept(frame(true, opcode, Some([1, 2, 3, 4]), b""));
            assert!(
                matches!(result, Err(ServerFrameError::Violation("a masked frame"))),
                "{opcode:?}"
            );
        }
        let mut r = reader();
        assert_eq!(
            r.accept(frame(false, OpCode::Binary, None, b"ab")).ok(),
            Some(None)
        );
        assert!(matches!(
            r.accept(frame(true, OpCode::Continuation, Some([0; 4]), b"cd")),
            Err(ServerFrameError::Violation("a masked frame"))
        ));
    }

    #[test]
    fn fragments_join_within_the_cap_and_not_past_it() {
        let mut r = reader();
        assert_eq!(
            r.accept(frame(false, OpCode::Text, None, b"ab")).ok(),
            Some(None)
        );
        assert_eq!(
            r.accept(frame(true, OpCode::Continuation, None, b"cdefgh"))
                .ok(),
            Some(Some(ServerMessage::Text(Bytes::from_static(b"abcdefgh"))))
        );
        assert_eq!(
            r.accept(frame(false, OpCode::Binary, None, b"abcd")).ok(),
            Some(None)
        );
        assert!(matches!(
            r.accept(frame(true, OpCode::Continuation, None, b"efghi")),
            Err(ServerFrameError::TooLarge { limit: 8 })
        ));
    }

    #[test]
    fn out_of_order_fragments_and_bad_text_are_violations() {
        let mut r = reader();
        assert!(r
            .accept(frame(true, OpCode::Continuation, None, b"x"))
            .is_err());
        let mut r = reader();
        assert_eq!(
            r.accept(frame(false, OpCode::Text, None, b"a")).ok(),
            Some(None)
        );
        assert!(r.accept(frame(true, OpCode::Text, None, b"b")).is_err());
        let mut r = reader();
        assert!(r.accept(frame(true, OpCode::Text, None, &[0xff])).is_err());
        assert!(r.accept(frame(true, OpCode::Close, None, &[3])).is_err());
        assert_eq!(
            r.accept(frame(true, OpCode::Close, None, &[3, 0xe8, b'o', b'k']))
                .ok(),
            Some(Some(ServerMessage::Close(Some((1000, "ok".into())))))
        );
    }
}

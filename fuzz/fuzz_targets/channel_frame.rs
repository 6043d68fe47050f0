//! Feeds arbitrary bytes to the channel-frame decoder (docs/protocol.md, "Channels").
//!
//! Neither `decode` nor `peek` may panic, they must agree on the header, and a frame that
//! decodes must survive encode → decode unchanged (byte for byte, for binary frames).

#![no_main]

use bytes::Bytes;
use carrier::protocol::channel_frame::{decode, encode, peek, FrameBody};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let peeked = peek(data);
    let frame = match decode(Bytes::copy_from_slice(data)) {
        Ok(frame) => frame,
        Err(err) => {
            if let Err(peek_err) = peeked {
                assert_eq!(peek_err, err, "peek and decode disagree");
            }
            return;
        }
    };
    let header = peeked.expect("peek refused a frame decode accepted");
    assert_eq!(header.channel, frame.channel);
    assert_eq!(header.seq, frame.seq);
    assert_eq!(header.kind, frame.body.kind());

    let encoded = encode(&frame.channel, frame.seq, &frame.body)
        .expect("encode refused a decoded frame")
        .to_vec();
    if let FrameBody::Binary(_) = frame.body {
        assert_eq!(
            encoded, data,
            "binary frame did not re-encode to the same bytes"
        );
    }
    let again = decode(Bytes::from(encoded)).expect("re-encoded frame does not decode");
    assert_eq!(again, frame, "frame changed across encode → decode");
});

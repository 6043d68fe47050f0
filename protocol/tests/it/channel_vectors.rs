//! The channel-frame codec against wire vectors produced by an independent reference codec
//! (`tests/vectors/channel-frames.json`, kept byte for byte as received; its origin is in
//! `tests/vectors/README.md`).

use bytes::Bytes;
use carrier_protocol::channel_frame::{decode, encode, peek, ChannelFrame, FrameBody};
use serde_json::Value;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/channel-frames.json"
);

fn vectors() -> Value {
    let text = std::fs::read_to_string(VECTORS)
        .unwrap_or_else(|err| panic!("cannot read {VECTORS}: {err}"));
    serde_json::from_str(&text).expect("vector file is JSON")
}

fn cases<'a>(all: &'a Value, key: &str) -> &'a [Value] {
    let list = all[key].as_array().expect("vector list");
    assert!(!list.is_empty(), "no {key} vectors");
    list
}

fn hex_field(case: &Value, key: &str) -> Vec<u8> {
    hex::decode(case[key].as_str().expect("hex string")).expect("valid hex")
}

/// The frame a valid vector describes, in our types.
fn expected_frame(case: &Value) -> ChannelFrame {
    let frame = &case["frame"];
    let body = match frame["kind"].as_str() {
        Some("binary") => FrameBody::Binary(Bytes::from(hex_field(frame, "payload_hex"))),
        Some("event") => FrameBody::Event {
            event: frame["event"].as_str().expect("event name").to_owned(),
            payload: frame["payload"].clone(),
        },
        other => panic!("unknown vector kind {other:?}"),
    };
    ChannelFrame {
        channel: frame["channel"].as_str().expect("channel").to_owned(),
        seq: u32::try_from(frame["seq"].as_u64().expect("seq")).expect("seq fits u32"),
        body,
    }
}

#[test]
fn encoder_reproduces_every_valid_vector() {
    let all = vectors();
    for case in cases(&all, "valid") {
        let name = &case["description"];
        let want = hex_field(case, "bytes_hex");
        let frame = expected_frame(case);
        let encoded = encode(&frame.channel, frame.seq, &frame.body)
            .unwrap_or_else(|err| panic!("{name}: encode refused: {err}"));
        match &frame.body {
            FrameBody::Binary(_) => assert_eq!(encoded.to_vec(), want, "{name}"),
            FrameBody::Event { payload, .. } => {
                // The header is exact; the JSON body is equal by value (key order may differ).
                let head_len = encoded.head.len();
                assert_eq!(&encoded.head[..], &want[..head_len], "{name}: header");
                let ours: Value = serde_json::from_slice(&encoded.body).expect("our body is JSON");
                let theirs: Value = serde_json::from_slice(&want[head_len..]).expect("JSON");
                assert_eq!(ours, theirs, "{name}: body");
                // Without objects there is no key order to differ: then the bytes must match too.
                if !payload.is_object() {
                    assert_eq!(encoded.to_vec(), want, "{name}: compact JSON bytes");
                }
            }
            FrameBody::EventBytes(_) => unreachable!("the vectors' frames are built as events"),
        }
    }
}

#[test]
fn decoder_returns_the_frame_of_every_valid_vector() {
    let all = vectors();
    for case in cases(&all, "valid") {
        let name = &case["description"];
        let bytes = hex_field(case, "bytes_hex");
        let want = expected_frame(case);
        let header = peek(&bytes).unwrap_or_else(|err| panic!("{name}: peek refused: {err}"));
        assert_eq!(
            (header.channel, header.seq),
            (&*want.channel, want.seq),
            "{name}"
        );
        assert_eq!(header.kind, want.body.kind(), "{name}");
        let got = decode(Bytes::from(bytes)).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn decoder_refuses_every_invalid_vector_with_malformed_frame() {
    let all = vectors();
    for case in cases(&all, "invalid") {
        let name = &case["description"];
        let bytes = hex_field(case, "bytes_hex");
        let err = decode(Bytes::from(bytes.clone()))
            .expect_err(&format!("{name}: decode accepted an invalid frame"));
        assert_eq!(err.wire_code(), "malformed_frame", "{name}");
        assert!(!err.to_string().is_empty(), "{name}");
        // A header-level refusal must already come from `peek`; a body-level one must not.
        match peek(&bytes) {
            Err(peek_err) => assert_eq!(peek_err, err, "{name}"),
            Ok(header) => assert_eq!(
                header.kind,
                carrier_protocol::channel_frame::FrameKind::Event,
                "{name}: {err}"
            ),
        }
    }
}

#[test]
fn decoded_binary_payload_points_into_the_received_message() {
    let all = vectors();
    let case = cases(&all, "valid")
        .iter()
        .find(|c| c["description"] == "binary, 4 KiB payload")
        .expect("the 4 KiB vector");
    let msg = Bytes::from(hex_field(case, "bytes_hex"));
    let range = msg.as_ptr_range();
    let frame = decode(msg.clone()).expect("valid vector");
    let FrameBody::Binary(payload) = frame.body else {
        panic!("expected a binary body");
    };
    assert_eq!(payload.len(), 4096);
    assert!(range.contains(&payload.as_ptr()));
    assert_eq!(payload.as_ptr_range().end, range.end);
}

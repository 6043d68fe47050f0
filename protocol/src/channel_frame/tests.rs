//! Unit tests of the codec internals; the wire vectors and properties live in `tests/`.

use super::*;
use serde_json::json;

#[test]
fn header_is_written_big_endian_after_the_name() {
    let frame = encode_binary("ab", 0x0102_0304, Bytes::new()).unwrap();
    assert_eq!(&frame.head[..], b"RBF\x01\x01\x02ab\x01\x02\x03\x04");
    assert!(frame.body.is_empty());
    assert_eq!(frame.len(), 12);
    assert!(!frame.is_empty());
}

#[test]
fn encode_binary_shares_the_payload_instead_of_copying_it() {
    let payload = Bytes::from(vec![9u8; 64]);
    let frame = encode_binary("a", 1, payload.clone()).unwrap();
    assert_eq!(frame.body.as_ptr(), payload.as_ptr());
}

#[test]
fn encode_refuses_empty_and_overlong_names_and_accepts_255_bytes() {
    let body = FrameBody::Binary(Bytes::new());
    assert_eq!(
        encode("", 0, &body).unwrap_err(),
        ChannelFrameError::EmptyChannelName
    );
    let long = "é".repeat(128); // 256 bytes
    assert_eq!(
        encode(&long, 0, &body).unwrap_err(),
        ChannelFrameError::ChannelNameTooLong { len: 256 }
    );
    assert!(encode(&"x".repeat(MAX_CHANNEL_NAME), 0, &body).is_ok());
}

#[test]
fn encode_event_refuses_an_empty_event_name() {
    let err = encode_event_frame("ui", 0, "", &Value::Null).unwrap_err();
    assert_eq!(err, ChannelFrameError::EmptyEventName);
}

#[test]
fn event_without_payload_decodes_as_null_and_extra_keys_are_ignored() {
    let mut msg = encode_head(FrameKind::Event, "ui", 5).unwrap().to_vec();
    msg.extend_from_slice(br#"{"extra":[1],"event":"tick"}"#);
    let frame = decode(Bytes::from(msg)).unwrap();
    assert_eq!(
        frame.body,
        FrameBody::Event {
            event: "tick".into(),
            payload: Value::Null
        }
    );
}

#[test]
fn event_name_must_be_a_string() {
    let mut msg = encode_head(FrameKind::Event, "ui", 5).unwrap().to_vec();
    msg.extend_from_slice(br#"{"event":7,"payload":1}"#);
    assert_eq!(
        decode(Bytes::from(msg)).unwrap_err(),
        ChannelFrameError::MissingEventName
    );
}

#[test]
fn event_body_that_is_not_utf8_is_refused_as_such() {
    let mut msg = encode_head(FrameKind::Event, "ui", 5).unwrap().to_vec();
    msg.extend_from_slice(b"{\"event\":\"\xff\"}");
    assert_eq!(
        decode(Bytes::from(msg)).unwrap_err(),
        ChannelFrameError::EventBodyNotUtf8
    );
}

#[test]
fn channel_name_that_is_not_utf8_is_refused() {
    let msg = b"RBF\x01\x01\x01\xff\x00\x00\x00\x00";
    assert_eq!(
        peek(msg).unwrap_err(),
        ChannelFrameError::ChannelNameNotUtf8
    );
}

#[test]
fn short_input_is_bad_magic_unless_it_could_still_be_a_frame() {
    assert_eq!(peek(b"{}").unwrap_err(), ChannelFrameError::BadMagic);
    assert_eq!(
        peek(b"").unwrap_err(),
        ChannelFrameError::TooShort { len: 0 }
    );
    assert_eq!(
        peek(b"RB").unwrap_err(),
        ChannelFrameError::TooShort { len: 2 }
    );
}

#[test]
fn peek_reports_where_the_body_starts_without_parsing_it() {
    let mut msg = encode_head(FrameKind::Event, "chat", 9).unwrap().to_vec();
    msg.extend_from_slice(b"not json");
    let header = peek(&msg).unwrap();
    assert_eq!(header.kind, FrameKind::Event);
    assert_eq!(header.channel, "chat");
    assert_eq!(header.seq, 9);
    assert_eq!(&msg[header.body_offset..], b"not json");
}

#[test]
fn every_error_maps_to_malformed_frame() {
    let err = decode(Bytes::from_static(b"RBF\x02")).unwrap_err();
    assert_eq!(err.wire_code(), "malformed_frame");
}

#[test]
fn event_round_trips_through_two_part_encoding() {
    let payload = json!({"w": 1, "list": [true, null]});
    let encoded = encode_event_frame("ui", 3, "resize", &payload).unwrap();
    let frame = decode(Bytes::from(encoded.to_vec())).unwrap();
    assert_eq!(
        frame,
        ChannelFrame {
            channel: "ui".into(),
            seq: 3,
            body: FrameBody::Event {
                event: "resize".into(),
                payload
            }
        }
    );
}

#[test]
fn event_payload_floats_survive_decode_and_re_encode_exactly() {
    // Needs serde_json's `float_roundtrip`: without it this value comes back one ULP off.
    let payload = json!({ "x": 5.339675471477256e214 });
    let msg = encode_event_frame("m", 1, "level", &payload)
        .unwrap()
        .to_vec();
    let FrameBody::Event { payload: got, .. } = decode(Bytes::from(msg)).unwrap().body else {
        panic!("event frame decoded as binary");
    };
    assert_eq!(got, payload);
}

/// Event bodies as senders write them, valid and not: [`EventBytes::parse`] accepts and refuses
/// exactly what [`decode`] does, with the same error, and reads the same name and payload.
#[test]
fn event_bytes_check_bodies_as_decode_does() {
    let bodies: &[&[u8]] = &[
        br#"{"event":"a","payload":1}"#,
        br#"{ "payload" : {"z":1,"a":[2, 3]} ,  "event" : "note" }"#,
        br#"{"event":"only"}"#,
        br#"{"event":"esc\u00e9\"q"}"#,
        br#"{"event":""}"#,
        br#"{"event":7}"#,
        br#"{"payload":1}"#,
        br#"[1,2]"#,
        br#"3"#,
        br#"  "str" "#,
        br#"{"event":"a""#,
        br#"{"event":"a"} x"#,
        br#"nope"#,
        b"",
        b"{\"event\":\"\xff\"}",
        br#"{"event":"a","payload":{"deep":[[[[{}]]]]},"extra":null}"#,
    ];
    for body in bodies {
        let mut msg = encode_head(FrameKind::Event, "ch", 0).unwrap().to_vec();
        msg.extend_from_slice(body);
        let decoded = decode(Bytes::from(msg)).map(|f| f.body);
        let parsed = EventBytes::parse(Bytes::copy_from_slice(body));
        match (&decoded, &parsed) {
            (Ok(FrameBody::Event { event, payload }), Ok(bytes)) => {
                assert_eq!(bytes.event(), event);
                assert_eq!(&bytes.payload().unwrap(), payload);
                assert_eq!(&bytes.bytes()[..], *body);
            }
            (Err(a), Err(b)) => assert_eq!(
                std::mem::discriminant(a),
                std::mem::discriminant(b),
                "{:?}: {a} / {b}",
                String::from_utf8_lossy(body)
            ),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(body)),
        }
    }
}

#[test]
fn an_event_forwarded_as_bytes_is_encoded_byte_for_byte() {
    let body = Bytes::from_static(br#"{ "payload": {"z":1,  "a":2}, "event":"sig" }"#);
    let event = EventBytes::parse(body.clone()).unwrap();
    let frame = encode("relay", 9, &FrameBody::EventBytes(event)).unwrap();
    assert_eq!(frame.body, body);
    let back = decode(Bytes::from(frame.to_vec())).unwrap();
    assert_eq!(back.seq, 9);
    assert_eq!(
        back.body,
        FrameBody::Event {
            event: "sig".into(),
            payload: serde_json::json!({"a": 2, "z": 1})
        }
    );
}

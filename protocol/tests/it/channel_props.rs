//! Properties of the channel-frame codec: everything the encoder accepts decodes to the same
//! frame, and no input whatsoever makes `decode` or `peek` panic.

use bytes::Bytes;
use carrier_protocol::channel_frame::{
    decode, encode, encode_binary, encode_event_frame, peek, ChannelFrame, ChannelFrameError,
    FrameBody, MAX_CHANNEL_NAME,
};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Any UTF-8 name of 1..=255 bytes: arbitrary chars, cut at the last one that still fits.
fn channel_name() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 1..=255).prop_map(|chars| {
        let mut name = String::new();
        for c in chars {
            if name.len() + c.len_utf8() > MAX_CHANNEL_NAME {
                break;
            }
            name.push(c);
        }
        name
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn frame_body() -> impl Strategy<Value = FrameBody> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1024)
            .prop_map(|payload| FrameBody::Binary(Bytes::from(payload))),
        (
            any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
            json_value()
        )
            .prop_map(|(event, payload)| FrameBody::Event { event, payload }),
    ]
}

fn channel_frame() -> impl Strategy<Value = ChannelFrame> {
    (channel_name(), any::<u32>(), frame_body()).prop_map(|(channel, seq, body)| ChannelFrame {
        channel,
        seq,
        body,
    })
}

/// One way to damage an encoded frame.
#[derive(Debug, Clone)]
enum Mutation {
    Set { at: usize, byte: u8 },
    Truncate { at: usize },
    Insert { at: usize, bytes: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
    ]
}

fn apply(msg: &mut Vec<u8>, mutation: &Mutation) {
    match mutation {
        Mutation::Set { at, byte } if !msg.is_empty() => {
            let at = at % msg.len();
            msg[at] = *byte;
        }
        Mutation::Set { .. } => {}
        Mutation::Truncate { at } => msg.truncate(at % (msg.len() + 1)),
        Mutation::Insert { at, bytes } => {
            let at = at % (msg.len() + 1);
            msg.splice(at..at, bytes.iter().copied());
        }
    }
}

fn encode_frame(frame: &ChannelFrame) -> Vec<u8> {
    encode(&frame.channel, frame.seq, &frame.body)
        .expect("the strategy only makes encodable frames")
        .to_vec()
}

/// Whatever `decode` says about `msg`, `peek` agrees on the header, and an accepted frame is
/// stable: encoding it again decodes to the same frame (and the same bytes, for binary frames).
fn check_consistent(msg: &[u8]) -> Result<(), TestCaseError> {
    let peeked = peek(msg);
    match decode(Bytes::copy_from_slice(msg)) {
        Ok(frame) => {
            let header = peeked.expect("peek accepts what decode accepts");
            prop_assert_eq!(header.channel, frame.channel.as_str());
            prop_assert_eq!(header.seq, frame.seq);
            prop_assert_eq!(header.kind, frame.body.kind());
            let again = encode_frame(&frame);
            if let FrameBody::Binary(_) = frame.body {
                prop_assert_eq!(&again[..], msg);
            }
            prop_assert_eq!(
                decode(Bytes::from(again)).expect("re-encoded frame decodes"),
                frame
            );
        }
        Err(err) => {
            prop_assert_eq!(err.wire_code(), "malformed_frame");
            if let Err(peek_err) = peeked {
                prop_assert_eq!(peek_err, err);
            }
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn any_encodable_frame_round_trips(frame in channel_frame()) {
        let encoded = encode(&frame.channel, frame.seq, &frame.body).expect("encodable");
        let msg = encoded.to_vec();
        prop_assert_eq!(peek(&msg).expect("peek").body_offset, encoded.head.len());
        prop_assert_eq!(decode(Bytes::from(msg)).expect("decode"), frame);
    }

    #[test]
    fn binary_payload_is_the_exact_tail_of_the_message(
        name in channel_name(),
        seq in any::<u32>(),
        payload in prop::collection::vec(any::<u8>(), 0..4096),
    ) {
        let payload = Bytes::from(payload);
        let encoded = encode_binary(&name, seq, payload.clone()).expect("encodable");
        prop_assert_eq!(encoded.head.len(), 6 + name.len() + 4);
        prop_assert_eq!(&encoded.body, &payload);
        let msg = Bytes::from(encoded.to_vec());
        let frame = decode(msg.clone()).expect("decode");
        let FrameBody::Binary(got) = frame.body else { panic!("binary frame decoded as event") };
        prop_assert_eq!(got.as_ptr(), msg[encoded.head.len()..].as_ptr());
    }

    #[test]
    fn event_frames_round_trip(
        name in channel_name(),
        seq in any::<u32>(),
        event in any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
        payload in json_value(),
    ) {
        let msg = encode_event_frame(&name, seq, &event, &payload).expect("encodable").to_vec();
        let frame = decode(Bytes::from(msg)).expect("decode");
        prop_assert_eq!(frame, ChannelFrame { channel: name, seq, body: FrameBody::Event { event, payload } });
    }

    #[test]
    fn names_over_255_bytes_are_refused(name in "\\PC{64,200}", seq in any::<u32>()) {
        let name = name.repeat(2).chars().cycle().take(256).collect::<String>();
        prop_assume!(name.len() > MAX_CHANNEL_NAME);
        let err = encode_binary(&name, seq, Bytes::new()).expect_err("over-long name");
        prop_assert_eq!(err, ChannelFrameError::ChannelNameTooLong { len: name.len() });
    }

    #[test]
    fn arbitrary_bytes_never_panic(msg in prop::collection::vec(any::<u8>(), 0..512)) {
        check_consistent(&msg)?;
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_prefix_never_panic(
        kind in 0u8..4,
        rest in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut msg = b"RBF\x01".to_vec();
        msg.push(kind);
        msg.extend_from_slice(&rest);
        check_consistent(&msg)?;
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        frame in channel_frame(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut msg = encode_frame(&frame);
        for mutation in &mutations {
            apply(&mut msg, mutation);
        }
        check_consistent(&msg)?;
    }
}

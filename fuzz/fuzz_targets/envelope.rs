//! Feeds arbitrary text to the envelope parser and the handshake params (docs/protocol.md,
//! "Envelope", "Handshake" and "Errors").
//!
//! Invariants:
//! - `parse` never panics; a frame it accepts re-encodes (with the crate's own encoders) to text
//!   that parses to the same frame, and its ids and names stay within the published bounds;
//! - every rejection's reply, and every `too_large` reply, is itself a valid envelope: an error
//!   response echoing the request's id (code `protocol_error` / `too_large`) or a `protocol_error`
//!   event with a code of docs/protocol.md, "Errors" — the server never answers with a frame a
//!   client cannot parse;
//! - a request's params, read as `system.handshake` params, either fail cleanly or give versions
//!   that print back to what was sent, and the compatibility check agrees with the version rules of
//!   docs/protocol.md, "Versions" (different majors, or either side below the other's minimum:
//!   incompatible; else compatible, with skew exactly when the minors differ);
//! - `truncate` cuts on a character boundary within the bound.

#![no_main]

use carrier::protocol::envelope::{
    encode_event, encode_result, parse, too_large_reply, truncate, Frame,
    ResponseBody, MAX_ID_BYTES, MAX_NAME_BYTES,
};
use carrier::protocol::methods::HandshakeParams;
use carrier::protocol::version::{Compatibility, VersionPair};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn reparse(bytes: &[u8]) -> Frame {
    let text = std::str::from_utf8(bytes).expect("encoders write UTF-8");
    parse(text).unwrap_or_else(|r| panic!("re-encoded frame refused ({r}): {text}"))
}

/// A reply the server would send must parse as a response with `id` and error `code`, or a
/// `protocol_error` event with one of the codes of docs/protocol.md, "Errors".
fn assert_valid_reply(reply: &[u8], id: Option<&str>, code: &str) {
    match reparse(reply) {
        Frame::Response(r) => {
            assert_eq!(Some(r.id.as_str()), id, "reply echoes another id");
            let ResponseBody::Error(e) = r.body else {
                panic!("a rejection answered with a result")
            };
            assert_eq!(e.get("code").and_then(Value::as_str), Some(code));
            assert!(e.get("message").is_some_and(Value::is_string));
        }
        Frame::Event(ev) => {
            assert!(id.is_none(), "an event although the request had an id");
            assert_eq!(ev.event, "protocol_error");
            assert_eq!(ev.seq, None);
            let c = ev.payload.get("code").and_then(Value::as_str).unwrap_or("");
            assert!(
                matches!(c, "malformed_frame" | "invalid_envelope" | "too_large"),
                "protocol_error code {c:?}"
            );
        }
        Frame::Request(_) => panic!("a reply parsed as a request"),
    }
}

fn check_handshake(params: &serde_json::Map<String, Value>) {
    let Ok(p) = serde_json::from_value::<HandshakeParams>(Value::Object(params.clone())) else {
        return;
    };
    for (field, v) in [
        ("protocol_version", p.protocol_version),
        ("min_compatible_protocol", p.min_compatible_protocol),
    ] {
        assert_eq!(
            params.get(field).and_then(Value::as_str),
            Some(v.to_string().as_str()),
            "version does not print back"
        );
    }
    let Ok(theirs) = VersionPair::new(p.protocol_version, p.min_compatible_protocol) else {
        assert!(p.min_compatible_protocol > p.protocol_version);
        return;
    };
    let ours = VersionPair::CURRENT;
    let incompatible = ours.version.major != theirs.version.major
        || theirs.version < ours.min_compatible
        || ours.version < theirs.min_compatible;
    match ours.check(&theirs) {
        Compatibility::Incompatible(_) => assert!(incompatible),
        Compatibility::Compatible { skew } => {
            assert!(!incompatible);
            assert_eq!(skew, ours.version.minor != theirs.version.minor);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let limit = data.len().saturating_sub(1).max(1);
    let big = too_large_reply(text, limit);
    // A too_large reply echoes the id when the text is a request; it never invents one.
    match reparse(&big) {
        Frame::Response(r) => {
            let ResponseBody::Error(e) = r.body else { panic!("too_large as a result") };
            assert_eq!(e.get("code").and_then(Value::as_str), Some("too_large"));
            let raw_id = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned));
            assert_eq!(Some(r.id), raw_id);
        }
        Frame::Event(_) => assert_valid_reply(&big, None, "too_large"),
        Frame::Request(_) => panic!("too_large reply parsed as a request"),
    }

    for max in [0usize, 1, 3, 64] {
        let t = truncate(text, max);
        assert!(t.len() <= max && text.starts_with(t));
    }

    match parse(text) {
        Err(rejection) => {
            let reply = rejection.reply();
            assert_valid_reply(&reply, rejection.id.as_deref(), "protocol_error");
            if let Some(id) = &rejection.id {
                assert!(!id.is_empty() && id.len() <= MAX_ID_BYTES);
            }
        }
        Ok(Frame::Request(r)) => {
            assert!(!r.id.is_empty() && r.id.len() <= MAX_ID_BYTES);
            assert!(!r.method.is_empty() && r.method.len() <= MAX_NAME_BYTES);
            let again = serde_json::to_vec(&json!({"id": r.id, "method": r.method, "params": r.params}))
                .expect("encode");
            assert_eq!(reparse(&again), Frame::Request(r.clone()));
            check_handshake(&r.params);
        }
        Ok(Frame::Response(r)) => {
            assert!(!r.id.is_empty() && r.id.len() <= MAX_ID_BYTES);
            let again = match &r.body {
                ResponseBody::Result(v) => encode_result(&r.id, v).expect("encode").to_vec(),
                ResponseBody::Error(e) => {
                    serde_json::to_vec(&json!({"id": r.id, "error": e})).expect("encode")
                }
            };
            assert_eq!(reparse(&again), Frame::Response(r));
        }
        Ok(Frame::Event(e)) => {
            assert!(!e.event.is_empty() && e.event.len() <= MAX_NAME_BYTES);
            let again = encode_event(&e.event, e.seq, &e.payload).expect("encode");
            assert_eq!(reparse(&again), Frame::Event(e));
        }
    }
});

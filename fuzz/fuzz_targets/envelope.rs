//! Feeds arbitrary text to the text-envelope parser and the method catalog (SPEC sections 4, 6).
//!
//! Invariants:
//! - `parse` never panics, and every refusal's reply is one valid JSON object: an error response
//!   echoing the frame's id (only when that id is a non-empty string within the id limit) or a
//!   `protocol_error` event;
//! - a parsed request has a usable id and a non-empty method; decoding its params with the
//!   catalog type of a known method never panics, and a refusal there is an error response;
//! - every frame the server encodes parses back to the same shape.

#![no_main]

use carrier::protocol::catalog::{def, parse_params, Method, MethodDef};
use carrier::protocol::envelope::{self, Frame, MAX_ID_BYTES};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn decode<M: MethodDef>(id: &str, params: serde_json::Map<String, Value>) {
    if let Err(rejection) = parse_params::<M>(id, params) {
        let reply: Value = serde_json::from_slice(&rejection.reply()).expect("reply is JSON");
        assert_eq!(reply["id"], id);
        assert_eq!(reply["error"]["code"], "protocol_error");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match envelope::parse(text) {
        Err(rejection) => {
            let reply: Value = serde_json::from_slice(&rejection.reply()).expect("reply is JSON");
            match &rejection.id {
                Some(id) => {
                    assert!(!id.is_empty() && id.len() <= MAX_ID_BYTES);
                    assert_eq!(reply["id"], id.as_str());
                }
                None => assert_eq!(reply["event"], "protocol_error"),
            }
        }
        Ok(Frame::Request(req)) => {
            assert!(!req.id.is_empty() && req.id.len() <= MAX_ID_BYTES && !req.method.is_empty());
            let echoed = envelope::encode_result(&req.id, &Value::Null).expect("encodes");
            let back = envelope::parse(std::str::from_utf8(&echoed).expect("utf-8"));
            assert!(matches!(back, Ok(Frame::Response(_))));
            let (id, params) = (req.id.as_str(), req.params);
            match Method::from_name(&req.method) {
                Some(Method::SystemHandshake) => decode::<def::SystemHandshake>(id, params),
                Some(Method::SessionSubmit) => decode::<def::SessionSubmit>(id, params),
                Some(Method::SessionAbort) => decode::<def::SessionAbort>(id, params),
                Some(Method::SessionPermissionRespond) => {
                    decode::<def::SessionPermissionRespond>(id, params)
                }
                Some(Method::SessionHistory) => decode::<def::SessionHistory>(id, params),
                Some(Method::SessionsStart) => decode::<def::SessionsStart>(id, params),
                Some(Method::SessionsSwitch) => decode::<def::SessionsSwitch>(id, params),
                Some(Method::UsageReport) => decode::<def::UsageReport>(id, params),
                Some(_) => decode::<def::SystemPing>(id, params),
                None => {}
            }
        }
        Ok(Frame::Response(_)) | Ok(Frame::Event(_)) => {}
    }
});

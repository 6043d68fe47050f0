//! Encoding the frames the server sends, and the `too_large` answer.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::limits::MAX_ID_BYTES;
use crate::error::{protocol_error_event, EffectState, ErrorCode, ErrorObject, ProtocolErrorCode};

#[derive(Serialize)]
struct OkFrame<'a, T: Serialize> {
    id: &'a str,
    result: &'a T,
}

#[derive(Serialize)]
struct ErrFrame<'a> {
    id: &'a str,
    error: &'a ErrorObject,
}

#[derive(Serialize)]
struct EventFrame<'a, T: Serialize> {
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    payload: &'a T,
}

/// A frame's bytes, allocated to their exact size: a queued frame then holds what outbound
/// budgets charge for it (serialising grows the buffer by doubling, up to twice the length).
pub(crate) fn exact(mut bytes: Vec<u8>) -> Bytes {
    bytes.shrink_to_fit();
    Bytes::from(bytes)
}

/// Scratch buffers up to this size stay with their thread for the next frame; a larger one (a
/// large result) is released once it has been copied out.
const SCRATCH_KEEP: usize = 4096;

thread_local! {
    /// Where frames are serialised before they are copied out at their exact size.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `value` serialised into one allocation of its exact size: into the thread's scratch buffer
/// first, then copied out. What [`exact`] does after `serde_json::to_vec` took two allocations
/// (its buffer, then the shrink), which was most of a `system.ping` answer's cost in the heap.
pub(crate) fn encode_exact<T: Serialize + ?Sized>(value: &T) -> Result<Bytes, serde_json::Error> {
    SCRATCH.with(|scratch| {
        // Busy only if a `Serialize` impl encodes a frame itself: then encode the plain way.
        let Ok(mut buf) = scratch.try_borrow_mut() else {
            return serde_json::to_vec(value).map(exact);
        };
        buf.clear();
        let encoded =
            serde_json::to_writer(&mut *buf, value).map(|()| Bytes::copy_from_slice(&buf));
        if buf.capacity() > SCRATCH_KEEP {
            *buf = Vec::new();
        }
        encoded
    })
}

/// Encodes `{id, result}`. Fails only if `result`'s own `Serialize` fails.
pub fn encode_result<T: Serialize>(id: &str, result: &T) -> Result<Bytes, serde_json::Error> {
    encode_exact(&OkFrame { id, result })
}

/// Encodes `{id, error}`.
pub fn encode_error(id: &str, error: &ErrorObject) -> Bytes {
    match encode_exact(&ErrFrame { id, error }) {
        Ok(b) => b,
        // Only a custom `data` value could fail to encode; answer without it.
        Err(_) => {
            let bare = ErrorObject {
                data: None,
                ..error.clone()
            };
            exact(serde_json::to_vec(&ErrFrame { id, error: &bare }).unwrap_or_default())
        }
    }
}

/// Encodes `{event, seq?, payload}`. Fails only if `payload`'s own `Serialize` fails.
pub fn encode_event<T: Serialize>(
    event: &str,
    seq: Option<u64>,
    payload: &T,
) -> Result<Bytes, serde_json::Error> {
    encode_exact(&EventFrame {
        event,
        seq,
        payload,
    })
}

/// The answer to a text message over the soft limit `limit` (docs/protocol.md, "Limits"): an error
/// response `too_large` with `data: {limit, size}` when the message is a request with a usable
/// id, otherwise a `protocol_error` event with code `too_large`. The socket stays open.
pub fn too_large_reply(text: &str, limit: usize) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        id: Option<Value>,
    }
    let message = format!(
        "text message of {} bytes is over the {limit}-byte limit",
        text.len()
    );
    let data = serde_json::json!({ "limit": limit, "size": text.len() });
    // Only an object can be a request: serde would also read `IdOnly` from an array
    // (`["x"]` as `{"id":"x"}`), inventing an id (found by the envelope fuzz target).
    let is_object = text.trim_start().starts_with('{');
    let id = is_object
        .then(|| serde_json::from_str::<IdOnly>(text).ok())
        .flatten()
        .and_then(|m| m.id)
        .and_then(|id| match id {
            Value::String(s) if !s.is_empty() && s.len() <= MAX_ID_BYTES => Some(s),
            _ => None,
        });
    match id {
        Some(id) => {
            let error = ErrorObject::new(ErrorCode::TooLarge, message)
                .effect(EffectState::None)
                .with_data(data);
            encode_error(&id, &error).to_vec()
        }
        None => {
            let Value::Object(extra) = data else {
                return Vec::new();
            };
            protocol_error_event(ProtocolErrorCode::TooLarge, &message, extra)
        }
    }
}

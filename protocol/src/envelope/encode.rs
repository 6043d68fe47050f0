//! Encoding the frames the server sends, and the `too_large` answer.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::limits::id_fits;
use crate::error::{protocol_error_event, EffectState, ErrorCode, ErrorObject, ProtocolErrorCode};

#[cfg(test)]
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
    encode_with(|buf| serde_json::to_writer(buf, value))
}

/// What `write` writes, in one allocation of its exact size (see [`encode_exact`]).
fn encode_with(
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
) -> Result<Bytes, serde_json::Error> {
    SCRATCH.with(|scratch| {
        // Busy only if a `Serialize` impl encodes a frame itself: then encode the plain way.
        let Ok(mut buf) = scratch.try_borrow_mut() else {
            let mut own = Vec::new();
            return write(&mut own).map(|()| exact(own));
        };
        buf.clear();
        let encoded = write(&mut buf).map(|()| Bytes::copy_from_slice(&buf));
        if buf.capacity() > SCRATCH_KEEP {
            *buf = Vec::new();
        }
        encoded
    })
}

/// Whether a JSON string's contents need escaping: a quote, a backslash or a control character
/// (what serde_json escapes; JSON forbids the three raw). Eight bytes at a time: the per-byte
/// loop was most of a `system.ping`'s envelope scan and id encoding.
pub(crate) fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A high bit for a byte below `n` (n ≤ 0x80); exact as to whether any byte is.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let byte = |x: u64, b: u8| below(x ^ (ONES * u64::from(b)), 1);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        if below(x, 0x20) | byte(x, b'"') | byte(x, b'\\') != 0 {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b == b'"' || b == b'\\' || b < 0x20)
}

/// `s` as a JSON string. One with nothing to escape is copied as it is, byte for byte what
/// serde_json writes.
fn write_str(buf: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
    if needs_escape(s.as_bytes()) {
        return serde_json::to_writer(buf, s);
    }
    buf.reserve(s.len() + 2);
    buf.push(b'"');
    buf.extend_from_slice(s.as_bytes());
    buf.push(b'"');
    Ok(())
}

/// Encodes `{id, result}`. Fails only if `result`'s own `Serialize` fails.
///
/// The envelope is written by hand and only the result goes through serde: for a
/// `system.ping` that was most of its answer's encoding (BENCHMARKS.md, "Performance 3, third
/// pass"); the bytes are serde_json's own (`encoding_a_result_by_hand_writes_what_serde_writes`).
pub fn encode_result<T: Serialize>(id: &str, result: &T) -> Result<Bytes, serde_json::Error> {
    encode_with(|buf| {
        buf.extend_from_slice(br#"{"id":"#);
        write_str(buf, id)?;
        buf.extend_from_slice(br#","result":"#);
        serde_json::to_writer(&mut *buf, result)?;
        buf.push(b'}');
        Ok(())
    })
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
            Value::String(s) if id_fits(&s) => Some(s),
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

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_escape_check_agrees_with_a_byte_at_a_time_one(
            bytes in proptest::collection::vec(proptest::prop_oneof![
                proptest::num::u8::ANY, proptest::strategy::Just(b'"'),
                proptest::strategy::Just(b'\\'), proptest::strategy::Just(0x1f),
                proptest::strategy::Just(0x20), proptest::strategy::Just(0x7f),
            ], 0..40),
            plain in "[ -!#-\\[\\]-~]{0,24}",
        ) {
            let slow = |b: &[u8]| b.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20);
            proptest::prop_assert_eq!(needs_escape(&bytes), slow(&bytes));
            // One byte to escape anywhere in a plain run, or none.
            proptest::prop_assert!(!needs_escape(plain.as_bytes()));
            for at in 0..=plain.len() {
                for b in [b'"', b'\\', 0x00, 0x1f] {
                    let mut v = plain.as_bytes().to_vec();
                    v.insert(at, b);
                    proptest::prop_assert!(needs_escape(&v));
                }
            }
        }

        #[test]
        fn encoding_a_result_by_hand_writes_what_serde_writes(
            id in proptest::prop_oneof![".{0,40}", "[ -~]{0,40}", "[\"\\\\\\x00-\\x1f\\x7f é]{0,12}"],
            n in proptest::option::of(proptest::num::i64::ANY),
        ) {
            let result = serde_json::json!({ "n": n, "s": id });
            let by_hand = encode_result(&id, &result).unwrap();
            let by_serde = serde_json::to_vec(&OkFrame { id: &id, result: &result }).unwrap();
            proptest::prop_assert_eq!(by_hand.as_ref(), by_serde.as_slice());
            let empty = encode_result(&id, &serde_json::Map::new()).unwrap();
            let empty_serde =
                serde_json::to_vec(&OkFrame { id: &id, result: &serde_json::Map::new() }).unwrap();
            proptest::prop_assert_eq!(empty.as_ref(), empty_serde.as_slice());
        }
    }
}

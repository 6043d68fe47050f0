//! JSON-RPC 2.0 as the `/acp` profile reads and writes it: one message per text frame, no
//! batches (ACP has none). [`parse`] sorts a frame into a request, a notification or a
//! response, or the error it gets; the `encode_*` functions write the messages carrier sends.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The error codes carrier answers with: JSON-RPC 2.0's own and ACP's (its schema's
/// `ErrorCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RpcCode {
    /// Not JSON.
    ParseError,
    /// JSON, but not a JSON-RPC 2.0 message carrier takes (a batch, no `jsonrpc: "2.0"`, an
    /// id that is not a string or an integer, a request before `initialize`).
    InvalidRequest,
    /// No such method.
    MethodNotFound,
    /// The params are not the method's.
    InvalidParams,
    /// Everything the method could not do (a turn already running, an observer's prompt, a
    /// bound passed).
    Internal,
    /// ACP's "resource not found": an unknown session.
    ResourceNotFound,
}

impl RpcCode {
    /// The wire number.
    pub(crate) fn number(self) -> i64 {
        match self {
            RpcCode::ParseError => -32700,
            RpcCode::InvalidRequest => -32600,
            RpcCode::MethodNotFound => -32601,
            RpcCode::InvalidParams => -32602,
            RpcCode::Internal => -32603,
            RpcCode::ResourceNotFound => -32002,
        }
    }
}

/// An error carrier answers: its code, a one-sentence message and optional data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) code: RpcCode,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: RpcCode, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// The longest request id carrier keeps (as JSON text): an id is held while its request is
/// answered later (a prompt), so it is bounded like every other thing a client makes us hold.
pub(crate) const MAX_ID_BYTES: usize = 256;

/// One JSON-RPC message a client sent.
#[derive(Debug)]
pub(crate) enum Incoming<'a> {
    /// A request: answer it with `id`.
    Request {
        id: Id,
        method: &'a str,
        params: Option<&'a RawValue>,
    },
    /// A notification: no answer.
    Notification {
        method: &'a str,
        params: Option<&'a RawValue>,
    },
    /// The answer to a request carrier sent.
    Response {
        id: Id,
        outcome: Result<&'a RawValue, &'a RawValue>,
    },
    /// Shaped as a response but not a valid one: not answered (see [`parse`]).
    Discarded,
}

/// A request id as the client wrote it: a string, an integer or `null` (JSON-RPC allows it,
/// and the answer carries it back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Id {
    Number(i64),
    Text(String),
    Null,
}

/// A message that could not be read: what it is answered with (`id` null when the message had
/// none that could be read).
#[derive(Debug)]
pub(crate) struct Unreadable {
    pub(crate) id: Id,
    pub(crate) error: RpcError,
}

/// The shape of any JSON-RPC message; which members are present decides what it is (a member
/// that is `null` is present).
#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Reads one text frame. A message shaped as a response (no `method`; a `result` or an
/// `error`) is never answered, even when it is not a valid one: answering it could start an
/// exchange of errors with a peer that answers them too.
pub(crate) fn parse(text: &str) -> Result<Incoming<'_>, Unreadable> {
    let unreadable = |code, message: &str| Unreadable {
        id: Id::Null,
        error: RpcError::new(code, message),
    };
    let value: &RawValue = serde_json::from_str(text)
        .map_err(|_| unreadable(RpcCode::ParseError, "Parse error: not JSON"))?;
    match value.get().trim_start().as_bytes().first() {
        Some(b'{') => {}
        Some(b'[') => {
            return Err(unreadable(
                RpcCode::InvalidRequest,
                "Invalid Request: JSON-RPC batches are not supported",
            ))
        }
        _ => {
            return Err(unreadable(
                RpcCode::InvalidRequest,
                "Invalid Request: a message is a JSON object",
            ))
        }
    }
    let raw: Raw<'_> = serde_json::from_str(value.get()).map_err(|_| {
        unreadable(
            RpcCode::InvalidRequest,
            "Invalid Request: a member is repeated or not valid",
        )
    })?;
    if raw.method.is_none() && (raw.result.is_some() || raw.error.is_some()) {
        return Ok(response(&raw));
    }
    let id = match raw.id.map(read_id) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(why)) => return Err(unreadable(RpcCode::InvalidRequest, why)),
    };
    let invalid = |message: &str| Unreadable {
        id: id.clone().unwrap_or(Id::Null),
        error: RpcError::new(RpcCode::InvalidRequest, message),
    };
    if raw.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return Err(invalid("Invalid Request: \"jsonrpc\" must be \"2.0\""));
    }
    let Some(method) = raw.method else {
        return Err(invalid(
            "Invalid Request: neither a request (\"method\") nor a response (\"result\" or \"error\")",
        ));
    };
    let method = borrowed_str(method)
        .ok_or_else(|| invalid("Invalid Request: \"method\" must be a string without escapes"))?;
    Ok(match id {
        Some(id) => Incoming::Request {
            id,
            method,
            params: raw.params,
        },
        None => Incoming::Notification {
            method,
            params: raw.params,
        },
    })
}

/// A message shaped as a response: the answer to one of carrier's requests, or, when it is
/// not a valid one, nothing to act on.
fn response<'a>(raw: &Raw<'a>) -> Incoming<'a> {
    let id = raw.id.and_then(|id| read_id(id).ok());
    let valid = raw.jsonrpc.map(RawValue::get) == Some("\"2.0\"");
    match (id, raw.result, raw.error) {
        (Some(id), Some(result), None) if valid => Incoming::Response {
            id,
            outcome: Ok(result),
        },
        (Some(id), None, Some(error)) if valid => Incoming::Response {
            id,
            outcome: Err(error),
        },
        _ => Incoming::Discarded,
    }
}

/// The id of a message that is not otherwise read (one over the size limit), or `null` when
/// it has none that could be answered.
pub(crate) fn id_of(message: &[u8]) -> Id {
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
    }
    // Only an object is a request (serde would read `IdOnly` from an array too).
    let is_object = message.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    is_object
        .then(|| serde_json::from_slice::<IdOnly<'_>>(message).ok())
        .flatten()
        .and_then(|m| m.id)
        .and_then(|raw| read_id(raw).ok())
        .unwrap_or(Id::Null)
}

fn read_id(raw: &RawValue) -> Result<Id, &'static str> {
    if raw.get().len() > MAX_ID_BYTES {
        return Err("Invalid Request: the id is over 256 bytes");
    }
    serde_json::from_str::<Id>(raw.get())
        .map_err(|_| "Invalid Request: the id must be a string, an integer or null")
}

/// A JSON string with no escapes, as a slice of the message (method names are plain ASCII).
fn borrowed_str(raw: &RawValue) -> Option<&str> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains(['\\', '"'])).then_some(inner)
}

/// Reads a method's params as `T`; absent params read as `{}`.
pub(crate) fn params<'a, T: Deserialize<'a>>(
    params: Option<&'a RawValue>,
    method: &str,
) -> Result<T, RpcError> {
    let text = params.map_or("{}", RawValue::get);
    serde_json::from_str(text).map_err(|e| {
        RpcError::new(
            RpcCode::InvalidParams,
            format!("Invalid params for {method}: {e}"),
        )
    })
}

#[derive(Serialize)]
struct ResultMessage<'a, R> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: R,
}

#[derive(Serialize)]
struct ErrorMessage<'a> {
    jsonrpc: &'static str,
    id: &'a Id,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

#[derive(Serialize)]
struct RequestMessage<'a, P> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct NotificationMessage<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

const VERSION: &str = "2.0";

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub(crate) fn encode_result<R: Serialize>(
    id: &Id,
    result: R,
) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&ResultMessage {
        jsonrpc: VERSION,
        id,
        result,
    })
}

/// `{"jsonrpc":"2.0","id":…,"error":{code, message, data?}}`.
pub(crate) fn encode_error(id: &Id, error: &RpcError) -> Vec<u8> {
    let message = ErrorMessage {
        jsonrpc: VERSION,
        id,
        error: ErrorBody {
            code: error.code.number(),
            message: &error.message,
            data: error.data.as_ref(),
        },
    };
    // Strings, integers and a `Value` always serialize.
    serde_json::to_vec(&message).unwrap_or_default()
}

/// `{"jsonrpc":"2.0","id":N,"method":…,"params":…}`: a request carrier sends (its ids are its
/// own integers).
pub(crate) fn encode_request<P: Serialize>(
    id: u64,
    method: &str,
    params: P,
) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&RequestMessage {
        jsonrpc: VERSION,
        id,
        method,
        params,
    })
}

/// `{"jsonrpc":"2.0","method":…,"params":…}`.
pub(crate) fn encode_notification<P: Serialize>(
    method: &str,
    params: P,
) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&NotificationMessage {
        jsonrpc: VERSION,
        method,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> (Id, i64) {
        match parse(text) {
            Err(u) => (u.id, u.error.code.number()),
            Ok(m) => panic!("{text} read as {m:?}"),
        }
    }

    #[test]
    fn a_request_a_notification_and_a_response_are_told_apart() {
        match parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#) {
            Ok(Incoming::Request { id, method, params }) => {
                assert_eq!((id, method), (Id::Number(1), "initialize"));
                assert_eq!(params.map(RawValue::get), Some(r#"{"a":1}"#));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#),
            Ok(Incoming::Notification {
                method: "session/cancel",
                ..
            })
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
            Ok(Incoming::Response {
                id: Id::Text(_),
                outcome: Ok(_)
            })
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#),
            Ok(Incoming::Response {
                id: Id::Null,
                outcome: Err(_)
            })
        ));
    }

    #[test]
    fn what_is_not_json_rpc_gets_its_code() {
        assert_eq!(code("not json"), (Id::Null, -32700));
        assert_eq!(code("[]"), (Id::Null, -32600));
        assert_eq!(
            code(r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#),
            (Id::Null, -32600)
        );
        assert_eq!(code("3"), (Id::Null, -32600));
        assert_eq!(code(r#"{"id":7,"method":"x"}"#), (Id::Number(7), -32600));
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":7,"method":"x"}"#),
            (Id::Number(7), -32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            (Id::Null, -32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            (Id::Null, -32600)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            (Id::Number(1), -32600)
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), (Id::Number(1), -32600));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":null}"#),
            (Id::Number(1), -32600)
        );
    }

    #[test]
    fn a_response_that_is_not_valid_is_not_answered() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":{},"error":{}}"#,
        ] {
            assert!(matches!(parse(text), Ok(Incoming::Discarded)), "{text}");
        }
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":2,"result":null}"#),
            Ok(Incoming::Response {
                id: Id::Number(2),
                outcome: Ok(_)
            })
        ));
    }

    #[test]
    fn an_id_at_the_bound_is_kept_and_one_byte_past_is_refused() {
        // The bound counts the id's JSON text, quotes included.
        let at = "a".repeat(MAX_ID_BYTES - 2);
        let text = format!(r#"{{"jsonrpc":"2.0","id":"{at}","method":"x"}}"#);
        assert!(matches!(parse(&text), Ok(Incoming::Request { .. })));
        let past = "a".repeat(MAX_ID_BYTES - 1);
        let text = format!(r#"{{"jsonrpc":"2.0","id":"{past}","method":"x"}}"#);
        assert_eq!(code(&text), (Id::Null, -32600));
    }

    #[test]
    fn an_oversized_message_is_answered_with_its_id_when_it_has_one() {
        assert_eq!(
            id_of(br#" {"jsonrpc":"2.0","id":"r9","method":"x"}"#),
            Id::Text("r9".into())
        );
        assert_eq!(id_of(br#"{"id":4}"#), Id::Number(4));
        assert_eq!(id_of(br#"[{"id":4}]"#), Id::Null);
        assert_eq!(id_of(br#"{"id":{"a":1}}"#), Id::Null);
        assert_eq!(id_of(b"not json"), Id::Null);
    }

    #[test]
    fn messages_are_written_as_json_rpc_2() {
        let result = encode_result(&Id::Text("a".into()), serde_json::json!({})).unwrap();
        assert_eq!(result, br#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        let error = encode_error(&Id::Null, &RpcError::new(RpcCode::ParseError, "p"));
        assert_eq!(
            error,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}"#
        );
        let request = encode_request(3, "m", serde_json::json!([])).unwrap();
        assert_eq!(
            request,
            br#"{"jsonrpc":"2.0","id":3,"method":"m","params":[]}"#
        );
    }
}

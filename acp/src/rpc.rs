//! JSON-RPC 2.0 framing, as both of carrier's ACP sides speak it: one message per text (a
//! line of an agent's stdout, a text frame of `/acp`), parsed strictly into a [`Message`] or
//! refused with the [`ErrorObject`] to answer; and the messages carrier writes, encoded once
//! into compact JSON (never a raw newline, so each is one line as written).
//!
//! Parameters and results stay as the peer wrote them ([`RawValue`]): a side reads the fields it
//! needs ([`Request::params`]) and passes the rest on byte for byte.

use bytes::Bytes;
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The text is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// The JSON is not one JSON-RPC 2.0 request, notification or response (batches included).
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not offered.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// The method's parameters are not what it takes.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// The request was understood and failed.
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// ACP: the agent needs `authenticate` first.
pub(crate) const AUTH_REQUIRED: i64 = -32000;
/// ACP: a resource the request names (a session) does not exist.
pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;

/// Longest piece of a peer's text (a method name, a reason) quoted back in an error message.
const QUOTED_BYTES: usize = 64;

/// A request id: a string, an integer, or (discouraged, and in answers to a message whose id
/// could not be read) `null`. Answers carry it back exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Id {
    /// An integer id.
    Number(i64),
    /// A string id.
    Str(String),
    /// `null`.
    Null,
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
            Id::Null => f.write_str("null"),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorObject {
    /// One of the codes above, or the peer's own.
    pub(crate) code: i64,
    /// One sentence.
    pub(crate) message: String,
    /// More, when there is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<Value>,
}

impl ErrorObject {
    /// An error without `data`.
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `-32601` for `method`.
    pub(crate) fn method_not_found(method: &str) -> Self {
        ErrorObject::new(
            METHOD_NOT_FOUND,
            format!("method not found: {:?}", quoted(method)),
        )
    }

    /// `-32602` with the reason.
    pub(crate) fn invalid_params(reason: impl std::fmt::Display) -> Self {
        ErrorObject::new(INVALID_PARAMS, format!("invalid params: {reason}"))
    }

    /// `-32603` with the reason.
    pub(crate) fn internal(reason: impl Into<String>) -> Self {
        ErrorObject::new(INTERNAL_ERROR, reason)
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// A request: answer it with [`encode_result`] or [`encode_error`] under its `id`.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// Its id.
    pub(crate) id: Id,
    /// Its method.
    pub(crate) method: String,
    /// Its params as sent (`None` when absent or `null`).
    pub(crate) params: Option<Box<RawValue>>,
}

/// A notification: never answered.
#[derive(Debug, Clone)]
pub(crate) struct Notification {
    /// Its method.
    pub(crate) method: String,
    /// Its params as sent (`None` when absent or `null`).
    pub(crate) params: Option<Box<RawValue>>,
}

/// A response to a request this side sent.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    /// The id of the request it answers.
    pub(crate) id: Id,
    /// Its `result` as sent (which may be `null`), or its `error`.
    pub(crate) outcome: Result<Box<RawValue>, ErrorObject>,
}

/// One JSON-RPC 2.0 message.
#[derive(Debug, Clone)]
pub(crate) enum Message {
    /// A request (it has an `id`).
    Request(Request),
    /// A notification (a method without `id`).
    Notification(Notification),
    /// A response (`result` or `error`, with the `id` it answers).
    Response(Response),
}

/// A text that is not one JSON-RPC 2.0 message: the error to answer it with, under `id` (the
/// message's own when it could be read, else `null`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refused {
    /// The id to answer under; `None` answers with `"id": null`.
    pub(crate) id: Option<Id>,
    /// [`PARSE_ERROR`] or [`INVALID_REQUEST`], with the reason.
    pub(crate) error: ErrorObject,
}

impl Refused {
    fn invalid(id: Option<Id>, reason: impl std::fmt::Display) -> Self {
        Refused {
            id,
            error: ErrorObject::new(INVALID_REQUEST, format!("invalid request: {reason}")),
        }
    }
}

impl Request {
    /// Its params as `T` (absent params read as `{}`), or the `-32602` answer.
    pub(crate) fn params<T: DeserializeOwned>(&self) -> Result<T, ErrorObject> {
        typed(self.params.as_deref())
    }
}

impl Notification {
    /// Its params as `T` (absent params read as `{}`), or why not (as a `-32602` error).
    pub(crate) fn params<T: DeserializeOwned>(&self) -> Result<T, ErrorObject> {
        typed(self.params.as_deref())
    }
}

impl Response {
    /// Its result as `T`, the peer's error, or (as `-32602`) why the result is not a `T`.
    pub(crate) fn result<T: DeserializeOwned>(&self) -> Result<T, ErrorObject> {
        match &self.outcome {
            Ok(raw) => serde_json::from_str(raw.get()).map_err(ErrorObject::invalid_params),
            Err(error) => Err(error.clone()),
        }
    }
}

fn typed<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    serde_json::from_str(params.map_or("{}", RawValue::get)).map_err(ErrorObject::invalid_params)
}

/// Reads a field that is present as `Some`, even when it is `null` (a derived `Option` would
/// read `null` as absent, and `"id": null` and `"result": null` are messages of their own).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// The members of a message object, each as written.
#[derive(Deserialize)]
struct Members {
    #[serde(default, deserialize_with = "present")]
    jsonrpc: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    method: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Box<RawValue>>,
}

/// Parses one message. A batch (an array) is refused as [`INVALID_REQUEST`]: neither ACP side
/// sends or takes batches.
pub(crate) fn parse(text: &str) -> Result<Message, Refused> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        let json = serde_json::from_str::<IgnoredAny>(text).is_ok();
        return Err(match (json, trimmed.starts_with('[')) {
            (false, _) => not_json(),
            (true, true) => Refused::invalid(None, "batches are not supported"),
            (true, false) => Refused::invalid(None, "a message is a JSON object"),
        });
    }
    let members: Members = serde_json::from_str(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => Refused::invalid(None, quoted(&e.to_string())),
        _ => not_json(),
    })?;
    // The id first, so every later refusal can name it.
    let id = match &members.id {
        None => None,
        Some(raw) => Some(
            serde_json::from_str::<Id>(raw.get())
                .map_err(|_| Refused::invalid(None, "id is not a string, an integer or null"))?,
        ),
    };
    let version = members
        .jsonrpc
        .as_deref()
        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    if version.as_deref() != Some("2.0") {
        return Err(Refused::invalid(id, "jsonrpc is not \"2.0\""));
    }
    let params = match members.params {
        Some(raw) if raw.get() == "null" => None,
        Some(raw) if raw.get().starts_with(['{', '[']) => Some(raw),
        Some(_) => return Err(Refused::invalid(id, "params is not an object or an array")),
        None => None,
    };
    match (members.method, members.result, members.error) {
        (Some(method), None, None) => {
            let method = serde_json::from_str::<String>(method.get())
                .map_err(|_| Refused::invalid(id.clone(), "method is not a string"))?;
            Ok(match id {
                Some(id) => Message::Request(Request { id, method, params }),
                None => Message::Notification(Notification { method, params }),
            })
        }
        (None, result, error) if params.is_none() => {
            let Some(id) = id else {
                return Err(Refused::invalid(None, "a response without an id"));
            };
            let outcome = match (result, error) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(serde_json::from_str::<ErrorObject>(error.get())
                    .map_err(|_| {
                        Refused::invalid(
                            Some(id.clone()),
                            "error is not an object with an integer code and a message",
                        )
                    })?),
                (None, None) => {
                    return Err(Refused::invalid(
                        Some(id),
                        "no method, no result and no error",
                    ))
                }
                (Some(_), Some(_)) => {
                    return Err(Refused::invalid(Some(id), "both a result and an error"))
                }
            };
            Ok(Message::Response(Response { id, outcome }))
        }
        _ => Err(Refused::invalid(
            id,
            "a message has a method, or a result or an error, never both",
        )),
    }
}

fn not_json() -> Refused {
    Refused {
        id: None,
        error: ErrorObject::new(PARSE_ERROR, "parse error: the message is not JSON"),
    }
}

/// At most [`QUOTED_BYTES`] of a peer's text, cut at a character boundary.
fn quoted(text: &str) -> &str {
    carrier_protocol::envelope::truncate(text, QUOTED_BYTES)
}

#[derive(Serialize)]
struct Out<'a, P: Serialize, R: Serialize> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Id>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

fn encode<P: Serialize, R: Serialize>(out: &Out<'_, P, R>) -> Result<Bytes, serde_json::Error> {
    let mut bytes = serde_json::to_vec(out)?;
    // A queued message holds what it is charged (serialising grows the buffer by doubling).
    bytes.shrink_to_fit();
    Ok(Bytes::from(bytes))
}

/// `{"jsonrpc":"2.0","id":…,"method":…,"params":…}`. Fails only if `params`' own `Serialize`
/// fails.
pub(crate) fn encode_request<P: Serialize>(
    id: &Id,
    method: &str,
    params: &P,
) -> Result<Bytes, serde_json::Error> {
    encode::<P, ()>(&Out {
        jsonrpc: "2.0",
        id: Some(id),
        method: Some(method),
        params: Some(params),
        result: None,
        error: None,
    })
}

/// `{"jsonrpc":"2.0","method":…,"params":…}`. Fails only if `params`' own `Serialize` fails.
pub(crate) fn encode_notification<P: Serialize>(
    method: &str,
    params: &P,
) -> Result<Bytes, serde_json::Error> {
    encode::<P, ()>(&Out {
        jsonrpc: "2.0",
        id: None,
        method: Some(method),
        params: Some(params),
        result: None,
        error: None,
    })
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`. Fails only if `result`'s own `Serialize` fails.
pub(crate) fn encode_result<R: Serialize>(id: &Id, result: &R) -> Result<Bytes, serde_json::Error> {
    encode::<(), R>(&Out {
        jsonrpc: "2.0",
        id: Some(id),
        method: None,
        params: None,
        result: Some(result),
        error: None,
    })
}

/// `{"jsonrpc":"2.0","id":…,"error":…}`, under `id` or (when `None`) `null`.
pub(crate) fn encode_error(id: Option<&Id>, error: &ErrorObject) -> Bytes {
    let id = id.unwrap_or(&Id::Null);
    let out = |error: &ErrorObject| {
        encode::<(), ()>(&Out {
            jsonrpc: "2.0",
            id: Some(id),
            method: None,
            params: None,
            result: None,
            error: Some(error),
        })
    };
    out(error).unwrap_or_else(|_| {
        // Only a custom `data` value can fail to encode: answer without it.
        let bare = ErrorObject {
            data: None,
            ..error.clone()
        };
        out(&bare).unwrap_or_default()
    })
}

/// `message` and a newline: one message of a stdio transport.
pub(crate) fn line(message: Bytes) -> Bytes {
    let mut line = Vec::with_capacity(message.len() + 1);
    line.extend_from_slice(&message);
    line.push(b'\n');
    Bytes::from(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_parses_and_what_is_not_one_is_refused_with_its_answer() {
        let text =
            r#"{"jsonrpc":"2.0","id":7,"method":"session/cancel","params":{"sessionId":"s"}}"#;
        let Ok(Message::Request(request)) = parse(text) else {
            panic!()
        };
        assert_eq!(
            (request.id.clone(), request.method.as_str()),
            (Id::Number(7), "session/cancel")
        );

        // Anything that is not one JSON-RPC 2.0 message is refused with the error to send back.
        let refused = parse(r#"[{"jsonrpc":"2.0","method":"x"}]"#).unwrap_err();
        assert_eq!(refused.error.code, INVALID_REQUEST);
        let answer = encode_error(refused.id.as_ref(), &refused.error);
        assert!(answer.starts_with(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600"#));
    }

    fn refused(text: &str) -> Refused {
        parse(text).expect_err(text)
    }

    #[test]
    fn reads_requests_notifications_and_responses() {
        let Message::Request(r) =
            parse(r#"{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":[1, 2]}}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!((r.id, r.method.as_str()), (Id::Str("a".into()), "m"));
        assert_eq!(
            r.params.unwrap().get(),
            r#"{"x":[1, 2]}"#,
            "params kept as sent"
        );

        let Message::Notification(n) = parse(r#"{"jsonrpc":"2.0","method":"n"}"#).unwrap() else {
            panic!()
        };
        assert!(n.params.is_none());
        assert_eq!(n.params::<Value>().unwrap(), json!({}));

        let Message::Response(ok) = parse(r#"{"jsonrpc":"2.0","id":3,"result":null}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(ok.id, Id::Number(3));
        assert_eq!(
            ok.outcome.unwrap().get(),
            "null",
            "a null result is a result"
        );

        let Message::Response(err) =
            parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no"}}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(err.id, Id::Null);
        assert_eq!(err.outcome.unwrap_err().code, METHOD_NOT_FOUND);

        let Message::Request(r) = parse(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.id, Id::Null, "a null id is a (discouraged) request");
    }

    #[test]
    fn what_is_not_json_is_a_parse_error_and_everything_else_invalid() {
        for text in ["", "{", "nope", "{\"jsonrpc\":\"2.0\",}", "\u{feff}{}"] {
            let r = refused(text);
            assert_eq!((r.id, r.error.code), (None, PARSE_ERROR), "{text:?}");
        }
        for text in [
            "[]",
            r#"[{"jsonrpc":"2.0","method":"m"}]"#,
            "7",
            r#""s""#,
            "null",
            r#"{"jsonrpc":"2.0","method":"m","method":"n"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
        ] {
            let r = refused(text);
            assert_eq!((r.id, r.error.code), (None, INVALID_REQUEST), "{text}");
        }
        for text in [
            r#"{"id":1,"method":"m"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":2,"id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"params":{}}"#,
        ] {
            let r = refused(text);
            assert_eq!(
                (r.id, r.error.code),
                (Some(Id::Number(1)), INVALID_REQUEST),
                "{text}"
            );
        }
    }

    #[test]
    fn typed_params_refuse_with_invalid_params() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct P {
            #[serde(rename = "sessionId")]
            session_id: String,
        }
        let Message::Request(r) =
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"sessionId":5}}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.params::<P>().unwrap_err().code, INVALID_PARAMS);
    }

    #[test]
    fn encodes_one_line_each_and_round_trips() {
        let id = Id::Number(1);
        let request = encode_request(&id, "m", &json!({"t": "a\nb"})).unwrap();
        assert_eq!(
            &request[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"a\nb"}}"#
        );
        assert!(matches!(
            parse(std::str::from_utf8(&request).unwrap()),
            Ok(Message::Request(_))
        ));
        let note = encode_notification("n", &json!({})).unwrap();
        assert_eq!(&note[..], br#"{"jsonrpc":"2.0","method":"n","params":{}}"#);
        let result = encode_result(&Id::Str("x".into()), &Value::Null).unwrap();
        assert_eq!(&result[..], br#"{"jsonrpc":"2.0","id":"x","result":null}"#);
        let error = encode_error(None, &ErrorObject::method_not_found("fs/read_text_file"));
        assert_eq!(
            &error[..],
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"method not found: \"fs/read_text_file\""}}"#
        );
        let line = line(error);
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(line.ends_with(b"}\n"));
    }

    #[test]
    fn a_long_method_is_quoted_cut() {
        let long = "m".repeat(10_000);
        let e = ErrorObject::method_not_found(&long);
        assert!(e.message.len() < 200, "{}", e.message.len());
    }
}

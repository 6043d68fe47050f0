//! The text envelope (docs/protocol.md, "Envelope"): parsing one text frame into a request, a
//! response or an event with strict validation, and encoding the frames the server sends.
//!
//! Parsing never drops a frame silently: every failure is a [`Rejection`] whose
//! [`Rejection::reply`] is the frame to answer with — an error response when the frame had a
//! usable `id`, otherwise a `protocol_error` event (docs/protocol.md, "Errors").
//!
//! Validation rules (where the protocol reference leaves a choice, these are the decisions):
//! - a frame is exactly one JSON object; its keys must be those of exactly one shape
//!   (`id`/`method`/`params`, `id`/`result`|`error`, `event`/`seq`/`payload`); an unknown
//!   top-level key is refused, since it makes the shape ambiguous;
//! - a usable `id` is a non-empty string of at most [`MAX_ID_BYTES`] bytes; anything else
//!   (number, empty, huge) is refused with a `protocol_error` event, as there is nothing to
//!   echo;
//! - `params` may be absent or `null` (both mean `{}`), otherwise it must be an object;
//! - `seq` may be absent or `null`; when present it is an unsigned integer.
//!
//! ```
//! use carrier_protocol::envelope::{parse, Frame};
//!
//! let Ok(Frame::Request(r)) = parse(r#"{"id":"r1","method":"system.ping"}"#) else { panic!() };
//! assert_eq!((r.id.as_str(), r.method.as_str(), r.params.len()), ("r1", "system.ping", 0));
//!
//! let rejection = parse("[1,2]").unwrap_err();
//! assert!(String::from_utf8(rejection.reply()).unwrap().contains("malformed_frame"));
//! ```

use serde_json::{Map, Value};

use super::error::{protocol_error_event, EffectState, ErrorCode, ErrorObject, ProtocolErrorCode};

pub(crate) mod encode;
mod limits;
pub use encode::{encode_error, encode_event, encode_result, too_large_reply};
pub use limits::{MAX_ID_BYTES, MAX_NAME_BYTES};

/// A request: `{id, method, params?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The requester's id, echoed in the response.
    pub id: String,
    /// The method's wire name (not yet looked up in the catalog).
    pub method: String,
    /// The params object; `{}` when absent or `null`.
    pub params: Map<String, Value>,
}

/// What a response carries: a result or an error, never both.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseBody {
    /// `result`: any JSON value.
    Result(Value),
    /// `error`: an object with at least a string `code` and a string `message`. Kept as JSON so
    /// a client can read codes newer than this build.
    Error(Map<String, Value>),
}

/// A response: `{id, result}` or `{id, error}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request it answers.
    pub id: String,
    /// The result or the error.
    pub body: ResponseBody,
}

/// An event: `{event, seq?, payload}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The event name.
    pub event: String,
    /// Per-session sequence number, on session events only.
    pub seq: Option<u64>,
    /// The payload.
    pub payload: Value,
}

/// One parsed text frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A request.
    Request(Request),
    /// A response.
    Response(Response),
    /// An event.
    Event(Event),
}

/// Why a frame was refused; it decides the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionKind {
    /// Not JSON, or not a JSON object.
    Malformed,
    /// A JSON object that is not a valid envelope.
    InvalidEnvelope,
    /// A request whose params fail validation.
    InvalidParams,
}

impl RejectionKind {
    /// The `data.reason` of an error response, or the `payload.code` of an event.
    pub fn reason(self) -> &'static str {
        match self {
            RejectionKind::Malformed => "malformed_frame",
            RejectionKind::InvalidEnvelope => "invalid_envelope",
            RejectionKind::InvalidParams => "invalid_params",
        }
    }
}

/// A refused frame and what to answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Rejection {
    /// The frame's usable id, if it had one: the reply is then an error response.
    pub id: Option<String>,
    /// Why it was refused.
    pub kind: RejectionKind,
    /// A human-readable explanation.
    pub message: String,
}

impl Rejection {
    fn new(id: Option<&str>, kind: RejectionKind, message: impl Into<String>) -> Self {
        Rejection {
            id: id.map(str::to_owned),
            kind,
            message: message.into(),
        }
    }

    /// A request's params failed validation.
    pub fn invalid_params(id: &str, message: impl Into<String>) -> Self {
        Rejection::new(Some(id), RejectionKind::InvalidParams, message)
    }

    /// The error object answered to a frame with a usable id: `protocol_error`,
    /// `effect_state: "none"`, `data.reason` naming the kind.
    pub fn error_object(&self) -> ErrorObject {
        ErrorObject::new(ErrorCode::ProtocolError, self.message.clone())
            .effect(EffectState::None)
            .with_data(serde_json::json!({ "reason": self.kind.reason() }))
    }

    /// The frame to answer with: an error response when there is a usable id, otherwise a
    /// `protocol_error` event (`malformed_frame` or `invalid_envelope`).
    pub fn reply(&self) -> Vec<u8> {
        match &self.id {
            Some(id) => encode_error(id, &self.error_object()).to_vec(),
            None => {
                let code = match self.kind {
                    RejectionKind::Malformed => ProtocolErrorCode::MalformedFrame,
                    RejectionKind::InvalidEnvelope | RejectionKind::InvalidParams => {
                        ProtocolErrorCode::InvalidEnvelope
                    }
                };
                protocol_error_event(code, &self.message, Map::new())
            }
        }
    }
}

/// Parses one text frame. See the module docs for the rules.
pub fn parse(text: &str) -> Result<Frame, Rejection> {
    // Most frames are well-formed requests: read those straight into their fields, without a
    // JSON tree for the envelope (a third of a `system.ping`'s cost). Anything else, and every
    // edge case, is left to the general parser, which decides and explains; the property test
    // `the_fast_path_agrees_with_the_general_parser` holds the two to the same answers.
    if let Some(request) = fast_request(text) {
        return Ok(Frame::Request(request));
    }
    parse_general(text)
}

/// A request with exactly `id`, `method` and optionally `params`, each within its bounds.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FastRequest<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    #[serde(default)]
    params: Option<Map<String, Value>>,
}

/// The common case of [`parse`]: a valid request, or `None` for the general parser to handle.
fn fast_request(text: &str) -> Option<Request> {
    // serde reads a struct from a JSON array too; an envelope is only ever an object.
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    let r: FastRequest<'_> = serde_json::from_str(text).ok()?;
    let id_ok = !r.id.is_empty() && r.id.len() <= MAX_ID_BYTES;
    let method_ok = !r.method.is_empty() && r.method.len() <= MAX_NAME_BYTES;
    (id_ok && method_ok).then(|| Request {
        id: r.id.into_owned(),
        method: r.method.into_owned(),
        params: r.params.unwrap_or_default(),
    })
}

/// [`parse`] for every frame: a JSON tree first, then the envelope's rules.
fn parse_general(text: &str) -> Result<Frame, Rejection> {
    // serde_json refuses nesting deeper than 128 levels with an error, never a stack overflow.
    let value: Value = serde_json::from_str(text).map_err(|e| {
        Rejection::new(
            None,
            RejectionKind::Malformed,
            format!("not valid JSON: {e}"),
        )
    })?;
    let Value::Object(mut obj) = value else {
        return Err(Rejection::new(
            None,
            RejectionKind::Malformed,
            format!("a frame must be a JSON object, got {}", kind_of(&value)),
        ));
    };
    let id = usable_id(&obj).map(str::to_owned);
    let id = id.as_deref();
    let has_request = obj.contains_key("method");
    let has_response = obj.contains_key("result") || obj.contains_key("error");
    let has_event = obj.contains_key("event");
    // Only requests are answered with error responses: a bad response or event from a peer is
    // answered with a `protocol_error` event even when it carries an id.
    let reply_id = if has_request || !(has_response || has_event) {
        id
    } else {
        None
    };
    let invalid = |msg: String| Rejection::new(reply_id, RejectionKind::InvalidEnvelope, msg);
    match (has_request, has_response, has_event) {
        (true, false, false) => {}
        (false, true, false) => {}
        (false, false, true) => {}
        (false, false, false) => {
            return Err(invalid(
                "a frame needs `method` (request), `result`/`error` (response) or `event`".into(),
            ))
        }
        _ => {
            return Err(invalid(
                "a frame must be exactly one of request, response or event".into(),
            ))
        }
    }
    if has_event {
        check_keys(&obj, &["event", "seq", "payload"]).map_err(invalid)?;
        return parse_event(&mut obj).map(Frame::Event).map_err(invalid);
    }
    let allowed: &[&str] = if has_request {
        &["id", "method", "params"]
    } else {
        &["id", "result", "error"]
    };
    check_keys(&obj, allowed).map_err(invalid)?;
    let Some(id) = id else {
        return Err(invalid(describe_bad_id(obj.get("id"))));
    };
    let id = id.to_owned();
    if has_request {
        parse_request(id, &mut obj).map(Frame::Request)
    } else {
        parse_response(id, &mut obj)
            .map(Frame::Response)
            .map_err(invalid)
    }
}

fn parse_request(id: String, obj: &mut Map<String, Value>) -> Result<Request, Rejection> {
    let method = match obj.remove("method") {
        Some(Value::String(m)) if !m.is_empty() && m.len() <= MAX_NAME_BYTES => m,
        Some(Value::String(_)) => {
            return Err(Rejection::new(
                Some(&id),
                RejectionKind::InvalidEnvelope,
                format!("`method` must be a non-empty string of at most {MAX_NAME_BYTES} bytes"),
            ))
        }
        other => {
            return Err(Rejection::new(
                Some(&id),
                RejectionKind::InvalidEnvelope,
                format!(
                    "`method` must be a string, got {}",
                    other.as_ref().map_or("nothing", kind_of)
                ),
            ))
        }
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(other) => {
            return Err(Rejection::invalid_params(
                &id,
                format!("`params` must be an object, got {}", kind_of(&other)),
            ))
        }
    };
    Ok(Request { id, method, params })
}

fn parse_response(id: String, obj: &mut Map<String, Value>) -> Result<Response, String> {
    let body = match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => ResponseBody::Result(result),
        (None, Some(Value::Object(error))) => {
            let is_str = |k: &str| error.get(k).is_some_and(Value::is_string);
            if !is_str("code") || !is_str("message") {
                return Err("`error` needs a string `code` and a string `message`".into());
            }
            ResponseBody::Error(error)
        }
        (None, Some(other)) => {
            return Err(format!(
                "`error` must be an object, got {}",
                kind_of(&other)
            ))
        }
        _ => return Err("a response carries `result` or `error`, never both".into()),
    };
    Ok(Response { id, body })
}

fn parse_event(obj: &mut Map<String, Value>) -> Result<Event, String> {
    let event = match obj.remove("event") {
        Some(Value::String(e)) if !e.is_empty() && e.len() <= MAX_NAME_BYTES => e,
        _ => return Err("`event` must be a non-empty string".into()),
    };
    let seq = match obj.remove("seq") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
        Some(_) => return Err("`seq` must be an unsigned integer".into()),
    };
    let payload = obj
        .remove("payload")
        .ok_or_else(|| "an event needs a `payload`".to_string())?;
    Ok(Event {
        event,
        seq,
        payload,
    })
}

/// The frame's `id`, if it is usable (a non-empty string within [`MAX_ID_BYTES`]).
fn usable_id(obj: &Map<String, Value>) -> Option<&str> {
    match obj.get("id") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_ID_BYTES => Some(s),
        _ => None,
    }
}

fn describe_bad_id(id: Option<&Value>) -> String {
    match id {
        None => "`id` is required".into(),
        Some(Value::String(s)) if s.is_empty() => "`id` must not be empty".into(),
        Some(Value::String(s)) => format!(
            "`id` is {} bytes; at most {MAX_ID_BYTES} are accepted",
            s.len()
        ),
        Some(other) => format!("`id` must be a string, got {}", kind_of(other)),
    }
}

fn check_keys(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(format!(
            "unexpected key {:?}; this frame may only have {}",
            truncate(k, 64),
            allowed.join(", ")
        )),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary (for echoing client text).
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests;

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
use limits::{id_fits, name_fits};
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
    if let Some(request) = compact_request(text) {
        return Some(request);
    }
    // serde reads a struct from a JSON array too; an envelope is only ever an object.
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    let r: FastRequest<'_> = serde_json::from_str(text).ok()?;
    (id_fits(&r.id) && name_fits(&r.method)).then(|| Request {
        id: r.id.into_owned(),
        method: r.method.into_owned(),
        params: r.params.unwrap_or_default(),
    })
}

/// The commonest request, as clients write it: `{"id":"…","method":"…"}`, or with
/// `,"params":{}` before the brace, no whitespace, and strings without escapes — read by a scan
/// of its bytes, without a JSON parser, and lent where it lies: its id and method are slices of
/// `text`, and its params are `{}`. Any other text is `None`; [`parse`] reads every frame,
/// this shape included, to the same [`Request`].
///
/// For a dispatcher's hottest path: a `system.ping` answered from these slices allocates
/// nothing for its envelope (BENCHMARKS.md, "Performance 3, third pass").
///
/// ```
/// use carrier_protocol::envelope::{parse_compact, CompactRequest};
///
/// let text = r#"{"id":"7","method":"system.ping"}"#;
/// assert_eq!(parse_compact(text), Some(CompactRequest { id: "7", method: "system.ping" }));
/// assert_eq!(parse_compact(r#"{ "id":"7","method":"system.ping"}"#), None);
/// ```
pub fn parse_compact(text: &str) -> Option<CompactRequest<'_>> {
    let rest = text.strip_prefix(r#"{"id":""#)?;
    let (id, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(r#","method":""#)?;
    let (method, rest) = plain_string(rest)?;
    if rest != "}" && rest != r#","params":{}}"# {
        return None;
    }
    (id_fits(id) && name_fits(method)).then_some(CompactRequest { id, method })
}

/// A request in the compact shape [`parse_compact`] reads: its id and method, borrowed from the
/// frame's text; its params are empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactRequest<'a> {
    /// The requester's id, within [`MAX_ID_BYTES`].
    pub id: &'a str,
    /// The method's wire name, within [`MAX_NAME_BYTES`] (not yet looked up in the catalog).
    pub method: &'a str,
}

/// [`parse_compact`], owned: the fast path of [`parse`] (most of a `system.ping`'s parse cost
/// was the JSON parser: BENCHMARKS.md, "Performance 3, second pass").
fn compact_request(text: &str) -> Option<Request> {
    parse_compact(text).map(|r| Request {
        id: r.id.to_owned(),
        method: r.method.to_owned(),
        params: Map::new(),
    })
}

/// The contents of a JSON string up to its closing quote and the text after that quote, for a
/// string with no escape and no control character (which JSON forbids raw); else `None`.
fn plain_string(s: &str) -> Option<(&str, &str)> {
    let end = memchr::memchr(b'"', s.as_bytes())?;
    (!encode::needs_escape(&s.as_bytes()[..end])).then(|| (&s[..end], &s[end + 1..]))
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
        Some(Value::String(m)) if name_fits(&m) => m,
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
        Some(Value::String(e)) if name_fits(&e) => e,
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
        Some(Value::String(s)) if id_fits(s) => Some(s),
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
mod tests {
    use super::*;

    fn reply_json(text: &str) -> Value {
        let rejection = parse(text).expect_err("should be refused");
        serde_json::from_slice(&rejection.reply()).unwrap()
    }

    #[test]
    fn request_with_and_without_params() {
        let Frame::Request(r) =
            parse(r#"{"id":"a","method":"session.submit","params":{"prompt":"hi"}}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.params["prompt"], "hi");
        for text in [
            r#"{"id":"a","method":"system.ping"}"#,
            r#"{"id":"a","method":"system.ping","params":null}"#,
        ] {
            let Frame::Request(r) = parse(text).unwrap() else {
                panic!()
            };
            assert!(r.params.is_empty());
        }
    }

    #[test]
    fn responses_and_events_parse() {
        let Frame::Response(r) = parse(r#"{"id":"a","result":{}}"#).unwrap() else {
            panic!()
        };
        assert_eq!(r.body, ResponseBody::Result(serde_json::json!({})));
        let Frame::Response(r) =
            parse(r#"{"id":"a","error":{"code":"future_code","message":"m"}}"#).unwrap()
        else {
            panic!()
        };
        assert!(matches!(r.body, ResponseBody::Error(_)));
        let Frame::Event(e) =
            parse(r#"{"event":"session.text_delta","seq":7,"payload":{}}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!((e.event.as_str(), e.seq), ("session.text_delta", Some(7)));
    }

    #[test]
    fn no_usable_id_gives_events() {
        for (text, code) in [
            ("nope", "malformed_frame"),
            ("[]", "malformed_frame"),
            ("null", "malformed_frame"),
            ("42", "malformed_frame"),
            (r#""str""#, "malformed_frame"),
            (r#"{"id":"","method":"m"}"#, "invalid_envelope"),
            (r#"{"id":7,"method":"m"}"#, "invalid_envelope"),
            (r#"{"method":"m"}"#, "invalid_envelope"),
            (r#"{"event":"x"}"#, "invalid_envelope"),
            (
                r#"{"id":"a","event":"x","payload":{},"seq":-1}"#,
                "invalid_envelope",
            ),
            (
                r#"{"id":"a","result":1,"error":{"code":"c","message":"m"}}"#,
                "invalid_envelope",
            ),
            (r#"{"id":"a","error":"boom"}"#, "invalid_envelope"),
        ] {
            let reply = reply_json(text);
            assert_eq!(reply["event"], "protocol_error", "{text}");
            assert_eq!(reply["payload"]["code"], code, "{text}");
        }
    }

    #[test]
    fn usable_id_gives_error_responses() {
        for text in [
            r#"{"id":"a"}"#,
            r#"{"id":"a","method":5}"#,
            r#"{"id":"a","method":""}"#,
            r#"{"id":"a","method":"m","extra":true}"#,
            r#"{"id":"a","method":"m","result":{}}"#,
        ] {
            let reply = reply_json(text);
            assert_eq!(reply["id"], "a", "{text}");
            assert_eq!(reply["error"]["code"], "protocol_error", "{text}");
            assert_eq!(
                reply["error"]["data"]["reason"], "invalid_envelope",
                "{text}"
            );
            assert_eq!(reply["error"]["effect_state"], "none", "{text}");
        }
        let reply = reply_json(r#"{"id":"a","method":"m","params":[1]}"#);
        assert_eq!(reply["error"]["data"]["reason"], "invalid_params");
    }

    #[test]
    fn huge_id_is_not_echoed() {
        let id = "x".repeat(MAX_ID_BYTES + 1);
        let reply = reply_json(&format!(r#"{{"id":"{id}","method":"system.ping"}}"#));
        assert_eq!(reply["payload"]["code"], "invalid_envelope");
        let ok = "y".repeat(MAX_ID_BYTES);
        assert!(parse(&format!(r#"{{"id":"{ok}","method":"system.ping"}}"#)).is_ok());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!(
            r#"{{"id":"a","method":"m","params":{{"x":{}{}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(reply_json(&deep)["payload"]["code"], "malformed_frame");
    }

    #[test]
    fn encoders_produce_the_three_shapes() {
        let ok = encode_result("r1", &serde_json::json!({"a":1})).unwrap();
        assert_eq!(&ok[..], br#"{"id":"r1","result":{"a":1}}"#);
        let err = encode_error("r1", &ErrorObject::new(ErrorCode::Busy, "busy"));
        assert_eq!(
            &err[..],
            br#"{"id":"r1","error":{"code":"busy","message":"busy"}}"#
        );
        let ev = encode_event("session.text_delta", Some(3), &serde_json::json!({})).unwrap();
        assert_eq!(
            &ev[..],
            br#"{"event":"session.text_delta","seq":3,"payload":{}}"#
        );
        let ev = encode_event("protocol_error", None, &serde_json::json!({})).unwrap();
        assert_eq!(&ev[..], br#"{"event":"protocol_error","payload":{}}"#);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }

    /// Found by the envelope fuzz target: serde reads a struct from a JSON array too, so `[",,0"]`
    /// was answered as if it were a request with id `",,0"`.
    #[test]
    fn too_large_never_takes_an_id_from_an_array() {
        let reply: Value = serde_json::from_slice(&too_large_reply(r#"[",,0"]"#, 1)).unwrap();
        assert_eq!(reply["event"], "protocol_error");
        assert_eq!(reply["payload"]["code"], "too_large");
        assert!(reply.get("id").is_none());
        let reply: Value =
            serde_json::from_slice(&too_large_reply(r#" {"id":"r1","method":"m"}"#, 1)).unwrap();
        assert_eq!(reply["id"], "r1");
        assert_eq!(reply["error"]["code"], "too_large");
    }

    /// Texts in and near the compact request's shape: strings with quotes, escapes, control
    /// characters and non-ASCII, at and past the length limits, and the shape's edges.
    fn compact_like() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let string = prop_oneof![
            "[a-z0-9.\"\\\\\u{0}\u{1f}\u{7f}é😀 ]{0,12}",
            Just(String::new()),
            Just("a".repeat(MAX_ID_BYTES)),
            Just("a".repeat(MAX_ID_BYTES + 1)),
            Just("m".repeat(MAX_NAME_BYTES)),
            Just("m".repeat(MAX_NAME_BYTES + 1)),
            Just("system.ping".to_string()),
        ];
        let tail = prop_oneof![
            Just("}"),
            Just(",\"params\":{}}"),
            Just(",\"params\":{} }"),
            Just(",\"params\":null}"),
            Just(",\"params\":{\"a\":1}}"),
            Just(",\"id\":\"x\"}"),
            Just("} "),
            Just(""),
        ];
        (string.clone(), string, tail)
            .prop_map(|(id, method, tail)| format!(r#"{{"id":"{id}","method":"{method}"{tail}"#))
    }

    /// Texts shaped like requests, with the near misses the fast path must leave alone: duplicate,
    /// unknown or missing keys, arrays, wrong types, empty and over-long ids and names, escapes,
    /// `null` params, whitespace.
    fn request_like() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("\"id\"".to_string()),
            Just("\"method\"".to_string()),
            Just("\"params\"".to_string()),
            Just("\"result\"".to_string()),
            Just("\"event\"".to_string()),
            Just("\"\\u0069d\"".to_string()),
            Just("\"x\"".to_string()),
        ];
        let value = prop_oneof![
            Just("\"r1\"".to_string()),
            Just("\"\"".to_string()),
            Just("\"system.ping\"".to_string()),
            Just(format!("\"{}\"", "a".repeat(MAX_ID_BYTES))),
            Just(format!("\"{}\"", "a".repeat(MAX_ID_BYTES + 1))),
            Just(format!("\"{}\"", "m".repeat(MAX_NAME_BYTES + 1))),
            Just("\"\\ud83d\\ude00\"".to_string()),
            Just("\"\\ud800\"".to_string()),
            Just("null".to_string()),
            Just("{}".to_string()),
            Just("{\"a\":1,\"a\":2}".to_string()),
            Just("[1]".to_string()),
            Just("7".to_string()),
        ];
        let ws = prop_oneof![Just(""), Just(" "), Just("\n\t")];
        (
            proptest::collection::vec((key, value), 0..5),
            ws.clone(),
            ws,
            any::<bool>(),
        )
            .prop_map(|(fields, a, b, array)| {
                let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                if array {
                    let values: Vec<&str> = fields.iter().map(|(_, v)| v.as_str()).collect();
                    format!("{a}[{}]{b}", values.join(","))
                } else {
                    format!("{a}{{{}}}{b}", body.join(","))
                }
            })
    }

    proptest::proptest! {
        #[test]
        fn the_fast_path_agrees_with_the_general_parser(text in request_like()) {
            let general = parse_general(&text);
            if let Some(fast) = fast_request(&text) {
                proptest::prop_assert_eq!(Ok(Frame::Request(fast)), general);
            }
            // And whatever the fast path made of it, `parse` answers as the general parser does.
            proptest::prop_assert_eq!(parse(&text), parse_general(&text));
        }

        #[test]
        fn the_compact_scan_agrees_with_the_general_parser(text in compact_like()) {
            if let Some(fast) = compact_request(&text) {
                proptest::prop_assert_eq!(Ok(Frame::Request(fast)), parse_general(&text));
            }
            proptest::prop_assert_eq!(parse(&text), parse_general(&text));
        }

        #[test]
        fn any_text_is_parsed_or_answered_with_valid_json(text in ".{0,200}") {
            if let Err(rejection) = parse(&text) {
                let reply: Value = serde_json::from_slice(&rejection.reply()).unwrap();
                proptest::prop_assert!(reply.get("error").is_some() || reply["event"] == "protocol_error");
            }
        }

        #[test]
        fn any_json_value_is_parsed_or_answered(value in json_value()) {
            let text = value.to_string();
            if let Err(rejection) = parse(&text) {
                let reply: Value = serde_json::from_slice(&rejection.reply()).unwrap();
                proptest::prop_assert!(reply.get("error").is_some() || reply["event"] == "protocol_error");
            }
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            prop_oneof![
                Just("id".to_owned()),
                Just("method".to_owned()),
                Just("system.ping".to_owned()),
                ".{0,8}"
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            let keys = prop_oneof![
                Just("id".to_owned()),
                Just("method".to_owned()),
                Just("params".to_owned()),
                Just("result".to_owned()),
                Just("error".to_owned()),
                Just("event".to_owned()),
                Just("seq".to_owned()),
                Just("payload".to_owned()),
                "[a-z]{1,4}",
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(keys, inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn the_fast_path_takes_plain_requests_and_leaves_the_rest() {
        let ping = fast_request(r#" {"id":"r1","method":"system.ping","params":null} "#);
        assert_eq!(
            ping.map(|r| (r.id, r.method, r.params.len())),
            Some(("r1".into(), "system.ping".into(), 0))
        );
        let escaped = fast_request(r#"{"\u0069d":"r\"1","method":"m","params":{"a":[1]}}"#);
        assert_eq!(escaped.map(|r| r.id), Some("r\"1".to_string()));
        for other in [
            r#"["r1","system.ping"]"#,
            r#"{"id":"r1","id":"r2","method":"m"}"#,
            r#"{"id":"r1","method":"m","extra":1}"#,
            r#"{"id":"","method":"m"}"#,
            r#"{"id":"r1","method":""}"#,
            r#"{"id":7,"method":"m"}"#,
            r#"{"id":"r1","method":"m","params":[1]}"#,
            r#"{"id":"r1","result":{}}"#,
        ] {
            assert!(fast_request(other).is_none(), "{other}");
        }
    }
}

//! The child's side of the wire: its stdout lines classified into responses, validated session
//! events and requests (the carrier serves none), and the requests the carrier writes to its
//! stdin — the same envelope as on the socket, one frame per line.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use carrier_protocol::envelope::{self, Frame, ResponseBody};
use carrier_protocol::error::ErrorObject;
use carrier_protocol::events::{DriverInfo, SessionEvent};
use carrier_protocol::ids::{RequestId, TurnId};
use carrier_protocol::methods::{AppInfo, Decision};
use carrier_protocol::version::ProtocolVersion;

/// One line of the child's stdout, classified.
#[derive(Debug)]
pub(crate) enum ChildFrame {
    /// An answer to one of the carrier's requests.
    Response { id: String, answer: Answer },
    /// A session event that passed validation (names and field types of docs/protocol.md,
    /// "Events").
    Event(SessionEvent),
    /// A request from the child; the carrier serves none and answers `method_not_found`.
    Request { id: String, method: String },
    /// Anything else: logged and dropped.
    Invalid(String),
}

/// A child's answer: its `result`, or its `error` object.
pub(crate) type Answer = Result<Value, Map<String, Value>>;

/// Classifies one stdout line.
pub(crate) fn classify(line: &str) -> ChildFrame {
    match envelope::parse(line) {
        Ok(Frame::Response(r)) => ChildFrame::Response {
            id: r.id,
            answer: match r.body {
                ResponseBody::Result(v) => Ok(v),
                ResponseBody::Error(e) => Err(e),
            },
        },
        Ok(Frame::Event(e)) => {
            if e.seq.is_some() {
                // The carrier numbers session events; a child's own seq is not used.
                tracing::debug!(event = %e.event, "agent process event seq ignored");
            }
            match SessionEvent::from_wire(&e.event, e.payload) {
                Ok(event) => ChildFrame::Event(event),
                Err(err) => ChildFrame::Invalid(err.to_string()),
            }
        }
        Ok(Frame::Request(r)) => ChildFrame::Request {
            id: r.id,
            method: r.method,
        },
        Err(rejection) => ChildFrame::Invalid(rejection.message),
    }
}

#[derive(Serialize)]
struct RequestLine<'a, P: Serialize> {
    id: &'a str,
    method: &'a str,
    params: &'a P,
}

/// `{id, method, params}` and a newline. Compact JSON never contains a raw newline.
pub(crate) fn encode_request<P: Serialize>(
    id: &str,
    method: &str,
    params: &P,
) -> Result<Bytes, serde_json::Error> {
    let mut line = serde_json::to_vec(&RequestLine { id, method, params })?;
    line.push(b'\n');
    Ok(Bytes::from(line))
}

/// `{id, error}` and a newline, for a request from the child.
pub(crate) fn encode_error_line(id: &str, error: &ErrorObject) -> Bytes {
    let mut line = envelope::encode_error(id, error).to_vec();
    line.push(b'\n');
    Bytes::from(line)
}

/// `system.handshake` params the carrier sends, as a client would.
#[derive(Serialize)]
pub(crate) struct HandshakeToChild {
    pub(crate) protocol_version: ProtocolVersion,
    pub(crate) min_compatible_protocol: ProtocolVersion,
    pub(crate) client: AppInfo,
}

/// What the carrier needs from the child's handshake result; other fields are ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct ChildHello {
    pub(crate) protocol_version: ProtocolVersion,
    pub(crate) min_compatible_protocol: ProtocolVersion,
    pub(crate) server: ChildServer,
}

/// The child's `server` (its `version` is optional: only the name is required).
#[derive(Debug, Deserialize)]
pub(crate) struct ChildServer {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) version: Option<String>,
}

/// `session.submit` as the child receives it.
#[derive(Serialize)]
pub(crate) struct SubmitToChild<'a> {
    pub(crate) prompt: &'a str,
    pub(crate) turn_id: &'a TurnId,
    pub(crate) driver: &'a DriverInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) options: Option<&'a Map<String, Value>>,
}

/// `session.abort` as the child receives it.
#[derive(Serialize)]
pub(crate) struct AbortToChild<'a> {
    pub(crate) turn_id: &'a TurnId,
}

/// `session.permission.respond` as the child receives it: the decision, and the option a
/// client named when the child's prompt offered `options`.
#[derive(Serialize)]
pub(crate) struct PermissionToChild<'a> {
    pub(crate) request_id: &'a RequestId,
    pub(crate) decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) option_id: Option<&'a str>,
}

/// `session.history` as the child receives it.
#[derive(Serialize)]
pub(crate) struct HistoryToChild {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) limit: Option<u32>,
}

/// The `code` of a child's error object.
pub(crate) fn error_code(error: &Map<String, Value>) -> &str {
    error.get("code").and_then(Value::as_str).unwrap_or("")
}

/// The `message` of a child's error object.
pub(crate) fn error_message(error: &Map<String, Value>) -> &str {
    error.get("message").and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_kind_of_line() {
        assert!(matches!(
            classify(r#"{"id":"c1","result":{}}"#),
            ChildFrame::Response { answer: Ok(_), .. }
        ));
        assert!(matches!(
            classify(r#"{"id":"c1","error":{"code":"x","message":"y"}}"#),
            ChildFrame::Response { answer: Err(_), .. }
        ));
        assert!(matches!(
            classify(r#"{"event":"session.text_delta","payload":{"turn_id":"t1","delta":"a"}}"#),
            ChildFrame::Event(SessionEvent::TextDelta(_))
        ));
        assert!(matches!(
            classify(r#"{"id":"q","method":"host.thing","params":{}}"#),
            ChildFrame::Request { .. }
        ));
        for bad in [
            "garbage",
            "[1]",
            r#"{"event":"session.text_delta","payload":{"turn_id":1,"delta":"a"}}"#,
            r#"{"event":"session.made_up","payload":{}}"#,
            r#"{"event":"protocol_error","payload":{"code":"x","message":"y"}}"#,
            r#"{"id":"c1","result":{},"error":{"code":"x","message":"y"}}"#,
        ] {
            assert!(matches!(classify(bad), ChildFrame::Invalid(_)), "{bad}");
        }
    }

    #[test]
    fn requests_are_one_line() {
        let line = encode_request(
            "c1",
            "session.submit",
            &serde_json::json!({"prompt": "a\nb"}),
        )
        .unwrap();
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(line.ends_with(b"\n"));
    }
}

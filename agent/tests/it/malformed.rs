//! Table-driven: malformed text frames after the handshake each get the reply docs/protocol.md
//! ("Envelope", "Errors") specifies, and the connection keeps working after every one.

use carrier_test_support as support;

use serde_json::{json, Value};
use support::*;

/// The reply a frame must get.
enum Expect {
    /// A `protocol_error` event with this payload code.
    Event(&'static str),
    /// An error response with this id, code and (for `protocol_error`) `data.reason`.
    Error(&'static str, &'static str, Option<&'static str>),
}

use Expect::*;

fn table() -> Vec<(String, Expect)> {
    let deep = format!(
        r#"{{"id":"deep","method":"system.ping","params":{{"x":{}{}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let huge_id = format!(r#"{{"id":"{}","method":"system.ping"}}"#, "i".repeat(300));
    let rows: Vec<(&str, Expect)> = vec![
        ("not json", Event("malformed_frame")),
        ("", Event("malformed_frame")),
        ("[]", Event("malformed_frame")),
        (
            r#"[{"id":"a","method":"system.ping"}]"#,
            Event("malformed_frame"),
        ),
        ("null", Event("malformed_frame")),
        ("42", Event("malformed_frame")),
        (r#""a string""#, Event("malformed_frame")),
        ("true", Event("malformed_frame")),
        (
            r#"{"id":"a","method":"system.ping""#,
            Event("malformed_frame"),
        ),
        (
            r#"{"id":"a","method":"system.ping"} {}"#,
            Event("malformed_frame"),
        ),
        (
            r#"{"id":"u","method":"system.ping","params":{"x":"\ud800"}}"#,
            Event("malformed_frame"),
        ),
        ("{}", Event("invalid_envelope")),
        (
            r#"{"id":"","method":"system.ping"}"#,
            Event("invalid_envelope"),
        ),
        (
            r#"{"id":7,"method":"system.ping"}"#,
            Event("invalid_envelope"),
        ),
        (
            r#"{"id":null,"method":"system.ping"}"#,
            Event("invalid_envelope"),
        ),
        (
            r#"{"id":["a"],"method":"system.ping"}"#,
            Event("invalid_envelope"),
        ),
        (r#"{"method":"system.ping"}"#, Event("invalid_envelope")),
        (r#"{"id":"r1","result":{}}"#, Event("invalid_envelope")),
        (
            r#"{"id":"r2","error":{"code":"busy","message":"m"}}"#,
            Event("invalid_envelope"),
        ),
        (
            r#"{"id":"r3","result":{},"error":{"code":"x","message":"y"}}"#,
            Event("invalid_envelope"),
        ),
        (
            r#"{"event":"session.text_delta","seq":1,"payload":{}}"#,
            Event("invalid_envelope"),
        ),
        (r#"{"event":"hello"}"#, Event("invalid_envelope")),
        (
            r#"{"id":"m1"}"#,
            Error("m1", "protocol_error", Some("invalid_envelope")),
        ),
        (
            r#"{"id":"m2","method":5}"#,
            Error("m2", "protocol_error", Some("invalid_envelope")),
        ),
        (
            r#"{"id":"m3","method":""}"#,
            Error("m3", "protocol_error", Some("invalid_envelope")),
        ),
        (
            r#"{"id":"m4","method":"system.ping","params":{},"extra":1}"#,
            Error("m4", "protocol_error", Some("invalid_envelope")),
        ),
        (
            r#"{"id":"m5","method":"system.ping","result":{}}"#,
            Error("m5", "protocol_error", Some("invalid_envelope")),
        ),
        (
            r#"{"id":"p1","method":"system.ping","params":[1]}"#,
            Error("p1", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p2","method":"system.ping","params":"x"}"#,
            Error("p2", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p3","method":"session.submit","params":{}}"#,
            Error("p3", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p4","method":"session.submit","params":{"prompt":["x"]}}"#,
            Error("p4", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p5","method":"session.submit","params":{"prompt":null}}"#,
            Error("p5", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p6","method":"session.history","params":{"limit":"ten"}}"#,
            Error("p6", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p7","method":"session.history","params":{"limit":-1}}"#,
            Error("p7", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p8","method":"session.history","params":{"limit":1.5}}"#,
            Error("p8", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p9","method":"session.permission.respond","params":{"request_id":"x","decision":"maybe"}}"#,
            Error("p9", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p10","method":"usage.report","params":{"scope":"galaxy"}}"#,
            Error("p10", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p11","method":"sessions.switch","params":{"session_id":null}}"#,
            Error("p11", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"p12","method":"session.abort","params":{"turn_id":5}}"#,
            Error("p12", "protocol_error", Some("invalid_params")),
        ),
        (
            r#"{"id":"n1","method":"nope.nothing"}"#,
            Error("n1", "method_not_found", None),
        ),
        (
            r#"{"id":"n2","method":"SYSTEM.PING"}"#,
            Error("n2", "method_not_found", None),
        ),
    ];
    let mut rows: Vec<(String, Expect)> =
        rows.into_iter().map(|(t, e)| (t.to_owned(), e)).collect();
    rows.push((deep, Event("malformed_frame")));
    rows.push((huge_id, Event("invalid_envelope")));
    rows
}

fn check(text: &str, expect: &Expect, reply: &Value) {
    match expect {
        Event(code) => {
            assert_eq!(
                reply["event"], "protocol_error",
                "frame {text:.80}: {reply}"
            );
            assert_eq!(reply["payload"]["code"], *code, "frame {text:.80}: {reply}");
            assert!(reply["payload"]["message"].is_string());
            assert!(reply.get("seq").is_none());
        }
        Error(id, code, reason) => {
            assert_eq!(reply["id"], *id, "frame {text:.80}: {reply}");
            assert_eq!(reply["error"]["code"], *code, "frame {text:.80}: {reply}");
            assert_eq!(reply["error"]["effect_state"], "none", "frame {text:.80}");
            if let Some(reason) = reason {
                assert_eq!(
                    reply["error"]["data"]["reason"], *reason,
                    "frame {text:.80}: {reply}"
                );
            }
        }
    }
}

#[tokio::test]
async fn every_malformed_frame_is_answered_and_the_connection_keeps_working() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let rows = table();
    assert!(rows.len() >= 25);
    let errors_before = server.transport.metrics().protocol_errors();
    for (text, expect) in &rows {
        c.send_raw(text).await;
        let reply = c.next().await;
        check(text, expect, &reply);
        // Still working: a ping right after is answered, and nothing else arrived.
        let ping = c.request("system.ping", json!({})).await;
        assert_eq!(ping["result"], json!({}), "after {text:.80}");
        assert!(
            c.stashed().is_empty(),
            "after {text:.80}: {:?}",
            c.stashed()
        );
    }
    let counted = server.transport.metrics().protocol_errors() - errors_before;
    let protocol_errors = rows
        .iter()
        .filter(|(_, e)| !matches!(e, Error(_, "method_not_found", _)))
        .count() as u64;
    assert_eq!(counted, protocol_errors);
    // A turn still runs end to end.
    let turn = c.submit("still alive").await;
    assert_eq!(
        concat_deltas(&c.turn_events(&turn).await),
        "echo: still alive"
    );
}

use super::*;
use carrier_protocol::version::ProtocolVersion;

fn machine() -> ConnectionMachine {
    ConnectionMachine::new(AppInfo {
        name: "t".into(),
        version: "0".into(),
    })
}

fn result(session: &str, epoch: &str, resume: Value, channels: Value) -> Value {
    json!({
        "protocol_version": PROTOCOL_VERSION.to_string(),
        "min_compatible_protocol": "1.0",
        "server": {"name": "s", "version": "1"},
        "role": "drive",
        "session_id": session,
        "epoch": epoch,
        "features": {"bulk_credit": true},
        "channels": channels,
        "limits": {"max_message_bytes": 1000},
        "resume": resume,
    })
}

fn channels() -> Value {
    json!([
        {"name": "e", "events": ["*"], "binary": true, "delivery": "bulk", "credit": 100},
        {"name": "m", "events": ["say"], "binary": false},
        {"name": "old", "events": ["*"], "binary": true, "delivery": "bulk"},
    ])
}

/// Opens a socket and answers its handshake with `answer`.
fn handshake(m: &mut ConnectionMachine, answer: Value) -> (Value, HandshakeStep) {
    let (frame, _) = m.socket_opened();
    let id = frame["id"].as_str().unwrap().to_owned();
    let step = m.handshake_answered(&id, Ok(answer)).expect("awaited");
    (frame, step)
}

fn ready(m: &mut ConnectionMachine, answer: Value) -> (Value, ResumeOutcome) {
    match handshake(m, answer) {
        (frame, HandshakeStep::Ready { outcome, .. }) => (frame, outcome),
        (_, other) => panic!("not ready: {other:?}"),
    }
}

fn send(m: &mut ConnectionMachine, channel: &str, kind: SendKind<'_>, len: usize) -> ChannelGo {
    m.channel_frame(channel, kind, len).expect("allowed")
}

#[test]
fn the_first_handshake_announces_the_versions_and_no_resume() {
    let mut m = machine();
    let (frame, attempt) = m.socket_opened();
    assert_eq!(attempt, 1);
    assert_eq!(frame["method"], "system.handshake");
    assert_eq!(
        frame["params"]["protocol_version"],
        PROTOCOL_VERSION.to_string()
    );
    assert_eq!(frame["params"]["min_compatible_protocol"], "1.0");
    assert_eq!(
        frame["params"]["client"],
        json!({"name": "t", "version": "0"})
    );
    assert!(frame["params"].get("resume").is_none());
    assert!(!m.is_ready());
    assert!(matches!(
        m.channel_frame("e", SendKind::Binary, 1),
        Err(ClientError::NotConnected)
    ));
}

#[test]
fn a_reconnect_resumes_after_the_last_delivered_event_and_drops_replayed_duplicates() {
    let mut m = machine();
    ready(
        &mut m,
        result("s1", "e1", json!({"outcome": "new"}), json!([])),
    );
    assert!(m.session_event(1) && m.session_event(2));
    m.socket_closed();
    assert!(!m.is_ready());
    let (frame, outcome) = ready(
        &mut m,
        result(
            "s1",
            "e1",
            json!({"outcome": "resumed", "replayed": 1}),
            json!([]),
        ),
    );
    assert_eq!(
        frame["params"]["resume"],
        json!({"session_id": "s1", "epoch": "e1", "after_seq": 2})
    );
    assert_eq!(outcome, ResumeOutcome::Resumed { replayed: 1 });
    assert!(!m.session_event(2), "a replayed duplicate");
    assert!(m.session_event(3));
}

#[test]
fn a_fresh_binding_after_asking_to_resume_is_a_reset_and_restarts_numbering() {
    let mut m = machine();
    ready(
        &mut m,
        result("s1", "e1", json!({"outcome": "new"}), json!([])),
    );
    assert!(m.session_event(5));
    m.socket_closed();
    let (_, outcome) = ready(
        &mut m,
        result("s9", "e2", json!({"outcome": "new"}), json!([])),
    );
    assert_eq!(outcome, ResumeOutcome::Reset);
    assert!(m.session_event(1));
    assert_eq!(m.resume_point().map(|p| p.epoch.as_str()), Some("e2"));
}

#[test]
fn sessions_start_and_switch_rebind_but_other_methods_do_not() {
    let mut m = machine();
    ready(
        &mut m,
        result("s1", "e1", json!({"outcome": "new"}), json!([])),
    );
    assert!(m.session_event(4));
    m.answered("session.status", &json!({"session_id": "s2"}));
    assert_eq!(m.handshake().map(|h| h.session_id.as_str()), Some("s1"));
    m.answered("sessions.switch", &json!({"session_id": "s2"}));
    assert_eq!(m.handshake().map(|h| h.session_id.as_str()), Some("s2"));
    assert_eq!(m.resume_point().map(|p| p.after_seq), Some(0));
    assert!(
        m.session_event(1),
        "the new session numbers from its own start"
    );
}

#[test]
fn answers_to_other_ids_and_stale_attempts_are_not_the_handshake() {
    let mut m = machine();
    let (first, attempt) = m.socket_opened();
    m.socket_closed();
    let (second, _) = m.socket_opened();
    let stale = first["id"].as_str().unwrap();
    assert!(m
        .handshake_answered(
            stale,
            Ok(result("s", "e", json!({"outcome": "new"}), json!([])))
        )
        .is_none());
    assert!(!m.handshake_timed_out(attempt), "an old attempt's timer");
    assert!(m.awaits(second["id"].as_str().unwrap()));
    assert!(m.handshake_timed_out(attempt + 1));
    assert!(!m.awaits(second["id"].as_str().unwrap()));
}

#[test]
fn an_error_an_unreadable_result_or_an_incompatible_server_fails_the_handshake() {
    let mut m = machine();
    let (frame, _) = m.socket_opened();
    let id = frame["id"].as_str().unwrap();
    let refused = ReceivedError {
        code: ErrorCode::VersionIncompatible.into(),
        message: "no".into(),
        effect_state: None,
        data: None,
    };
    assert!(matches!(
        m.handshake_answered(id, Err(refused)),
        Some(HandshakeStep::Failed(ClientError::Remote { .. }))
    ));
    let (_, step) = handshake(&mut m, json!({"protocol_version": "1.0"}));
    assert!(matches!(
        step,
        HandshakeStep::Failed(ClientError::MalformedResponse { .. })
    ));
    let mut two = result("s", "e", json!({"outcome": "new"}), json!([]));
    two["protocol_version"] = json!("2.0");
    two["min_compatible_protocol"] = json!("2.0");
    let (_, step) = handshake(&mut m, two);
    let HandshakeStep::Failed(error) = step else {
        panic!("a 2.0 server was accepted")
    };
    assert_eq!(error.code(), Some(&ErrorCode::VersionIncompatible.into()));
    assert!(!m.is_ready());
}

#[test]
fn a_server_of_another_minor_is_skewed_whatever_its_flag_says() {
    let mut m = machine();
    let mut other = result("s", "e", json!({"outcome": "new"}), json!([]));
    let minor = if PROTOCOL_VERSION.minor == 0 { 9 } else { 0 };
    other["protocol_version"] = json!(ProtocolVersion::new(1, minor).to_string());
    other["version_skew"] = json!(false);
    let (_, step) = handshake(&mut m, other);
    let HandshakeStep::Ready { info, .. } = step else {
        panic!("not ready")
    };
    assert!(info.version_skew);
}

#[test]
fn each_channel_numbers_its_own_frames_from_zero_on_every_connection() {
    let mut m = machine();
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    assert_eq!(
        send(&mut m, "m", SendKind::Event("say"), 5),
        ChannelGo::Send { seq: 0 }
    );
    assert_eq!(
        send(&mut m, "old", SendKind::Binary, 5),
        ChannelGo::Send { seq: 0 }
    );
    assert_eq!(
        send(&mut m, "m", SendKind::Event("say"), 5),
        ChannelGo::Send { seq: 1 }
    );
    assert_eq!(
        send(&mut m, "old", SendKind::Event("x"), 5),
        ChannelGo::Send { seq: 1 }
    );
    m.socket_closed();
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    assert_eq!(
        send(&mut m, "m", SendKind::Event("say"), 5),
        ChannelGo::Send { seq: 0 }
    );
}

#[test]
fn frames_the_descriptor_does_not_allow_are_refused_and_take_no_seq() {
    let mut m = machine();
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    let refused =
        |m: &mut ConnectionMachine, channel: &str, kind| match m.channel_frame(channel, kind, 1) {
            Err(ClientError::Channel(error)) => error,
            other => panic!("{channel}: {other:?}"),
        };
    assert!(matches!(
        refused(&mut m, "nope", SendKind::Binary),
        ChannelSendError::Unknown { .. }
    ));
    assert!(matches!(
        refused(&mut m, "m", SendKind::Binary),
        ChannelSendError::BinaryRefused { .. }
    ));
    assert!(matches!(
        refused(&mut m, "m", SendKind::Event("shout")),
        ChannelSendError::EventNotDeclared { .. }
    ));
    assert_eq!(
        send(&mut m, "m", SendKind::Event("say"), 1),
        ChannelGo::Send { seq: 0 }
    );
}

#[test]
fn bulk_credit_is_spent_up_to_the_limit_then_waits_for_a_grant() {
    let mut m = machine();
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    assert_eq!(m.credit("e"), Some(100));
    assert_eq!(
        send(&mut m, "e", SendKind::Binary, 60),
        ChannelGo::Send { seq: 0 }
    );
    assert_eq!(
        send(&mut m, "e", SendKind::Binary, 40),
        ChannelGo::Send { seq: 1 }
    );
    assert_eq!(m.credit("e"), Some(0));
    // At the limit: the next byte waits, and waiting takes no seq.
    assert_eq!(
        send(&mut m, "e", SendKind::Binary, 1),
        ChannelGo::AwaitCredit { left: 0 }
    );
    assert!(m.credit_granted("e", 30));
    assert_eq!(
        send(&mut m, "e", SendKind::Binary, 31),
        ChannelGo::AwaitCredit { left: 30 }
    );
    assert_eq!(
        send(&mut m, "e", SendKind::Binary, 30),
        ChannelGo::Send { seq: 2 }
    );
    // Grants add up.
    assert!(m.credit_granted("e", 10) && m.credit_granted("e", 15));
    assert_eq!(m.credit("e"), Some(25));
}

#[test]
fn a_frame_larger_than_the_whole_credit_is_refused_at_once() {
    let mut m = machine();
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    assert!(matches!(
        m.channel_frame("e", SendKind::Binary, 101),
        Err(ClientError::Channel(ChannelSendError::OverCredit {
            bytes: 101,
            credit: 100,
            ..
        }))
    ));
    assert_eq!(m.credit("e"), Some(100));
}

#[test]
fn without_credit_in_the_descriptor_nothing_is_counted() {
    let mut m = machine();
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    assert_eq!(m.credit("old"), None);
    assert_eq!(
        send(&mut m, "old", SendKind::Binary, 10 << 20),
        ChannelGo::Send { seq: 0 }
    );
    assert!(
        !m.credit_granted("old", 5),
        "a grant for an uncounted channel is ignored"
    );
    assert!(!m.credit_granted("m", 5));
    assert!(!m.credit_granted("nope", 5));
}

#[test]
fn credit_in_a_descriptor_is_not_counted_unless_the_connection_has_bulk_credit() {
    let mut m = machine();
    let mut answer = result("s", "e", json!({"outcome": "new"}), channels());
    answer["features"] = json!({"bulk_credit": false});
    ready(&mut m, answer);
    assert_eq!(m.credit("e"), None);
    assert_eq!(
        send(&mut m, "e", SendKind::Binary, 1 << 20),
        ChannelGo::Send { seq: 0 }
    );
}

#[test]
fn credit_starts_over_from_the_descriptor_on_a_new_connection() {
    let mut m = machine();
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    assert_eq!(
        send(&mut m, "e", SendKind::Binary, 100),
        ChannelGo::Send { seq: 0 }
    );
    m.socket_closed();
    assert!(!m.credit_granted("e", 5), "no connection, no credit");
    ready(
        &mut m,
        result("s", "e", json!({"outcome": "new"}), channels()),
    );
    assert_eq!(m.credit("e"), Some(100));
}

#[test]
fn responses_are_read_and_everything_else_is_not() {
    let (id, outcome) = read_response(br#"{"id":"a","result":{"x":1}}"#).unwrap();
    assert_eq!((id.as_str(), outcome.unwrap()), ("a", json!({"x": 1})));
    let (_, outcome) =
        read_response(br#"{"id":"b","error":{"code":"busy","message":"m"}}"#).unwrap();
    assert_eq!(
        outcome.unwrap_err().code,
        super::super::ReceivedErrorCode::from(ErrorCode::Busy)
    );
    let (_, outcome) = read_response(br#"{"id":"c","error":7}"#).unwrap();
    assert_eq!(
        outcome.unwrap_err().code,
        super::super::ReceivedErrorCode::from(ErrorCode::ProtocolError)
    );
    for other in [
        &br#"{"event":"x","payload":{}}"#[..],
        br#"{"id":"d","method":"m","params":{}}"#,
        br#"{"id":"e","result":1,"error":{}}"#,
        br#"{"result":1}"#,
        b"[1]",
        b"not json",
    ] {
        assert!(
            read_response(other).is_none(),
            "{}",
            String::from_utf8_lossy(other)
        );
    }
}

#[test]
fn a_host_only_channel_is_refused_locally_and_takes_no_seq() {
    let mut m = machine();
    let channels = json!([
        {"name": "diagnostics", "events": ["report"], "binary": false, "direction": "host_to_clients"},
        {"name": "future", "events": ["*"], "binary": true, "direction": "sideways"},
        {"name": "m", "events": ["say"], "binary": false},
    ]);
    ready(
        &mut m,
        result("s1", "e1", json!({"outcome": "new"}), channels),
    );
    for channel in ["diagnostics", "future"] {
        let refused = m
            .channel_frame(channel, SendKind::Event("report"), 2)
            .expect_err("host → clients only");
        assert_eq!(
            refused,
            ClientError::Channel(ChannelSendError::HostToClients {
                channel: channel.into()
            })
        );
    }
    assert_eq!(
        send(&mut m, "m", SendKind::Event("say"), 2),
        ChannelGo::Send { seq: 0 }
    );
}

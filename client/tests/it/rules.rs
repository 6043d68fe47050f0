//! The client rules both clients implement, run on the Rust side: the cases of
//! `protocol/tests/vectors/client-rules.json` against the protocol's version rules
//! ([`VersionPair::check`], [`Verdict::assess`]), the client's feature preflight
//! ([`carrier_client::preflight`]) and its connection machine ([`ConnectionMachine`]): versions
//! judged at the handshake, preflight after it, the seq line across reconnects and session
//! switches, and bulk credit. The JavaScript client runs the same file
//! (`js/test/client-rules.test.js`).

use std::collections::BTreeMap;

use carrier_client::{
    AppInfo, ChannelGo, ChannelSendError, ClientError, ConnectionMachine, HandshakeStep,
    ReceivedError, SendKind,
};
use carrier_protocol::version::{
    Compatibility, Incompatibility, ProtocolVersion, Side, Verdict, VersionPair,
};
use serde_json::{json, Value};

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../protocol/tests/vectors/client-rules.json"
);

fn vectors() -> Value {
    let text = std::fs::read_to_string(VECTORS)
        .unwrap_or_else(|err| panic!("cannot read {VECTORS}: {err}"));
    serde_json::from_str(&text).expect("the rule file is JSON")
}

fn cases<'a>(all: &'a Value, key: &str) -> &'a [Value] {
    let list = all[key].as_array().expect("a list of cases");
    assert!(!list.is_empty(), "no {key} cases");
    list
}

fn name(case: &Value) -> &str {
    case["case"].as_str().expect("every case is named")
}

/// The base handshake result with `overrides`' top-level fields in place of its own.
fn handshake_result(all: &Value, overrides: &Value) -> Value {
    let mut result = all["handshake_result"].clone();
    for (key, value) in overrides.as_object().into_iter().flatten() {
        result[key] = value.clone();
    }
    result
}

fn machine() -> ConnectionMachine {
    ConnectionMachine::new(AppInfo {
        name: "rules".into(),
        version: "0".into(),
    })
}

/// Opens a socket on `m`, checks the resume its handshake asks for, and answers it with `result`.
fn handshake(m: &mut ConnectionMachine, asks: Option<&Value>, result: Value) -> HandshakeStep {
    m.socket_closed();
    let (frame, _) = m.socket_opened();
    if let Some(asks) = asks {
        let asked = frame["params"]
            .get("resume")
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(&asked, asks, "the resume the handshake asks for");
    }
    let id = frame["id"].as_str().expect("a handshake id").to_owned();
    m.handshake_answered(&id, Ok(result))
        .expect("the machine awaits its handshake")
}

fn ready(m: &mut ConnectionMachine, asks: Option<&Value>, result: Value) {
    match handshake(m, asks, result) {
        HandshakeStep::Ready { .. } => {}
        HandshakeStep::Failed(error) => panic!("handshake failed: {error}"),
    }
}

fn pair(value: &Value) -> Option<VersionPair> {
    VersionPair::parse(
        value["protocol_version"].as_str()?,
        value["min_compatible_protocol"].as_str()?,
    )
}

fn side(side: Side) -> &'static str {
    side.as_str()
}

/// The case's verdict as the protocol's functions reach it.
fn verdict(client: VersionPair, server: Option<VersionPair>) -> Value {
    let Some(server) = server else {
        return json!({"verdict": "unreadable"});
    };
    let why = match client.check(&server) {
        Compatibility::Compatible { .. } => None,
        Compatibility::Incompatible(Incompatibility::MajorMismatch) => Some("major_mismatch"),
        Compatibility::Incompatible(Incompatibility::PeerTooOld) => Some("server_too_old"),
        Compatibility::Incompatible(Incompatibility::SelfTooOld) => Some("client_too_old"),
    };
    match (Verdict::assess(client, server), why) {
        (Verdict::Compatible, None) => json!({"verdict": "compatible"}),
        (Verdict::Skew { update }, None) => json!({"verdict": "skew", "update": side(update)}),
        (Verdict::Incompatible { update }, Some(why)) => {
            json!({"verdict": "incompatible", "why": why, "update": side(update)})
        }
        (verdict, why) => panic!("check and assess disagree: {verdict:?}, {why:?}"),
    }
}

#[test]
fn versions_are_judged_by_the_shared_cases() {
    let all = vectors();
    let mut through_the_machine = 0;
    for case in cases(&all, "versions") {
        let client = pair(&case["client"]).expect("the client's pair is readable");
        let expect = &case["expect"];
        assert_eq!(
            &verdict(client, pair(&case["server"])),
            expect,
            "{}",
            name(case)
        );
        if client != VersionPair::CURRENT {
            continue;
        }
        // This build's client: its machine judges the server's handshake result the same way.
        through_the_machine += 1;
        let result = handshake_result(&all, &case["server"]);
        let step = handshake(&mut machine(), None, result);
        match (expect["verdict"].as_str(), step) {
            (Some("compatible" | "skew"), HandshakeStep::Ready { info, .. }) => {
                assert_eq!(
                    info.version_skew,
                    expect["verdict"] == "skew",
                    "{}",
                    name(case)
                );
            }
            (Some("incompatible"), HandshakeStep::Failed(ClientError::Preflight { error, .. })) => {
                let error = serde_json::to_value(&error).expect("an error object");
                assert_eq!(error["code"], "version_incompatible", "{}", name(case));
                assert_eq!(error["effect_state"], "none", "{}", name(case));
                assert_eq!(
                    error["data"],
                    json!({"server": case["server"], "client": case["client"]}),
                    "{}",
                    name(case)
                );
            }
            (Some("unreadable"), HandshakeStep::Failed(ClientError::MalformedResponse { .. })) => {}
            (_, step) => panic!("{}: the machine answered {step:?}", name(case)),
        }
    }
    assert!(through_the_machine > 0);
}

fn wire(error: Option<ReceivedError>) -> Value {
    error.map_or(Value::Null, |error| {
        let mut value = serde_json::to_value(&error).expect("an error object");
        // What is compared is the code, the effect and the data; messages are each client's.
        value.as_object_mut().map(|o| o.remove("message"));
        value
    })
}

#[test]
fn feature_preflight_follows_the_shared_cases() {
    let all = vectors();
    let mut through_the_machine = 0;
    for case in cases(&all, "preflight") {
        let method = case["method"].as_str().expect("a method");
        let params = &case["params"];
        let server = &case["server"];
        let protocol: ProtocolVersion = server["protocol_version"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .expect("a readable server protocol");
        let features: BTreeMap<String, bool> =
            serde_json::from_value(server["features"].clone()).expect("feature flags");
        let expect = &case["expect"];
        let refused = carrier_client::preflight(method, params, protocol, &features);
        assert_eq!(&wire(refused), expect, "{}", name(case));
        // Against a server this build can talk to, the machine refuses the same after its
        // handshake.
        let version = protocol.to_string();
        let talks = VersionPair::parse(&version, &version).is_some_and(|server| {
            !matches!(
                VersionPair::CURRENT.check(&server),
                Compatibility::Incompatible(_)
            )
        });
        if !talks {
            continue;
        }
        through_the_machine += 1;
        let mut m = machine();
        ready(&mut m, None, handshake_result(&all, server));
        assert_eq!(&wire(m.preflight(method, params)), expect, "{}", name(case));
    }
    assert!(through_the_machine > 0);
}

#[test]
fn the_seq_line_and_the_resume_point_follow_the_shared_cases() {
    let all = vectors();
    for case in cases(&all, "sessions") {
        let mut m = machine();
        for step in case["steps"].as_array().expect("steps") {
            if let Some(overrides) = step.get("connect") {
                ready(
                    &mut m,
                    Some(&step["asks"]),
                    handshake_result(&all, overrides),
                );
            } else if let Some(seqs) = step.get("events") {
                let delivered: Vec<u64> = seqs
                    .as_array()
                    .expect("seqs")
                    .iter()
                    .filter_map(Value::as_u64)
                    .filter(|&seq| m.session_event(seq))
                    .collect();
                assert_eq!(json!(delivered), step["delivered"], "{}", name(case));
            } else if let Some(method) = step["answered"].as_str() {
                m.answered(method, &step["result"]);
            } else {
                panic!("{}: unknown step {step}", name(case));
            }
        }
    }
}

/// What a send (or a waiting send, after a grant) came to, in the cases' words.
fn outcome(go: Result<ChannelGo, ClientError>) -> (&'static str, Option<u32>) {
    match go {
        Ok(ChannelGo::Send { seq }) => ("sent", Some(seq)),
        Ok(ChannelGo::AwaitCredit { .. }) => ("waits", None),
        Err(ClientError::Channel(ChannelSendError::OverCredit { .. })) => ("too_large", None),
        Err(error) => panic!("the send failed: {error}"),
    }
}

fn expected(step: &Value) -> (&str, Option<u32>) {
    let seq = step["seq"].as_u64().map(|seq| seq as u32);
    (step["then"].as_str().expect("then"), seq)
}

#[test]
fn bulk_credit_follows_the_shared_cases() {
    let all = vectors();
    for case in cases(&all, "credit") {
        let result = handshake_result(&all, &case["connect"]);
        let mut m = machine();
        ready(&mut m, None, result.clone());
        // The machine holds no queue: a send that waits is asked again after each grant.
        let mut waiting: Option<(String, usize)> = None;
        for step in case["steps"].as_array().expect("steps") {
            if let Some(send) = step.get("send") {
                assert!(
                    waiting.is_none(),
                    "{}: one waiting send at a time",
                    name(case)
                );
                let channel = send["channel"].as_str().expect("channel").to_owned();
                let bytes = send["bytes"].as_u64().expect("bytes") as usize;
                let got = outcome(m.channel_frame(&channel, SendKind::Binary, bytes));
                assert_eq!(got, expected(step), "{}: {step}", name(case));
                if got.0 == "waits" {
                    waiting = Some((channel, bytes));
                }
            } else if let Some(grant) = step.get("grant") {
                let channel = grant["channel"].as_str().expect("channel");
                m.credit_granted(channel, grant["bytes"].as_u64().expect("bytes"));
                if let Some((channel, bytes)) = waiting.take() {
                    let got = outcome(m.channel_frame(&channel, SendKind::Binary, bytes));
                    assert_eq!(got, expected(step), "{}: {step}", name(case));
                    if got.0 == "waits" {
                        waiting = Some((channel, bytes));
                    }
                }
            } else if let Some(left) = step.get("credit").and_then(Value::as_object) {
                for (channel, credit) in left {
                    assert_eq!(
                        m.credit(channel),
                        credit.as_u64(),
                        "{}: {channel}",
                        name(case)
                    );
                }
            } else if step.get("reconnect").is_some() {
                ready(&mut m, None, result.clone());
            } else {
                panic!("{}: unknown step {step}", name(case));
            }
        }
    }
}

//! The client's connection logic as a state machine with no I/O and no runtime: what to send
//! when a socket opens (the handshake, with a resume point after a reconnect), what a handshake
//! answer means (versions judged, resume outcome, session binding), which session events are
//! new, how `sessions.start`/`switch` rebind, and, per channel of the current connection, the
//! `seq` of the next frame sent and the bulk credit left.
//!
//! [`Client`](super::Client) feeds it what the transport reports and does what it says; the
//! load generator, which drives its sockets itself, starts its connections with it too.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::error::{ChannelSendError, ClientError, ErrorCode, ReceivedError};
use super::events::ResumeOutcome;
use super::features;
use super::resume::{ResumePoint, SessionCursor};
use carrier_protocol::catalog::Method;
use carrier_protocol::channel_info::ChannelInfo;
use carrier_protocol::methods::{AppInfo, HandshakeInfo};
use carrier_protocol::version::{
    incompatible_error, Compatibility, VersionPair, MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION,
};

const HANDSHAKE: &str = "system.handshake";
/// The feature that makes a client count bulk credit (protocol 1.1).
const BULK_CREDIT: &str = "bulk_credit";

/// What a handshake answer amounted to.
#[derive(Debug, Clone, PartialEq)]
pub enum HandshakeStep {
    /// The connection is ready: requests and channel frames may flow.
    Ready {
        /// The handshake result (with `version_skew` as this client judges it).
        info: Box<HandshakeInfo>,
        /// How the connection was bound, as the application should see it (a fresh binding
        /// after asking to resume is a `reset`).
        outcome: ResumeOutcome,
    },
    /// The handshake failed; the connection should be closed and not retried.
    Failed(ClientError),
}

/// The kind of channel frame about to be sent, for the checks against the descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendKind<'a> {
    /// An opaque binary frame.
    Binary,
    /// An event frame with this name.
    Event(&'a str),
}

/// Whether a channel frame may go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelGo {
    /// Send it with this `seq` (taken; its credit, if counted, is spent).
    Send {
        /// The frame's `seq` on its channel.
        seq: u32,
    },
    /// A bulk channel without enough credit: wait for `channel.credit` and ask again.
    AwaitCredit {
        /// Credit left now.
        left: u64,
    },
}

/// One channel's outbound state on the current connection.
#[derive(Debug, Clone)]
struct Lane {
    next_seq: u32,
    /// Credit left, for a bulk channel whose descriptor carried `credit`; `None`: not counted.
    credit: Option<u64>,
    /// The descriptor's credit: the most that can ever be available at once.
    initial: Option<u64>,
}

/// The connection logic of one client (see the module docs).
#[derive(Debug, Clone)]
pub struct ConnectionMachine {
    client: AppInfo,
    attempt: u64,
    /// The handshake sent on the current socket and not answered yet: its id, and whether it
    /// asked to resume.
    awaiting: Option<(String, bool)>,
    handshake: Option<HandshakeInfo>,
    cursor: SessionCursor,
    ready: bool,
    lanes: HashMap<String, Lane>,
}

impl ConnectionMachine {
    /// A machine for a client that introduces itself as `client` (`{name, version}`).
    pub fn new(client: AppInfo) -> ConnectionMachine {
        ConnectionMachine {
            client,
            attempt: 0,
            awaiting: None,
            handshake: None,
            cursor: SessionCursor::default(),
            ready: false,
            lanes: HashMap::new(),
        }
    }

    /// A socket opened: returns the handshake to send first (`resume` after a reconnect) and
    /// the attempt number it belongs to. Nothing else may be sent until it is answered.
    pub fn socket_opened(&mut self) -> (Value, u64) {
        self.ready = false;
        self.lanes.clear();
        self.attempt += 1;
        let id = format!("hs{}", self.attempt);
        let mut params = json!({
            "protocol_version": PROTOCOL_VERSION,
            "min_compatible_protocol": MIN_COMPATIBLE_PROTOCOL,
            "client": { "name": self.client.name, "version": self.client.version },
        });
        let point = self.cursor.point();
        if let (Some(point), Some(params)) = (point, params.as_object_mut()) {
            params.insert("resume".into(), json!(point));
        }
        self.awaiting = Some((id.clone(), point.is_some()));
        (
            json!({ "id": id, "method": HANDSHAKE, "params": params }),
            self.attempt,
        )
    }

    /// The socket is gone (a break, a close, `disconnect`): nothing may be sent until the next
    /// handshake. The resume point is kept.
    pub fn socket_closed(&mut self) {
        self.ready = false;
        self.awaiting = None;
        self.lanes.clear();
    }

    /// Whether requests and channel frames may be sent.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The latest handshake result (its `session_id` follows rebinding).
    pub fn handshake(&self) -> Option<&HandshakeInfo> {
        self.handshake.as_ref()
    }

    /// Where a reconnect would resume from.
    pub fn resume_point(&self) -> Option<&ResumePoint> {
        self.cursor.point()
    }

    /// Whether `id` is the handshake awaited on the current socket.
    pub fn awaits(&self, id: &str) -> bool {
        self.awaiting
            .as_ref()
            .is_some_and(|(awaited, _)| awaited == id)
    }

    /// The handshake of `attempt` timed out, if it is still the one awaited; `true` then, and
    /// the connection should be closed.
    pub fn handshake_timed_out(&mut self, attempt: u64) -> bool {
        let current = attempt == self.attempt && self.awaiting.is_some();
        if current {
            self.awaiting = None;
        }
        current
    }

    /// The answer to the handshake `id` arrived: `None` when `id` is not the one awaited.
    pub fn handshake_answered(
        &mut self,
        id: &str,
        answer: Result<Value, ReceivedError>,
    ) -> Option<HandshakeStep> {
        if !self.awaits(id) {
            return None;
        }
        let (_, asked_to_resume) = self.awaiting.take()?;
        let result = match answer {
            Ok(result) => result,
            Err(error) => {
                return Some(self.failed(ClientError::Remote {
                    method: HANDSHAKE.into(),
                    error,
                }))
            }
        };
        let mut info: HandshakeInfo = match serde_json::from_value(result) {
            Ok(info) => info,
            Err(error) => return Some(self.failed(malformed(error.to_string()))),
        };
        // The client judges the versions itself: a server whose pair it cannot talk to is
        // refused as the server refuses a client, and `version_skew` is the client's to set.
        let ours = VersionPair::CURRENT;
        let theirs = match VersionPair::new(info.protocol_version, info.min_compatible_protocol) {
            Ok(theirs) => theirs,
            Err(_) => {
                return Some(self.failed(malformed(format!(
                    "min_compatible_protocol {} is above protocol_version {}",
                    info.min_compatible_protocol, info.protocol_version
                ))))
            }
        };
        info.version_skew = match ours.check(&theirs) {
            Compatibility::Compatible { skew } => skew,
            Compatibility::Incompatible(why) => {
                return Some(self.failed(ClientError::Preflight {
                    method: HANDSHAKE.into(),
                    error: incompatible_error(theirs, ours, why).into(),
                }))
            }
        };
        let outcome = self
            .cursor
            .bind(asked_to_resume, info.resume, &info.session_id, &info.epoch);
        // Credit is counted only where the server says this connection has `bulk_credit`
        // (it announced 1.1 and so did this client): a server that grants nothing must never
        // leave a send waiting.
        let credit = info.features.get(BULK_CREDIT) == Some(&true);
        self.lanes = info
            .channels
            .iter()
            .map(|channel| (channel.name.clone(), lane(channel, credit)))
            .collect();
        self.handshake = Some(info.clone());
        self.ready = true;
        Some(HandshakeStep::Ready {
            info: Box::new(info),
            outcome,
        })
    }

    fn failed(&mut self, error: ClientError) -> HandshakeStep {
        self.ready = false;
        HandshakeStep::Failed(error)
    }

    /// A session event with `seq` arrived: `true` when it is new, `false` for a duplicate
    /// replayed after a resume.
    pub fn session_event(&mut self, seq: u64) -> bool {
        self.cursor.accept(seq)
    }

    /// `method` succeeded with `result`: a method the catalog marks as rebinding
    /// (`sessions.start`, `sessions.switch`) moves the connection to the session it names.
    pub fn answered(&mut self, method: &str, result: &Value) {
        let rebinds = Method::from_name(method).is_some_and(|m| m.spec().rebinds_session);
        let session = result.get("session_id").and_then(Value::as_str);
        if let (true, Some(session_id)) = (rebinds, session) {
            self.cursor.rebind(session_id);
            if let Some(info) = self.handshake.as_mut() {
                info.session_id = session_id.to_owned();
            }
        }
    }

    /// The `unsupported_feature` error `method` with `params` gets locally, if the server
    /// lacks what it needs.
    pub fn preflight(&self, method: &str, params: &Value) -> Option<ReceivedError> {
        let info = self.handshake.as_ref()?;
        features::preflight(method, params, info.protocol_version, &info.features)
    }

    /// Whether a frame of `kind` with a body of `body_len` bytes may go on `channel` now. On
    /// [`ChannelGo::Send`] its `seq` is taken (0, 1, 2 … per channel and connection) and, on a
    /// bulk channel with credit, the body's bytes are spent.
    pub fn channel_frame(
        &mut self,
        channel: &str,
        kind: SendKind<'_>,
        body_len: usize,
    ) -> Result<ChannelGo, ClientError> {
        if !self.ready {
            return Err(ClientError::NotConnected);
        }
        let descriptor = self
            .handshake
            .as_ref()
            .and_then(|info| info.channel(channel));
        let unknown = || ChannelSendError::Unknown {
            channel: channel.to_owned(),
        };
        let descriptor = descriptor.ok_or_else(unknown)?;
        if !descriptor.clients_send() {
            Err(ChannelSendError::HostToClients {
                channel: channel.to_owned(),
            })?;
        }
        match kind {
            SendKind::Binary if !descriptor.binary => Err(ChannelSendError::BinaryRefused {
                channel: channel.to_owned(),
            })?,
            SendKind::Event(event) if !descriptor.declares(event) => {
                Err(ChannelSendError::EventNotDeclared {
                    channel: channel.to_owned(),
                    event: event.to_owned(),
                })?
            }
            _ => {}
        }
        let lane = self.lanes.get_mut(channel).ok_or_else(unknown)?;
        let bytes = body_len as u64;
        if let (Some(left), Some(initial)) = (lane.credit.as_mut(), lane.initial) {
            if bytes > initial {
                Err(ChannelSendError::OverCredit {
                    channel: channel.to_owned(),
                    bytes,
                    credit: initial,
                })?;
            }
            if bytes > *left {
                return Ok(ChannelGo::AwaitCredit { left: *left });
            }
            *left -= bytes;
        }
        let seq = lane.next_seq;
        lane.next_seq = lane.next_seq.wrapping_add(1);
        Ok(ChannelGo::Send { seq })
    }

    /// `channel.credit` granted `bytes` more on `channel`; `false` when it names no counted
    /// channel of this connection (ignored).
    pub fn credit_granted(&mut self, channel: &str, bytes: u64) -> bool {
        match self
            .lanes
            .get_mut(channel)
            .and_then(|lane| lane.credit.as_mut())
        {
            Some(left) => {
                *left = left.saturating_add(bytes);
                true
            }
            None => false,
        }
    }

    /// Credit left on `channel` (`None`: not counted).
    pub fn credit(&self, channel: &str) -> Option<u64> {
        self.lanes.get(channel).and_then(|lane| lane.credit)
    }
}

fn lane(channel: &ChannelInfo, credit_on: bool) -> Lane {
    // Only a bulk channel whose descriptor carries `credit` (a 1.1 server) is counted.
    let credit = channel.credit.filter(|_| credit_on && channel.is_bulk());
    Lane {
        next_seq: 0,
        credit,
        initial: credit,
    }
}

fn malformed(reason: String) -> ClientError {
    ClientError::MalformedResponse {
        method: HANDSHAKE.into(),
        reason,
    }
}

/// Reads a text frame as a response: `Some((id, result or error))`, `None` for events,
/// requests and anything unreadable.
pub fn read_response(text: &[u8]) -> Option<(String, Result<Value, ReceivedError>)> {
    let Ok(Value::Object(mut frame)) = serde_json::from_slice::<Value>(text) else {
        return None;
    };
    if frame.contains_key("method") || frame.contains_key("event") {
        return None;
    }
    let id = frame.get("id")?.as_str()?.to_owned();
    let outcome = match (frame.remove("result"), frame.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(wire_error(error)),
        _ => return None,
    };
    Some((id, outcome))
}

/// An error object as received; one that does not parse becomes a `protocol_error`.
pub(crate) fn wire_error(error: Value) -> ReceivedError {
    serde_json::from_value(error.clone()).unwrap_or_else(|_| ReceivedError {
        code: ErrorCode::ProtocolError.into(),
        message: format!("unreadable error object: {error}"),
        effect_state: None,
        data: None,
    })
}

#[cfg(test)]
mod tests {
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
        let refused = |m: &mut ConnectionMachine, channel: &str, kind| match m
            .channel_frame(channel, kind, 1)
        {
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
}

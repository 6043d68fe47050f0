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
mod tests;

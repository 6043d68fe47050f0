//! One load-generator connection: a fastwebsockets client (the carrier's own stack) over TCP.
//!
//! Every frame is masked with a fresh random key, as RFC 6455 asks of clients. A server may skip
//! unmasking for an all-zero key (Node `ws` does), so a zero key would favour some servers over
//! others; instead the payload is copied into a scratch buffer and masked there, which leaves
//! the caller's message untouched for the next send. That copy is client-side work and the
//! same for every server.

use std::time::Duration;

use super::error::LoadError;
use super::plan::Plan;
use super::target::Target;
use bytes::Bytes;
use fastwebsockets::{FragmentCollector, Frame, OpCode, Payload, WebSocketError};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
// Every mode dials through the carrier client's one dialer (owner check, upgrade), and the
// carrier modes start with the client's own handshake (docs/protocol.md, "Handshake").
use carrier::client::{
    dial, read_response, AppInfo, ConnectionMachine, DialedSocket, HandshakeStep, TransportError,
    WsOptions,
};
use carrier::discovery::listener::DialError;

/// A received data message: its opcode and payload.
pub(crate) struct Message {
    pub(crate) opcode: OpCode,
    pub(crate) payload: Bytes,
}

/// An upgraded client connection.
pub(crate) struct BenchSocket {
    ws: FragmentCollector<TokioIo<Upgraded>>,
    /// Where each outgoing payload is masked.
    scratch: Vec<u8>,
}

/// A masked frame carrying `payload` (masked in place by the caller) under `key`.
fn masked<'a>(opcode: OpCode, key: [u8; 4], payload: &'a mut [u8]) -> Frame<'a> {
    Frame::new(true, opcode, Some(key), Payload::BorrowedMut(payload))
}

impl BenchSocket {
    /// Opens a TCP connection and performs the WebSocket upgrade, within `timeout`.
    pub(crate) async fn connect(target: &Target, timeout: Duration) -> Result<Self, LoadError> {
        let mut ws = upgrade(target, timeout).await?;
        // Payloads are masked here, in a scratch buffer (module docs). fastwebsockets would
        // then send its automatic pong and close replies unmasked, so this client answers
        // pings and closes itself ([`BenchSocket::recv`]).
        ws.set_auto_apply_mask(false);
        ws.set_auto_close(false);
        ws.set_auto_pong(false);
        Ok(BenchSocket {
            ws: FragmentCollector::new(ws),
            scratch: Vec::new(),
        })
    }

    /// Sends one message (or control frame) with `payload`, masked under a fresh random key.
    pub(crate) async fn send(&mut self, opcode: OpCode, payload: &[u8]) -> Result<(), LoadError> {
        let key: [u8; 4] = rand::random();
        self.scratch.clear();
        self.scratch.extend_from_slice(payload);
        fastwebsockets::unmask(&mut self.scratch, key);
        let frame = masked(opcode, key, &mut self.scratch);
        self.ws.write_frame(frame).await.map_err(LoadError::from)
    }

    /// The next text or binary message (pings are answered, pongs skipped). A close is
    /// answered and reported as an error.
    pub(crate) async fn recv(&mut self) -> Result<Message, LoadError> {
        loop {
            let frame = self.ws.read_frame().await?;
            match frame.opcode {
                OpCode::Ping => self.send(OpCode::Pong, &frame.payload).await?,
                OpCode::Text | OpCode::Binary => {
                    let payload = match frame.payload {
                        Payload::Bytes(b) => b.freeze(),
                        other => Bytes::copy_from_slice(&other),
                    };
                    return Ok(Message {
                        opcode: frame.opcode,
                        payload,
                    });
                }
                OpCode::Close => {
                    let code = (frame.payload.len() >= 2)
                        .then(|| u16::from_be_bytes([frame.payload[0], frame.payload[1]]));
                    let _ = self.send(OpCode::Close, &frame.payload).await;
                    return Err(LoadError::Closed(code));
                }
                _ => continue,
            }
        }
    }

    /// Sends a JSON-RPC style request and waits for the response with the same id, skipping
    /// events. Returns an error for an `error` response.
    pub(crate) async fn request(&mut self, id: &[u8], frame: &[u8]) -> Result<(), LoadError> {
        self.send(OpCode::Text, frame).await?;
        loop {
            let msg = self.recv().await?;
            if msg.opcode != OpCode::Text {
                continue;
            }
            if let Some(outcome) = response_outcome(&msg.payload, id) {
                return outcome;
            }
        }
    }

    /// The carrier's `system.handshake`, as the carrier client starts: the frame and the
    /// judgement of the answer are the client's [`ConnectionMachine`]'s.
    pub(crate) async fn carrier_handshake(&mut self) -> Result<(), LoadError> {
        let mut machine = machine();
        let (frame, _) = machine.socket_opened();
        self.send(OpCode::Text, frame.to_string().as_bytes())
            .await?;
        loop {
            let msg = self.recv().await?;
            if msg.opcode != OpCode::Text {
                continue;
            }
            let Some((id, answer)) = read_response(&msg.payload) else {
                continue;
            };
            match machine.handshake_answered(&id, answer) {
                Some(HandshakeStep::Ready { .. }) => return Ok(()),
                Some(HandshakeStep::Failed(error)) => {
                    return Err(LoadError::Rejected(error.to_string()))
                }
                None => continue,
            }
        }
    }

    /// Sends a normal close and waits briefly for the server's answer.
    pub(crate) async fn close(mut self) {
        if self
            .send(OpCode::Close, &1000u16.to_be_bytes())
            .await
            .is_err()
        {
            return;
        }
        // Read until the server's close (or EOF), so it is the server that ends the TCP stream.
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            while let Ok(frame) = self.ws.read_frame().await {
                if frame.opcode == OpCode::Close {
                    break;
                }
            }
        })
        .await;
    }
}

/// A TCP connection to `target` upgraded to a WebSocket (TCP_NODELAY on), within `timeout`,
/// through the carrier client's dialer: the listener's owner is checked before the upgrade
/// (which carries the token) is written.
pub(crate) async fn upgrade(target: &Target, timeout: Duration) -> Result<DialedSocket, LoadError> {
    let mut options = WsOptions::new(&target.url).connect_timeout(timeout);
    if let Some(token) = &target.token {
        options = options.token(token);
    }
    match dial(&options, |_| {}).await {
        Ok(dialed) => Ok(dialed.socket),
        Err(TransportError::ForeignListener(refusal)) => {
            Err(LoadError::Listener(DialError::Foreign(refusal)))
        }
        Err(TransportError::UnattributedListener(refusal)) => {
            Err(LoadError::Listener(DialError::Unattributed(refusal)))
        }
        Err(error) => Err(LoadError::Connect(error.to_string())),
    }
}

/// The client machine a load connection starts with (it names itself `carrier-bench`).
fn machine() -> ConnectionMachine {
    ConnectionMachine::new(AppInfo {
        name: "carrier-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

/// The `system.handshake` request every carrier client starts with, from the client's
/// machine, and its id.
pub(crate) fn handshake_frame() -> (String, String) {
    let (frame, _) = machine().socket_opened();
    let id = frame["id"].as_str().unwrap_or_default().to_owned();
    (id, frame.to_string())
}

/// `Some(result)` when `text` is the response to `id`; `None` for anything else (events,
/// other ids, non-JSON).
///
/// A response that starts `{"id":"<id>","result":` (the carrier writes its answers so) is
/// taken without parsing the rest: the client's work per message then stays as small as an
/// echo client's, so a client-bound run compares servers rather than clients. Anything else
/// is parsed.
pub(crate) fn response_outcome(text: &[u8], id: &[u8]) -> Option<Result<(), LoadError>> {
    #[derive(Deserialize)]
    struct IdAndError<'a> {
        #[serde(borrow)]
        id: Option<&'a str>,
        error: Option<serde_json::Value>,
    }
    let answered = text
        .strip_prefix(b"{\"id\":\"")
        .and_then(|rest| rest.strip_prefix(id))
        .is_some_and(|rest| rest.starts_with(b"\",\"result\":"));
    if answered {
        return Some(Ok(()));
    }
    let r: IdAndError<'_> = serde_json::from_slice(text).ok()?;
    if r.id.map(str::as_bytes) != Some(id) {
        return None;
    }
    Some(match r.error {
        None => Ok(()),
        Some(e) => Err(LoadError::Rejected(e.to_string())),
    })
}

impl From<WebSocketError> for LoadError {
    fn from(e: WebSocketError) -> Self {
        match e {
            WebSocketError::ConnectionClosed | WebSocketError::UnexpectedEOF => {
                LoadError::Closed(None)
            }
            other => LoadError::Io(other.to_string()),
        }
    }
}

/// Opens `n` connections (at most 64 upgrades in flight), handshaking when the mode speaks the
/// carrier protocol. Fails on the first connection that cannot be opened.
pub(crate) async fn open_all(
    plan: &Plan,
    target: &Target,
    n: usize,
) -> Result<Vec<BenchSocket>, LoadError> {
    use futures_util::{stream, StreamExt, TryStreamExt};
    let carrier = plan.mode.is_carrier();
    let timeout = plan.connect_timeout;
    stream::iter(0..n)
        .map(|_| async move {
            let mut socket = BenchSocket::connect(target, timeout).await?;
            if carrier {
                tokio::time::timeout(timeout, socket.carrier_handshake())
                    .await
                    .map_err(|_| LoadError::Connect("handshake timed out".into()))??;
            }
            Ok::<_, LoadError>(socket)
        })
        .buffered(64)
        .try_collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_matched_by_id_and_events_skipped() {
        assert!(matches!(
            response_outcome(br#"{"id":"p1","result":{}}"#, b"p1"),
            Some(Ok(()))
        ));
        assert!(matches!(
            response_outcome(br#"{"id":"p1","error":{"code":"x"}}"#, b"p1"),
            Some(Err(LoadError::Rejected(_)))
        ));
        assert!(response_outcome(br#"{"event":"e","payload":{}}"#, b"p1").is_none());
        assert!(response_outcome(br#"{"id":"p2","result":{}}"#, b"p1").is_none());
        assert!(response_outcome(b"not json", b"p1").is_none());
        // The prefix the carrier writes, and the same answers in other orders or spacing.
        assert!(response_outcome(br#"{"id":"p12","result":{}}"#, b"p1").is_none());
        assert!(matches!(
            response_outcome(br#"{"result":{},"id":"p1"}"#, b"p1"),
            Some(Ok(()))
        ));
        assert!(matches!(
            response_outcome(br#"{ "id": "p1", "error": {"code":"x"}}"#, b"p1"),
            Some(Err(LoadError::Rejected(_)))
        ));
    }
}

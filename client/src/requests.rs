//! Requests: wait for the connection to be ready, take room in the outbound buffer, send under
//! the client's lock (so no request overtakes the next handshake), then wait for the answer.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::error::ClientError;
use super::inner::{Inner, Pending, Phase};
use super::subscribers::lock;
use super::transport::TransportError;

/// A request on the wire: its id and where its answer arrives.
type Sent = (String, oneshot::Receiver<Result<Value, ClientError>>);

impl Inner {
    pub(crate) async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        if method == "system.handshake" {
            return Err(ClientError::ReservedMethod);
        }
        let deadline = Instant::now() + timeout;
        let timed_out = || ClientError::Timeout {
            method: method.to_owned(),
            after: timeout,
        };
        let mut phase = self.phase.subscribe();
        let (id, answer) = loop {
            let settled = tokio::time::timeout_at(
                deadline,
                phase.wait_for(|phase| !matches!(phase, Phase::Handshaking | Phase::Reconnecting)),
            )
            .await
            .map_err(|_| timed_out())?
            .map(|phase| phase.clone())
            .map_err(|_| ClientError::NotConnected)?;
            match settled {
                Phase::Ready => {}
                Phase::Closed(error) => return Err(error),
                _ => return Err(ClientError::NotConnected),
            }
            let id = format!("c{}", self.next_id.fetch_add(1, Ordering::Relaxed));
            let text = json!({ "id": id, "method": method, "params": params }).to_string();
            // Room first (this may wait while the buffer is full), then the send under the lock.
            let room = tokio::time::timeout_at(deadline, self.transport.reserve(text.len()))
                .await
                .map_err(|_| timed_out())??;
            if let Some(sent) = self.send_request(id, method, &params, text, room)? {
                break sent;
            }
            // The connection changed between the phase check and the send; wait for the phase
            // to catch up, then look again.
            tokio::time::timeout_at(deadline, phase.changed())
                .await
                .map_err(|_| timed_out())?
                .map_err(|_| ClientError::NotConnected)?;
        };
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(ClientError::ConnectionLost {
                method: method.to_owned(),
            }),
            Err(_) => {
                lock(&self.core).pending.remove(&id);
                Err(timed_out())
            }
        }
    }

    /// Sends one request if the connection is ready: `Ok(None)` when it is not (yet).
    fn send_request(
        &self,
        id: String,
        method: &str,
        params: &Value,
        text: String,
        room: super::transport::Room,
    ) -> Result<Option<Sent>, ClientError> {
        let mut core = lock(&self.core);
        if !core.machine.is_ready() {
            return Ok(None);
        }
        if let Some(error) = core.machine.preflight(method, params) {
            return Err(ClientError::Preflight {
                method: method.to_owned(),
                error,
            });
        }
        // Sent under the lock: the machine is not ready again until the next handshake is
        // answered, and the transport reports a new socket before it accepts frames for it.
        match self.transport.send_text_in(text, room) {
            Ok(()) => {}
            // The socket just went away and the transport has not said so yet; nothing was
            // sent, so the request can wait for the reconnect like any other.
            Err(TransportError::NotConnected) => return Ok(None),
            Err(error) => return Err(error.into()),
        }
        let (reply, answer) = oneshot::channel();
        core.pending.insert(
            id.clone(),
            Pending {
                method: method.to_owned(),
                reply,
            },
        );
        Ok(Some((id, answer)))
    }
}

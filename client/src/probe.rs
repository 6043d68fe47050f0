//! `GET /healthz` probing: is a carrier listening on this address, and whose listener is it?
//!
//! A probe carries no token, so it may go to any TCP listener; it reports the listener's owner
//! ([`Listener`]) so that a caller such as `carrier doctor` sends a token only where it may. A
//! Unix socket is probed only when it is this user's: the peer credentials say so before
//! anything is written, and another user's socket is refused with nothing sent (a socket is
//! never a port someone else happens to hold, so there is nothing to report about it).

use std::time::Duration;

use super::transport::TransportError;
use bytes::Bytes;
use carrier_discovery::listener::{DialError, Endpoint, Listener, OwnerCheck};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::HOST;
use hyper::rt::{Read, Write};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// What answered a health probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// `200 {"status":"ok"}`: a carrier server.
    Carrier,
    /// Something else answered HTTP (another program on the port, or an unhealthy server).
    Other {
        /// The HTTP status.
        status: u16,
        /// The start of the body, for the report.
        body: String,
    },
}

/// What a health probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Whose listener answered. Only [`Listener::may_receive_token`] listeners may be sent a
    /// token afterwards (by a dial that checks again).
    pub listener: Listener,
    /// What it answered.
    pub health: Health,
}

/// The most of a health answer that is read; a carrier's is a dozen bytes.
const MAX_BODY: usize = 4096;

/// Sends `GET /healthz` to the loopback address `addr` (no upgrade, no token, so to any TCP
/// listener) or to a Unix socket of this user's, within `timeout`, and says whose listener
/// answered. An error means nothing usable answered: closed port, timeout, or not HTTP — or,
/// for a socket, that it is not this user's ([`TransportError::ForeignListener`] /
/// [`TransportError::UnattributedListener`], nothing sent).
pub async fn probe_health(
    endpoint: impl Into<Endpoint>,
    timeout: Duration,
) -> Result<Probe, TransportError> {
    probe_health_at(endpoint, "/", timeout).await
}

/// [`probe_health`] for a carrier mounted at `mount_path` of a host's own server: `GET
/// MOUNT_PATH/healthz` (`/assist/healthz` for `/assist` or `/assist/`; `/healthz` for `/`),
/// which a carrier mounted with its routes (axum's `nest_service`) answers. A mount of the
/// socket alone (`route_service`) has no such route: the host's server answers it, and only a
/// handshake can tell.
pub async fn probe_health_at(
    endpoint: impl Into<Endpoint>,
    mount_path: &str,
    timeout: Duration,
) -> Result<Probe, TransportError> {
    let endpoint = endpoint.into();
    let healthz = format!("{}/healthz", mount_path.trim_end_matches('/'));
    let healthz = healthz.as_str();
    let failed = |reason: String| TransportError::Connect {
        addr: endpoint.to_string(),
        reason,
    };
    let probe =
        async {
            match &endpoint {
                Endpoint::Tcp(addr) => {
                    let checked = OwnerCheck::any_owner().connect(*addr).await.map_err(
                        |error| match error {
                            DialError::Connect { reason, .. } => failed(reason),
                            other => failed(other.to_string()),
                        },
                    )?;
                    ask_health(
                        TokioIo::new(checked.stream),
                        checked.listener,
                        &endpoint,
                        healthz,
                    )
                    .await
                }
                #[cfg(unix)]
                Endpoint::Unix(path) => {
                    let checked = OwnerCheck::own_user().connect_unix(path).await.map_err(
                        |error| match error {
                            DialError::Connect { reason, .. } => failed(reason),
                            DialError::Foreign(refusal) => refusal.into(),
                            DialError::Unattributed(refusal) => refusal.into(),
                            other => failed(other.to_string()),
                        },
                    )?;
                    ask_health(
                        TokioIo::new(checked.stream),
                        checked.listener,
                        &endpoint,
                        healthz,
                    )
                    .await
                }
                #[cfg(not(unix))]
                Endpoint::Unix(_) => Err(failed(
                    "Unix sockets are not available on this system".into(),
                )),
            }
        };
    tokio::time::timeout(timeout, probe)
        .await
        .map_err(|_| failed(format!("no answer within {timeout:?}")))?
}

/// `GET healthz` over `io`, already connected to `listener`.
async fn ask_health<IO>(
    io: IO,
    listener: Listener,
    endpoint: &Endpoint,
    healthz: &str,
) -> Result<Probe, TransportError>
where
    IO: Read + Write + Unpin + Send + 'static,
{
    let failed = |reason: String| TransportError::Connect {
        addr: endpoint.to_string(),
        reason,
    };
    let host = match endpoint {
        Endpoint::Tcp(addr) => addr.to_string(),
        Endpoint::Unix(_) => "localhost".to_owned(),
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| failed(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "health probe connection ended with an error");
        }
    });
    let request = Request::get(healthz)
        .header(HOST, host)
        .body(Empty::<Bytes>::new())
        .map_err(|e| failed(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status().as_u16();
    let body = Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let is_ok = serde_json::from_slice::<Value>(&body)
        .ok()
        .is_some_and(|v| v.get("status").and_then(Value::as_str) == Some("ok"));
    let health = if status == 200 && is_ok {
        Health::Carrier
    } else {
        Health::Other {
            status,
            body: String::from_utf8_lossy(&body).chars().take(200).collect(),
        }
    };
    Ok(Probe { listener, health })
}

//! The pipe's connection: the shared client over the shared dialer (owner check, upgrade,
//! handshake), with no reconnect, and the one-line failures a run can end with.

use std::io::Write;
use std::sync::Arc;

use carrier::client::{
    Client, ClientError, ClientOptions, HandshakeInfo, Transport, TransportError, WsClientTransport,
};

use crate::client::failure::{explain, Failure};
use crate::client::session::options;
use crate::client::target::{tokenless_warning, Target};

/// An open pipe connection.
pub(super) struct Opened {
    pub(super) client: Client,
    pub(super) transport: Arc<WsClientTransport>,
    pub(super) info: HandshakeInfo,
}

/// Connects to `target` and checks that the carrier has `channel`. `outbound` bounds what is
/// queued for the socket and `inbound` what is received and not yet written out (bytes).
pub(super) async fn open(
    target: &Target,
    channel: &str,
    outbound: usize,
    inbound: usize,
    err: &mut impl Write,
) -> Result<Opened, Failure> {
    let url = target.url.as_str();
    let options = options(target, None)
        .map_err(|error| explain(url, &error))?
        .outbound_budget(outbound)
        .no_reconnect();
    let transport = Arc::new(WsClientTransport::new(options));
    let client = Client::with_options(
        Arc::clone(&transport) as Arc<dyn Transport>,
        ClientOptions {
            name: "carrier-pipe".into(),
            inbound_backlog: inbound,
            ..ClientOptions::default()
        },
    );
    let connected = client.connect().await;
    if let Some(warning) = transport
        .last_listener()
        .and_then(|listener| tokenless_warning(url, &listener))
    {
        let _ = writeln!(err, "carrier: {warning}");
    }
    let info = connected.map_err(|error| refused(url, &error))?;
    if info.channel(channel).is_none() {
        let names: Vec<&str> = info.channels.iter().map(|c| c.name.as_str()).collect();
        let known = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        client.disconnect().await;
        return Err(Failure::runtime(format!(
            "{url} has no channel `{channel}` (its channels: {known}); mount one with `carrier serve --channel {channel}:echo`"
        )));
    }
    Ok(Opened {
        client,
        transport,
        info,
    })
}

/// The line for a failed connect: a refused token said the pipe's way, the rest as every
/// client command says it.
fn refused(url: &str, error: &ClientError) -> Failure {
    match error {
        ClientError::Refused { close } if close.is_refusal() => token_refused(url, "close 1008"),
        ClientError::Transport(TransportError::UpgradeRejected { status: 401 }) => {
            token_refused(url, "HTTP 401")
        }
        ClientError::Transport(TransportError::UpgradeRejected { status: 403 }) => {
            Failure::runtime(format!(
                "{url} refused the connection (HTTP 403): this host or origin is not allowed, or the token was refused"
            ))
        }
        ClientError::Transport(TransportError::Io(reason)) => Failure::runtime(format!(
            "the connection to {url} failed during the handshake: {reason}"
        )),
        other => explain(url, other),
    }
}

/// The line for a refused token, whichever way the carrier refused it.
fn token_refused(url: &str, how: &str) -> Failure {
    Failure::runtime(format!(
        "{url} refused the token ({how}): check --token / CARRIER_TOKEN"
    ))
}

/// Why the connection ended when the pipe did not end it: the server's close, or the error
/// that broke it.
pub(super) fn connection_ended(url: &str, transport: &WsClientTransport) -> Failure {
    if let Some(close) = transport.last_close() {
        return match close.code {
            1008 => token_refused(url, "close 1008"),
            code if close.reason.is_empty() => {
                Failure::runtime(format!("{url} closed the connection ({code})"))
            }
            code => Failure::runtime(format!(
                "{url} closed the connection ({code}: {})",
                close.reason
            )),
        };
    }
    match transport.last_error() {
        Some(error) => Failure::runtime(format!("the connection to {url} failed: {error}")),
        None => Failure::runtime(format!("{url} closed the connection")),
    }
}

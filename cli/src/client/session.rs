//! [`Session`]: a client command's connection to its [`Target`] — the client, the handshake's
//! answer, and its event and state feeds.

use std::io::Write;
use std::sync::Arc;

use carrier::client::{
    Client, ClientError, ConnectionState, EventStream, HandshakeInfo, Subscription,
    WsClientTransport, WsOptions,
};
use carrier::discovery::listener::OwnerPolicy;
use carrier::protocol::Role;
use tokio::sync::mpsc::{self, UnboundedReceiver};

use super::failure::{explain, Failure};
use super::target::{tokenless_warning, Target};

pub(crate) fn options(target: &Target, role: Option<Role>) -> Result<WsOptions, ClientError> {
    let mut options = WsOptions::new(&target.url);
    if let Some(token) = &target.token {
        options = options.token(token);
    }
    if let Some(role) = role {
        options = options.role(role);
    }
    if target.owners == OwnerPolicy::AnyOwner {
        options = options.any_owner();
    }
    options.validate()?;
    Ok(options)
}

/// A connected client and its event stream and state feed (the state handler only forwards
/// into a channel, so every decision is made on the command's own task).
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) info: HandshakeInfo,
    pub(crate) events: EventStream,
    pub(crate) states: UnboundedReceiver<ConnectionState>,
    _subscription: Subscription,
}

/// Opens a session with `target`; a listener `--any-owner` reached without the token is named
/// on `err` first, whether or not the session opens.
pub(crate) async fn open(
    target: &Target,
    role: Option<Role>,
    err: &mut impl Write,
) -> Result<Session, Failure> {
    let (transport, session) = match options(target, role) {
        Ok(options) => {
            let transport = Arc::new(WsClientTransport::new(options));
            let session = open_session(Arc::clone(&transport)).await;
            (Some(transport), session)
        }
        Err(error) => (None, Err(error)),
    };
    if let Some(warning) = transport
        .and_then(|t| t.last_listener())
        .and_then(|listener| tokenless_warning(&target.url, &listener))
    {
        let _ = writeln!(err, "carrier: {warning}");
    }
    session.map_err(|error| explain(&target.url, &error))
}

/// A session with the user's own listener at `url` (doctor's handshake).
pub(crate) async fn open_own(
    url: &str,
    token: Option<&str>,
    role: Option<Role>,
) -> Result<Session, ClientError> {
    let target = Target {
        url: url.to_owned(),
        token: token.map(str::to_owned),
        owners: OwnerPolicy::OwnUser,
    };
    open_session(Arc::new(WsClientTransport::new(options(&target, role)?))).await
}

async fn open_session(transport: Arc<WsClientTransport>) -> Result<Session, ClientError> {
    let client = Client::new(transport);
    let events = client.events();
    let (state_tx, states) = mpsc::unbounded_channel();
    let subscription = client.on_state_change(Box::new(move |state| {
        let _ = state_tx.send(state);
    }));
    let info = client.connect().await?;
    Ok(Session {
        client,
        info,
        events,
        states,
        _subscription: subscription,
    })
}

/// Whether a state change means the connection is gone for good (not a reconnect).
pub(crate) fn closed_for_good(state: ConnectionState) -> bool {
    state == ConnectionState::Disconnected
}

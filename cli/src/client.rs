//! Client-side commands of the `carrier` binary (SPEC section 10): `send`, `connect`, `status`
//! and `doctor`. Argument parsing and wiring only; everything else comes from
//! [`carrier::client`].
//!
//! Each `run_*` returns the exit code: 0 success, 1 runtime failure (unreachable server, token
//! refused, turn aborted), 2 usage error (a URL that is not `ws://HOST:PORT/`, or no URL while
//! not exactly one carrier runs); the reason is one line on stderr.
//!
//! Without a URL, `send`, `connect` and `status` use the runtime file of the one carrier that
//! runs ([`carrier::discovery`]): its URL, and its token unless one is given. Clap's own parse
//! errors already exit with 2. The `*_with` variants take the output streams (and the console
//! its input lines) so tests can drive them.
//!
//! Every command talks only to a listener of the user running it: the Rust client's dialer
//! checks the listening socket's owner before the upgrade (and the token in it) is written, and
//! another user's listener ends the command with one line naming the port and the owner, exit 1,
//! nothing sent. `--any-owner`, given with a URL, lets `send`, `connect`, `status` and `pipe`
//! talk to another user's listener (an `--open` carrier) — without the token, and saying so.
//!
//! One file per command under `client/`; this file holds the arguments and what they share.

mod console;
mod doctor;
mod send;
mod status;

use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::process::ExitCode;
use std::sync::Arc;

use carrier::client::{
    Client, ClientError, ClientEvent, ConnectionState, ErrorCode, HandshakeInfo, Listener,
    Subscription, TransportError, WsClientTransport, WsOptions,
};
use carrier::discovery::listener::OwnerPolicy;
use carrier::discovery::RuntimeDir;
use carrier::protocol::Role;
use clap::Args;
use serde_json::Value;
use tokio::sync::mpsc::{self, UnboundedReceiver};

pub use console::connect_with;
pub use doctor::doctor_with;
pub use send::send_with;
pub use status::status_with;

/// `carrier send [URL] PROMPT`: one turn, the reply on stdout.
#[derive(Debug, Clone, Args)]
// Two optional positionals rather than clap's `allow_missing_positional`, which would take the
// URL of `send URL --token T PROMPT` for the prompt; [`SendArgs::target_and_prompt`] sorts them.
#[command(override_usage = "carrier send [OPTIONS] [URL] <PROMPT>")]
pub struct SendArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/ (default: the one running carrier's runtime file)
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// The prompt to submit (given alone, the first argument is the prompt)
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Answer permission requests of this turn with "allow"
    #[arg(long, conflicts_with = "deny")]
    pub allow: bool,
    /// Answer permission requests of this turn with "deny" (the default)
    #[arg(long)]
    pub deny: bool,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

impl SendArgs {
    /// `(URL, PROMPT)`: one argument is the prompt alone.
    pub fn target_and_prompt(&self) -> Option<(Option<&str>, &str)> {
        match (self.url.as_deref(), self.prompt.as_deref()) {
            (url, Some(prompt)) => Some((url, prompt)),
            (Some(prompt), None) => Some((None, prompt)),
            (None, None) => None,
        }
    }
}

/// `carrier connect [URL]`: an interactive console.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/ (default: the one running carrier's runtime file)
    pub url: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Connect read-only (role observe)
    #[arg(long)]
    pub observe: bool,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

/// `carrier status [--json] [URL]`: a server's `system.status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Print the status as one JSON line (the `system.status` result plus `url`)
    #[arg(long)]
    pub json: bool,
    /// Server URL (default: the one running carrier's runtime file)
    pub url: Option<String>,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also talk to another user's listener at the URL given (an --open carrier), never with a
    /// token; needs the URL
    #[arg(long)]
    pub any_owner: bool,
}

/// `carrier doctor`: what is listening locally, versions, compatibility, what to update.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Token used to handshake with each server of yours found (without it only /healthz is
    /// checked; another user's listener never gets it)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// The ports `doctor` probes: the default port and its `--max-retries` successors.
pub const DOCTOR_PORTS: RangeInclusive<u16> = 7070..=7090;

/// Runs `carrier send` on the process's stdout and stderr.
pub async fn run_send(args: SendArgs) -> ExitCode {
    send_with(args, &mut io::stdout(), &mut io::stderr()).await
}

/// Runs `carrier connect` on the process's stdin, stdout and stderr.
pub async fn run_connect(args: ConnectArgs) -> ExitCode {
    connect_with(
        args,
        console::stdin_lines(),
        &mut io::stdout(),
        &mut io::stderr(),
    )
    .await
}

/// Runs `carrier status` on the process's stdout and stderr.
pub async fn run_status(args: StatusArgs) -> ExitCode {
    status_with(args, &mut io::stdout(), &mut io::stderr()).await
}

/// Runs `carrier doctor` on the process's stdout and stderr.
pub async fn run_doctor(args: DoctorArgs) -> ExitCode {
    doctor_with(
        args,
        DOCTOR_PORTS,
        &RuntimeDir::for_user(),
        &mut io::stdout(),
        &mut io::stderr(),
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// Shared plumbing
// ---------------------------------------------------------------------------------------------

/// A command that cannot go on: the exit code and the one line that explains it.
pub(super) struct Failure {
    pub(super) code: ExitCode,
    pub(super) line: String,
}

impl Failure {
    pub(super) fn runtime(line: impl Into<String>) -> Failure {
        Failure {
            code: ExitCode::FAILURE,
            line: line.into(),
        }
    }

    pub(super) fn usage(line: impl Into<String>) -> Failure {
        Failure {
            code: ExitCode::from(2),
            line: line.into(),
        }
    }

    pub(super) fn report(self, err: &mut impl Write) -> ExitCode {
        let _ = writeln!(err, "carrier: {}", self.line);
        self.code
    }
}

/// One clear line for a client error, saying what to do about it where that is known.
pub(super) fn explain(url: &str, error: &ClientError) -> Failure {
    let line = match error {
        ClientError::Transport(TransportError::InvalidUrl { .. }) => {
            return Failure {
                code: ExitCode::from(2),
                line: error.to_string(),
            }
        }
        ClientError::Transport(TransportError::Connect { reason, .. }) => format!(
            "cannot reach {url}: {reason}; is `carrier serve` running? (`carrier doctor` lists local servers)"
        ),
        ClientError::Transport(TransportError::UpgradeRejected { status: 403 }) => format!(
            "{url} refused the connection (HTTP 403): this host or origin is not allowed"
        ),
        ClientError::Transport(TransportError::UpgradeRejected { status: 503 }) => {
            format!("{url} refused the connection (HTTP 503): too many connections")
        }
        ClientError::Refused { close } => format!(
            "{url} refused this client ({close}): check --token / CARRIER_TOKEN and the requested role"
        ),
        ClientError::Remote { error: wire, .. } | ClientError::Preflight { error: wire, .. }
            if wire.code == ErrorCode::VersionIncompatible =>
        {
            format!(
                "{url} speaks an incompatible protocol: {}; run `carrier doctor` to see which side to update",
                wire.message
            )
        }
        other => other.to_string(),
    };
    Failure::runtime(line)
}

/// Where a client command connects, with which token, and to whose listener.
pub(super) struct Target {
    pub(super) url: String,
    pub(super) token: Option<String>,
    /// [`OwnerPolicy::AnyOwner`] only for a URL the user named with `--any-owner`.
    pub(super) owners: OwnerPolicy,
}

/// The URL and token given, or, without a URL, those of the one carrier whose runtime file is in
/// `runtime` (a token given still wins). Warnings about files that were ignored go to `err`.
/// `--any-owner` needs a URL: a carrier found through a runtime file is always the user's own.
pub(super) fn resolve_target(
    url: Option<&str>,
    token: Option<&str>,
    any_owner: bool,
    runtime: &RuntimeDir,
    err: &mut impl Write,
) -> Result<Target, Failure> {
    if let Some(url) = url {
        return Ok(Target {
            url: url.to_owned(),
            token: token.map(str::to_owned),
            owners: if any_owner {
                OwnerPolicy::AnyOwner
            } else {
                OwnerPolicy::OwnUser
            },
        });
    }
    if any_owner {
        return Err(Failure::usage(
            "--any-owner needs the URL of the listener you mean; a carrier found through its runtime file is always your own",
        ));
    }
    let scan = runtime.scan();
    for warning in &scan.warnings {
        let _ = writeln!(err, "carrier: warning: {warning}");
    }
    match scan.carriers.as_slice() {
        [] => Err(Failure::usage(format!(
            "no running carrier found (no runtime file in {}): start one with `carrier serve`, or give its URL and --token",
            runtime.path().display()
        ))),
        [one] => Ok(Target {
            url: one.url.clone(),
            token: token.map(str::to_owned).or_else(|| one.token.clone()),
            owners: OwnerPolicy::OwnUser,
        }),
        several => {
            let names: Vec<String> = several.iter().map(|c| c.describe()).collect();
            Err(Failure::usage(format!(
                "{} carriers are running: {}; give the URL of one (and its --token)",
                several.len(),
                names.join(", ")
            )))
        }
    }
}

/// The warning for a listener that `--any-owner` let a command talk to without the token;
/// `None` for the user's own.
pub(super) fn tokenless_warning(url: &str, listener: &Listener) -> Option<String> {
    let whose = match listener {
        Listener::Own | Listener::Unchecked => return None,
        Listener::Foreign(owner) => format!("belongs to {owner}, not to you"),
        Listener::Unattributed(reason) => format!("cannot be attributed to a user ({reason})"),
    };
    Some(format!(
        "warning: the listener at {url} {whose}: talking to it without a token (--any-owner)"
    ))
}

fn options(target: &Target, role: Option<Role>) -> Result<WsOptions, ClientError> {
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

/// A connected client and its event and state feeds (handlers only forward into channels, so
/// every decision is made on the command's own task).
pub(super) struct Session {
    pub(super) client: Client,
    pub(super) info: HandshakeInfo,
    pub(super) events: UnboundedReceiver<ClientEvent>,
    pub(super) states: UnboundedReceiver<ConnectionState>,
    _subscriptions: [Subscription; 2],
}

/// Opens a session with `target`; a listener `--any-owner` reached without the token is named
/// on `err` first, whether or not the session opens.
pub(super) async fn open(
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
pub(super) async fn open_own(
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
    let (event_tx, events) = mpsc::unbounded_channel();
    let (state_tx, states) = mpsc::unbounded_channel();
    let subscriptions = [
        client.on_event(Box::new(move |event| {
            let _ = event_tx.send(event.clone());
        })),
        client.on_state_change(Box::new(move |state| {
            let _ = state_tx.send(state);
        })),
    ];
    let info = client.connect().await?;
    Ok(Session {
        client,
        info,
        events,
        states,
        _subscriptions: subscriptions,
    })
}

/// Whether a state change means the connection is gone for good (not a reconnect).
pub(super) fn closed_for_good(state: ConnectionState) -> bool {
    state == ConnectionState::Disconnected
}

pub(super) fn string_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The driver identity as one short word: a string as is, an object by its `driver_id`.
pub(super) fn driver_name(driver: &Value) -> String {
    match driver {
        Value::String(name) => name.clone(),
        Value::Object(fields) => fields
            .get("driver_id")
            .and_then(Value::as_str)
            .map_or_else(|| driver.to_string(), str::to_owned),
        Value::Null => "someone".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carrier::client::{ForeignListener, UnattributedListener};
    use carrier::discovery::User;

    #[test]
    fn a_refused_listener_is_one_runtime_line_naming_the_port() {
        let addr = "127.0.0.1:7090".parse().expect("addr");
        let refusals: [TransportError; 2] = [
            ForeignListener {
                addr,
                owner: User {
                    uid: 65534,
                    name: Some("nobody".into()),
                },
                you: 1000,
            }
            .into(),
            UnattributedListener {
                addr,
                reason: "cannot read /proc/net/tcp: Permission denied (os error 13)".into(),
            }
            .into(),
        ];
        let lines = refusals.map(|refusal| {
            let failure = explain("ws://127.0.0.1:7090/", &ClientError::Transport(refusal));
            assert_eq!(failure.code, ExitCode::FAILURE);
            failure.line
        });
        assert_eq!(
            lines,
            [
                "refusing to talk to 127.0.0.1:7090: its listener belongs to uid 65534 (nobody), not to you (uid 1000); nothing was sent",
                "refusing to talk to 127.0.0.1:7090: the port cannot be attributed to a user (cannot read /proc/net/tcp: Permission denied (os error 13)); nothing was sent",
            ]
        );
    }
}

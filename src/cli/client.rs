//! Client-side commands of the `carrier` binary (SPEC section 10): `send`, `connect`, `status`
//! and `doctor`. Argument parsing and wiring only; everything else comes from
//! [`carrier::client`].
//!
//! # Wiring into `src/main.rs`
//!
//! ```ignore
//! mod cli;
//!
//! #[derive(clap::Subcommand)]
//! enum Command {
//!     /// Run one turn against a running server and print the reply.
//!     Send(cli::client::SendArgs),
//!     /// Interactive console: prompts, streamed output, permission answers.
//!     Connect(cli::client::ConnectArgs),
//!     /// Print a server's `system.status`.
//!     Status(cli::client::StatusArgs),
//!     /// Find local servers and check versions and compatibility.
//!     Doctor(cli::client::DoctorArgs),
//!     // … serve, schema, bench
//! }
//!
//! // in `async fn main() -> std::process::ExitCode` (a tokio runtime):
//! match command {
//!     Command::Send(args) => cli::client::run_send(args).await,
//!     Command::Connect(args) => cli::client::run_connect(args).await,
//!     Command::Status(args) => cli::client::run_status(args).await,
//!     Command::Doctor(args) => cli::client::run_doctor(args).await,
//! }
//! ```
//!
//! Each `run_*` returns the exit code: 0 success, 1 runtime failure (unreachable server, token
//! refused, turn aborted), 2 usage error (a URL that is not `ws://HOST:PORT/`); the reason is one
//! line on stderr. Clap's own parse errors already exit with 2. The `*_with` variants take the
//! output streams (and the console its input lines) so tests can drive them.

use std::collections::VecDeque;
use std::io::{self, BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use carrier::client::{
    probe_health, Client, ClientError, ClientEvent, Compatibility, ConnectionState, Decision,
    ErrorCode, HandshakeInfo, Health, HistoryEntry, ResumeOutcome, SessionEventKind, Subscription,
    TransportError, VersionRange, WsClientTransport, WsOptions,
};
use carrier::protocol::Role;
use clap::Args;
use serde_json::{json, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver};

/// `carrier send URL PROMPT`: one turn, the reply on stdout.
#[derive(Debug, Clone, Args)]
pub struct SendArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/
    pub url: String,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The prompt to submit
    pub prompt: String,
    /// Answer permission requests of this turn with "allow"
    #[arg(long, conflicts_with = "deny")]
    pub allow: bool,
    /// Answer permission requests of this turn with "deny" (the default)
    #[arg(long)]
    pub deny: bool,
}

/// `carrier connect URL`: an interactive console.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Server URL, e.g. ws://127.0.0.1:7070/
    pub url: String,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Connect read-only (role observe)
    #[arg(long)]
    pub observe: bool,
}

/// `carrier status [--json] [URL]`: a server's `system.status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Print the status as one JSON line (the `system.status` result plus `url`)
    #[arg(long)]
    pub json: bool,
    /// Server URL
    #[arg(default_value = "ws://127.0.0.1:7070/")]
    pub url: String,
    /// Access token (prefer the CARRIER_TOKEN variable: command lines are visible to other users)
    #[arg(long, env = "CARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// `carrier doctor`: what is listening locally, versions, compatibility, what to update.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Token used to handshake with each server found (without it only /healthz is checked)
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
    connect_with(args, stdin_lines(), &mut io::stdout(), &mut io::stderr()).await
}

/// Runs `carrier status` on the process's stdout and stderr.
pub async fn run_status(args: StatusArgs) -> ExitCode {
    status_with(args, &mut io::stdout(), &mut io::stderr()).await
}

/// Runs `carrier doctor` on the process's stdout and stderr.
pub async fn run_doctor(args: DoctorArgs) -> ExitCode {
    doctor_with(args, DOCTOR_PORTS, &mut io::stdout(), &mut io::stderr()).await
}

// ---------------------------------------------------------------------------------------------
// Shared plumbing
// ---------------------------------------------------------------------------------------------

/// A command that cannot go on: the exit code and the one line that explains it.
struct Failure {
    code: ExitCode,
    line: String,
}

impl Failure {
    fn runtime(line: impl Into<String>) -> Failure {
        Failure {
            code: ExitCode::FAILURE,
            line: line.into(),
        }
    }

    fn report(self, err: &mut impl Write) -> ExitCode {
        let _ = writeln!(err, "carrier: {}", self.line);
        self.code
    }
}

/// One clear line for a client error, saying what to do about it where that is known.
fn explain(url: &str, error: &ClientError) -> Failure {
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
        ClientError::Remote { error: wire, .. } if wire.code == ErrorCode::VersionIncompatible => {
            format!(
                "{url} speaks an incompatible protocol: {}; run `carrier doctor` to see which side to update",
                wire.message
            )
        }
        other => other.to_string(),
    };
    Failure::runtime(line)
}

fn options(url: &str, token: Option<&str>, role: Option<Role>) -> Result<WsOptions, ClientError> {
    let mut options = WsOptions::new(url);
    if let Some(token) = token {
        options = options.token(token);
    }
    if let Some(role) = role {
        options = options.role(role);
    }
    options.validate()?;
    Ok(options)
}

/// A connected client and its event and state feeds (handlers only forward into channels, so
/// every decision is made on the command's own task).
struct Session {
    client: Client,
    info: HandshakeInfo,
    events: UnboundedReceiver<ClientEvent>,
    states: UnboundedReceiver<ConnectionState>,
    _subscriptions: [Subscription; 2],
}

async fn open(url: &str, token: Option<&str>, role: Option<Role>) -> Result<Session, Failure> {
    open_session(url, token, role)
        .await
        .map_err(|error| explain(url, &error))
}

async fn open_session(
    url: &str,
    token: Option<&str>,
    role: Option<Role>,
) -> Result<Session, ClientError> {
    let client = Client::new(Arc::new(WsClientTransport::new(options(url, token, role)?)));
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
fn closed_for_good(state: ConnectionState) -> bool {
    state == ConnectionState::Disconnected
}

fn string_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The driver identity as one short word: a string as is, an object by its `driver_id`.
fn driver_name(driver: &Value) -> String {
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

// ---------------------------------------------------------------------------------------------
// send
// ---------------------------------------------------------------------------------------------

/// `carrier send` with explicit output streams.
pub async fn send_with(args: SendArgs, out: &mut impl Write, err: &mut impl Write) -> ExitCode {
    match send_turn(&args, out, err).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(err),
    }
}

async fn send_turn(
    args: &SendArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), Failure> {
    let decision = if args.allow {
        Decision::Allow
    } else {
        Decision::Deny
    };
    let mut session = open(&args.url, args.token.as_deref(), None).await?;
    let submitted = session
        .client
        .request("session.submit", json!({ "prompt": args.prompt }))
        .await
        .map_err(|error| explain(&args.url, &error))?;
    let turn = string_field(&submitted, "turn_id")
        .ok_or_else(|| Failure::runtime("the server's submit result has no turn_id"))?
        .to_owned();
    // What reached stdout, so text lost to a reconnect gap can be completed from the final text.
    let mut printed = String::new();
    let finish = |printed: &str, text: &str, out: &mut dyn Write| {
        if let Some(rest) = text.strip_prefix(printed) {
            let _ = out.write_all(rest.as_bytes());
        }
        let _ = writeln!(out);
        let _ = out.flush();
    };
    loop {
        tokio::select! {
            event = session.events.recv() => {
                let Some(event) = event else {
                    return Err(Failure::runtime("the client stopped"));
                };
                match event {
                    ClientEvent::Session(event) => match event.kind {
                        SessionEventKind::TextDelta { turn_id, delta } if turn_id == turn => {
                            let _ = out.write_all(delta.as_bytes());
                            let _ = out.flush();
                            printed.push_str(&delta);
                        }
                        SessionEventKind::PermissionRequest { turn_id, request_id, tool, .. }
                            if turn_id == turn =>
                        {
                            let _ = writeln!(
                                err,
                                "carrier: `{tool}` asked for permission: {} (use --allow or --deny)",
                                decision.as_str()
                            );
                            session
                                .client
                                .request(
                                    "session.permission.respond",
                                    json!({ "request_id": request_id, "decision": decision }),
                                )
                                .await
                                .map_err(|error| explain(&args.url, &error))?;
                        }
                        SessionEventKind::Error { turn_id: Some(turn_id), code, message }
                            if turn_id == turn =>
                        {
                            let _ = writeln!(err, "carrier: session error {code}: {message}");
                        }
                        SessionEventKind::TurnCompleted { turn_id, text, aborted }
                            if turn_id == turn =>
                        {
                            finish(&printed, &text, out);
                            if aborted {
                                return Err(Failure::runtime("the turn was aborted"));
                            }
                            return Ok(());
                        }
                        _ => {}
                    },
                    ClientEvent::Ready { outcome: ResumeOutcome::Reset, .. } => {
                        return Err(Failure::runtime(
                            "the server restarted during the turn; its reply is lost",
                        ));
                    }
                    ClientEvent::HistoryRefetched { entries, .. } => {
                        // Events were lost: if the reply is in the history, the turn is over.
                        if let Some(reply) = entries
                            .iter()
                            .rev()
                            .find(|e| e.turn_id.as_deref() == Some(&turn) && e.role != "user")
                        {
                            finish(&printed, &reply.text, out);
                            return Ok(());
                        }
                    }
                    ClientEvent::HandshakeFailed(error) => return Err(explain(&args.url, &error)),
                    _ => {}
                }
            }
            state = session.states.recv() => {
                if state.map_or(true, closed_for_good) {
                    return Err(Failure::runtime(format!(
                        "the connection to {} closed before the turn completed",
                        args.url
                    )));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// connect
// ---------------------------------------------------------------------------------------------

/// Stdin lines, read on a plain thread: a blocking read of a terminal cannot be cancelled, and
/// this way it never holds up the runtime's shutdown after `/quit`.
fn stdin_lines() -> UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

const CONSOLE_HELP: &str = "type a prompt and press enter; /allow or /deny answers a permission \
request; /status, /history, /sessions show the session; /quit leaves";

/// `carrier connect` with explicit input lines (the channel closing is end of input) and output
/// streams.
pub async fn connect_with(
    args: ConnectArgs,
    input: UnboundedReceiver<String>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> ExitCode {
    let role = args.observe.then_some(Role::Observe);
    let session = match open(&args.url, args.token.as_deref(), role).await {
        Ok(session) => session,
        Err(failure) => return failure.report(err),
    };
    let _ = writeln!(
        err,
        "connected to {} {} at {} (session {}, role {}); {CONSOLE_HELP}",
        session.info.server.name,
        session.info.server.version,
        args.url,
        session.info.session_id,
        session.info.role,
    );
    let mut console = Console {
        url: args.url,
        client: session.client.clone(),
        out,
        err,
        queue: VecDeque::new(),
        input_done: false,
        our_turn: None,
        permission: None,
        mid_line: false,
    };
    let result = console.run(input, session).await;
    console.client.disconnect().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(console.err),
    }
}

/// The console's state. Lines are handled one at a time, in order. While a turn this console
/// submitted is running, only `/allow`, `/deny` (which wait for the permission request) and
/// `/quit` are handled; anything else waits for the turn to complete. So piped input behaves
/// like typed input, and command output never cuts into streamed text.
struct Console<'a, O: Write, E: Write> {
    url: String,
    client: Client,
    out: &'a mut O,
    err: &'a mut E,
    queue: VecDeque<String>,
    input_done: bool,
    /// The turn this console submitted and is waiting for.
    our_turn: Option<String>,
    /// The pending permission request: (request_id, tool).
    permission: Option<(String, String)>,
    /// True when streamed text left the cursor mid-line.
    mid_line: bool,
}

enum Line {
    Prompt(String),
    Answer(Decision),
    Status,
    History,
    Sessions,
    Help,
    Quit,
}

impl Line {
    /// Only the exact commands are commands; anything else (including `/tool …` for agents
    /// that take slash prompts) is a prompt.
    fn parse(line: &str) -> Option<Line> {
        let trimmed = line.trim();
        Some(match trimmed {
            "" => return None,
            "/allow" => Line::Answer(Decision::Allow),
            "/deny" => Line::Answer(Decision::Deny),
            "/status" => Line::Status,
            "/history" => Line::History,
            "/sessions" => Line::Sessions,
            "/help" => Line::Help,
            "/quit" => Line::Quit,
            _ => Line::Prompt(trimmed.to_owned()),
        })
    }
}

/// What to do after handling something.
enum Flow {
    Continue,
    Quit,
}

impl<O: Write, E: Write> Console<'_, O, E> {
    async fn run(
        &mut self,
        mut input: UnboundedReceiver<String>,
        mut session: Session,
    ) -> Result<(), Failure> {
        loop {
            if let Flow::Quit = self.run_ready_lines().await? {
                return Ok(());
            }
            if self.input_done && self.queue.is_empty() {
                if self.our_turn.is_none() {
                    return Ok(());
                }
                if let Some((request_id, tool)) = self.permission.take() {
                    self.note(&format!("[no more input: denying `{tool}`]"));
                    self.answer(&request_id, Decision::Deny).await;
                }
            }
            tokio::select! {
                line = input.recv(), if !self.input_done => match line {
                    Some(line) => self.queue.push_back(line),
                    None => self.input_done = true,
                },
                event = session.events.recv() => match event {
                    Some(event) => self.on_event(event).await?,
                    None => return Err(Failure::runtime("the client stopped")),
                },
                state = session.states.recv() => match state {
                    Some(ConnectionState::Connecting) => self.note("[connection lost; reconnecting…]"),
                    Some(state) if !closed_for_good(state) => {}
                    _ => {
                        return Err(Failure::runtime(format!("the connection to {} closed", self.url)));
                    }
                },
            }
        }
    }

    /// Handles queued lines from the head while they can run.
    async fn run_ready_lines(&mut self) -> Result<Flow, Failure> {
        while let Some(head) = self.queue.front() {
            let Some(line) = Line::parse(head) else {
                self.queue.pop_front();
                continue;
            };
            let ready = match &line {
                Line::Answer(_) => self.permission.is_some() || self.our_turn.is_none(),
                Line::Quit => true,
                _ => self.our_turn.is_none(),
            };
            if !ready {
                break;
            }
            self.queue.pop_front();
            if let Flow::Quit = self.run_line(line).await? {
                return Ok(Flow::Quit);
            }
        }
        Ok(Flow::Continue)
    }

    async fn run_line(&mut self, line: Line) -> Result<Flow, Failure> {
        match line {
            Line::Quit => return Ok(Flow::Quit),
            Line::Help => self.note(CONSOLE_HELP),
            Line::Prompt(prompt) => {
                match self
                    .client
                    .request("session.submit", json!({ "prompt": prompt }))
                    .await
                {
                    Ok(result) => {
                        self.our_turn = string_field(&result, "turn_id").map(str::to_owned)
                    }
                    Err(error) => self.report(&error),
                }
            }
            Line::Answer(decision) => match self.permission.take() {
                Some((request_id, _)) => self.answer(&request_id, decision).await,
                None => self.note("[no permission request is pending]"),
            },
            Line::Status => match self.client.request("session.status", json!({})).await {
                Ok(status) => {
                    let state = string_field(&status, "state").unwrap_or("unknown");
                    let session = string_field(&status, "session_id").unwrap_or("?");
                    let line = match string_field(&status, "turn_id") {
                        Some(turn) => format!("session {session}: {state} (turn {turn})"),
                        None => format!("session {session}: {state}"),
                    };
                    self.print_line(&line);
                }
                Err(error) => self.report(&error),
            },
            Line::History => match self.client.request("session.history", json!({})).await {
                Ok(history) => {
                    let entries: Vec<HistoryEntry> = history
                        .get("entries")
                        .cloned()
                        .and_then(|entries| serde_json::from_value(entries).ok())
                        .unwrap_or_default();
                    if entries.is_empty() {
                        self.print_line("(no history yet)");
                    }
                    for entry in entries {
                        self.print_line(&format!("{}: {}", entry.role, entry.text));
                    }
                }
                Err(error) => self.report(&error),
            },
            Line::Sessions => match self.client.request("sessions.list", json!({})).await {
                Ok(list) => {
                    let current = self.client.handshake().map(|info| info.session_id);
                    let sessions = list
                        .get("sessions")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    for session in sessions {
                        let id = string_field(&session, "session_id").unwrap_or("?");
                        let marker = if current.as_deref() == Some(id) {
                            "*"
                        } else {
                            " "
                        };
                        self.print_line(&format!(
                            "{marker} {id}  {}  {}",
                            string_field(&session, "state").unwrap_or("?"),
                            string_field(&session, "title").unwrap_or(""),
                        ));
                    }
                }
                Err(error) => self.report(&error),
            },
        }
        Ok(Flow::Continue)
    }

    async fn on_event(&mut self, event: ClientEvent) -> Result<(), Failure> {
        match event {
            ClientEvent::Session(event) => self.on_session_event(event.kind),
            ClientEvent::Notice { event, payload } => {
                let message = string_field(&payload, "message").unwrap_or("");
                self.note(&format!("[{event}] {message}"));
            }
            ClientEvent::Ready { outcome, .. } => match outcome {
                ResumeOutcome::New => {}
                ResumeOutcome::Resumed { replayed } => {
                    self.note(&format!("[reconnected; {replayed} missed events replayed]"));
                }
                ResumeOutcome::Gap { from, to } => {
                    self.note(&format!(
                        "[reconnected; events {from}..={to} were lost, /history has everything]"
                    ));
                    self.forget_lost_turn().await;
                }
                ResumeOutcome::Reset => {
                    self.note("[reconnected to a restarted server; the previous turn is gone]");
                    self.our_turn = None;
                    self.permission = None;
                }
            },
            ClientEvent::HistoryRefetched { .. } => {}
            ClientEvent::HistoryRefetchFailed { error, .. } => {
                self.note(&format!("[could not refetch the history: {error}]"));
            }
            ClientEvent::HandshakeFailed(error) => return Err(explain(&self.url, &error)),
        }
        Ok(())
    }

    fn on_session_event(&mut self, kind: SessionEventKind) {
        match kind {
            SessionEventKind::TurnStarted { turn_id, driver } => {
                if self.our_turn.as_deref() != Some(turn_id.as_str()) {
                    self.print_line(&format!(
                        "[{} started turn {turn_id}]",
                        driver_name(&driver)
                    ));
                }
            }
            SessionEventKind::TextDelta { delta, .. } => {
                let _ = self.out.write_all(delta.as_bytes());
                let _ = self.out.flush();
                self.mid_line = !delta.ends_with('\n');
            }
            SessionEventKind::PermissionRequest {
                request_id,
                tool,
                input,
                ..
            } => {
                self.print_line(&format!(
                    "[permission] `{tool}` wants to run with {input}: /allow or /deny"
                ));
                self.permission = Some((request_id, tool));
            }
            SessionEventKind::PermissionResolved {
                request_id,
                decision,
            } => {
                if self
                    .permission
                    .as_ref()
                    .is_some_and(|(pending, _)| *pending == request_id)
                {
                    self.permission = None;
                }
                self.print_line(&format!("[permission {}]", decision.as_str()));
            }
            SessionEventKind::TurnCompleted {
                turn_id, aborted, ..
            } => {
                self.end_line();
                if aborted {
                    self.print_line("[turn aborted]");
                }
                if self.our_turn.as_deref() == Some(turn_id.as_str()) {
                    self.our_turn = None;
                    self.permission = None;
                }
            }
            SessionEventKind::Error { code, message, .. } => {
                self.note(&format!("[session error {code}] {message}"));
            }
            SessionEventKind::Other { event, .. } => {
                tracing::debug!(event, "console ignores an unknown session event");
            }
        }
    }

    /// After a gap the completion of our turn may be among the lost events: ask.
    async fn forget_lost_turn(&mut self) {
        let Some(turn) = self.our_turn.clone() else {
            return;
        };
        if let Ok(status) = self.client.request("session.status", json!({})).await {
            let still_running = string_field(&status, "turn_id") == Some(turn.as_str())
                && string_field(&status, "state") != Some("idle");
            if !still_running {
                self.end_line();
                self.our_turn = None;
                self.permission = None;
            }
        }
    }

    async fn answer(&mut self, request_id: &str, decision: Decision) {
        let answered = self
            .client
            .request(
                "session.permission.respond",
                json!({ "request_id": request_id, "decision": decision }),
            )
            .await;
        if let Err(error) = answered {
            self.report(&error);
        }
    }

    fn report(&mut self, error: &ClientError) {
        let line = explain(&self.url, error).line;
        self.note(&format!("[error] {line}"));
    }

    fn end_line(&mut self) {
        if self.mid_line {
            let _ = writeln!(self.out);
            let _ = self.out.flush();
            self.mid_line = false;
        }
    }

    fn print_line(&mut self, line: &str) {
        self.end_line();
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }

    fn note(&mut self, line: &str) {
        self.end_line();
        let _ = writeln!(self.err, "{line}");
    }
}

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

/// `carrier status` with explicit output streams.
pub async fn status_with(args: StatusArgs, out: &mut impl Write, err: &mut impl Write) -> ExitCode {
    match status(&args, out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(err),
    }
}

async fn status(args: &StatusArgs, out: &mut impl Write) -> Result<(), Failure> {
    let session = open(&args.url, args.token.as_deref(), None).await?;
    let status = session
        .client
        .request("system.status", json!({}))
        .await
        .map_err(|error| explain(&args.url, &error));
    session.client.disconnect().await;
    let mut status = status?;
    if args.json {
        let Some(fields) = status.as_object_mut() else {
            return Err(Failure::runtime("the server's status is not a JSON object"));
        };
        fields.insert("url".into(), json!(args.url));
        let _ = writeln!(out, "{status}");
        return Ok(());
    }
    let text = |value: &Value, key: &str| string_field(value, key).unwrap_or("?").to_owned();
    let server = status.get("server").cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        out,
        "{} {} at {}",
        text(&server, "name"),
        text(&server, "version"),
        args.url
    );
    let _ = writeln!(
        out,
        "protocol {} (oldest compatible {}), epoch {}",
        text(&status, "protocol_version"),
        text(&status, "min_compatible_protocol"),
        text(&status, "epoch")
    );
    if let Some(connections) = status.get("connections") {
        let _ = writeln!(out, "connections: {connections}");
    }
    let channels: Vec<String> = status
        .get("channels")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .map(|name| {
                    name.as_str()
                        .map_or_else(|| name.to_string(), str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "channels: {}",
        if channels.is_empty() {
            "(none)".to_owned()
        } else {
            channels.join(", ")
        }
    );
    if let Some(features) = status.get("compatibility").and_then(Value::as_object) {
        for (feature, detail) in features {
            let available = detail.get("available").and_then(Value::as_bool) == Some(true);
            let _ = writeln!(
                out,
                "feature {feature}: {} (needs protocol {})",
                if available {
                    "available"
                } else {
                    "unavailable"
                },
                text(detail, "required_protocol")
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// doctor
// ---------------------------------------------------------------------------------------------

/// `carrier doctor` over `ports` on 127.0.0.1, with explicit output streams. Exits 0 when at
/// least one carrier answered and every one checked is usable; 1 when none answered, or one is
/// incompatible or refused the token.
pub async fn doctor_with(
    args: DoctorArgs,
    ports: RangeInclusive<u16>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> ExitCode {
    let (first, last) = (*ports.start(), *ports.end());
    let probes = ports.map(|port| async move {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        (port, probe_health(addr, Duration::from_secs(2)).await)
    });
    let found: Vec<(u16, Health)> = futures_util::future::join_all(probes)
        .await
        .into_iter()
        .filter_map(|(port, health)| health.ok().map(|health| (port, health)))
        .collect();
    let _ = writeln!(
        out,
        "this client: {} {}, protocol {} (oldest compatible {})",
        carrier::client::CLIENT_NAME,
        env!("CARGO_PKG_VERSION"),
        carrier::client::PROTOCOL_VERSION,
        carrier::client::MIN_COMPATIBLE_PROTOCOL
    );
    let mut carriers = 0;
    let mut problems = 0;
    for (port, health) in found {
        match health {
            Health::Other { status, .. } => {
                let _ = writeln!(
                    out,
                    "127.0.0.1:{port}: not a carrier (GET /healthz answered HTTP {status})"
                );
            }
            Health::Carrier => {
                carriers += 1;
                let _ = writeln!(out, "127.0.0.1:{port}: carrier server (healthz ok)");
                match &args.token {
                    None => {
                        let _ = writeln!(
                            out,
                            "  set CARRIER_TOKEN (or --token) to check versions and compatibility"
                        );
                    }
                    Some(token) => {
                        if !check_versions(port, token, out).await {
                            problems += 1;
                        }
                    }
                }
            }
        }
    }
    if carriers == 0 {
        let _ = writeln!(
            err,
            "carrier: no carrier server is listening on 127.0.0.1:{first}-{last}; start one with `carrier serve`"
        );
        return ExitCode::FAILURE;
    }
    if problems > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Handshakes with the server on `port` and reports versions, compatibility and missing
/// features. Returns false when something needs fixing.
async fn check_versions(port: u16, token: &str, out: &mut impl Write) -> bool {
    let url = format!("ws://127.0.0.1:{port}/");
    let ours = VersionRange::this_client();
    let session = match open_session(&url, Some(token), Some(Role::Observe)).await {
        Ok(session) => session,
        Err(error) => {
            match error.wire() {
                Some(wire) if wire.code == ErrorCode::VersionIncompatible => {
                    let update = wire
                        .data
                        .as_ref()
                        .and_then(server_range)
                        .map(|theirs| Compatibility::assess(ours, theirs));
                    let advice = match update {
                        Some(Compatibility::Incompatible { update }) => {
                            format!("update the {}", update.as_str())
                        }
                        _ => "update whichever side is older".to_owned(),
                    };
                    let _ = writeln!(out, "  incompatible: {}; {advice}", wire.message);
                }
                _ => {
                    let _ = writeln!(out, "  {}", explain(&url, &error).line);
                }
            }
            return false;
        }
    };
    let info = &session.info;
    let _ = writeln!(
        out,
        "  server {} {}, protocol {} (oldest compatible {}), session {}",
        info.server.name,
        info.server.version,
        info.protocol_version,
        info.min_compatible_protocol,
        info.session_id
    );
    let verdict = match VersionRange::parse(&info.protocol_version, &info.min_compatible_protocol) {
        Some(theirs) => Compatibility::assess(ours, theirs),
        None => Compatibility::Compatible,
    };
    let healthy = match verdict {
        Compatibility::Compatible => {
            let _ = writeln!(out, "  compatible");
            true
        }
        Compatibility::Skew { update } => {
            let _ = writeln!(
                out,
                "  compatible with version skew: update the {} to get the newest features",
                update.as_str()
            );
            true
        }
        Compatibility::Incompatible { update } => {
            let _ = writeln!(out, "  incompatible: update the {}", update.as_str());
            false
        }
    };
    if let Ok(status) = session.client.request("system.status", json!({})).await {
        if let Some(features) = status.get("compatibility").and_then(Value::as_object) {
            for (feature, detail) in features {
                if detail.get("available").and_then(Value::as_bool) == Some(false) {
                    let needs = string_field(detail, "required_protocol").unwrap_or("?");
                    let _ = writeln!(
                        out,
                        "  feature {feature} unavailable (needs protocol {needs}): update the side below it"
                    );
                }
            }
        }
    }
    session.client.disconnect().await;
    healthy
}

/// The server's versions from a `version_incompatible` error's `data`, when it names them
/// (`{server: {protocol_version, min_compatible_protocol}}` or the same keys at the top).
fn server_range(data: &Value) -> Option<VersionRange> {
    let server = data.get("server").filter(|v| v.is_object()).unwrap_or(data);
    let protocol = string_field(server, "protocol_version")?;
    let min = string_field(server, "min_compatible_protocol").unwrap_or(protocol);
    VersionRange::parse(protocol, min)
}

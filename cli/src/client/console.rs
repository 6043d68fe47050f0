//! `carrier connect`: a line console (prompts, streamed output, permission answers,
//! `/status`, `/history`, `/sessions`, `/quit`) that also works when stdin is a pipe.

use std::collections::VecDeque;
use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use carrier::client::{
    Client, ClientError, ClientEvent, ConnectionState, Decision, ReceivedHistoryEntry,
    ReceivedSessionEventKind, ResumeOutcome,
};
use carrier::discovery::RuntimeDir;
use carrier::protocol::Role;
use serde_json::{json, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver};

use super::args::ConnectArgs;
use super::failure::{explain, Failure};
use super::fields::{driver_name, string_field};
use super::session::{closed_for_good, open, Session};
use super::target::resolve_target;

/// Stdin lines, read on a plain thread: a blocking read of a terminal cannot be cancelled, and
/// this way it never holds up the runtime's shutdown after `/quit`.
pub(super) fn stdin_lines() -> UnboundedReceiver<String> {
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
    let runtime = RuntimeDir::for_user();
    let target = match resolve_target(
        args.url.as_deref(),
        args.token.as_deref(),
        args.any_owner,
        &runtime,
        err,
    ) {
        Ok(target) => target,
        Err(failure) => return failure.report(err),
    };
    let session = match open(&target, role, err).await {
        Ok(session) => session,
        Err(failure) => return failure.report(err),
    };
    let _ = writeln!(
        err,
        "connected to {} {} at {} (session {}, role {}); {CONSOLE_HELP}",
        session.info.server.name,
        session.info.server.version,
        target.url,
        session.info.session_id,
        session.info.role,
    );
    let mut console = Console {
        url: target.url,
        client: session.client.clone(),
        out,
        err,
        queue: VecDeque::new(),
        input_done: false,
        our_turn: None,
        permission: None,
        mid_line: false,
        state: ConnectionState::Disconnected,
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
    /// The last client state seen on the state feed. The feed starts with the first
    /// handshake's own `connecting` → `connected`, so only `connecting` after an open state
    /// means the connection was lost.
    state: ConnectionState,
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
                    Some(state) if !closed_for_good(state) => self.on_state(state),
                    _ => {
                        return Err(Failure::runtime(format!("the connection to {} closed", self.url)));
                    }
                },
            }
        }
    }

    fn on_state(&mut self, state: ConnectionState) {
        let was_open = std::mem::replace(&mut self.state, state).is_open();
        if was_open && state == ConnectionState::Connecting {
            self.note("[connection lost; reconnecting…]");
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
            Line::Prompt(prompt) => match self.client.submit(prompt).await {
                Ok(turn) => self.our_turn = Some(turn),
                Err(error) => self.report(&error),
            },
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
                    let entries: Vec<ReceivedHistoryEntry> = history
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
            // Connection states: the console reports a reconnect by its outcome (above).
            ClientEvent::State(_) | ClientEvent::HistoryRefetched { .. } => {}
            ClientEvent::HistoryRefetchFailed { error, .. } => {
                self.note(&format!("[could not refetch the history: {error}]"));
            }
            ClientEvent::HandshakeFailed(error) => return Err(explain(&self.url, &error)),
        }
        Ok(())
    }

    fn on_session_event(&mut self, kind: ReceivedSessionEventKind) {
        match kind {
            ReceivedSessionEventKind::TurnStarted {
                turn_id,
                driver,
                prompt,
            } => {
                if self.our_turn.as_deref() != Some(turn_id.as_str()) {
                    let asked = prompt.map(|p| format!(": {p}")).unwrap_or_default();
                    self.print_line(&format!(
                        "[{} started turn {turn_id}{asked}]",
                        driver_name(&driver)
                    ));
                }
            }
            ReceivedSessionEventKind::TextDelta { delta, .. } => {
                let _ = self.out.write_all(delta.as_bytes());
                let _ = self.out.flush();
                self.mid_line = !delta.ends_with('\n');
            }
            ReceivedSessionEventKind::PermissionRequest {
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
            ReceivedSessionEventKind::PermissionResolved {
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
            ReceivedSessionEventKind::TurnCompleted {
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
            ReceivedSessionEventKind::Error { code, message, .. } => {
                self.note(&format!("[session error {code}] {message}"));
            }
            ReceivedSessionEventKind::AgentUpdate { update, .. } => {
                // One line per update: its kind, and a tool call's title when it has one.
                let field = |name: &str| update.get(name).and_then(Value::as_str);
                let kind = field("sessionUpdate").unwrap_or("update");
                let title = field("title").map(|t| format!(": {t}")).unwrap_or_default();
                self.note(&format!("[agent {kind}{title}]"));
            }
            ReceivedSessionEventKind::Other { event, .. } => {
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
        let answered = self.client.respond(request_id, decision).await;
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

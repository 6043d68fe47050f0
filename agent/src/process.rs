//! An external agent process as the session (`carrier serve --agent-cmd "CMD ARGS"`).
//!
//! The child speaks the carrier's envelope (docs/protocol.md, "Envelope") as JSON lines: one frame
//! per line, UTF-8, requests from the carrier on its stdin, answers and events on its stdout; its
//! stderr goes to the carrier's log at `info`. A whole conversation:
//!
//! ```text
//! carrier → {"id":"c1","method":"system.handshake","params":{"protocol_version":"1.0","min_compatible_protocol":"1.0","client":{"name":"carrier","version":"0.1.0"}}}
//! child   → {"id":"c1","result":{"protocol_version":"1.0","min_compatible_protocol":"1.0","server":{"name":"my-agent","version":"1"}}}
//! carrier → {"id":"c2","method":"session.submit","params":{"prompt":"hi there","turn_id":"t1","driver":{"driver_id":"local","surface":"carrier"}}}
//! child   → {"id":"c2","result":{}}
//! child   → {"event":"session.text_delta","payload":{"turn_id":"t1","delta":"there"}}
//! child   → {"event":"session.text_delta","payload":{"turn_id":"t1","delta":" hi"}}
//! child   → {"event":"session.turn_completed","payload":{"turn_id":"t1","text":"there hi","aborted":false}}
//! ```
//!
//! What the carrier does for the child (so the child does not):
//! - it answers the client's `session.submit` with `{turn_id}` and emits `turn_started` as soon
//!   as the submit is written to the child; it stamps `seq` on every event, keeps the resume
//!   ring and the history, and answers `busy` / `not_found` itself;
//! - it emits `permission_resolved` when a client answers (then sends the child
//!   `session.permission.respond`); a child's own `turn_started` or `permission_resolved` is
//!   dropped, as is an event of a turn that is not running, a line that is not a valid frame, or an
//!   event whose name or field types are not those of docs/protocol.md, "Events" (all logged);
//! - `session.history` / `session.status` are forwarded; a child answering `method_not_found`
//!   (or not running) is served from the carrier's own record. `session.status` is answered
//!   under the carrier's `session_id`.
//!
//! What the child must do: answer every request by `id` within the timeout
//! (`--agent-timeout-ms`, default 30 s), emit `session.turn_completed` to end each turn, stop a
//! turn on `session.abort`, and **exit when its stdin closes**.
//!
//! Long replies: a line is at most [`DEFAULT_MAX_LINE_BYTES`] (1 MiB); a longer one is dropped
//! whole as it streams by (never buffered), so it is lost — for a `turn_completed`, the turn
//! keeps running until a client aborts it. A child with a long reply streams it in deltas of
//! any size under the line cap (the carrier forwards each one whole, split into events of at
//! most `max_reply_bytes`) and ends the turn with a `turn_completed` whose `text` fits a line;
//! when that text is not the whole reply it adds `"truncated": true`. The carrier keeps at
//! most `max_reply_bytes` of the text either way, cutting it (and marking it) when longer.
//!
//! Failures: a submit not answered in time ends the turn with `session.error {code:
//! "agent_timeout"}` and an aborted `turn_completed` (the child is sent `session.abort`); a
//! read not answered in time fails with `internal` / `effect_state: "unknown"`; a child that
//! exits mid-turn ends it with `session.error {code: "agent_exited"}` and an aborted
//! `turn_completed`. The next submit restarts it, at most 5 times a minute; after that every
//! submit ends with `agent_exited` until the carrier restarts.
//!
//! The child never outlives the carrier: [`AgentProcess::stop`] (and `TextProfile::shutdown`)
//! closes its stdin, gives it the stop grace (500 ms) and kills it; it is spawned with
//! `kill_on_drop`. If the carrier itself is killed (`SIGKILL`), no code of ours runs: the
//! child then sees its stdin close and must exit. (`prctl(PR_SET_PDEATHSIG)` would need
//! `libc` and `unsafe` in a `pre_exec` hook, and it fires when the *thread* that spawned the
//! child exits — with tokio's pool, possibly long before the carrier does — so it is not used.)
//!
//! One agent process is one session: the child's submit carries no session id, so its
//! conversation cannot be shared between sessions. [`AgentProcess::profile`] serves it as the
//! single session `s1`; `sessions.start` is refused (`internal`) — run another carrier for
//! another agent process.
//!
//! The pieces under it serve any line wire over a child's stdio (`carrier-acp` hosts an ACP
//! agent with them, `--agent-acp`), so both keep the same bounds and rules: [`ChildLink`]
//! (spawning, the capped line reader with its read-ahead, stderr to the log, stopping, and
//! [`ChildLink::read_until_exit`]), [`Requests`] (the requests awaiting the child's answer,
//! at most so many, each within the request timeout: [`answer_within`]) and
//! [`RestartBudget`] (5 restarts a minute).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use carrier_agent::process::{AgentProcess, AgentProcessConfig};
//! use carrier_server::{CarrierConfig, WsTransport};
//!
//! let agent = AgentProcess::start(AgentProcessConfig::from_command_line("python3 agent.py")?).await?;
//! let transport = WsTransport::new(CarrierConfig::default().with_port(0))?;
//! transport.attach(agent.profile());
//! transport.start().await?;
//! // …
//! transport.stop().await;
//! agent.stop().await;
//! # Ok(()) }
//! ```

mod child;
mod codec;
mod config;
mod error;
mod hello;
mod lines;
mod requests;
mod restarts;
mod session;
mod submit;
mod supervisor;
mod turns;

use std::sync::Arc;

/// The agent's name and version from its handshake ([`AgentProcess::agent_info`]).
pub use carrier_protocol::methods::AppInfo;
pub use config::{
    AgentProcessConfig, DEFAULT_LINE_QUEUE, DEFAULT_MAX_LINE_BYTES,
    DEFAULT_MAX_RESTARTS_PER_MINUTE, DEFAULT_REQUEST_TIMEOUT,
};
pub use error::AgentProcessError;
pub use lines::{Line, LineReader};
// What any line wire over a child's stdio builds on (ACP's `--agent-acp` in `carrier-acp`):
// the same line cap, read-ahead, stop and restart rules as `--agent-cmd`.
pub use child::{ChildLines, ChildLink, SendLineError};
pub use requests::{answer_within, Outcome, Requests, TooManyRequests};
pub use restarts::RestartBudget;

use super::directory::{SessionDirectory, SessionEntry};
use super::profile::AgentProfile;
use super::session::{HostError, ProtocolSession};
use carrier_protocol::ids::SessionId;
use session::ProcessSession;
use supervisor::Supervisor;

/// A supervised agent process: started (and handshaken) by [`AgentProcess::start`], restarted
/// by the next submit after it exits, stopped by [`AgentProcess::stop`]. Cheap to clone;
/// clones share the process.
#[derive(Clone)]
pub struct AgentProcess {
    sup: Arc<Supervisor>,
}

impl std::fmt::Debug for AgentProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentProcess")
            .field("program", &self.sup.config.program())
            .field("pid", &self.pid())
            .finish()
    }
}

impl AgentProcess {
    /// Starts the child and completes its handshake. Fails when the program cannot start,
    /// does not answer the handshake within the request timeout, exits, or speaks an
    /// incompatible protocol (docs/protocol.md, "Versions"); the child is then killed.
    pub async fn start(config: AgentProcessConfig) -> Result<AgentProcess, AgentProcessError> {
        let sup = Supervisor::new(config);
        sup.launch().await?;
        Ok(AgentProcess { sup })
    }

    /// The child's `server` from its last handshake (`version` empty when it sent none).
    pub fn agent_info(&self) -> AppInfo {
        self.sup.agent_info().unwrap_or(AppInfo {
            name: String::new(),
            version: String::new(),
        })
    }

    /// The running child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.sup.running().and_then(|l| l.pid)
    }

    /// The agent as the [`ProtocolSession`] of session `session_id`, for a host's own
    /// directory. Every session given it drives the same child, so give it to one session only.
    pub fn session(&self, session_id: &str) -> Arc<dyn ProtocolSession> {
        Arc::new(ProcessSession {
            sup: self.sup.clone(),
            session_id: SessionId::from(session_id),
        })
    }

    /// The directory of the one session this process is: `s1`, titled `default`.
    pub fn directory(&self) -> ProcessDirectory {
        ProcessDirectory {
            session: self.session(SESSION_ID),
        }
    }

    /// An [`AgentProfile`] serving this process as its only session, with the default binder
    /// and resume ring, and no usage reporter (the process reports no usage). Use
    /// [`AgentProfile::builder`] with [`AgentProcess::directory`] to change those.
    pub fn profile(&self) -> AgentProfile {
        AgentProfile::builder(self.directory()).build()
    }

    /// Stops the child for good: closes its stdin, waits the stop grace, kills it and waits
    /// until it is reaped. Later submits end with `agent_exited`. Safe to call more than once.
    pub async fn stop(&self) {
        self.sup.stop().await;
    }
}

/// The single-session directory of an [`AgentProcess`] (see the module docs).
pub struct ProcessDirectory {
    session: Arc<dyn ProtocolSession>,
}

/// The id of the one session.
const SESSION_ID: &str = "s1";

impl SessionDirectory for ProcessDirectory {
    fn list(&self) -> Vec<SessionEntry> {
        vec![SessionEntry {
            session_id: SESSION_ID.into(),
            title: "default".into(),
        }]
    }

    fn open(&self, session_id: &str) -> Option<Arc<dyn ProtocolSession>> {
        (session_id == SESSION_ID).then(|| self.session.clone())
    }

    fn start(&self, _title: Option<&str>) -> Result<SessionEntry, HostError> {
        Err(HostError::new(
            "this carrier hosts one agent process, which is one session; start another \
             carrier for another agent process",
        ))
    }
}

//! An ACP agent process as the agent of carrier's sessions (`carrier serve --agent-acp "CMD
//! ARGS"`): carrier launches it and is its ACP *client* over stdio — one JSON-RPC message per
//! line, UTF-8; its stderr goes to the carrier's log at `info`.
//!
//! At launch carrier sends `initialize` (ACP version 1, `clientInfo` carrier's, client
//! capabilities: no `fs`, no `terminal` — the agent works on its own files) and `session/new
//! {cwd, mcpServers: []}` for the default session `s1` (`cwd`: [`AcpAgentConfig::with_cwd`],
//! `--agent-cwd`, by default the current directory). An agent that refuses it and names
//! `authMethods` stops the launch ([`AcpAgentError::AuthRequired`] names them: carrier does not
//! authenticate). One process serves every carrier session: each is one ACP session of it
//! (`session/new` as the session starts), so `sessions.start` works.
//!
//! | carrier | ACP |
//! |---|---|
//! | a turn (`session.submit {prompt}`) | `session/prompt {sessionId, prompt: [{type: "text", text}]}` |
//! | `session.abort` | `session/cancel {sessionId}`; open permission requests answered `{outcome: "cancelled"}` |
//! | `session.text_delta` | `session/update` `agent_message_chunk` of text |
//! | `session.agent_update {turn_id?, update}` | every other `session/update` (tool calls and their updates, plans, thoughts, commands, modes, usage, …), `update` byte for byte |
//! | `session.permission_request {tool, input, options}` | `session/request_permission {toolCall, options}`: `tool` the call's title, `input` the call |
//! | `session.permission.respond` `allow` / `deny` / `option_id` | `{outcome: "selected", optionId}`: the `allow_once` / `reject_once` option (else `allow_always` / `reject_always`), or the option named |
//! | `turn_completed {aborted, stop_reason}` | the prompt's answer `{stopReason}`: `cancelled` is aborted |
//! | — (answered `-32601`) | `fs/*`, `terminal/*`, any other request of the agent's |
//!
//! Bounds, timeouts and restarts are `--agent-cmd`'s ([`carrier_agent::process`]): a line over
//! the line cap (1 MiB) is skipped as it streams; at most 32 lines are read ahead; requests
//! carrier awaits are at most [`MAX_REQUESTS_IN_FLIGHT`], each answered within the request
//! timeout (`--agent-timeout-ms`) — a prompt within the timeout of the agent's last message
//! about its session, since a turn streams for as long as it needs, and not while a
//! permission prompt waits for a person; at most [`MAX_OPEN_PERMISSIONS`] of the agent's
//! permission requests wait for an answer at once; an agent that exits mid-turn ends it with
//! `agent_exited`, and the next turn restarts it (at most 5 times a minute; each session then
//! gets a new ACP session: the agent's memory of the conversation went with it); the child
//! never outlives the carrier.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use carrier_acp::agent_host::{AcpAgent, AcpAgentConfig};
//! use carrier_server::{CarrierConfig, WsTransport};
//!
//! let config = AcpAgentConfig::from_command_line("npx my-acp-agent")?.with_cwd("/home/me/project");
//! let agent = AcpAgent::start(config).await?;
//! let transport = WsTransport::new(CarrierConfig::default().with_port(0))?;
//! transport.attach(agent.profile());
//! transport.start().await?;
//! // …
//! transport.stop().await;
//! agent.stop().await;
//! # Ok(()) }
//! ```

mod config;
mod directory;
mod error;
mod peer;
mod session;
mod wire;

use std::sync::Arc;

use carrier_agent::AgentProfile;
use carrier_protocol::methods::AppInfo;

pub use config::AcpAgentConfig;
pub use directory::AcpDirectory;
pub use error::AcpAgentError;
pub use peer::{MAX_OPEN_PERMISSIONS, MAX_REQUESTS_IN_FLIGHT};
pub use session::{MAX_OPTIONS, MAX_OPTION_BYTES, MAX_PERMISSION_INPUT};

use session::Peer;

/// The id of the session made at launch, the default one.
const FIRST_SESSION: &str = "s1";

/// A supervised ACP agent process: started (initialized, its first session made) by
/// [`AcpAgent::start`], restarted by the next turn after it exits, stopped by
/// [`AcpAgent::stop`]. Cheap to clone; clones share the process.
#[derive(Clone)]
pub struct AcpAgent {
    peer: Arc<Peer>,
}

impl std::fmt::Debug for AcpAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpAgent")
            .field("program", &self.peer.config.process().program())
            .field("pid", &self.pid())
            .finish()
    }
}

impl AcpAgent {
    /// Starts the agent, `initialize`s it and makes the first session's ACP session. Fails
    /// when the program cannot start, does not answer in time, exits, speaks another ACP
    /// version, or refuses `session/new` (naming its `authMethods` when it has some); the
    /// child is then stopped.
    pub async fn start(config: AcpAgentConfig) -> Result<AcpAgent, AcpAgentError> {
        if !config.cwd().is_dir() {
            return Err(AcpAgentError::Cwd {
                path: config.cwd().display().to_string(),
                reason: "not a directory".into(),
            });
        }
        let peer = Peer::new(config);
        let link = peer.launch().await?;
        let first = peer.session(FIRST_SESSION);
        if let Err((_, why)) = first.ensure_acp(&peer, &link).await {
            let methods = peer.auth_methods();
            peer.stop().await;
            return Err(match methods.is_empty() {
                true => AcpAgentError::Refused {
                    method: "session/new",
                    reason: why,
                },
                false => AcpAgentError::AuthRequired { methods },
            });
        }
        Ok(AcpAgent { peer })
    }

    /// The agent's `agentInfo` (`version` empty when it sent none).
    pub fn agent_info(&self) -> AppInfo {
        let info = self.peer.agent_info().unwrap_or_default();
        AppInfo {
            name: info.name,
            version: info.version,
        }
    }

    /// The running child's process id.
    pub fn pid(&self) -> Option<u32> {
        self.peer.running().and_then(|l| l.pid())
    }

    /// The agent's sessions, for a host's own profile.
    pub fn directory(&self) -> AcpDirectory {
        AcpDirectory::new(self.peer.clone())
    }

    /// An [`AgentProfile`] serving the agent's sessions with the default binder, usage
    /// reporter and bounds. Use [`AgentProfile::builder`] with [`AcpAgent::directory`] to
    /// change those.
    pub fn profile(&self) -> AgentProfile {
        AgentProfile::builder(self.directory()).build()
    }

    /// Stops the child for good: closes its stdin, waits the stop grace, kills it and waits
    /// until it is reaped. Later turns end with `agent_exited`. Safe to call more than once.
    pub async fn stop(&self) {
        self.peer.stop().await;
    }
}

//! What the integration tests share (the `carrier-test-support` crate): one server launcher, one
//! config, one wait bound, and the clients that talk to it over real sockets on 127.0.0.1.
//!
//! - [`Server`] starts a [`WsTransport`] on port 0 with the embedded agent, the seed
//!   system's wire at `/robota` and ACP at `/acp` ([`Server::start`], [`Server::with`]) or with the payload-agnostic [`TestProfile`] ([`Server::core`]).
//! - [`AgentServer`]: a [`Server`] hosting an agent process, as `carrier serve --agent-cmd` does.
//! - The agent-protocol client ([`Client`]: handshake, requests, waiting for events) and the
//!   carrier-core helpers (a `tokio-tungstenite` connector, the byte-exact [`Raw`] client).
//! - [`bulk`]: a bulk-channel client that counts inbound credit (or announces 1.0).
//! - [`figure`]: the README's memory figure, computed from a carrier's flags.
//! - [`node`]: Node.js and npm commands with a deadline, and the JS package's dev dependencies.
//! - [`robota`]: a client of the seed system's own wire (the Robota profile).
//! - [`acp`]: a client of the `/acp` profile (JSON-RPC 2.0), which can record what it hears.
//! - [`rogue`]: a rogue server's pieces (frames masked as no server may send them, spoiled
//!   upgrade answers).
//! - [`runtime_file`]: runtime files as a carrier writes them, and the processes they name.
//! - [`squatter`]: another user's listener that records what it receives.
//! - [`serve_process`] runs a carrier as a child process: the real `carrier serve` binary (only
//!   for the tests of `carrier-cli`, the binary's package), or a crate's test host example.
//! - [`host`]: that test host, a carrier process for the tests that watch a process (its memory,
//!   its log, its children); `server/examples/server_host.rs` and `agent/examples/agent_host.rs`
//!   run it.
//!
//! A crate rather than a `mod` in each test, so every test uses what it needs and nothing is
//! dead code for the others.

pub mod acp;
mod agent;
pub mod bulk;
mod common;
pub mod figure;
pub mod host;
pub mod node;
pub mod robota;
pub mod rogue;
pub mod runtime_file;
pub mod serve_process;
pub mod squatter;
mod stash;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use carrier::acp::{AcpProfile, ACP_PATH};
use carrier::agent::process::{AgentProcess, AgentProcessConfig};
use carrier::agent::{AgentProfile, SessionUsage};
use carrier::robota::{RobotaProfile, ROBOTA_PATH};
use carrier::server::{
    Attachment, Binary, CarrierConfig, ChannelDescriptor, ChannelHandle, DeliveryClass, WsTransport,
};

pub use agent::*;
pub use common::{repo, Ws, DELAY, WAIT};
pub use wire::*;

/// A config for tests: port 0, a fixed token, named driver and surface, a 5 s handshake timeout.
pub fn config() -> CarrierConfig {
    let mut config = CarrierConfig::default()
        .with_port(0)
        .with_auth(carrier::server::Auth::Token("test-token".into()))
        .with_driver_id("host-driver".into())
        .with_surface("test-surface".into());
    config.limits.handshake_timeout = Duration::from_secs(5);
    config
}

/// `profile` at `/` and the seed system's wire over its sessions at `/robota`, as `carrier
/// serve` attaches them.
pub fn with_robota(profile: AgentProfile) -> Attachment {
    let robota = Arc::new(RobotaProfile::new(&profile));
    Attachment::from(profile).with_route(ROBOTA_PATH, robota)
}

/// `profile` at `/` with every foreign wire over its sessions, as `carrier serve` attaches
/// them: the seed system's at `/robota`, ACP at `/acp`.
pub fn with_wires(profile: AgentProfile) -> Attachment {
    let acp = Arc::new(AcpProfile::new(&profile));
    with_robota(profile).with_route(ACP_PATH, acp)
}

/// A started carrier on 127.0.0.1.
pub struct Server {
    /// The carrier itself, for registering channels and reading its state.
    pub transport: WsTransport,
    /// The port it listens on.
    pub port: u16,
    /// The token a client presents.
    pub token: String,
    /// What the [`TestProfile`] observed; stays zero under any other profile.
    pub stats: Arc<Stats>,
}

impl Server {
    /// The embedded agent with [`DELAY`] on [`config()`].
    pub async fn start() -> Server {
        Server::with(config(), embedded(DELAY)).await
    }

    /// A server with a given config and agent profile, serving the seed system's wire at
    /// `/robota` and ACP at `/acp` beside it (as `carrier serve` does).
    pub async fn with(config: CarrierConfig, profile: AgentProfile) -> Server {
        let transport = WsTransport::new(config).expect("valid config");
        transport.attach(with_wires(profile));
        Server::listen(transport, Arc::default()).await
    }

    /// Declares a bulk channel every role may send on, binary frames accepted.
    pub fn bulk_channel(&self, name: &str) -> ChannelHandle {
        self.transport
            .register_channel(
                ChannelDescriptor::new(name, &["*"], Binary::Accepted)
                    .delivery(DeliveryClass::Bulk),
            )
            .expect("register")
    }

    /// The payload-agnostic [`TestProfile`] on `config`.
    pub async fn core(config: CarrierConfig) -> Server {
        let transport = WsTransport::new(config).expect("valid config");
        let stats = Arc::new(Stats::default());
        transport.attach(Arc::new(TestProfile {
            stats: stats.clone(),
        }));
        Server::listen(transport, stats).await
    }

    /// The [`TestProfile`] on [`config()`].
    pub async fn core_default() -> Server {
        Server::core(config()).await
    }

    async fn listen(transport: WsTransport, stats: Arc<Stats>) -> Server {
        transport.start().await.expect("start");
        let port = transport.bound_port().expect("bound port");
        let token = transport.resolved_token().unwrap_or_default().to_owned();
        Server {
            transport,
            port,
            token,
            stats,
        }
    }

    /// The WebSocket URL with the token and an extra query (e.g. `"&role=observe"`, or `""`).
    pub fn url(&self, extra_query: &str) -> String {
        format!(
            "ws://127.0.0.1:{}/?token={}{extra_query}",
            self.port, self.token
        )
    }

    /// The URL of the seed system's wire (`/robota`) with the token and an extra query.
    pub fn robota_url(&self, extra_query: &str) -> String {
        format!(
            "ws://127.0.0.1:{}/robota?token={}{extra_query}",
            self.port, self.token
        )
    }

    /// The URL of ACP (`/acp`) with the token and an extra query.
    pub fn acp_url(&self, extra_query: &str) -> String {
        format!(
            "ws://127.0.0.1:{}/acp?token={}{extra_query}",
            self.port, self.token
        )
    }

    /// Connects an agent-protocol client without handshaking.
    pub async fn connect(&self, extra_query: &str) -> Client {
        Client::connect(&self.url(extra_query)).await
    }

    /// Connects and completes the handshake; returns the client and the handshake result.
    pub async fn drive(&self) -> (Client, serde_json::Value) {
        self.handshaken("").await
    }

    /// Connects as observer and completes the handshake.
    pub async fn observe(&self) -> (Client, serde_json::Value) {
        self.handshaken("&role=observe").await
    }

    async fn handshaken(&self, extra_query: &str) -> (Client, serde_json::Value) {
        let mut c = self.connect(extra_query).await;
        let result = c.handshake(serde_json::json!({})).await;
        (c, result)
    }
}

/// An agent process hosted by an in-process carrier, as `carrier serve --agent-cmd CMD` hosts
/// it: the identity `carrier serve` stamps by default (driver `local`, surface `carrier`), its
/// 30 s agent timeout, the seed system's wire at `/robota`.
pub struct AgentServer {
    /// The carrier.
    pub server: Server,
    /// The agent process its profile talks to.
    pub agent: AgentProcess,
}

impl AgentServer {
    /// `command_line` (split as `--agent-cmd` splits it) on [`config()`] with the identity of
    /// `carrier serve`.
    pub async fn start(command_line: &str) -> AgentServer {
        AgentServer::start_with(command_line, config()).await
    }

    /// `command_line` on `config` with the identity of `carrier serve`.
    pub async fn start_with(command_line: &str, config: CarrierConfig) -> AgentServer {
        let process = AgentProcessConfig::from_command_line(command_line)
            .expect("a command line")
            .request_timeout(Duration::from_secs(30));
        AgentServer::spawn(process, config).await
    }

    /// `process` on `config` with the identity of `carrier serve`.
    pub async fn spawn(process: AgentProcessConfig, config: CarrierConfig) -> AgentServer {
        let agent = AgentProcess::start(process)
            .await
            .expect("the agent process starts");
        let config = config
            .with_driver_id(carrier::server::DEFAULT_DRIVER_ID.into())
            .with_surface("carrier".into());
        // As `carrier serve` hosts a child: usage counted, so a client cannot tell it from the
        // embedded agent by its features.
        let profile = AgentProfile::builder(agent.directory())
            .usage(SessionUsage::default())
            .build();
        let server = Server::with(config, profile).await;
        AgentServer { server, agent }
    }

    /// The WebSocket URL with the token.
    pub fn url(&self) -> String {
        self.server.url("")
    }

    /// A handshaken drive client and its handshake result.
    pub async fn client(&self) -> (Client, serde_json::Value) {
        self.server.drive().await
    }

    /// The agent process running now.
    pub fn agent_pid(&self) -> u32 {
        self.agent.pid().expect("a running agent process")
    }

    /// Stops the carrier, then its agent process (as `carrier serve` does at SIGTERM), and
    /// checks that the agent process did not outlive it.
    pub async fn finish(self) {
        let pid = self.agent.pid();
        self.server.transport.stop().await;
        self.agent.stop().await;
        if let Some(pid) = pid {
            assert!(
                !serve_process::alive(pid),
                "agent process {pid} outlived the carrier"
            );
        }
    }
}

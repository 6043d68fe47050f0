//! `carrier serve`: flags → [`CarrierConfig`], the attached agent, mounted channels, the
//! `listening` line, signals. Wiring only.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use carrier::acp::agent_host::{AcpAgent, AcpAgentConfig, AcpAgentError};
use carrier::acp::{AcpProfile, ACP_PATH};
use carrier::agent::process::{AgentProcess, AgentProcessConfig, AgentProcessError};
use carrier::agent::{
    AgentProfile, EmbeddedAgent, InMemoryDirectory, SessionUsage, DEFAULT_MAX_SESSION_BYTES,
};
use carrier::protocol::Role;
use carrier::robota::{RobotaProfile, ROBOTA_PATH};
use carrier::server::{
    Attachment, Auth, CarrierConfig, Limits, RuntimeFileOptions, Token, UnixSocket, WsTransport,
};
use clap::Args;

use carrier_channels::{self as channels, ChannelSpec};

/// Flags of `carrier serve` (README.md, "Serving"). Every flag also reads an environment variable;
/// prefer `CARRIER_TOKEN` over `--token`: command lines are visible to other local users.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// First port to try on 127.0.0.1 (0: any free port).
    #[arg(long, env = "CARRIER_PORT", default_value_t = 7070)]
    port: u16,
    /// How many following ports to try when the port is taken.
    #[arg(long, env = "CARRIER_MAX_RETRIES", default_value_t = 20)]
    max_retries: u16,
    /// The token clients must present (default: a random one per launch).
    #[arg(
        long,
        env = "CARRIER_TOKEN",
        hide_env_values = true,
        conflicts_with = "open",
        value_parser = parse_token
    )]
    token: Option<Token>,
    /// Run without a token (needs --open-reason). Any local process could then drive the agent.
    #[arg(long, env = "CARRIER_OPEN")]
    open: bool,
    /// Why this carrier runs without a token.
    #[arg(long, env = "CARRIER_OPEN_REASON")]
    open_reason: Option<String>,
    /// The most a connection may do: drive or observe.
    #[arg(long, env = "CARRIER_ROLE", default_value = "drive", value_parser = parse_role)]
    role: Role,
    /// Extra Host name to accept besides loopback (bare name, no port). Repeatable.
    #[arg(
        long = "allowed-host",
        env = "CARRIER_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,
    /// Extra browser origin to accept (scheme://host[:port]). Repeatable.
    #[arg(
        long = "allowed-origin",
        env = "CARRIER_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,
    /// A payload channel NAME:KIND[:ARG], KIND = echo | relay | files:DIR; echo and relay take
    /// `:bulk` for the bulk delivery class (NAME:echo:bulk). Repeatable.
    #[arg(long = "channel", env = "CARRIER_CHANNELS", value_delimiter = ',')]
    channels: Vec<ChannelSpec>,
    /// Host an external agent process speaking the envelope as JSON lines on stdin/stdout.
    #[arg(long, env = "CARRIER_AGENT_CMD", conflicts_with = "agent_acp")]
    agent_cmd: Option<String>,
    /// Host an ACP agent (Agent Client Protocol over stdio): carrier is its ACP client.
    #[arg(long, env = "CARRIER_AGENT_ACP")]
    agent_acp: Option<String>,
    /// The working directory of the ACP agent's sessions (default: the current directory).
    #[arg(long, env = "CARRIER_AGENT_CWD", requires = "agent_acp")]
    agent_cwd: Option<PathBuf>,
    /// How long the agent process may take to answer a request.
    #[arg(long, env = "CARRIER_AGENT_TIMEOUT_MS", default_value_t = 30_000)]
    agent_timeout_ms: u64,
    /// Delay between the embedded agent's deltas.
    #[arg(long, env = "CARRIER_DEMO_DELAY_MS", default_value_t = 10)]
    demo_delay_ms: u64,
    /// Soft limit of one text message (answered `too_large`, the socket stays open).
    #[arg(long, env = "CARRIER_MAX_TEXT_BYTES", default_value_t = 1 << 20)]
    max_text_bytes: usize,
    /// Hard cap of any message (close 1009).
    #[arg(long, env = "CARRIER_MAX_MESSAGE_BYTES", default_value_t = 16 << 20)]
    max_message_bytes: usize,
    /// Memory for messages clients send, shared by all connections; a message that does not fit
    /// waits. Default: 64 MiB, or --max-message-bytes when that is larger.
    #[arg(long, env = "CARRIER_MAX_INBOUND_BYTES")]
    max_inbound_bytes: Option<usize>,
    /// Connections admitted at once; one more is answered HTTP 503. Each one counts in the
    /// README's memory figure and holds a file descriptor: `ulimit -n` must leave room for it.
    #[arg(
        long,
        env = "CARRIER_MAX_CONNECTIONS",
        default_value_t = Limits::default().max_connections
    )]
    max_connections: usize,
    /// Outbound bytes queued per connection before a slow reader is closed (1013).
    #[arg(long, env = "CARRIER_QUEUE_BYTES", default_value_t = 8 << 20)]
    queue_bytes: usize,
    /// Bytes of one reply kept for `turn_completed.text` and history (more: `truncated`).
    #[arg(long, env = "CARRIER_MAX_REPLY_BYTES", default_value_t = 1 << 20)]
    max_reply_bytes: usize,
    /// Memory for every session's history and resume events together (at most 64 GiB); past it
    /// the least recently used sessions lose their oldest entries first.
    #[arg(
        long,
        env = "CARRIER_MAX_SESSION_BYTES",
        default_value_t = DEFAULT_MAX_SESSION_BYTES,
        value_parser = parse_session_bytes
    )]
    max_session_bytes: usize,
    /// Write the token to this new file (mode 0600) instead of printing it.
    #[arg(long, env = "CARRIER_TOKEN_FILE", conflicts_with = "open")]
    token_file: Option<PathBuf>,
    /// Identity stamped on turns submitted through this listener.
    #[arg(long, env = "CARRIER_DRIVER_ID", default_value = "local")]
    driver_id: String,
    /// Surface name stamped on turns.
    #[arg(long, env = "CARRIER_SURFACE", default_value = "carrier")]
    surface: String,
    /// What `/` speaks: carrier (the agent protocol) or robota (the seed system's own wire,
    /// which `/robota` speaks either way).
    #[arg(long, env = "CARRIER_PROFILE", default_value = "carrier")]
    profile: String,
    /// The Unix socket local clients of your user reach this carrier through, without a token
    /// (default: PID.sock beside the runtime file). Its directory must be yours and writable
    /// by no one else.
    #[arg(long, env = "CARRIER_UNIX_SOCKET", conflicts_with = "no_unix_socket")]
    unix_socket: Option<PathBuf>,
    /// No Unix socket: clients use TCP (and the owner check where the system has one).
    #[arg(long, env = "CARRIER_NO_UNIX_SOCKET")]
    no_unix_socket: bool,
    /// Runtime worker threads. Default: the CPUs this process may run on.
    #[arg(long, env = "CARRIER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
}

/// The runtime `carrier serve` runs on: `threads` workers (default: the CPUs the process may
/// use, which honours `taskset` and cgroup limits).
///
/// Always the multi-thread scheduler, also with one worker: a worker runs the task a running
/// task woke next (tokio's LIFO slot), so a connection's writer writes right after its reader
/// routed a frame, while the frame is still in the cache. The current-thread scheduler queues
/// the writer behind every other ready task: pinned to one CPU, a 100-connection 16 KiB channel
/// echo carried 11 % fewer messages per second with it, and `system.ping` 10 % more (medians of
/// 15 paired runs; BENCHMARKS.md, "Server changes"). The echo is the carrier's
/// heavier traffic, and the build before `--threads` existed ran this scheduler too.
pub fn runtime(threads: Option<u16>) -> std::io::Result<tokio::runtime::Runtime> {
    let n = threads.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(n.max(1))
        .enable_all()
        .build()
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| format!("unknown role {s:?}: use drive or observe"))
}

fn parse_session_bytes(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n <= carrier::server::MAX_BUDGET => Ok(n),
        Ok(_) => Err("at most 68719476736 (64 GiB)".to_owned()),
        Err(e) => Err(format!("{e}: a number of bytes")),
    }
}

fn parse_token(s: &str) -> Result<Token, std::convert::Infallible> {
    Ok(Token::from(s))
}

/// `--open`, `--token` and `--open-reason` that contradict each other: they cannot be said in
/// an [`Auth`], so the CLI refuses them itself (exit 2).
#[derive(Debug, thiserror::Error)]
enum AuthFlagsError {
    #[error("open mode and a token are mutually exclusive: drop --open or drop the token")]
    OpenWithToken,
    #[error("open_reason is only meaningful with open mode (--open)")]
    ReasonWithoutOpen,
}

/// The text profile `/` speaks (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Profile {
    Carrier,
    Robota,
}

impl ServeArgs {
    /// `--profile`, read here rather than by clap so a bad value is one line, like the other
    /// configuration errors.
    fn profile(&self) -> Result<Profile, String> {
        match self.profile.as_str() {
            "carrier" => Ok(Profile::Carrier),
            "robota" => Ok(Profile::Robota),
            other => Err(format!("unknown profile {other:?}: use carrier or robota")),
        }
    }
}

fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("carrier serve: {message}");
    ExitCode::from(2)
}

fn runtime_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("carrier serve: {message}");
    ExitCode::from(1)
}

impl ServeArgs {
    /// The flags' choice of token or open mode. A blank or missing reason with `--open` is
    /// left to [`CarrierConfig::validate`], which owns that rule.
    fn auth(&self) -> Result<Auth, AuthFlagsError> {
        match (self.open, &self.token, &self.open_reason) {
            (true, Some(_), _) => Err(AuthFlagsError::OpenWithToken),
            (true, None, reason) => Ok(Auth::Open {
                reason: reason.clone().unwrap_or_default(),
            }),
            (false, _, Some(_)) => Err(AuthFlagsError::ReasonWithoutOpen),
            (false, Some(token), None) => Ok(Auth::Token(token.clone())),
            (false, None, None) => Ok(Auth::Mint),
        }
    }

    /// `--unix-socket` / `--no-unix-socket`.
    fn unix_socket(&self) -> UnixSocket {
        match (&self.unix_socket, self.no_unix_socket) {
            (_, true) => UnixSocket::Off,
            (Some(path), false) => UnixSocket::At(path.clone()),
            (None, false) => UnixSocket::BesideRuntimeFile,
        }
    }

    fn config(&self) -> Result<CarrierConfig, AuthFlagsError> {
        Ok(CarrierConfig::default()
            .with_port(self.port)
            .with_max_retries(self.max_retries)
            .with_auth(self.auth()?)
            .with_role(self.role)
            .with_allowed_hosts(self.allowed_hosts.clone())
            .with_allowed_origins(self.allowed_origins.clone())
            .with_driver_id(self.driver_id.clone())
            .with_surface(self.surface.clone())
            .with_limits(
                Limits::default()
                    .with_max_text_bytes(self.max_text_bytes)
                    .with_max_message_bytes(self.max_message_bytes)
                    .with_max_inbound_bytes(self.max_inbound_bytes.unwrap_or(
                        carrier::server::DEFAULT_MAX_INBOUND.max(self.max_message_bytes),
                    ))
                    .with_max_connections(self.max_connections)
                    .with_queue_bytes(self.queue_bytes)
                    .with_max_reply_bytes(self.max_reply_bytes),
            ))
    }
}

/// The one line printed on stdout once listening; fields in the documented order (docs/protocol.md,
/// "Discovery and the CLI").
#[derive(serde::Serialize)]
struct Listening {
    event: &'static str,
    url: String,
    port: u16,
    token: serde_json::Value,
    role: &'static str,
    /// The Unix socket, `null` without one.
    socket: Option<String>,
}

/// Runs `carrier serve` until SIGINT/SIGTERM.
pub async fn run(args: ServeArgs) -> ExitCode {
    // The runtime file lets `carrier send`, `connect`, `status` and `doctor` find this carrier
    // (docs/protocol.md, "Discovery and the CLI"); with --token-file the token stays in that file
    // only.
    let mut advertised = RuntimeFileOptions::for_user();
    if args.token_file.is_some() {
        advertised = advertised.without_token();
    }
    let config = match args.config() {
        Ok(config) => config,
        Err(e) => return usage_error(e),
    };
    let profile = match args.profile() {
        Ok(profile) => profile,
        Err(e) => return usage_error(e),
    };
    let transport = match WsTransport::new(config) {
        Ok(t) => t
            .with_runtime_file(advertised)
            .with_unix_socket(args.unix_socket()),
        Err(e) => return usage_error(e),
    };
    let agent = match (&args.agent_cmd, &args.agent_acp) {
        (Some(command_line), _) => {
            match start_agent_process(command_line, args.agent_timeout_ms).await {
                Ok(agent) => Some(Hosted::Process(agent)),
                Err(e @ AgentProcessError::CommandLine(_)) => return usage_error(e),
                Err(e) => return runtime_error(e),
            }
        }
        (None, Some(command_line)) => {
            let cwd = args.agent_cwd.as_deref();
            match start_acp_agent(command_line, cwd, args.agent_timeout_ms).await {
                Ok(agent) => Some(Hosted::Acp(agent)),
                Err(e @ (AcpAgentError::CommandLine(_) | AcpAgentError::Cwd { .. })) => {
                    return usage_error(e)
                }
                Err(e) => return runtime_error(e),
            }
        }
        (None, None) => None,
    };
    let code = serve(&args, profile, &transport, agent.as_ref()).await;
    // After every connection is closed: the child never outlives the carrier.
    if let Some(agent) = agent {
        agent.stop().await;
    }
    code
}

/// The agent process `serve` hosts instead of the embedded agent.
enum Hosted {
    /// `--agent-cmd`: the envelope as JSON lines.
    Process(AgentProcess),
    /// `--agent-acp`: an ACP agent.
    Acp(AcpAgent),
}

impl Hosted {
    fn profile(&self) -> carrier::agent::AgentProfileBuilder {
        match self {
            Hosted::Process(agent) => AgentProfile::builder(agent.directory()),
            Hosted::Acp(agent) => AgentProfile::builder(agent.directory()),
        }
    }

    async fn stop(&self) {
        match self {
            Hosted::Process(agent) => agent.stop().await,
            Hosted::Acp(agent) => agent.stop().await,
        }
    }
}

/// Starts `--agent-acp` (split as `--agent-cmd` is): `initialize`, then the first session.
async fn start_acp_agent(
    command_line: &str,
    cwd: Option<&Path>,
    timeout_ms: u64,
) -> Result<AcpAgent, AcpAgentError> {
    let mut config = AcpAgentConfig::from_command_line(command_line)?
        .request_timeout(Duration::from_millis(timeout_ms));
    if let Some(cwd) = cwd {
        config = config.with_cwd(cwd);
    }
    AcpAgent::start(config).await
}

/// Starts `--agent-cmd` (split as a POSIX shell would; no shell runs) and its handshake.
async fn start_agent_process(
    command_line: &str,
    timeout_ms: u64,
) -> Result<AgentProcess, AgentProcessError> {
    let config = AgentProcessConfig::from_command_line(command_line)?
        .request_timeout(Duration::from_millis(timeout_ms));
    AgentProcess::start(config).await
}

/// Attaches the agent, mounts channels, listens, prints the `listening` line and runs until a
/// signal.
async fn serve(
    args: &ServeArgs,
    wire: Profile,
    transport: &WsTransport,
    agent: Option<&Hosted>,
) -> ExitCode {
    // Listen for signals before anything can read the `listening` line: a host that sends
    // SIGTERM as soon as it has the line must get a graceful stop, not the default death.
    let stop = Stop::install();
    let profile = match agent {
        Some(agent) => agent.profile(),
        None => {
            let embedded =
                EmbeddedAgent::default().with_demo_delay(Duration::from_millis(args.demo_delay_ms));
            AgentProfile::builder(InMemoryDirectory::new(move |_| embedded.session()))
        }
    };
    // `serve` counts each session's words as its usage whatever the agent (the library's
    // builder wires no reporter unless asked), so a client cannot tell an `--agent-cmd` child
    // from the embedded agent by its features.
    let profile = profile
        .usage(SessionUsage::default())
        .max_session_bytes(args.max_session_bytes)
        .build();
    // The seed system's wire is served at `/robota` under either profile, and at `/` too with
    // `--profile robota` (where it also stands for the sessions at `stop()`); ACP clients and
    // editors at `/acp`.
    let robota = Arc::new(RobotaProfile::new(&profile));
    let acp = Arc::new(AcpProfile::new(&profile));
    let at_root = match wire {
        Profile::Carrier => Attachment::from(profile),
        Profile::Robota => Attachment::new(robota.clone()),
    };
    transport.attach(
        at_root
            .with_route(ROBOTA_PATH, robota)
            .with_route(ACP_PATH, acp),
    );
    for spec in &args.channels {
        if let Err(e) = channels::mount(transport, spec) {
            return usage_error(e);
        }
    }
    if let Err(e) = transport.start().await {
        return runtime_error(e);
    }
    let Some(port) = transport.bound_port() else {
        return runtime_error("the listener has no port");
    };
    let token = match (&args.token_file, transport.resolved_token()) {
        (Some(path), Some(token)) => match write_token_file(path, token) {
            Ok(()) => serde_json::Value::from("file"),
            Err(e) => {
                transport.stop().await;
                return runtime_error(format!(
                    "cannot write the token file {}: {e}",
                    path.display()
                ));
            }
        },
        (None, Some(token)) => serde_json::Value::from(token),
        (_, None) => serde_json::Value::Null,
    };
    let line = Listening {
        event: "listening",
        url: format!("ws://127.0.0.1:{port}/"),
        port,
        token,
        role: args.role.as_str(),
        socket: transport
            .unix_socket_path()
            .map(|path| path.display().to_string()),
    };
    let line = serde_json::to_string(&line).unwrap_or_default();
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    stop.wait().await;
    transport.stop().await;
    ExitCode::SUCCESS
}

/// Writes the token to a new file readable only by its owner. An existing file (or link) at
/// the path is replaced, never written through.
pub fn write_token_file(path: &Path, token: &str) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => return Err(std::io::Error::other("the path is a directory")),
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(token.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// SIGINT / SIGTERM (Ctrl-C elsewhere), listened for from the moment it is installed.
struct Stop {
    #[cfg(unix)]
    signals: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Stop {
    fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Stop {
                signals: signal(SignalKind::interrupt())
                    .and_then(|int| Ok((int, signal(SignalKind::terminate())?)))
                    .ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Stop {}
        }
    }

    async fn wait(self) {
        #[cfg(unix)]
        if let Some((mut int, mut term)) = self.signals {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

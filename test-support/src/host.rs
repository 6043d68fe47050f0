//! A carrier host for the tests that watch a process rather than a socket: its resident memory,
//! its log, its children, what becomes of them when it is killed. `server/examples/server_host.rs`
//! and `agent/examples/agent_host.rs` are this [`main`], so each crate's tests run an example of
//! their own crate (Cargo builds a package's examples for `cargo test`), not the CLI's `carrier
//! serve`. It takes the few flags of `carrier serve` those tests give, with the same meaning and
//! defaults, and prints the same `listening` line, so [`Serve`](crate::serve_process::Serve)
//! runs either.
//!
//! Flags: `--port N`, `--token T`, `--channel NAME:KIND[:ARG]` (repeatable), `--agent-cmd CMD`,
//! `--agent-timeout-ms N`, `--max-reply-bytes N`. The embedded agent answers without
//! `--agent-cmd`. Logs go to stderr, filtered by `RUST_LOG` (default `info`). SIGTERM or
//! SIGINT stops the carrier, then its agent process, and exits 0; a bad flag exits 2.

use std::process::ExitCode;
use std::time::Duration;

use carrier::agent::process::{AgentProcess, AgentProcessConfig};
use carrier::agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory, SessionUsage};
use carrier::server::{Auth, CarrierConfig, WsTransport};
use carrier_channels::ChannelSpec;
use tokio::signal::unix::{signal, SignalKind};

/// What the flags ask for.
struct Flags {
    port: u16,
    token: String,
    channels: Vec<ChannelSpec>,
    agent_cmd: Option<String>,
    agent_timeout: Duration,
    max_reply_bytes: Option<usize>,
}

impl Flags {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Flags, String> {
        let mut flags = Flags {
            port: 0,
            token: crate::serve_process::TOKEN.to_owned(),
            channels: Vec::new(),
            agent_cmd: None,
            // `carrier serve --agent-timeout-ms`'s default.
            agent_timeout: Duration::from_secs(30),
            max_reply_bytes: None,
        };
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = |value: &str| {
                value
                    .parse::<u64>()
                    .map_err(|e| format!("{flag} {value}: {e}"))
            };
            match flag.as_str() {
                "--port" => {
                    flags.port = u16::try_from(number(&value)?).map_err(|e| e.to_string())?
                }
                "--token" => flags.token = value,
                "--channel" => flags.channels.push(value.parse()?),
                "--agent-cmd" => flags.agent_cmd = Some(value),
                "--agent-timeout-ms" => {
                    flags.agent_timeout = Duration::from_millis(number(&value)?)
                }
                "--max-reply-bytes" => {
                    flags.max_reply_bytes =
                        Some(usize::try_from(number(&value)?).map_err(|e| e.to_string())?)
                }
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        Ok(flags)
    }
}

/// The host's `main`: parses the flags, serves until a signal.
pub fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let flags = match Flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // The runtime `carrier serve` runs on: multi-thread, a worker per CPU.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(flags))
}

async fn serve(flags: Flags) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    };
    // Signals first: a test that sends SIGTERM once it has the line gets a graceful stop.
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(term), Ok(int)) => (term, int),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let mut config = CarrierConfig::default()
        .with_port(flags.port)
        .with_auth(Auth::Token(flags.token.clone().into()));
    if let Some(bytes) = flags.max_reply_bytes {
        config.limits.max_reply_bytes = bytes;
    }
    let transport = match WsTransport::new(config) {
        Ok(transport) => transport,
        Err(e) => return fail(&e),
    };
    let agent = match &flags.agent_cmd {
        Some(command_line) => {
            let config = match AgentProcessConfig::from_command_line(command_line) {
                Ok(config) => config.request_timeout(flags.agent_timeout),
                Err(e) => return fail(&e),
            };
            match AgentProcess::start(config).await {
                Ok(agent) => Some(agent),
                Err(e) => return fail(&e),
            }
        }
        None => None,
    };
    let builder = match &agent {
        Some(agent) => AgentProfile::builder(agent.directory()),
        None => {
            // `carrier serve --demo-delay-ms`'s default.
            let embedded = EmbeddedAgent::default().with_demo_delay(Duration::from_millis(10));
            AgentProfile::builder(InMemoryDirectory::new(move |_| embedded.session()))
        }
    };
    // Usage counted whatever the agent, as `carrier serve` does.
    let profile = builder.usage(SessionUsage::default()).build();
    transport.attach(profile);
    for spec in &flags.channels {
        if let Err(e) = carrier_channels::mount(&transport, spec) {
            return fail(&e);
        }
    }
    if let Err(e) = transport.start().await {
        return fail(&e);
    }
    let Some(port) = transport.bound_port() else {
        return fail(&"the listener has no port");
    };
    let line = serde_json::json!({
        "event": "listening",
        "url": format!("ws://127.0.0.1:{port}/"),
        "port": port,
    });
    println!("{line}");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    transport.stop().await;
    // After every connection is closed: the child never outlives the carrier.
    if let Some(agent) = agent {
        agent.stop().await;
    }
    ExitCode::SUCCESS
}

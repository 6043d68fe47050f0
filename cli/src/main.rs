//! The `carrier` binary. See `carrier --help` and the README.

// The commands are the `carrier-cli` package's library (cli/Cargo.toml), so its tests can call them.
use carrier_cli as cli;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// A loopback WebSocket carrier for AI-agent sessions.
#[derive(Debug, Parser)]
#[command(name = "carrier", about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the embedded agent (or --agent-cmd, --agent-acp) on 127.0.0.1.
    Serve(Box<cli::serve::ServeArgs>),
    /// Run one turn against a running server and print the reply.
    Send(cli::client::SendArgs),
    /// Interactive console: prompts, streamed output, permission answers.
    Connect(cli::client::ConnectArgs),
    /// Pipe stdin to a payload channel and the channel's frames to stdout.
    Pipe(cli::pipe::PipeArgs),
    /// Be an ACP agent on stdio that is a running carrier's /acp (for editors).
    Acp(cli::acp::AcpArgs),
    /// Print a server's `system.status`.
    Status(cli::client::StatusArgs),
    /// Find local servers and check versions and compatibility.
    Doctor(cli::client::DoctorArgs),
    /// Write or check the JSON Schemas of the protocol.
    Schema(cli::schema::SchemaArgs),
    /// Load-test a running server on loopback; prints one JSON line.
    Bench(carrier_loadgen::args::BenchArgs),
}

/// Logs go to stderr, filtered by `RUST_LOG`; by default `serve` logs at info and the client
/// commands only warnings, so their one-line errors stay one line.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// `carrier --version`: the crate's version and the protocol pair this build speaks, e.g.
/// `0.2.0 (protocol 1.2, min 1.0)`, the pair read from the protocol crate's constants.
fn version() -> String {
    use carrier::protocol::version::{MIN_COMPATIBLE_PROTOCOL, PROTOCOL_VERSION};
    format!(
        "{} (protocol {PROTOCOL_VERSION}, min {MIN_COMPATIBLE_PROTOCOL})",
        env!("CARGO_PKG_VERSION")
    )
}

fn parse() -> Result<Cli, clap::Error> {
    // clap keeps a version as `&'static str`; the string is built once per process.
    let version: &'static str = Box::leak(version().into_boxed_str());
    let matches = Cli::command().version(version).try_get_matches()?;
    Cli::from_arg_matches(&matches)
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    init_logging(if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    });
    let runtime = match &cli.command {
        Command::Serve(args) => cli::serve::runtime(args.threads),
        _ => tokio::runtime::Runtime::new(),
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("carrier: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => cli::serve::run(*args).await,
            Command::Send(args) => cli::client::run_send(args).await,
            Command::Connect(args) => cli::client::run_connect(args).await,
            Command::Pipe(args) => cli::pipe::run_pipe(args).await,
            Command::Acp(args) => cli::acp::run_acp(args).await,
            Command::Status(args) => cli::client::run_status(args).await,
            Command::Doctor(args) => cli::client::run_doctor(args).await,
            Command::Schema(args) => cli::schema::run(args),
            Command::Bench(args) => carrier_loadgen::args::run_bench(args).await,
        }
    })
}

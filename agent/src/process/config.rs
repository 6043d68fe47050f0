//! [`AgentProcessConfig`]: what to run and how long to wait for it.

use std::time::Duration;

use super::error::AgentProcessError;

/// How to run and supervise an agent process. Build it from a command line with
/// [`AgentProcessConfig::from_command_line`] (split as a POSIX shell would, but no shell runs)
/// or from a program and its arguments with [`AgentProcessConfig::new`].
///
/// ```
/// use std::time::Duration;
/// use carrier_agent::process::AgentProcessConfig;
///
/// let config = AgentProcessConfig::from_command_line("python3 'my agent.py' --fast")
///     .unwrap()
///     .request_timeout(Duration::from_secs(5));
/// assert_eq!(config.program(), "python3");
/// assert_eq!(config.args(), ["my agent.py", "--fast"]);
/// assert!(AgentProcessConfig::from_command_line("  ").is_err());
/// assert!(AgentProcessConfig::from_command_line("agent 'unclosed").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProcessConfig {
    program: String,
    args: Vec<String>,
    pub(crate) request_timeout: Duration,
    pub(crate) max_line_bytes: usize,
    pub(crate) line_queue: usize,
    pub(crate) max_restarts_per_minute: usize,
    pub(crate) stop_grace: Duration,
}

/// `--agent-timeout-ms` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(30_000);

/// The longest line read from the child's stdout; longer lines are dropped whole.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

/// Lines read ahead of the carrier before the reader stops reading (the child then blocks on
/// its own writes): with the line cap, this bounds what a flooding child can make us hold.
pub const DEFAULT_LINE_QUEUE: usize = 32;

/// At most 5 restarts a minute (docs/protocol.md, "Agent processes").
pub const DEFAULT_MAX_RESTARTS_PER_MINUTE: usize = 5;

impl AgentProcessConfig {
    /// Runs `program` with `args`, with the defaults: 30 s request timeout, 1 MiB lines,
    /// 5 restarts a minute, 500 ms between closing the child's stdin and killing it on stop.
    pub fn new(
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        AgentProcessConfig {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            line_queue: DEFAULT_LINE_QUEUE,
            max_restarts_per_minute: DEFAULT_MAX_RESTARTS_PER_MINUTE,
            stop_grace: Duration::from_millis(500),
        }
    }

    /// Splits `command_line` into words as a POSIX shell would (quotes and backslashes), with
    /// no expansion and without running a shell. Empty or unbalanced input is refused.
    pub fn from_command_line(command_line: &str) -> Result<Self, AgentProcessError> {
        let words = shlex::split(command_line).ok_or_else(|| {
            AgentProcessError::CommandLine(
                "unbalanced quotes or a trailing backslash in the agent command".into(),
            )
        })?;
        let mut words = words.into_iter();
        let program = words
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| AgentProcessError::CommandLine("the agent command is empty".into()))?;
        Ok(AgentProcessConfig::new(program, words))
    }

    /// How long the child may take to answer any request (`--agent-timeout-ms`), including
    /// the handshake.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The longest stdout line accepted (at least 1 KiB); a longer line is logged and dropped.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes.max(1024);
        self
    }

    /// Restarts allowed in any 60 s window (0: never restart).
    pub fn max_restarts_per_minute(mut self, restarts: usize) -> Self {
        self.max_restarts_per_minute = restarts;
        self
    }

    /// How long a stopping child may take to exit after its stdin closes before it is killed.
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// The request timeout.
    pub fn timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The restarts allowed in any 60 s window.
    pub fn restarts_per_minute(&self) -> usize {
        self.max_restarts_per_minute
    }

    /// The stop grace.
    pub fn grace(&self) -> Duration {
        self.stop_grace
    }

    /// The program run.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Its arguments.
    pub fn args(&self) -> &[String] {
        &self.args
    }
}

//! [`AcpAgentError`]: why an ACP agent could not be started.

/// Why [`super::AcpAgent::start`] failed. `carrier serve` prints it and exits 1 (2 for a
/// command line that cannot be split or a working directory that is not one).
#[derive(Debug, thiserror::Error)]
pub enum AcpAgentError {
    /// The command line is empty or cannot be split into words.
    #[error("invalid --agent-acp: {0}")]
    CommandLine(String),
    /// `--agent-cwd` is not a directory.
    #[error("invalid --agent-cwd {path:?}: {reason}")]
    Cwd {
        /// The path.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The program could not be started (not found, not executable, …).
    #[error("cannot start the ACP agent {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The agent answered `initialize` with another ACP major version.
    #[error("the ACP agent speaks ACP protocol version {0}; carrier speaks version 1")]
    Version(u16),
    /// The agent needs `authenticate` first, which carrier does not do: log in with the agent
    /// itself (its own command line), then start carrier again.
    #[error(
        "the ACP agent requires authentication ({methods}); carrier does not authenticate: \
         log in with the agent itself, then start carrier again"
    )]
    AuthRequired {
        /// The agent's `authMethods`, by id and name.
        methods: String,
    },
    /// The agent refused `initialize` or `session/new`, or answered something else.
    #[error("the ACP agent refused {method}: {reason}")]
    Refused {
        /// The method.
        method: &'static str,
        /// Its error or what was wrong with its answer.
        reason: String,
    },
    /// The agent did not answer in time.
    #[error("the ACP agent did not answer {method} within {ms} ms")]
    Timeout {
        /// The method.
        method: &'static str,
        /// The request timeout.
        ms: u64,
    },
    /// The agent exited (or closed its stdout) before it was ready.
    #[error("the ACP agent exited before it was ready ({0})")]
    Exited(String),
    /// The carrier stopped the agent.
    #[error("the ACP agent was stopped")]
    Stopped,
}

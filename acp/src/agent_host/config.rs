//! [`AcpAgentConfig`]: what to run, the working directory its sessions get, and the process
//! rules it shares with `--agent-cmd` ([`AgentProcessConfig`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use carrier_agent::process::AgentProcessConfig;

use super::error::AcpAgentError;

/// How to run and supervise an ACP agent. The process side (command, request timeout, line
/// cap, read-ahead, restarts, stop grace) is an [`AgentProcessConfig`], as for `--agent-cmd`.
///
/// ```
/// use carrier_acp::agent_host::AcpAgentConfig;
///
/// let config = AcpAgentConfig::from_command_line("npx my-acp-agent --acp").unwrap();
/// assert_eq!(config.process().program(), "npx");
/// assert!(config.cwd().is_absolute(), "the current directory by default");
/// assert!(AcpAgentConfig::from_command_line("").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct AcpAgentConfig {
    process: AgentProcessConfig,
    cwd: PathBuf,
}

impl AcpAgentConfig {
    /// Runs `process`, with sessions in the current directory.
    pub fn new(process: AgentProcessConfig) -> Self {
        AcpAgentConfig {
            process,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }

    /// Splits `command_line` into words as a POSIX shell would (no shell runs), as
    /// [`AgentProcessConfig::from_command_line`] does.
    pub fn from_command_line(command_line: &str) -> Result<Self, AcpAgentError> {
        AgentProcessConfig::from_command_line(command_line)
            .map(AcpAgentConfig::new)
            .map_err(|e| AcpAgentError::CommandLine(e.to_string()))
    }

    /// The working directory every ACP session gets (`session/new {cwd}`, `--agent-cwd`);
    /// made absolute against the current directory, as ACP requires.
    pub fn with_cwd(mut self, cwd: impl AsRef<Path>) -> Self {
        let cwd = cwd.as_ref();
        self.cwd = match cwd.is_absolute() {
            true => cwd.to_path_buf(),
            false => std::env::current_dir()
                .map(|here| here.join(cwd))
                .unwrap_or_else(|_| cwd.to_path_buf()),
        };
        self
    }

    /// How long the agent may take to answer a request (`--agent-timeout-ms`); see
    /// [`AgentProcessConfig::request_timeout`].
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.process = self.process.request_timeout(timeout);
        self
    }

    /// Changes the process side.
    pub fn with_process(
        mut self,
        change: impl FnOnce(AgentProcessConfig) -> AgentProcessConfig,
    ) -> Self {
        self.process = change(self.process);
        self
    }

    /// The process side.
    pub fn process(&self) -> &AgentProcessConfig {
        &self.process
    }

    /// The sessions' working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
}

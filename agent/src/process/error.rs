//! [`AgentProcessError`]: why an agent process could not be started.

use carrier_protocol::version::ProtocolVersion;

/// Why [`super::AgentProcess::start`] failed. `carrier serve` prints it and exits 1 (2 for a
/// command line that cannot be split).
#[derive(Debug, thiserror::Error)]
pub enum AgentProcessError {
    /// The command line is empty or cannot be split into words.
    #[error("invalid --agent-cmd: {0}")]
    CommandLine(String),
    /// The program could not be started (not found, not executable, …).
    #[error("cannot start the agent process {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The child's protocol cannot talk to this carrier's (the rules of docs/protocol.md,
    /// "Versions").
    #[error(
        "the agent process speaks protocol {agent_version} (accepts {agent_min} or later), this \
         carrier speaks {ours} (accepts {ours_min} or later): {why}; update the {update}"
    )]
    Incompatible {
        /// The child's `protocol_version`.
        agent_version: ProtocolVersion,
        /// The child's `min_compatible_protocol`.
        agent_min: ProtocolVersion,
        /// The carrier's `protocol_version`.
        ours: ProtocolVersion,
        /// The carrier's `min_compatible_protocol`.
        ours_min: ProtocolVersion,
        /// The rule that failed.
        why: carrier_protocol::version::Incompatibility,
        /// Which side to update: `"agent"` or `"carrier"`.
        update: &'static str,
    },
    /// The child answered the handshake with an error or an invalid result.
    #[error("the agent process refused the handshake: {0}")]
    Handshake(String),
    /// The child did not answer the handshake in time.
    #[error("the agent process did not answer system.handshake within {0} ms")]
    Timeout(u64),
    /// The child exited (or closed its stdout) before answering the handshake.
    #[error("the agent process exited before answering system.handshake ({0})")]
    Exited(String),
    /// The carrier stopped the agent process.
    #[error("the agent process was stopped")]
    Stopped,
}

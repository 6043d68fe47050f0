//! A carrier in a process of its own, for the agent layer's tests that watch a process (its
//! resident memory, its log, its agent processes, what they do when it is killed):
//! `agent/tests/it/agent_process*.rs` and `reply_bound.rs`. `--agent-cmd` hosts an agent process, the embedded agent
//! answers otherwise; the flags and `listening` line are those of `carrier serve`
//! (`carrier_test_support::host`).
//!
//! ```sh
//! cargo run -p carrier-agent --example agent_host -- --port 7070 --token t --agent-cmd "python3 agent.py"
//! ```

fn main() -> std::process::ExitCode {
    carrier_test_support::host::main()
}

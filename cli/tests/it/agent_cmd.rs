//! `carrier serve --agent-cmd CMD`, the CLI's side of agent processes: a carrier whose agent
//! cannot start, fails its handshake or speaks an incompatible protocol exits 1 with one line
//! saying so and leaves no agent behind; a command line that cannot be split is a usage error;
//! SIGTERM stops the carrier and then its agent, with exit 0. (How a carrier hosts agent
//! processes, well-behaved or not, is the agent layer's: `agent/tests/it/agent_process*.rs`,
//! with the Python agents of `agent/tests/agents/`.)

use carrier_test_support::serve_process::*;

#[tokio::test]
async fn sigterm_stops_the_carrier_and_its_agent_with_exit_0() {
    let serve = Serve::with_agent(&reverse_agent(1), &[]).await;
    let agent = serve.agent_pid();
    serve.finish().await;
    assert!(!alive(agent));
}

/// `serve` with `bad_handshake.py MODE` must exit 1 mentioning `expect`, and leave no child.
async fn refused_at_launch(mode: &str, expect: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("pid");
    let agent = python_agent(
        "bad_handshake.py",
        &format!("{mode} '{}'", pidfile.display()),
    );
    let mut args = vec!["--agent-cmd", agent.as_str()];
    args.extend_from_slice(extra);
    let refused = match Serve::start(&args).await {
        Ok(_) => panic!("serve started with a {mode} agent"),
        Err(refused) => refused,
    };
    assert_eq!(refused.status.code(), Some(1), "{mode}: {}", refused.stderr);
    assert!(
        refused.stderr.contains(expect),
        "{mode}: {}",
        refused.stderr
    );
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .expect("the agent ran")
        .trim()
        .parse()
        .expect("pid");
    assert!(
        !alive(pid),
        "{mode}: agent {pid} outlived the refused carrier"
    );
}

#[tokio::test]
async fn serve_exits_1_when_the_agent_speaks_an_incompatible_protocol() {
    refused_at_launch("incompatible", "speaks protocol 2.0", &[]).await;
    refused_at_launch("incompatible", "update the carrier", &[]).await;
}

#[tokio::test]
async fn serve_exits_1_when_the_agent_fails_its_handshake() {
    refused_at_launch(
        "error",
        "refused the handshake: internal: no model configured",
        &[],
    )
    .await;
    refused_at_launch("exit", "exited before answering system.handshake", &[]).await;
    refused_at_launch(
        "silent",
        // Long enough for python to start and write its pid on a loaded 2-core machine.
        "did not answer system.handshake within 3000 ms",
        &["--agent-timeout-ms", "3000"],
    )
    .await;
}

#[tokio::test]
async fn serve_exits_1_when_the_agent_cannot_start() {
    let refused = Serve::start(&["--agent-cmd", "/nonexistent/agent --flag"])
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        refused
            .stderr
            .contains("cannot start the agent process \"/nonexistent/agent\""),
        "{}",
        refused.stderr
    );
}

#[tokio::test]
async fn an_agent_command_that_cannot_be_split_is_a_usage_error() {
    for bad in ["agent 'unclosed", "   "] {
        let refused = Serve::start(&["--agent-cmd", bad])
            .await
            .err()
            .expect("refused");
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{bad:?}: {}",
            refused.stderr
        );
        assert!(
            refused.stderr.contains("invalid --agent-cmd"),
            "{}",
            refused.stderr
        );
    }
}

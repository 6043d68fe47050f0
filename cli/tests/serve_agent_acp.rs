//! `carrier serve --agent-acp "CMD ARGS"` as a process (the ACP agent of
//! `acp/tests/fixtures/agents/` on the Node SDK as its child; carrier-acp's own tests drive the
//! library): the flags, an agent that needs authentication making `serve` exit 1 naming its
//! methods, and a 2 GiB line on the agent's stdout skipped as it streams — the server's peak
//! resident memory (VmHWM) stays flat and under the README's figure.

use carrier_test_support as support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use support::figure::Flags;
use support::serve_process::{peak_rss_kib, Serve};

fn agents() -> PathBuf {
    support::repo().join("acp/tests/fixtures/agents")
}

/// `CMD` of `--agent-acp` for the Node SDK agent, with `env` variables.
fn node_agent(env: &str) -> String {
    support::node::npm_ci(&agents());
    let script = agents().join("sdk-agent.mjs");
    format!("env {env} node '{}'", script.display())
}

#[tokio::test]
async fn the_flags_are_checked_before_anything_starts() {
    let both = Serve::start(&["--agent-acp", "node x.mjs", "--agent-cmd", "python3 y.py"])
        .await
        .err()
        .expect("refused");
    assert_eq!(both.status.code(), Some(2), "{}", both.stderr);
    assert!(both.stderr.contains("--agent-cmd"), "{}", both.stderr);

    let cwd_alone = Serve::start(&["--agent-cwd", "/tmp"])
        .await
        .err()
        .expect("refused");
    assert_eq!(cwd_alone.status.code(), Some(2), "{}", cwd_alone.stderr);

    let not_a_dir = Serve::start(&[
        "--agent-acp",
        &node_agent(""),
        "--agent-cwd",
        "/no/such/dir",
    ])
    .await
    .err()
    .expect("refused");
    assert_eq!(not_a_dir.status.code(), Some(2), "{}", not_a_dir.stderr);
    assert!(
        not_a_dir.stderr.contains("/no/such/dir"),
        "{}",
        not_a_dir.stderr
    );

    let no_program = Serve::start(&["--agent-acp", "/no/such/agent"])
        .await
        .err()
        .expect("refused");
    assert_eq!(no_program.status.code(), Some(1), "{}", no_program.stderr);
}

#[tokio::test]
async fn an_agent_that_needs_authentication_makes_serve_exit_1_naming_its_methods() {
    let refused = Serve::start(&["--agent-acp", &node_agent("ACP_AUTH=1")])
        .await
        .err()
        .expect("serve refuses to start");
    assert_eq!(refused.status.code(), Some(1), "{}", refused.stderr);
    let line = refused
        .stderr
        .lines()
        .find(|l| l.starts_with("carrier serve:"))
        .unwrap_or_default();
    assert!(
        line.contains("requires authentication") && line.contains("login (Log in with a browser)"),
        "{}",
        refused.stderr
    );
}

#[tokio::test]
async fn a_2_gib_line_from_the_agent_is_skipped_as_it_streams_and_memory_stays_flat() {
    // The line takes its time through a debug build: the prompt may be silent that long.
    let serve = Serve::start(&[
        "--agent-acp",
        &node_agent(""),
        "--agent-timeout-ms",
        "600000",
    ])
    .await
    .expect("serve starts");
    let (mut c, hs) = serve.client().await;
    assert_eq!(hs["features"]["agent_updates"], true);
    let turn = c.submit("hello").await;
    c.turn_events(&turn).await;
    let before = peak_rss_kib(serve.pid);

    let size: u64 = 2 << 30;
    let turn = c
        .ok("session.submit", json!({"prompt": format!("huge {size}")}))
        .await["turn_id"]
        .as_str()
        .expect("turn")
        .to_owned();
    let events = tokio::time::timeout(Duration::from_secs(600), c.turn_events(&turn))
        .await
        .expect("the turn ends");
    assert_eq!(support::concat_deltas(&events), "after huge");
    let after = peak_rss_kib(serve.pid);
    eprintln!("VmHWM before the line: {before} KiB; after 2 GiB: {after} KiB");
    // Flat: what the line could cost is the line cap and the read-ahead, not its size.
    assert!(
        after.saturating_sub(before) < 64 * 1024,
        "VmHWM grew from {before} KiB to {after} KiB"
    );
    let figure = Flags {
        acp_agent: true,
        ..Flags::defaults()
    }
    .readme_figure(1, 0);
    assert!(
        after * 1024 <= figure,
        "{after} KiB is over the figure {figure} B"
    );
    assert!(
        serve.log().contains("line over the limit dropped"),
        "{}",
        serve.log()
    );
    serve.finish().await;
}

//! `carrier serve --agent-cmd` with agents that misbehave on purpose (`agent/tests/agents/`): clients
//! get the errors docs/protocol.md, "Agent processes", names, the carrier keeps serving, and no
//! agent process outlives it.

use carrier_test_support as support;

use serde_json::json;
use support::serve_process::*;
use support::*;

/// The carrier still answers after whatever the agent did.
async fn still_serving(serve: &Serve) {
    let (mut c, _) = serve.client().await;
    c.ok("system.ping", json!({})).await;
}

#[tokio::test]
async fn garbage_lines_and_invalid_events_are_logged_and_dropped() {
    let serve = Serve::with_agent(&python_agent("garbage.py", ""), &[]).await;
    let (mut c, _) = serve.client().await;
    let t = c.submit("anything").await;
    let events = c.turn_events(&t).await;
    assert_eq!(
        names(&events),
        [
            "session.turn_started",
            "session.text_delta",
            "session.turn_completed"
        ]
    );
    assert_consecutive(&events);
    assert_eq!(events[0]["seq"], 1);
    assert_eq!(events[1]["seq"], 2, "the child's own seq is not used");
    assert_eq!(events[1]["payload"], json!({"turn_id": t, "delta": "ok"}));
    assert_eq!(events[0]["payload"]["driver"]["driver_id"], "local");
    assert!(
        c.stashed().is_empty(),
        "nothing else reached the client: {:?}",
        c.stashed()
    );
    // A forwarded read whose result fails validation is never sent.
    let e = c.err("session.history", json!({})).await;
    assert_eq!(e["code"], "protocol_error");
    assert_eq!(e["effect_state"], "unknown");
    assert_eq!(e["data"]["reason"], "invalid_result");
    // A valid forwarded answer is the child's, under the carrier's session id.
    let status = c.ok("session.status", json!({})).await;
    assert_eq!(
        status,
        json!({"session_id": "s1", "state": "running", "turn_id": "child-says"})
    );
    let log = serve.log();
    assert!(
        log.contains("INFO") && log.contains("garbage agent stderr line"),
        "{log}"
    );
    assert!(log.contains("agent process line dropped"), "{log}");
    still_serving(&serve).await;
    serve.finish().await;
}

/// Submits `prompt` and returns the turn's events.
async fn turn(c: &mut Client, prompt: &str) -> Vec<serde_json::Value> {
    let t = c.submit(prompt).await;
    c.turn_events(&t).await
}

#[tokio::test]
async fn an_agent_that_exits_mid_turn_is_restarted_by_the_next_submit_five_times_a_minute() {
    let serve = Serve::with_agent(&python_agent("exit_mid_turn.py", ""), &[]).await;
    let (mut c, _) = serve.client().await;
    let first = serve.agent_pid();
    // The first child, then five restarts: each streams one delta and exits.
    for round in 0..6 {
        let events = turn(&mut c, "go").await;
        assert_eq!(
            names(&events),
            [
                "session.turn_started",
                "session.text_delta",
                "session.error",
                "session.turn_completed"
            ],
            "round {round}"
        );
        assert_consecutive(&events);
        assert_eq!(events[2]["payload"]["code"], "agent_exited");
        let done = &events[3]["payload"];
        assert_eq!(
            (done["aborted"].as_bool(), done["text"].as_str()),
            (Some(true), Some("partial"))
        );
        // agent_exited is sent once the child is reaped.
        assert!(serve.agent_pids().is_empty(), "round {round}");
    }
    // Budget spent: every submit now fails with agent_exited, and no child starts.
    for _ in 0..2 {
        let events = turn(&mut c, "go").await;
        assert_eq!(
            names(&events),
            [
                "session.turn_started",
                "session.error",
                "session.turn_completed"
            ]
        );
        assert_eq!(events[1]["payload"]["code"], "agent_exited");
        assert_eq!(events[2]["payload"]["aborted"], true);
        assert!(serve.agent_pids().is_empty());
    }
    let history = c.ok("session.history", json!({})).await;
    assert_eq!(history["entries"].as_array().map(Vec::len), Some(16));
    still_serving(&serve).await;
    assert!(!alive(first));
    serve.finish().await;
}

#[tokio::test]
async fn a_silent_agent_times_out_submits_with_agent_timeout_and_reads_with_internal() {
    let agent = python_agent("silent.py", "");
    let serve = Serve::with_agent(&agent, &["--agent-timeout-ms", "3000"]).await;
    let (mut c, _) = serve.client().await;
    // The reads wait out their timeouts alongside the turn's.
    let history = c.send_request("session.history", json!({})).await;
    let status = c.send_request("session.status", json!({})).await;
    let events = turn(&mut c, "hello?").await;
    assert_eq!(
        names(&events),
        [
            "session.turn_started",
            "session.error",
            "session.turn_completed"
        ]
    );
    assert_eq!(events[1]["payload"]["code"], "agent_timeout");
    assert_eq!(events[2]["payload"]["aborted"], true);
    for id in [history, status] {
        let e = c.response(&id).await["error"].clone();
        assert_eq!(e["code"], "internal", "{id}");
        assert_eq!(e["effect_state"], "unknown", "{id}");
    }
    // The silent child is still the same one: timeouts do not restart it.
    assert_eq!(serve.agent_pids().len(), 1);
    still_serving(&serve).await;
    serve.finish().await;
}

#[tokio::test]
async fn a_flooding_agent_cannot_grow_the_carriers_memory() {
    let serve = Serve::with_agent(&python_agent("flood.py", ""), &[]).await;
    let (mut c, _) = serve.client().await;
    let events = turn(&mut c, "flood").await;
    assert_eq!(concat_deltas(&events), "survived");
    assert_eq!(events.last().unwrap()["payload"]["text"], "survived");
    assert_consecutive(&events);
    // The 64 MiB line was skipped as it streamed by, never held whole.
    let peak = peak_rss_kib(serve.pid);
    assert!(peak < 48 * 1024, "carrier peak RSS {peak} KiB");
    assert!(serve.log().contains("line over the limit dropped"));
    still_serving(&serve).await;
    serve.finish().await;
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

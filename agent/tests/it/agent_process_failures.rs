//! Agent processes that misbehave on purpose (`agent/tests/agents/`), hosted as `carrier serve
//! --agent-cmd` hosts them: clients get the errors docs/protocol.md, "Agent processes", names,
//! the carrier keeps serving, and no agent process outlives it. Each test watches the carrier's
//! process (its log, its children, its memory), so the carrier runs in a process of its own:
//! this crate's example `agent_host`. (`carrier serve` refusing to start when its agent does is
//! the CLI's test: `cli/tests/it/agent_cmd.rs`.)

use carrier_test_support as support;

use serde_json::json;
use support::serve_process::*;
use support::*;

/// The carrier whose process a test watches: this crate's example `agent_host`.
const HOST: Program = Program::Example("agent_host");

/// The carrier still answers after whatever the agent did.
async fn still_serving(serve: &Serve) {
    let (mut c, _) = serve.client().await;
    c.ok("system.ping", json!({})).await;
}

#[tokio::test]
async fn garbage_lines_and_invalid_events_are_logged_and_dropped() {
    let serve = HOST.with_agent(&python_agent("garbage.py", ""), &[]).await;
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
    let serve = HOST
        .with_agent(&python_agent("exit_mid_turn.py", ""), &[])
        .await;
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
    let serve = HOST
        .with_agent(&agent, &["--agent-timeout-ms", "3000"])
        .await;
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
    let serve = HOST.with_agent(&python_agent("flood.py", ""), &[]).await;
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

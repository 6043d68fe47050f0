//! `/acp` against the ACP SDK's own client: the TypeScript SDK (`@agentclientprotocol/sdk`,
//! pinned in `acp/tests/fixtures/package-lock.json`, installed with `npm ci`) connects over its
//! own WebSocket transport, token in `Authorization: Bearer`, and runs
//! `acp/tests/fixtures/sdk-client.mjs`: initialize, session/new, a prompt turn streamed to
//! `end_turn`, a permission round trip, cancel → `cancelled` (while streaming, and while a
//! permission is asked), session/load replaying a turn another client ran, and an observer
//! refused a prompt with nothing run. (Over `carrier acp`, and with the Python SDK: the CLI's
//! `acp_bridge` tests.)

use carrier_test_support as support;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::node::{acp_fixtures, run};
use support::Server;

/// What the other client asked in s1 before the SDK's client loads it.
const LOADED: &str = "asked by another client";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_client_drives_a_session_over_its_websocket() {
    let fixtures = acp_fixtures();
    // Slow enough that a cancel lands while the reply streams.
    let s = Server::with(
        support::config(),
        support::embedded(Duration::from_millis(30)),
    )
    .await;
    let (mut carrier, _) = s.drive().await;
    let turn_id = carrier.submit(LOADED).await;
    carrier.turn_events(&turn_id).await;

    let mut node = Command::new("node");
    node.arg("sdk-client.mjs")
        .current_dir(&fixtures)
        .env("ACP_MODE", "ws")
        .env("ACP_URL", format!("ws://127.0.0.1:{}/acp", s.port))
        .env("ACP_TOKEN", &s.token)
        .env("ACP_LOADED", LOADED);
    let out = tokio::task::spawn_blocking(move || run(node, "node sdk-client.mjs (ws)"))
        .await
        .unwrap();
    assert!(out.success, "the SDK client failed:\n{}", out.report());
    let summary: Value =
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.report()));
    support::acp::check_sdk_summary(&summary, LOADED);

    // The observer's prompt ran nothing: s1 still holds only the other client's turn.
    let history = carrier.ok("session.history", json!({})).await;
    assert_eq!(history["entries"].as_array().unwrap().len(), 2, "{history}");
    assert_eq!(history["entries"][0]["text"], LOADED);
}

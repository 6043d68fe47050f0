//! `carrier serve` speaking the seed system's own wire (the Robota profile): `--profile robota`
//! at `/`, `/robota` without it, a bad `--profile`. The real binary, over real sockets. (An
//! agent process behind the wire and channel frames on a Robota connection are the wire's
//! tests: `robota/tests/it/`.)

use carrier_test_support as support;

use serde_json::json;
use support::robota::{deltas, RobotaClient};
use support::serve_process::*;

fn url(serve: &Serve, path: &str) -> String {
    format!("ws://127.0.0.1:{}{path}?token={TOKEN}", serve.port)
}

/// One turn of `prompt`: its messages, checked to end `complete` with the streamed reply.
async fn turn(c: &mut RobotaClient, prompt: &str) -> String {
    c.send(json!({"type": "submit", "prompt": prompt})).await;
    let turn = c.until_turn_ends().await;
    let end = turn.last().unwrap();
    assert_eq!(end["type"], "complete", "{turn:?}");
    assert_eq!(end["result"]["response"], deltas(&turn));
    deltas(&turn)
}

#[tokio::test]
async fn with_profile_robota_slash_speaks_the_seed_systems_wire() {
    let serve = Serve::start(&["--profile", "robota", "--demo-delay-ms", "1"])
        .await
        .expect("serve");
    let (mut c, messages, workspace) = RobotaClient::connect_greeted(&url(&serve, "/")).await;
    assert_eq!(messages["messages"], json!([]));
    assert_eq!(workspace["snapshot"]["sessionId"], "s1");
    assert_eq!(turn(&mut c, "at the root").await, "echo: at the root");
    // `/robota` speaks it too, on the same session.
    let (_, messages, _) = RobotaClient::connect_greeted(&url(&serve, "/robota")).await;
    assert_eq!(messages["messages"].as_array().unwrap().len(), 2);
    serve.finish().await;
}

#[tokio::test]
async fn without_the_flag_slash_is_the_agent_protocol_and_robota_is_at_its_path() {
    let serve = Serve::start(&["--demo-delay-ms", "1"])
        .await
        .expect("serve");
    let (mut carrier, hs) = serve.client().await;
    assert_eq!(hs["session_id"], "s1");
    let (mut robota, _, _) = RobotaClient::connect_greeted(&url(&serve, "/robota")).await;
    assert_eq!(turn(&mut robota, "by path").await, "echo: by path");
    let history = carrier.ok("session.history", json!({})).await;
    assert_eq!(history["entries"][1]["text"], "echo: by path");
    serve.finish().await;
}

#[tokio::test]
async fn a_bad_profile_exits_2_with_one_line() {
    for bad in ["nope", "", "Robota"] {
        let refused = match Serve::start(&["--profile", bad]).await {
            Ok(_) => panic!("--profile {bad:?} was accepted"),
            Err(refused) => refused,
        };
        assert_eq!(refused.status.code(), Some(2), "--profile {bad:?}");
        let lines: Vec<&str> = refused.stderr.trim_end().lines().collect();
        assert_eq!(lines.len(), 1, "one line: {:?}", refused.stderr);
        assert!(lines[0].contains("profile"), "{}", lines[0]);
    }
}

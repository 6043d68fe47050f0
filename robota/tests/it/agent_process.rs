//! An agent process behind the seed system's wire, hosted as `carrier serve --agent-cmd` hosts
//! it (in-process): turns, permission prompts, abort, a prompt handed to the next driver, the
//! history, as with the embedded agent. Real sockets, a client written from that system's
//! public message types.

use carrier_test_support as support;

use serde_json::json;
use support::robota::{deltas, types, RobotaClient};
use support::serve_process::python_agent;
use support::AgentServer;

#[tokio::test]
async fn an_agent_process_drives_the_seed_systems_wire_like_the_embedded_agent() {
    let serve = AgentServer::start(&python_agent("echo_clone.py", "20")).await;
    let (mut c, _, _) = RobotaClient::connect_greeted(&serve.server.robota_url("")).await;
    c.send(json!({"type": "submit", "prompt": "from a child"}))
        .await;
    let first = c.until_turn_ends().await;
    assert_eq!(types(&first)[..2], ["user_message", "thinking"]);
    // `carrier serve`'s default driver is the seed system's owner on its wire.
    assert_eq!(first[0]["driverId"], "owner");
    assert_eq!(deltas(&first), "child: from a child");
    assert_eq!(
        first.last().unwrap()["result"]["response"],
        "child: from a child"
    );

    for (result, reply) in [(json!(true), "tool ran: ls"), (json!(false), "tool denied")] {
        c.send(json!({"type": "submit", "prompt": "/tool ls"}))
            .await;
        let asked = c.until("permission_request").await.pop().unwrap();
        assert_eq!(asked["event"]["toolName"], "demo.tool");
        assert_eq!(asked["event"]["toolArgs"], json!({"command": "ls"}));
        let id = asked["event"]["id"].clone();
        c.send(json!({"type": "permission-response", "id": id, "result": result}))
            .await;
        let rest = c.until_turn_ends().await;
        assert_eq!(
            rest[0],
            json!({"type": "prompt_resolved", "event": {"id": id}})
        );
        assert_eq!(deltas(&rest), reply);
    }

    let prompt = vec!["w"; 100].join(" ");
    let seen = c.submit_and_abort(&prompt).await;
    let end = seen.last().unwrap();
    assert_eq!(end["type"], "interrupted");
    assert_eq!(end["result"]["response"], deltas(&seen));

    // The child's prompt outlives neither its driver nor its turn: a driver that connects
    // after the first one left is sent it, and an abort resolves it.
    c.send(json!({"type": "submit", "prompt": "/tool rm"}))
        .await;
    let asked = c.until("permission_request").await.pop().unwrap();
    let _ = c.ws.close(None).await;
    let (mut c, _, _) = RobotaClient::connect_greeted(&serve.server.robota_url("")).await;
    assert_eq!(c.next().await, asked);
    c.send(json!({"type": "abort"})).await;
    let end = c.until_turn_ends().await;
    assert_eq!(types(&end), ["prompt_resolved", "interrupted"]);
    assert_eq!(end[0]["event"]["id"], asked["event"]["id"]);

    let history = c.ask("get-messages", json!({})).await;
    let list = history["messages"].as_array().unwrap();
    assert_eq!(list.len(), 10, "five turns: {history}");
    assert_eq!(
        (list[0]["role"].clone(), list[0]["content"].clone()),
        (json!("user"), json!("from a child"))
    );
    assert_eq!(list[1]["content"], "child: from a child");
    assert_eq!(list[7]["state"], "interrupted");
    assert_eq!(list[9]["state"], "interrupted");
    serve.finish().await;
}

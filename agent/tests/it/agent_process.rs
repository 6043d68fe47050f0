//! Agent processes that behave (docs/protocol.md, "Agent processes"): the example
//! `reverse_agent`, a clone of the embedded agent, hosted by the library's `AgentProcess` as
//! `carrier serve --agent-cmd` hosts them. Every test runs a real child process, and checks that
//! no agent process outlives its carrier. Most run the carrier in-process; the ones that read
//! the carrier's log or kill it run it in a process of its own (the example `agent_host`).
//! (`carrier serve` stopping its agent at SIGTERM is the CLI's test: `cli/tests/it/agent_cmd.rs`.)

use carrier_test_support as support;

use std::path::Path;
use std::time::Duration;

use carrier_agent::process::{AgentProcess, AgentProcessConfig};
use serde_json::{json, Value};
use support::serve_process::*;
use support::*;

/// The carrier a test reads the log of, or kills: this crate's example `agent_host`.
const HOST: Program = Program::Example("agent_host");

#[tokio::test]
async fn the_reverse_agent_streams_the_reversed_prompt_word_by_word() {
    let serve = AgentServer::start(&reverse_agent(1)).await;
    let (mut c, hs) = serve.client().await;
    assert_eq!(hs["session_id"], "s1");
    let t = c.submit("one two three").await;
    let events = c.turn_events(&t).await;
    assert_eq!(
        names(&events),
        [
            "session.turn_started",
            "session.text_delta",
            "session.text_delta",
            "session.text_delta",
            "session.turn_completed"
        ]
    );
    assert_eq!(events[0]["seq"], 1);
    assert_consecutive(&events);
    assert_eq!(
        events[0]["payload"]["driver"],
        json!({"driver_id": "local", "surface": "carrier"}),
        "the driver is the host's identity"
    );
    let deltas: Vec<&str> = events[1..4]
        .iter()
        .filter_map(|e| e["payload"]["delta"].as_str())
        .collect();
    assert_eq!(deltas, ["three", " two", " one"]);
    assert_eq!(
        events[4]["payload"],
        json!({"turn_id": t, "text": "three two one", "aborted": false})
    );
    // The agent answers history/status with method_not_found: the carrier's record answers.
    let history = c.ok("session.history", json!({})).await;
    assert_eq!(
        history["entries"],
        json!([
            {"role": "user", "text": "one two three", "turn_id": t},
            {"role": "assistant", "text": "three two one", "turn_id": t},
        ])
    );
    let status = c.ok("session.status", json!({})).await;
    assert_eq!(status, json!({"session_id": "s1", "state": "idle"}));
    serve.finish().await;
}

#[tokio::test]
async fn an_observer_sees_the_prompt_a_driver_submitted_to_an_agent_process() {
    let serve = AgentServer::start(&reverse_agent(1)).await;
    let (mut driver, _) = serve.client().await;
    let mut observer = Client::connect(&format!("{}&role=observe", serve.url())).await;
    assert_eq!(observer.handshake(json!({})).await["role"], "observe");
    // Spacing, quotes, a newline and non-ASCII text survive exactly.
    let prompt = "  two  spaces, \"quotes\",\na new line and ünïcödé ✓ ";
    let turn = driver.submit(prompt).await;
    let started = observer.event("session.turn_started").await;
    assert_eq!(started["payload"]["turn_id"], turn.as_str());
    assert_eq!(started["payload"]["prompt"], prompt, "{started}");
    // The child never sent a turn_started: the carrier filled the prompt in.
    let on_driver = driver.event("session.turn_started").await;
    assert_eq!(on_driver["payload"], started["payload"]);
    observer.turn_events(&turn).await;
    serve.finish().await;
}

#[tokio::test]
async fn the_reverse_agent_asks_permission_and_the_carrier_resolves_it_once() {
    let serve = AgentServer::start(&reverse_agent(1)).await;
    let (mut c, _) = serve.client().await;
    for (decision, reply) in [("allow", "tool ran: b a"), ("deny", "tool denied")] {
        let t = c.submit("/tool a b").await;
        let request = c.event("session.permission_request").await;
        assert_eq!(request["payload"]["tool"], "reverse.tool");
        assert_eq!(request["payload"]["input"], json!({"command": "a b"}));
        let status = c.ok("session.status", json!({})).await;
        assert_eq!(status["state"], "awaiting_permission");
        let request_id = request["payload"]["request_id"].clone();
        let params = json!({"request_id": request_id, "decision": decision});
        c.ok("session.permission.respond", params).await;
        let events = c.turn_events(&t).await;
        let resolved: Vec<&Value> = events
            .iter()
            .filter(|e| e["event"] == "session.permission_resolved")
            .collect();
        assert_eq!(resolved.len(), 1, "{events:?}");
        assert_eq!(
            resolved[0]["payload"],
            json!({"request_id": request_id, "decision": decision})
        );
        assert_eq!(concat_deltas(&events), reply);
        assert_eq!(events.last().unwrap()["payload"]["text"], reply);
    }
    serve.finish().await;
}

#[tokio::test]
async fn abort_ends_the_turn_at_once_and_the_agent_keeps_serving() {
    let serve = AgentServer::start(&reverse_agent(200)).await;
    let (mut c, _) = serve.client().await;
    let t1 = c.submit("a b c d e f").await;
    c.event("session.text_delta").await;
    c.ok("session.abort", json!({"turn_id": t1})).await;
    let events = c.turn_events(&t1).await;
    let done = events.last().unwrap();
    assert_eq!(done["payload"]["aborted"], true);
    assert_eq!(done["payload"]["text"], "f");
    let t2 = c.submit("x y").await;
    let next = c.turn_events(&t2).await;
    assert_eq!(next.last().unwrap()["payload"]["text"], "y x");
    // Nothing of the aborted turn was numbered after its end.
    assert_eq!(next[0]["seq"].as_u64(), done["seq"].as_u64().map(|s| s + 1));
    assert!(c.stashed().iter().all(|f| f["payload"]["turn_id"] != t1));
    serve.finish().await;
}

/// One client session against the carrier at `url`: everything a client can observe, in order.
async fn transcript(url: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut c = Client::connect(url).await;
    let hs = c.handshake(json!({})).await;
    out.push(hs.clone());
    let t = c.submit("alpha beta gamma").await;
    out.extend(c.turn_events(&t).await);
    let t = c.submit("/tool ls -la").await;
    let request = c.event("session.permission_request").await;
    out.push(request.clone());
    out.push(
        c.request("session.submit", json!({"prompt": "too soon"}))
            .await,
    );
    out.push(c.request("session.status", json!({})).await);
    let id = request["payload"]["request_id"].clone();
    let respond = json!({"request_id": id, "decision": "allow"});
    out.push(c.request("session.permission.respond", respond).await);
    out.extend(c.turn_events(&t).await);
    let t = c.submit("/tool nope").await;
    let request = c.event("session.permission_request").await;
    out.push(request.clone());
    let id = request["payload"]["request_id"].clone();
    let respond = json!({"request_id": id, "decision": "deny"});
    out.push(c.request("session.permission.respond", respond).await);
    out.extend(c.turn_events(&t).await);
    out.push(c.request("session.history", json!({"limit": 3})).await);
    out.push(c.request("session.status", json!({})).await);
    out.push(c.request("session.abort", json!({})).await);
    // A second client resumes after seq 3 and gets the same replay.
    let resume = json!({"session_id": hs["session_id"], "epoch": hs["epoch"], "after_seq": 3});
    let mut c2 = Client::connect(url).await;
    let r2 = c2.handshake(json!({ "resume": resume })).await;
    let replayed = r2["resume"]["replayed"].as_u64().expect("resumed");
    out.push(r2);
    for _ in 0..replayed {
        out.push(c2.next().await);
    }
    out
}

/// Masks what may differ between two carriers: the epoch, and the agent's own word.
fn masked(frames: Vec<Value>) -> Vec<Value> {
    fn mask(v: &mut Value) {
        match v {
            Value::String(s) => *s = s.replace("child:", "echo:"),
            Value::Array(items) => items.iter_mut().for_each(mask),
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if k == "epoch" {
                        *v = json!("<epoch>");
                    } else {
                        mask(v);
                    }
                }
            }
            _ => {}
        }
    }
    let mut frames = frames;
    frames.iter_mut().for_each(mask);
    frames
}

#[tokio::test]
async fn a_client_cannot_tell_the_embedded_agent_from_an_equivalent_child_except_by_the_text() {
    // The embedded agent as `carrier serve --demo-delay-ms 1` runs it.
    let identity = config()
        .with_driver_id(carrier_server::DEFAULT_DRIVER_ID.into())
        .with_surface("carrier".into());
    let embedded = Server::with(identity, embedded(Duration::from_millis(1))).await;
    let child = AgentServer::start(&python_agent("echo_clone.py", "1")).await;
    let (embedded_url, child_url) = (embedded.url(""), child.url());
    let (a, b) = tokio::join!(transcript(&embedded_url), transcript(&child_url));
    let child_said = serde_json::to_string(&b).unwrap();
    assert!(child_said.contains("child: alpha"), "the texts differ");
    assert_eq!(masked(a), masked(b));
    embedded.transport.stop().await;
    child.finish().await;
}

/// A client that answers a prompt and aborts its turn at once (both frames out before either
/// reply): the child is told to abort, and is not sent an answer for the turn it was told to
/// abort (it would refuse it, `not_found`, logged by the carrier).
#[tokio::test]
async fn an_answer_then_an_abort_at_once_reach_the_child_as_the_abort_alone() {
    let serve = HOST
        .with_agent(&python_agent("echo_clone.py", "1"), &[])
        .await;
    let (mut c, _) = serve.client().await;
    let t = c.submit("/tool ls").await;
    let request = c.event("session.permission_request").await;
    let answer = json!({"request_id": request["payload"]["request_id"], "decision": "allow"});
    let answered = c.send_request("session.permission.respond", answer).await;
    let aborted = c
        .send_request("session.abort", json!({ "turn_id": t }))
        .await;
    assert!(c.response(&answered).await.get("error").is_none());
    assert!(c.response(&aborted).await.get("error").is_none());
    let ended = c.turn_events(&t).await;
    assert_eq!(ended.last().unwrap()["payload"]["aborted"], true);
    // The child reads its stdin in order: once it has streamed a later turn, it has answered
    // every line the carrier wrote before that turn's submit.
    let next = c.submit("one two three four five six").await;
    let done = c.turn_events(&next).await;
    assert_eq!(
        done.last().unwrap()["payload"]["text"],
        "child: one two three four five six"
    );
    c.ok("session.status", json!({})).await;
    let log = serve.log();
    assert!(!log.contains("refused a permission answer"), "{log}");
    serve.finish().await;
}

#[tokio::test]
async fn when_the_carrier_is_killed_its_agent_sees_stdin_close_and_exits() {
    let mut serve = HOST.with_agent(&reverse_agent(1), &[]).await;
    let agent = serve.agent_pid();
    assert!(alive(agent));
    let status = serve.signal_and_wait("KILL").await;
    assert!(!status.success());
    assert!(
        until(|| !alive(agent)).await,
        "agent {agent} outlived a killed carrier"
    );
}

fn silent_agent_ignoring_eof() -> AgentProcessConfig {
    let script = carrier_test_support::repo().join("agent/tests/agents/silent.py");
    let script = script.to_string_lossy().into_owned();
    AgentProcessConfig::new(
        "python3",
        ["-S".to_owned(), script, "--ignore-eof".to_owned()],
    )
    .stop_grace(Duration::from_millis(100))
}

#[tokio::test]
async fn stop_kills_and_reaps_a_child_that_ignores_its_stdin_closing() {
    let agent = AgentProcess::start(silent_agent_ignoring_eof())
        .await
        .expect("start");
    assert_eq!(agent.agent_info().name, "test-agent");
    let pid = agent.pid().expect("pid");
    assert!(alive(pid));
    agent.stop().await;
    // Reaped, not merely killed: the test process was its parent.
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    agent.stop().await;
}

#[tokio::test]
async fn transport_stop_kills_the_agent_process_of_its_profile() {
    let agent = AgentProcess::start(silent_agent_ignoring_eof())
        .await
        .expect("start");
    let pid = agent.pid().expect("pid");
    let server = Server::with(config(), agent.profile()).await;
    let (mut c, _) = server.drive().await;
    c.ok("system.ping", json!({})).await;
    server.transport.stop().await;
    assert!(until(|| !alive(pid)).await, "agent {pid} survived stop()");
    agent.stop().await;
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
}

//! One budget for every session's history and resume ring (docs/protocol.md, "Delivery and
//! memory"): sessions that evict each other's oldest entries while their hubs emit keep their
//! live streams whole, and a resume reports the gap up to what is still held. (The carrier's
//! memory under the budget is `carrier serve`'s figure: `cli/tests/figure/session_memory.rs`; what the
//! budget charges against the heap is `agent/tests/session_memory_heap.rs`.)

use carrier_test_support as support;

use std::time::Duration;

use carrier_agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
use serde_json::json;
use support::{Client, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_evicting_each_other_at_once_keep_their_live_streams_whole() {
    // Eight connections run turns in eight sessions at once, with a budget of 64 KiB for all
    // of them: every event recorded evicts from the other sessions while their hubs are
    // emitting. No lock waits on another for ever, every live stream stays whole, and a resume
    // from the start reports the gap up to what is still held.
    const BUDGET: usize = 64 << 10;
    let agent = EmbeddedAgent::default().with_demo_delay(Duration::ZERO);
    let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
        .max_session_bytes(BUDGET)
        .build();
    let memory = profile.session_memory().clone();
    let server = Server::with(support::config(), profile).await;
    let prompt = "many small words ".repeat(200);
    let mut connections = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (url, prompt) = (server.url(""), prompt.clone());
        connections.spawn(async move {
            let mut c = Client::connect(&url).await;
            let hs = c.handshake(json!({})).await;
            let session = c.ok("sessions.start", json!({})).await["session_id"].clone();
            let mut seen = Vec::new();
            for _ in 0..10 {
                let turn_id = c.submit(&prompt).await;
                let events = c.turn_events(&turn_id).await;
                assert_eq!(support::concat_deltas(&events), format!("echo: {prompt}"));
                seen.extend(events);
            }
            support::assert_consecutive(&seen);
            let last = seen.last().expect("events")["seq"].as_u64().expect("seq");
            let mut r = Client::connect(&url).await;
            let resume = json!({"session_id": session, "epoch": hs["epoch"], "after_seq": 0});
            let resumed = r.handshake(json!({ "resume": resume })).await["resume"].clone();
            match resumed["outcome"].as_str() {
                Some("gap") => {
                    assert_eq!(resumed["from"], 1);
                    let to = resumed["to"].as_u64().expect("to");
                    assert!(to <= last, "{resumed}");
                    // What is still held is replayed, from just after the gap.
                    if to < last {
                        assert_eq!(r.next().await["seq"], to + 1);
                    }
                }
                _ => panic!("200 events through a 64 KiB budget cannot all be held: {resumed}"),
            }
        });
    }
    let all = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(done) = connections.join_next().await {
            done.expect("a connection's turns");
        }
    });
    all.await.expect("every connection finished (no deadlock)");
    assert!(memory.in_use() <= BUDGET, "{} B charged", memory.in_use());
}

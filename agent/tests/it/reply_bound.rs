//! Every reply is bounded in the carrier's memory (docs/protocol.md, "Limits"):
//! `turn_completed.text` and the reply's history entry hold at most `limits.max_reply_bytes`,
//! cut at a character boundary and marked `truncated: true`; deltas are never cut (a delta
//! longer than the cap travels as several events); the hub holds no more than the cap of a
//! running turn. Real sockets, a `tokio-tungstenite` client, in-process carriers; the carrier whose
//! memory a child's endless reply must not grow runs in a process of its own (the example
//! `agent_host`). (`carrier serve --max-reply-bytes 0` is refused: the CLI's tests.)

use carrier_test_support as support;

use std::sync::{Arc, Mutex};

use carrier_agent::{
    AgentProfile, HostError, InMemoryDirectory, ProtocolSession, TurnSink, TurnStart,
};
use carrier_protocol::methods::Decision;
use futures_util::StreamExt;
use serde_json::{json, Value};
use support::serve_process::*;
use support::*;
use tokio_tungstenite::tungstenite::Message;

/// The carrier whose memory a test measures: this crate's example `agent_host`.
const HOST: Program = Program::Example("agent_host");

/// An agent whose turns the test plays by hand through the sink.
#[derive(Clone, Default)]
struct Puppet {
    sink: Arc<Mutex<Option<TurnSink>>>,
}

impl ProtocolSession for Puppet {
    fn start_turn(&self, turn: TurnStart) -> Result<(), HostError> {
        *self.sink.lock().unwrap() = Some(turn.sink);
        Ok(())
    }
    fn abort_turn(&self, _turn_id: &str) {}
    fn permission_decided(&self, _turn_id: &str, _request_id: &str, _decision: Decision) {}
}

impl Puppet {
    fn sink(&self) -> TurnSink {
        self.sink.lock().unwrap().clone().expect("a running turn")
    }
}

async fn puppet_server(max_reply_bytes: usize) -> (Server, Puppet) {
    let puppet = Puppet::default();
    let agent = puppet.clone();
    let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| {
        Arc::new(agent.clone()) as Arc<dyn ProtocolSession>
    }))
    .build();
    let mut config = config();
    config.limits.max_reply_bytes = max_reply_bytes;
    (Server::with(config, profile).await, puppet)
}

fn completed(events: &[Value]) -> &Value {
    let last = events.last().expect("events");
    assert_eq!(last["event"], "session.turn_completed");
    &last["payload"]
}

async fn reply_entry(c: &mut Client) -> Value {
    let history = c.ok("session.history", json!({"limit": 1})).await;
    let entry = history["entries"][0].clone();
    assert_eq!(entry["role"], "assistant");
    entry
}

#[tokio::test]
async fn a_reply_at_the_cap_is_whole_and_one_byte_past_is_cut_and_marked() {
    let (server, puppet) = puppet_server(8).await;
    let (mut c, hs) = server.drive().await;
    assert_eq!(hs["limits"]["max_reply_bytes"], 8);

    // Exactly the cap: whole, no `truncated`.
    let t = c.submit("at").await;
    puppet.sink().complete("12345678").unwrap();
    let events = c.turn_events(&t).await;
    assert_eq!(completed(&events)["text"], "12345678");
    assert!(completed(&events).get("truncated").is_none());
    let entry = reply_entry(&mut c).await;
    assert_eq!(entry["text"], "12345678");
    assert!(entry.get("truncated").is_none());

    // One byte past: cut to the cap.
    let t = c.submit("past").await;
    puppet.sink().complete("123456789").unwrap();
    let events = c.turn_events(&t).await;
    assert_eq!(completed(&events)["text"], "12345678");
    assert_eq!(completed(&events)["truncated"], true);
    let entry = reply_entry(&mut c).await;
    assert_eq!(
        (&entry["text"], &entry["truncated"]),
        (&json!("12345678"), &json!(true))
    );

    // A cap inside a character: the cut falls before it ("€" is 3 bytes: 7 + 3 > 8).
    let t = c.submit("boundary").await;
    puppet.sink().complete("1234567€").unwrap();
    let events = c.turn_events(&t).await;
    assert_eq!(completed(&events)["text"], "1234567");
    assert_eq!(completed(&events)["truncated"], true);

    // An agent that cut its reply itself says so; the carrier keeps the mark.
    let t = c.submit("own cut").await;
    puppet.sink().finish_truncated("123", false).unwrap();
    let events = c.turn_events(&t).await;
    assert_eq!(completed(&events)["text"], "123");
    assert_eq!(completed(&events)["truncated"], true);
}

#[tokio::test]
async fn deltas_are_never_cut_a_long_one_is_split_and_an_aborted_reply_is_capped() {
    let (server, puppet) = puppet_server(8).await;
    let (mut c, _) = server.drive().await;
    let (mut observer, _) = server.observe().await;
    let t = c.submit("go").await;
    let sink = puppet.sink();
    sink.delta("abcdef").unwrap();
    // 13 bytes in one call: more than the cap, so several events, none over it, each
    // ending on a character boundary (the second "€" would end at byte 10).
    sink.delta("€ghij€klm").unwrap();
    sink.delta("tail").unwrap();
    c.ok("session.abort", json!({})).await;
    for client in [&mut c, &mut observer] {
        let events = client.turn_events(&t).await;
        assert_eq!(
            concat_deltas(&events),
            "abcdef€ghij€klmtail",
            "nothing lost"
        );
        let deltas: Vec<&str> = events
            .iter()
            .filter(|e| e["event"] == "session.text_delta")
            .map(|e| e["payload"]["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, ["abcdef", "€ghij", "€klm", "tail"]);
        // What the carrier kept of the aborted turn: "€" does not fit the 2 bytes left of
        // the cap, and nothing after it is kept (the text stays a prefix of the reply).
        let done = completed(&events);
        assert_eq!(
            (&done["text"], &done["aborted"], &done["truncated"]),
            (&json!("abcdef"), &json!(true), &json!(true))
        );
    }
    assert_eq!(reply_entry(&mut c).await["truncated"], true);
}

#[tokio::test]
async fn the_embedded_agent_at_the_default_cap_is_not_marked() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let t = c.submit("hello world").await;
    let events = c.turn_events(&t).await;
    assert_eq!(completed(&events)["text"], "echo: hello world");
    assert!(completed(&events).get("truncated").is_none());
}

/// The child of `agent/tests/agents/long_reply.py`: its units, so the test knows the stream.
const UNIT: &str = "aé€😀";
const CHUNK_UNITS: usize = 6553;
const BIG_DELTA: usize = 900 * 1024;
const CAP: usize = 256 * 1024;
const DELTA_HEAD: &str = "{\"event\":\"session.text_delta\",";

/// `s` repeated until `bytes`, cut back to a character boundary.
fn prefix_of_stream(bytes: usize) -> String {
    let chunk = UNIT.repeat(CHUNK_UNITS);
    let mut s = chunk.repeat(bytes / chunk.len() + 1);
    let mut end = bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

/// What a reader that keeps up saw of one turn: deltas measured from their frames (the child
/// writes no escapes), every other frame parsed.
struct Seen {
    delta_bytes: usize,
    deltas: usize,
    largest_delta_frame: usize,
    /// Every other frame, in order; the last is the `turn_completed`.
    others: Vec<Value>,
}

async fn read_turn(c: &mut Client) -> Seen {
    let mut seen = Seen {
        delta_bytes: 0,
        deltas: 0,
        largest_delta_frame: 0,
        others: Vec::new(),
    };
    loop {
        let msg = tokio::time::timeout(WAIT, c.ws.next())
            .await
            .expect("the stream stalled")
            .expect("the connection closed")
            .expect("a frame");
        let text = match msg {
            Message::Text(t) => t,
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        };
        if text.starts_with(DELTA_HEAD) {
            let start = text.find("\"delta\":\"").expect("delta field") + 9;
            assert!(text.ends_with("\"}}"), "delta frame shape");
            seen.delta_bytes += text.len() - 3 - start;
            seen.deltas += 1;
            seen.largest_delta_frame = seen.largest_delta_frame.max(text.len());
            continue;
        }
        let frame: Value = serde_json::from_str(&text).expect("JSON");
        let done = frame["event"] == "session.turn_completed";
        seen.others.push(frame);
        if done {
            return seen;
        }
    }
}

/// The reproduction: a child streaming 640 MiB in one turn grew the carrier to
/// 662 MiB (the hub kept the whole reply), and a reply over the outbound budget would fail
/// every connection when its `turn_completed` went out.
#[tokio::test]
async fn a_child_streaming_512_mib_in_one_turn_leaves_the_carrier_memory_bounded() {
    let serve = HOST
        .with_agent(
            &python_agent("long_reply.py", ""),
            &["--max-reply-bytes", &CAP.to_string()],
        )
        .await;
    let (mut c, hs) = serve.client().await;
    assert_eq!(hs["limits"]["max_reply_bytes"], CAP);
    let chunk = UNIT.len() * CHUNK_UNITS;
    let count = (512 << 20) / chunk + 1;
    let before = carrier_test_support::serve_process::rss_kib(serve.pid);

    let id = c
        .send_request("session.submit", json!({"prompt": count.to_string()}))
        .await;
    let seen = read_turn(&mut c).await;
    let peak = peak_rss_kib(serve.pid);
    let growth_mib = peak.saturating_sub(before) / 1024;
    eprintln!(
        "512 MiB reply: VmRSS before {before} KiB, VmHWM after {peak} KiB (+{growth_mib} MiB)"
    );
    assert!(
        growth_mib < 64,
        "carrier grew by {growth_mib} MiB streaming 512 MiB (bound: 64 MiB)"
    );
    assert_eq!(seen.others.len(), 3, "{:?}", seen.others);
    assert_eq!(seen.others[0]["id"], id, "the submit's answer first");
    let turn_id = &seen.others[0]["result"]["turn_id"];
    assert_eq!(seen.others[1]["event"], "session.turn_started");
    let done = &seen.others[2]["payload"];
    assert_eq!(&done["turn_id"], turn_id);

    // Every delta arrived whole: the stream plus the big delta, split at the cap.
    let big = prefix_of_stream(BIG_DELTA).len();
    assert_eq!(seen.delta_bytes, count * chunk + big);
    assert_eq!(seen.deltas, count + big.div_ceil(CAP));
    assert!(
        seen.largest_delta_frame <= CAP + 256,
        "a delta event of {} bytes",
        seen.largest_delta_frame
    );
    // The completion: the child's 768 KiB text cut to the cap on a character boundary.
    let kept = prefix_of_stream(CAP);
    assert!(kept.len() < CAP, "the cap falls inside a character");
    assert_eq!(done["truncated"], true);
    assert_eq!(done["aborted"], false);
    assert_eq!(done["text"].as_str().map(str::len), Some(kept.len()));
    assert!(done["text"] == kept.as_str());
    let entry = reply_entry(&mut c).await;
    assert_eq!(entry["truncated"], true);
    assert!(entry["text"] == kept.as_str());

    // The next turn works, and is not marked.
    let t = c.submit("small").await;
    let events = c.turn_events(&t).await;
    assert_eq!(concat_deltas(&events), "abc");
    assert_eq!(completed(&events)["text"], "abc");
    assert!(completed(&events).get("truncated").is_none());
    serve.finish().await;
}

#[tokio::test]
async fn a_childs_own_truncated_mark_is_kept() {
    let serve = AgentServer::start(&python_agent("long_reply.py", "")).await;
    let (mut c, _) = serve.client().await;
    let t = c.submit("flagged").await;
    let events = c.turn_events(&t).await;
    assert_eq!(concat_deltas(&events), "abc");
    assert_eq!(
        (
            &completed(&events)["text"],
            &completed(&events)["truncated"]
        ),
        (&json!("ab"), &json!(true))
    );
    assert_eq!(reply_entry(&mut c).await["truncated"], true);
    let t = c.submit("plain").await;
    let events = c.turn_events(&t).await;
    assert!(completed(&events).get("truncated").is_none());
    serve.finish().await;
}

//! Session bounds (docs/protocol.md, "Limits"): `sessions.start` titles of at most
//! `limits.max_title_bytes` (`invalid_params` past it), at most `limits.max_sessions` sessions
//! (`limit_exceeded` past it), whatever the host directory; and `sessions.list` answered in
//! any state of the directory, within the connection's outbound budget. Real sockets, a
//! `tokio-tungstenite` client.

use carrier_test_support as support;

use std::sync::{Arc, Mutex};

use carrier_agent::{
    AgentProfile, EmbeddedAgent, HostError, InMemoryDirectory, ProtocolSession, SessionDirectory,
    SessionEntry,
};
use serde_json::{json, Value};
use support::*;

const MAX_TITLE: usize = 256;
const MAX_SESSIONS: usize = 64;

fn assert_title_refused(e: &Value, size: usize) {
    assert_eq!(e["code"], "protocol_error", "{e}");
    assert_eq!(e["effect_state"], "none", "{e}");
    assert_eq!(e["data"]["reason"], "invalid_params", "{e}");
    assert_eq!(e["data"]["limit"], MAX_TITLE, "{e}");
    assert_eq!(e["data"]["size"], size, "{e}");
}

fn titles(list: &Value) -> Vec<String> {
    list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["title"].as_str().expect("title").to_owned())
        .collect()
}

#[tokio::test]
async fn the_handshake_publishes_the_session_and_reply_bounds() {
    let server = Server::start().await;
    let (_c, hs) = server.drive().await;
    assert_eq!(hs["limits"]["max_title_bytes"], MAX_TITLE);
    assert_eq!(hs["limits"]["max_sessions"], MAX_SESSIONS);
    assert_eq!(hs["limits"]["max_reply_bytes"], 1 << 20);
}

/// The reproduction: ten sessions with ~1 MiB titles used to make every
/// `sessions.list` answer larger than the 8 MiB budget, so every caller (observers too) was
/// closed with 1013, for good.
#[tokio::test]
async fn ten_over_long_titles_are_refused_and_sessions_list_is_still_answered() {
    let server = Server::start().await;
    let (mut driver, _) = server.drive().await;
    let (mut observer, _) = server.observe().await;
    let huge = "t".repeat(1_000_000);
    for _ in 0..10 {
        let e = driver.err("sessions.start", json!({ "title": huge })).await;
        assert_title_refused(&e, huge.len());
    }
    assert_eq!(
        driver.ok("session.status", json!({})).await["session_id"],
        "s1",
        "a refused start binds nothing"
    );
    for client in [&mut driver, &mut observer] {
        let list = client.ok("sessions.list", json!({})).await;
        assert_eq!(titles(&list), ["default"]);
    }
}

#[tokio::test]
async fn a_title_at_max_title_bytes_is_accepted_and_one_byte_past_is_refused() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    // Counted in UTF-8 bytes: 128 two-byte characters are exactly the limit.
    let at_limit = "é".repeat(MAX_TITLE / 2);
    assert_eq!(at_limit.len(), MAX_TITLE);
    let started = c.ok("sessions.start", json!({ "title": at_limit })).await;
    assert_eq!(started["session_id"], "s2");
    let past = format!("{at_limit}x");
    let e = c.err("sessions.start", json!({ "title": past })).await;
    assert_title_refused(&e, MAX_TITLE + 1);
    let list = c.ok("sessions.list", json!({})).await;
    assert_eq!(titles(&list), ["default".to_owned(), at_limit]);
}

#[tokio::test]
async fn sessions_start_at_max_sessions_is_accepted_and_one_past_is_limit_exceeded() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    // `s1` exists from the start: 63 more reach the limit.
    for n in 2..=MAX_SESSIONS {
        let started = c.ok("sessions.start", json!({})).await;
        assert_eq!(started["session_id"], format!("s{n}"));
    }
    let e = c
        .err("sessions.start", json!({"title": "one too many"}))
        .await;
    assert_eq!(e["code"], "limit_exceeded", "{e}");
    assert_eq!(e["effect_state"], "none");
    assert_eq!(
        e["data"],
        json!({"limit": "max_sessions", "value": MAX_SESSIONS})
    );
    assert_eq!(
        c.ok("session.status", json!({})).await["session_id"],
        format!("s{MAX_SESSIONS}"),
        "the refused start left the binding alone"
    );
    let list = c.ok("sessions.list", json!({})).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), MAX_SESSIONS);
}

/// The count and the start are one step: drivers racing for the last free places get exactly
/// as many sessions as are left.
#[tokio::test]
async fn concurrent_starts_never_pass_max_sessions() {
    let mut config = config();
    config.limits.max_sessions = 10;
    let server = Server::with(config, embedded(DELAY)).await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (mut c, _) = server.drive().await;
        tasks.push(tokio::spawn(async move {
            let mut started = 0;
            for _ in 0..10 {
                let r = c.request("sessions.start", json!({})).await;
                match r.get("result") {
                    Some(_) => started += 1,
                    None => assert_eq!(r["error"]["code"], "limit_exceeded", "{r}"),
                }
            }
            started
        }));
    }
    let mut started = 0;
    for t in tasks {
        started += t.await.unwrap();
    }
    assert_eq!(started, 9, "s1 plus nine started sessions");
    let (mut c, _) = server.drive().await;
    let list = c.ok("sessions.list", json!({})).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 10);
}

/// A host directory the carrier does not control: it was filled out of band with more
/// sessions and longer titles than the carrier's bounds.
struct HostDirectory {
    agent: EmbeddedAgent,
    entries: Mutex<Vec<SessionEntry>>,
}

impl SessionDirectory for HostDirectory {
    fn list(&self) -> Vec<SessionEntry> {
        self.entries.lock().unwrap().clone()
    }
    fn open(&self, session_id: &str) -> Option<Arc<dyn ProtocolSession>> {
        let known = self.list().iter().any(|e| e.session_id == session_id);
        known.then(|| self.agent.session())
    }
    fn start(&self, _title: Option<&str>) -> Result<SessionEntry, HostError> {
        Err(HostError::new("this host starts no sessions"))
    }
}

fn host_directory(count: usize, title: &str) -> AgentProfile {
    let entries = (1..=count)
        .map(|n| SessionEntry {
            session_id: format!("h{n}"),
            title: title.to_owned(),
        })
        .collect();
    AgentProfile::builder(HostDirectory {
        agent: EmbeddedAgent::default(),
        entries: Mutex::new(entries),
    })
    .build()
}

#[tokio::test]
async fn sessions_list_cuts_a_host_directorys_long_titles_at_a_character_boundary() {
    // 20 sessions with 1 MiB titles would be a 20 MiB answer; "€" is 3 bytes, so 256 bytes
    // end inside one: 85 characters (255 bytes) are kept.
    let title = "€".repeat(1 << 18);
    let server = Server::with(config(), host_directory(20, &title)).await;
    let (mut c, _) = server.observe().await;
    let list = c.ok("sessions.list", json!({})).await;
    let got = titles(&list);
    assert_eq!(got.len(), 20);
    for t in got {
        assert_eq!(t, "€".repeat(85));
    }
    // Past the carrier's bound the host's directory starts nothing new either.
    let (mut d, _) = server.drive().await;
    let e = d.err("sessions.start", json!({})).await;
    assert_eq!(e["code"], "internal", "{e}");
}

#[tokio::test]
async fn sessions_list_of_a_directory_larger_than_the_budget_lists_the_leading_sessions() {
    let budget = 64 * 1024;
    let config = config().with_limits(
        carrier_server::Limits::default()
            .with_queue_bytes(budget)
            .with_handshake_timeout(config().limits.handshake_timeout),
    );
    // 2,000 sessions × ~280 bytes each ≈ 560 KiB of JSON: eight times the budget.
    let server = Server::with(config, host_directory(2000, &"x".repeat(MAX_TITLE))).await;
    let (mut c, _) = server.observe().await;
    let id = c.send_request("sessions.list", json!({})).await;
    let msg = tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut c.ws))
        .await
        .expect("an answer in time")
        .expect("the connection is open")
        .expect("a frame");
    let text = msg.into_text().expect("a text frame");
    assert!(text.len() <= budget, "{} bytes", text.len());
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["id"], id);
    let sessions = answer["result"]["sessions"].as_array().unwrap();
    assert!(sessions.len() > 100, "{} sessions", sessions.len());
    assert!(sessions.len() < 2000);
    assert_eq!(sessions[0]["session_id"], "h1", "the default session first");
    // Still connected and answering.
    assert_eq!(c.ok("system.ping", json!({})).await, json!({}));
}

#[tokio::test]
async fn the_embedded_directory_is_bounded_through_the_carrier_too() {
    // The bounds are the carrier's, not the directory's: a profile built over an
    // `InMemoryDirectory` by hand is bound by the transport's limits.
    let mut config = config();
    config.limits.max_sessions = 2;
    config.limits.max_title_bytes = 4;
    let agent = EmbeddedAgent::default();
    let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session())).build();
    let server = Server::with(config, profile).await;
    let (mut c, hs) = server.drive().await;
    assert_eq!(hs["limits"]["max_sessions"], 2);
    assert_eq!(hs["limits"]["max_title_bytes"], 4);
    let e = c.err("sessions.start", json!({"title": "12345"})).await;
    assert_eq!(e["data"]["reason"], "invalid_params");
    c.ok("sessions.start", json!({"title": "1234"})).await;
    let e = c.err("sessions.start", json!({"title": "ok"})).await;
    assert_eq!(e["code"], "limit_exceeded");
    assert_eq!(e["data"]["value"], 2);
}

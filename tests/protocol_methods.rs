//! Every method's success path and every error code of docs/protocol.md, "Errors", triggered by
//! real requests over real sockets.

use carrier_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use carrier::agent::{
    AgentProfile, EmbeddedAgent, HostError, InMemoryDirectory, ProtocolSession, SessionDirectory,
    SessionEntry,
};
use carrier::server::{Binary, ChannelDescriptor};
use serde_json::{json, Value};
use support::*;

#[tokio::test]
async fn every_read_method_succeeds() {
    let server = Server::start().await;
    server
        .transport
        .register_channel(ChannelDescriptor::new("share", &["*"], Binary::Accepted))
        .unwrap();
    let (mut c, hs) = server.drive().await;

    assert_eq!(c.ok("system.ping", json!({})).await, json!({}));

    let status = c.ok("system.status", json!({})).await;
    assert_eq!(status["server"]["name"], "carrier");
    assert_eq!(status["protocol_version"], "1.2");
    assert_eq!(status["min_compatible_protocol"], "1.0");
    assert_eq!(status["epoch"], hs["epoch"]);
    assert_eq!(status["connections"], 1);
    assert_eq!(status["channels"], json!(["share"]));
    assert_eq!(
        status["compatibility"]["sessions"],
        json!({"required_protocol": "1.0", "available": true})
    );
    assert_eq!(
        status["compatibility"]["usage.stored"],
        json!({"required_protocol": "1.0", "available": false})
    );

    assert_eq!(
        c.ok("surface.role", json!({})).await,
        json!({"role": "drive"})
    );
    assert_eq!(
        c.ok("session.status", json!({})).await,
        json!({"session_id": "s1", "state": "idle"})
    );
    assert_eq!(
        c.ok("session.history", json!({})).await,
        json!({"entries": []})
    );
    assert_eq!(
        c.ok("sessions.list", json!({})).await,
        json!({"sessions": [{"session_id": "s1", "title": "default", "state": "idle"}]})
    );
    assert_eq!(
        c.ok("channels.list", json!({})).await,
        json!({"channels": [{"name": "share", "events": ["*"], "binary": true, "delivery": "reliable"}]})
    );
    assert_eq!(
        c.ok("usage.report", json!({})).await,
        json!({"scope": "session", "session_id": "s1", "tokens_in": 0, "tokens_out": 0, "turns": 0})
    );
}

#[tokio::test]
async fn every_mutating_method_succeeds() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;

    let turn = c.submit("count these words").await;
    c.turn_events(&turn).await;
    let usage = c
        .ok(
            "usage.report",
            json!({"scope": "session", "session_id": "s1"}),
        )
        .await;
    assert_eq!(
        (&usage["tokens_in"], &usage["tokens_out"], &usage["turns"]),
        (&json!(3), &json!(4), &json!(1))
    );

    let started = c.ok("sessions.start", json!({"title": "side quest"})).await;
    assert_eq!(started, json!({"session_id": "s2"}));
    assert_eq!(c.ok("session.status", json!({})).await["session_id"], "s2");
    let list = c.ok("sessions.list", json!({})).await;
    assert_eq!(
        list["sessions"][1],
        json!({"session_id": "s2", "title": "side quest", "state": "idle"})
    );
    let untitled = c.ok("sessions.start", json!({"title": null})).await;
    assert_eq!(untitled, json!({"session_id": "s3"}));

    assert_eq!(
        c.ok("sessions.switch", json!({"session_id": "s1"})).await,
        json!({"session_id": "s1"})
    );
    assert_eq!(
        c.ok("session.history", json!({})).await["entries"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let turn = c.submit("/tool go").await;
    let req = c.event("session.permission_request").await;
    c.ok(
        "session.permission.respond",
        json!({"request_id": req["payload"]["request_id"], "decision": "allow"}),
    )
    .await;
    c.turn_events(&turn).await;

    let turn = c.submit("/tool wait").await;
    c.event("session.permission_request").await;
    assert_eq!(
        c.ok("session.abort", json!({"turn_id": null})).await,
        json!({"turn_id": turn})
    );
}

/// A directory whose `start` fails, or hands out an empty session id.
struct Flaky {
    inner: InMemoryDirectory,
    empty_ids: bool,
    released: Arc<std::sync::Mutex<Vec<String>>>,
}

impl SessionDirectory for Flaky {
    fn list(&self) -> Vec<SessionEntry> {
        self.inner.list()
    }
    fn open(&self, id: &str) -> Option<Arc<dyn ProtocolSession>> {
        self.inner.open(id)
    }
    fn start(&self, _title: Option<&str>) -> Result<SessionEntry, HostError> {
        if self.empty_ids {
            Ok(SessionEntry {
                session_id: String::new(),
                title: "broken".into(),
            })
        } else {
            Err(HostError::new("disk full"))
        }
    }
    fn release(&self, id: &str) {
        self.released.lock().unwrap().push(id.to_owned());
    }
}

fn flaky(empty_ids: bool) -> (AgentProfile, Arc<std::sync::Mutex<Vec<String>>>) {
    let agent = EmbeddedAgent::default().with_demo_delay(DELAY);
    let released = Arc::new(std::sync::Mutex::new(Vec::new()));
    let dir = Flaky {
        inner: InMemoryDirectory::new(move |_| agent.session()),
        empty_ids,
        released: released.clone(),
    };
    (AgentProfile::builder(dir).build(), released)
}

#[tokio::test]
async fn every_error_code_is_reachable() {
    let mut cfg = config();
    cfg.limits.max_text_bytes = 4096;
    let server = Server::with(cfg.clone(), embedded(Duration::from_millis(200))).await;
    let (mut c, _) = server.drive().await;

    let e = c.err("session.submit", json!({"prompt": 5})).await;
    assert_eq!(
        (e["code"].as_str(), e["data"]["reason"].as_str()),
        (Some("protocol_error"), Some("invalid_params"))
    );
    assert_eq!(e["effect_state"], "none");

    let e = c.err("session.teleport", json!({})).await;
    assert_eq!(e["code"], "method_not_found");

    let e = c.err("usage.report", json!({"scope": "personal"})).await;
    assert_eq!(e["code"], "unsupported_feature");
    assert_eq!(e["effect_state"], "none");
    assert_eq!(
        e["data"],
        json!({
            "feature": "usage.personal",
            "component": "server",
            "required_protocol": "1.0",
            "actual_protocol": "1.2",
            "recovery": e["data"]["recovery"],
        })
    );
    assert!(e["data"]["recovery"]
        .as_str()
        .is_some_and(|r| !r.is_empty()));

    let turn = c.submit("slow turn here").await;
    assert_eq!(
        c.err("session.submit", json!({"prompt": "x"})).await["code"],
        "busy"
    );
    let e = c.err("session.abort", json!({"turn_id": "t999"})).await;
    assert_eq!(e["code"], "not_found");
    c.ok("session.abort", json!({"turn_id": turn})).await;
    assert_eq!(c.err("session.abort", json!({})).await["code"], "not_found");
    let e = c
        .err("sessions.switch", json!({"session_id": "nope"}))
        .await;
    assert_eq!(e["code"], "not_found");
    let e = c.err("usage.report", json!({"session_id": "nope"})).await;
    assert_eq!(e["code"], "not_found");
    let e = c
        .err(
            "session.permission.respond",
            json!({"request_id": "p?", "decision": "allow"}),
        )
        .await;
    assert_eq!(e["code"], "not_found");

    let big = format!(
        r#"{{"id":"big","method":"session.submit","params":{{"prompt":"{}"}}}}"#,
        "x".repeat(5000)
    );
    c.send_raw(&big).await;
    let r = c.response("big").await;
    assert_eq!(r["error"]["code"], "too_large");
    assert_eq!(r["error"]["data"]["limit"], 4096);
    assert_eq!(r["error"]["data"]["size"], big.len());
    assert_eq!(
        c.ok("system.ping", json!({})).await,
        json!({}),
        "socket stays open"
    );

    let (mut o, _) = server.observe().await;
    assert_eq!(
        o.err("session.submit", json!({"prompt": "x"})).await["code"],
        "forbidden"
    );

    let mut fresh = server.connect("").await;
    assert_eq!(
        fresh.err("system.ping", json!({})).await["code"],
        "handshake_required"
    );

    let mut old = server.connect("").await;
    let e = old
        .err(
            "system.handshake",
            handshake_params(json!({"protocol_version": "3.0", "min_compatible_protocol": "3.0"})),
        )
        .await;
    assert_eq!(e["code"], "version_incompatible");

    let (profile, _) = flaky(false);
    let failing = Server::with(config(), profile).await;
    let (mut f, _) = failing.drive().await;
    let e = f.err("sessions.start", json!({})).await;
    assert_eq!(e["code"], "internal");
    assert_eq!(e["effect_state"], "unknown");
}

#[tokio::test]
async fn a_start_result_that_fails_validation_is_never_sent_and_releases_the_session() {
    let (profile, released) = flaky(true);
    let server = Server::with(config(), profile).await;
    let (mut c, _) = server.drive().await;
    let e = c.err("sessions.start", json!({})).await;
    assert_eq!(e["code"], "protocol_error");
    assert_eq!(e["effect_state"], "unknown");
    assert_eq!(*released.lock().unwrap(), vec![String::new()]);
    // Still bound to the default session.
    assert_eq!(c.ok("session.status", json!({})).await["session_id"], "s1");
}

/// `session.history` keeps the newest entries within the profile's bound: at the bound every
/// entry is there, one turn past it the oldest turn is gone and `limit` still counts from the
/// newest.
#[tokio::test]
async fn history_holds_the_newest_entries_within_its_bound() {
    let agent = EmbeddedAgent::default().with_demo_delay(DELAY);
    let profile = AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
        .history(4, usize::MAX)
        .build();
    let server = Server::with(config(), profile).await;
    let (mut c, _) = server.drive().await;
    let texts = |v: Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e["text"].as_str().unwrap_or("?").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };

    for prompt in ["one", "two"] {
        let turn = c.submit(prompt).await;
        c.turn_events(&turn).await;
    }
    let at_bound = c.ok("session.history", json!({})).await;
    assert_eq!(texts(at_bound), ["one", "echo: one", "two", "echo: two"]);

    let turn = c.submit("three").await;
    c.turn_events(&turn).await;
    let past = c.ok("session.history", json!({})).await;
    assert_eq!(past["entries"][0]["turn_id"], "t2");
    assert_eq!(texts(past), ["two", "echo: two", "three", "echo: three"]);
    let newest = c.ok("session.history", json!({"limit": 1})).await;
    assert_eq!(texts(newest), ["echo: three"]);
}

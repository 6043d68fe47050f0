//! Roles, session fan-out and driver identity (docs/protocol.md, "Roles" and "Events").

use carrier_test_support as support;

use carrier_protocol::catalog::METHODS;
use carrier_protocol::Role;
use serde_json::json;
use support::*;

#[tokio::test]
async fn observers_are_refused_every_drive_method_with_forbidden() {
    let server = Server::start().await;
    let (mut o, _) = server.observe().await;
    let drive_methods: Vec<&str> = METHODS
        .iter()
        .filter(|m| m.least_role == Role::Drive)
        .map(|m| m.name)
        .collect();
    assert_eq!(drive_methods.len(), 4);
    for method in drive_methods {
        let params = match method {
            "session.submit" => json!({"prompt": "hi"}),
            "session.permission.respond" => json!({"request_id": "x", "decision": "allow"}),
            _ => json!({}),
        };
        let e = o.err(method, params).await;
        assert_eq!(e["code"], "forbidden", "{method}");
        assert_eq!(e["effect_state"], "none", "{method}");
        assert_eq!(
            e["data"],
            json!({"required_role": "drive", "role": "observe"}),
            "{method}"
        );
    }
    // Observe methods still work, including switching its own binding.
    o.ok("sessions.switch", json!({"session_id": "s1"})).await;
    o.ok("session.history", json!({})).await;
}

#[tokio::test]
async fn observers_receive_every_session_event_like_drivers() {
    let server = Server::start().await;
    let (mut d, _) = server.drive().await;
    let (mut o, _) = server.observe().await;
    let turn = d.submit("/tool look").await;
    let req = d.event("session.permission_request").await;
    d.ok(
        "session.permission.respond",
        json!({"request_id": req["payload"]["request_id"], "decision": "allow"}),
    )
    .await;
    let seen_by_driver = d.turn_events(&turn).await;
    let seen_by_observer = o.turn_events(&turn).await;
    let mut all_driver = vec![req.clone()];
    all_driver.extend(seen_by_driver);
    // The observer's list includes the permission request it skipped to; compare full streams.
    let mut driver_stream: Vec<_> = all_driver
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    driver_stream.sort_unstable();
    let observer_stream: Vec<_> = seen_by_observer
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(observer_stream, driver_stream);
    assert_consecutive(&seen_by_observer);
    assert_eq!(seen_by_observer[0]["event"], "session.turn_started");
    assert!(names(&seen_by_observer).contains(&"session.permission_resolved".to_owned()));
}

#[tokio::test]
async fn an_observer_sees_the_prompt_a_driver_submitted_to_the_embedded_agent() {
    let server = Server::start().await;
    let (mut driver, _) = server.drive().await;
    let (mut observer, hs) = server.observe().await;
    assert_eq!(hs["role"], "observe");
    for prompt in [
        "hello there",
        "  two  spaces, \"quotes\",\na new line and ünïcödé ✓ ",
    ] {
        let turn = driver.submit(prompt).await;
        let started = observer.event("session.turn_started").await;
        assert_eq!(started["payload"]["turn_id"], turn.as_str());
        assert_eq!(started["payload"]["prompt"], prompt, "{started}");
        observer.turn_events(&turn).await;
        driver.turn_events(&turn).await;
    }
}

#[tokio::test]
async fn the_driver_identity_comes_from_the_host_not_the_client() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let r = c
        .ok(
            "session.submit",
            json!({
                "prompt": "who am i",
                "driver": {"driver_id": "mallory", "surface": "forged"},
                "options": {"driver": "mallory"},
            }),
        )
        .await;
    let started = c.event("session.turn_started").await;
    assert_eq!(started["payload"]["turn_id"], r["turn_id"]);
    assert_eq!(
        started["payload"]["driver"],
        json!({"driver_id": "host-driver", "surface": "test-surface"})
    );
}

#[tokio::test]
async fn an_observe_only_listener_grants_observe_even_when_drive_is_asked() {
    let mut cfg = config();
    cfg.role = Role::Observe;
    let server = Server::with(cfg, embedded(DELAY)).await;
    let (mut c, hs) = server.drive().await;
    assert_eq!(hs["role"], "observe");
    assert_eq!(
        c.err("session.submit", json!({"prompt": "x"})).await["code"],
        "forbidden"
    );
}

#[tokio::test]
async fn connections_bound_to_different_sessions_see_only_their_own_events() {
    let server = Server::start().await;
    let (mut a, _) = server.drive().await;
    let (mut b, _) = server.drive().await;
    let (mut watcher, _) = server.observe().await;
    let s2 = b.ok("sessions.start", json!({"title": "b's"})).await;
    assert_eq!(s2["session_id"], "s2");
    watcher
        .ok("sessions.switch", json!({"session_id": "s2"}))
        .await;

    let ta = a.submit("for a").await;
    let tb = b.submit("for b").await;
    let ea = a.turn_events(&ta).await;
    let eb = b.turn_events(&tb).await;
    assert_eq!(concat_deltas(&ea), "echo: for a");
    assert_eq!(concat_deltas(&eb), "echo: for b");
    // Both sessions number their own events from 1.
    assert_eq!(ea[0]["seq"], 1);
    assert_eq!(eb[0]["seq"], 1);
    let ew = watcher.turn_events(&tb).await;
    assert_eq!(concat_deltas(&ew), "echo: for b");

    // Nothing else arrived. Every event of a turn is queued to every bound connection before
    // the turn's `turn_completed`, so after a ping round-trip anything leaked would be stashed.
    for c in [&mut a, &mut b, &mut watcher] {
        c.ok("system.ping", json!({})).await;
        let leaked: Vec<_> = c
            .stashed()
            .iter()
            .filter(|f| {
                f["event"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("session."))
            })
            .collect();
        assert!(leaked.is_empty(), "{leaked:?}");
    }

    // Switching moves only the connection that asked.
    assert_eq!(a.ok("session.status", json!({})).await["session_id"], "s1");
    assert_eq!(b.ok("session.status", json!({})).await["session_id"], "s2");
}

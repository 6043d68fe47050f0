//! The handshake gate and version rules (docs/protocol.md, "Handshake" and "Versions"), over real
//! sockets.

use carrier_test_support as support;

use std::time::Duration;

use carrier_agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
use carrier_protocol::version::VersionPair;
use carrier_server::{Binary, ChannelDescriptor};
use futures_util::SinkExt;
use serde_json::json;
use support::*;

#[tokio::test]
async fn handshake_result_has_every_field() {
    let server = Server::start().await;
    server
        .transport
        .register_channel(ChannelDescriptor::new("mic", &["level"], Binary::Accepted))
        .unwrap();
    let (_c, r) = server.drive().await;
    assert_eq!(r["protocol_version"], "1.2");
    assert_eq!(r["min_compatible_protocol"], "1.0");
    assert_eq!(r["server"]["name"], "carrier");
    assert!(r["server"]["version"].is_string());
    assert_eq!(r["role"], "drive");
    assert_eq!(r["session_id"], "s1");
    assert!(r["epoch"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(r["version_skew"], false);
    assert_eq!(
        r["features"],
        json!({
            "sessions": true, "resume": true, "permissions": true, "channels": true,
            "usage.session": true, "usage.personal": false, "usage.stored": false,
            "bulk_credit": true, "agent_updates": true,
        })
    );
    assert_eq!(
        r["channels"],
        json!([{"name": "mic", "events": ["level"], "binary": true, "delivery": "reliable"}])
    );
    let limits = &r["limits"];
    assert_eq!(limits["max_text_bytes"], 1 << 20);
    assert_eq!(limits["max_message_bytes"], 16 << 20);
    assert_eq!(limits["max_connections"], 1024);
    assert_eq!(limits["queue_bytes"], 8 << 20);
    assert_eq!(limits["handshake_timeout_ms"], 5000);
    assert_eq!(limits["resume_max_events"], 1024);
    assert_eq!(limits["resume_max_bytes"], 4 << 20);
    assert_eq!(r["resume"], json!({"outcome": "new"}));
}

#[tokio::test]
async fn a_request_before_the_handshake_gets_handshake_required_and_close_1008() {
    let server = Server::start().await;
    let mut c = server.connect("").await;
    let e = c.err("system.ping", json!({})).await;
    assert_eq!(e["code"], "handshake_required");
    assert_eq!(c.ended().await, Ended::Close(1008));
}

#[tokio::test]
async fn a_frame_without_id_before_the_handshake_gets_an_event_and_close_1008() {
    let server = Server::start().await;
    for first in [
        "not json",
        r#"{"event":"x","payload":{}}"#,
        r#"{"id":"a","result":{}}"#,
    ] {
        let mut c = server.connect("").await;
        c.send_raw(first).await;
        let e = c.next().await;
        assert_eq!(e["event"], "protocol_error", "{first}");
        assert_eq!(e["payload"]["code"], "handshake_required", "{first}");
        assert_eq!(c.ended().await, Ended::Close(1008), "{first}");
    }
}

#[tokio::test]
async fn silence_is_closed_1008_after_the_handshake_timeout() {
    let mut config = config();
    config.limits.handshake_timeout = Duration::from_millis(200);
    let server = Server::with(config, embedded(DELAY)).await;
    let mut c = server.connect("").await;
    assert_eq!(c.ended().await, Ended::Close(1008));
}

#[tokio::test]
async fn a_completed_handshake_stops_the_timeout() {
    let mut config = config();
    config.limits.handshake_timeout = Duration::from_millis(200);
    let server = Server::with(config, embedded(DELAY)).await;
    let (mut c, _) = server.drive().await;
    // Well past the timeout, the connection still answers.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(c.ok("system.ping", json!({})).await, json!({}));
}

#[tokio::test]
async fn minor_skew_succeeds_with_version_skew_true() {
    let server = Server::start().await;
    let mut c = server.connect("").await;
    let r = c
        .handshake(json!({"protocol_version": "1.7", "min_compatible_protocol": "1.0"}))
        .await;
    assert_eq!(r["version_skew"], true);
    assert_eq!(r["protocol_version"], "1.2");
    assert_eq!(c.ok("system.ping", json!({})).await, json!({}));
}

#[tokio::test]
async fn incompatible_versions_get_version_incompatible_and_close_1002() {
    let server = Server::start().await;
    for (v, min) in [("2.0", "2.0"), ("0.9", "0.1"), ("1.5", "1.3")] {
        let mut c = server.connect("").await;
        let e = c
            .err(
                "system.handshake",
                handshake_params(json!({"protocol_version": v, "min_compatible_protocol": min})),
            )
            .await;
        assert_eq!(e["code"], "version_incompatible", "{v}/{min}");
        assert_eq!(e["data"]["server"]["protocol_version"], "1.2");
        assert_eq!(e["data"]["server"]["min_compatible_protocol"], "1.0");
        assert_eq!(e["data"]["client"]["protocol_version"], v);
        assert_eq!(e["data"]["client"]["min_compatible_protocol"], min);
        assert_eq!(c.ended().await, Ended::Close(1002), "{v}/{min}");
    }
}

#[tokio::test]
async fn deprecated_min_compatible_peer_is_accepted_and_ignored() {
    let server = Server::start().await;
    let mut c = server.connect("").await;
    let r = c.handshake(json!({"min_compatible_peer": "0.1"})).await;
    assert_eq!(r["version_skew"], false);
}

#[tokio::test]
async fn invalid_handshake_params_are_answered_and_a_retry_works() {
    let server = Server::start().await;
    let mut c = server.connect("").await;
    for params in [
        json!({"protocol_version": "1.0"}),
        json!({"protocol_version": "one", "min_compatible_protocol": "1.0"}),
        json!({"protocol_version": "1.0", "min_compatible_protocol": "1.2"}),
    ] {
        let e = c.err("system.handshake", params.clone()).await;
        assert_eq!(e["code"], "protocol_error", "{params}");
        assert_eq!(e["data"]["reason"], "invalid_params", "{params}");
    }
    c.handshake(json!({})).await;
}

#[tokio::test]
async fn a_second_handshake_is_refused_and_the_connection_keeps_working() {
    let server = Server::start().await;
    let (mut c, _) = server.drive().await;
    let e = c.err("system.handshake", handshake_params(json!({}))).await;
    assert_eq!(e["code"], "protocol_error");
    assert_eq!(e["data"]["reason"], "already_handshaken");
    assert_eq!(c.ok("system.ping", json!({})).await, json!({}));
}

#[tokio::test]
async fn observe_role_is_reported_in_the_handshake() {
    let server = Server::start().await;
    let (mut c, r) = server.observe().await;
    assert_eq!(r["role"], "observe");
    assert_eq!(
        c.ok("surface.role", json!({})).await,
        json!({"role": "observe"})
    );
}

/// A profile of the embedded agent that announces `version` / `min` instead of the default.
fn announcing(version: &str, min: &str) -> carrier_agent::AgentProfile {
    let pair = VersionPair::parse(version, min).expect("a consistent pair");
    let agent = EmbeddedAgent::default().with_demo_delay(DELAY);
    AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session()))
        .protocol_version(pair)
        .build()
}

#[tokio::test]
async fn the_default_profile_announces_protocol_1_1_in_handshake_and_status() {
    let profile = embedded(DELAY);
    assert_eq!(profile.protocol_version(), VersionPair::CURRENT);
    let server = Server::with(config(), profile).await;
    let (mut c, r) = server.drive().await;
    assert_eq!(r["protocol_version"], "1.2");
    assert_eq!(r["min_compatible_protocol"], "1.0");
    let status = c.ok("system.status", json!({})).await;
    assert_eq!(status["protocol_version"], "1.2");
    assert_eq!(status["min_compatible_protocol"], "1.0");
}

#[tokio::test]
async fn a_configured_newer_minor_is_announced_and_a_1_2_client_gets_version_skew() {
    let server = Server::with(config(), announcing("1.3", "1.0")).await;
    let (mut c, r) = server.drive().await;
    assert_eq!(r["protocol_version"], "1.3");
    assert_eq!(r["min_compatible_protocol"], "1.0");
    assert_eq!(r["version_skew"], true);
    let status = c.ok("system.status", json!({})).await;
    assert_eq!(status["protocol_version"], "1.3");
    assert_eq!(status["min_compatible_protocol"], "1.0");
    // Same minor as the server: no skew.
    let mut same = server.connect("").await;
    let r = same
        .handshake(json!({"protocol_version": "1.3", "min_compatible_protocol": "1.0"}))
        .await;
    assert_eq!(r["version_skew"], false);
}

#[tokio::test]
async fn clients_are_checked_against_the_configured_pair_not_the_build_default() {
    // A server whose minimum is 1.1 refuses a 1.0 client that the default server accepts.
    let server = Server::with(config(), announcing("1.3", "1.1")).await;
    let mut c = server.connect("").await;
    let e = c
        .err(
            "system.handshake",
            handshake_params(json!({"protocol_version": "1.0"})),
        )
        .await;
    assert_eq!(e["code"], "version_incompatible");
    assert_eq!(e["data"]["server"]["protocol_version"], "1.3");
    assert_eq!(e["data"]["server"]["min_compatible_protocol"], "1.1");
    assert_eq!(c.ended().await, Ended::Close(1002));

    let server = Server::with(config(), announcing("2.0", "2.0")).await;
    let mut c = server.connect("").await;
    let e = c.err("system.handshake", handshake_params(json!({}))).await;
    assert_eq!(e["code"], "version_incompatible");
    assert_eq!(e["data"]["server"]["protocol_version"], "2.0");
    assert_eq!(c.ended().await, Ended::Close(1002));
    // A 2.x client is welcome there.
    let mut c = server.connect("").await;
    let r = c
        .handshake(json!({"protocol_version": "2.0", "min_compatible_protocol": "2.0"}))
        .await;
    assert_eq!(r["version_skew"], false);
}

/// A channel declared host → clients only: the handshake says so, and an independent client's
/// frames on it, binary or event, are refused with `forbidden` (naming the channel and seq)
/// and never reach the host, while the host's own sends reach the client and the connection
/// goes on working.
#[tokio::test]
async fn a_host_to_clients_channel_refuses_clients_frames_with_forbidden() {
    use carrier_protocol::channel_frame;
    use tokio_tungstenite::tungstenite::Message;

    let server = Server::start().await;
    let diagnostics = server
        .transport
        .register_channel(
            ChannelDescriptor::new("diagnostics", &["report"], Binary::Accepted).host_to_clients(),
        )
        .unwrap();
    let mut inbound = diagnostics.inbound(8);
    let (mut c, hs) = server.drive().await;
    assert_eq!(
        hs["channels"],
        json!([{"name": "diagnostics", "events": ["report"], "binary": true,
                "delivery": "reliable", "direction": "host_to_clients"}])
    );
    let listed = c.ok("channels.list", json!({})).await;
    assert_eq!(listed["channels"][0]["direction"], "host_to_clients");

    let frames = [
        channel_frame::encode_binary("diagnostics", 0, bytes::Bytes::from_static(b"x"))
            .expect("encode"),
        channel_frame::encode_event_frame("diagnostics", 1, "report", &json!({"ok": true}))
            .expect("encode"),
    ];
    for (seq, frame) in frames.into_iter().enumerate() {
        c.ws.send(Message::binary(frame.to_vec()))
            .await
            .expect("sent");
        let refusal = c.event("protocol_error").await;
        assert_eq!(refusal["payload"]["code"], "forbidden", "{refusal}");
        assert_eq!(refusal["payload"]["channel"], "diagnostics");
        assert_eq!(refusal["payload"]["seq"], seq);
    }
    // The connection still works, and nothing reached the host.
    c.ok("system.ping", json!({})).await;
    assert!(
        inbound.try_recv().is_err(),
        "a refused frame reached the host"
    );
    // The host's own frames go out.
    diagnostics
        .send_event("report", json!({"ok": true}))
        .expect("the host sends");
    let frame = loop {
        match tokio::time::timeout(WAIT, futures_util::StreamExt::next(&mut c.ws))
            .await
            .expect("a frame in time")
        {
            Some(Ok(Message::Binary(bytes))) => break bytes,
            Some(Ok(_)) => continue,
            other => panic!("{other:?}"),
        }
    };
    let decoded = channel_frame::decode(frame).expect("a channel frame");
    assert_eq!(decoded.channel, "diagnostics");
}

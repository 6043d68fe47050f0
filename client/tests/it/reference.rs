//! Reference test suite for the client transport contract (docs/protocol.md, "Client behaviour").
//!
//! How to reuse it for a new transport (a pipe, native messaging):
//!
//! - If your transport is a socket under [`ReconnectingTransport`], write a `Connector` for it and
//!   the "transport contract" section passes as is with the fake swapped for your socket.
//! - If you implement `Transport` directly, keep the tests and replace `fake_transport()` with a
//!   constructor for yours plus a way to play the server side (what `FakePeer` does here).
//!
//! The fake side is `carrier_client::testing`: `fake_network()` gives a connector and a
//! `FakeServer` that accepts each dial as a `FakePeer`, refuses dials on demand, and records dial
//! times on the tokio clock, so reconnect delays are checked exactly under a paused clock.
//!
//! Sections: the transport contract over in-memory sockets; the handshake layer (`Client`) over
//! the same; `WsClientTransport` against a real loopback WebSocket server (tokio-tungstenite).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use carrier_client::testing::{fake_network, FakeConnector, FakePeer, FakeServer};
use carrier_client::{
    Client, ClientError, ClientEvent, ClientOptions, ConnectionState, EffectState, ErrorCode,
    HandshakeInfo, Outgoing, ReceivedHistoryEntry, ReceivedSessionEventKind, ReconnectingTransport,
    ResumeOutcome, Subscription, Transport, TransportError, WsClientTransport, WsOptions,
};
use carrier_protocol::Role;
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

type FakeTransport = ReconnectingTransport<FakeConnector>;

fn fake_transport() -> (Arc<FakeTransport>, FakeServer) {
    let (connector, server) = fake_network();
    (Arc::new(ReconnectingTransport::new(connector)), server)
}

/// Waits for the next item. The bound only turns a hang into a failure: under a paused clock it
/// is virtual time, and real-socket tests get their answers in milliseconds.
async fn next<T>(rx: &mut UnboundedReceiver<T>) -> T {
    tokio::time::timeout(Duration::from_secs(3600), rx.recv())
        .await
        .expect("nothing arrived")
        .expect("the sender is gone")
}

/// The next text frame the client sent, parsed.
async fn frame(peer: &mut FakePeer) -> Value {
    tokio::time::timeout(Duration::from_secs(3600), peer.recv_json())
        .await
        .expect("no frame arrived")
        .expect("a JSON text frame")
}

fn drain<T>(rx: &mut UnboundedReceiver<T>) -> Vec<T> {
    let mut items = Vec::new();
    while let Ok(item) = rx.try_recv() {
        items.push(item);
    }
    items
}

fn states(transport: &dyn Transport) -> (Subscription, UnboundedReceiver<ConnectionState>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sub = transport.on_state_change(Box::new(move |state| {
        let _ = tx.send(state);
    }));
    (sub, rx)
}

fn messages(transport: &dyn Transport) -> (Subscription, UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sub = transport.on_message(Box::new(move |frame| {
        let _ = tx.send(frame.clone());
    }));
    (sub, rx)
}

fn binaries(transport: &dyn Transport) -> (Subscription, UnboundedReceiver<Bytes>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sub = transport.on_binary(Box::new(move |payload| {
        let _ = tx.send(payload.clone());
    }));
    (sub, rx)
}

async fn connect_fake() -> (Arc<FakeTransport>, FakeServer, FakePeer) {
    let (transport, mut server) = fake_transport();
    transport.connect().await.expect("connect");
    let peer = server.accept().await.expect("accepted");
    (transport, server, peer)
}

/// The time between consecutive instants, starting from `from`.
fn gaps(from: Instant, times: &[Instant]) -> Vec<Duration> {
    let mut previous = from;
    times
        .iter()
        .map(|time| {
            let gap = *time - previous;
            previous = *time;
            gap
        })
        .collect()
}

fn secs(values: &[u64]) -> Vec<Duration> {
    values.iter().copied().map(Duration::from_secs).collect()
}

// ---------------------------------------------------------------------------------------------
// Transport contract (in-memory sockets)
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn connect_reports_connecting_then_connected_and_disconnect_reports_disconnected() {
    let (transport, mut server) = fake_transport();
    let (_sub, mut seen) = states(transport.as_ref());
    assert_eq!(transport.state(), ConnectionState::Disconnected);

    transport.connect().await.expect("connect");
    assert_eq!(transport.state(), ConnectionState::Connected);
    let mut peer = server.accept().await.expect("accepted");

    transport.disconnect().await;
    assert_eq!(transport.state(), ConnectionState::Disconnected);
    assert_eq!(
        drain(&mut seen),
        [
            ConnectionState::Connecting,
            ConnectionState::Connected,
            ConnectionState::Disconnected
        ]
    );
    // An intentional disconnect is a normal close, and nothing is dialled again.
    assert_eq!(
        peer.recv().await,
        Some(Outgoing::Close(carrier_client::CloseInfo {
            code: 1000,
            reason: String::new()
        }))
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.dial_times().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_first_connect_returns_the_error_and_does_not_retry() {
    let (transport, server) = fake_transport();
    let (_sub, mut seen) = states(transport.as_ref());
    server.refuse_dials(true);

    let error = transport.connect().await.expect_err("refused");
    assert!(matches!(error, TransportError::Connect { .. }), "{error:?}");
    assert_eq!(transport.state(), ConnectionState::Disconnected);
    assert_eq!(
        drain(&mut seen),
        [ConnectionState::Connecting, ConnectionState::Disconnected]
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.dial_times().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn connect_twice_keeps_one_connection_and_disconnect_twice_is_safe() {
    let (transport, server, _peer) = connect_fake().await;
    transport.connect().await.expect("second connect");
    assert_eq!(server.dial_times().len(), 1);
    transport.disconnect().await;
    transport.disconnect().await;
    assert_eq!(transport.state(), ConnectionState::Disconnected);
}

#[tokio::test(start_paused = true)]
async fn one_send_is_exactly_one_frame_in_order() {
    let (transport, _server, mut peer) = connect_fake().await;
    for n in 0..3 {
        transport
            .send(&json!({"id": format!("r{n}"), "method": "system.ping", "params": {}}))
            .expect("send");
    }
    for n in 0..3 {
        assert_eq!(
            frame(&mut peer).await,
            json!({"id": format!("r{n}"), "method": "system.ping", "params": {}})
        );
    }
    assert_eq!(peer.try_recv(), None);
}

#[tokio::test(start_paused = true)]
async fn send_refuses_non_objects_and_fails_when_not_connected() {
    let (transport, _server) = fake_transport();
    assert_eq!(
        transport.send(&json!({"id": "r1", "method": "system.ping"})),
        Err(TransportError::NotConnected)
    );
    transport.connect().await.expect("connect");
    assert_eq!(
        transport.send(&json!([1, 2])),
        Err(TransportError::NotAnObject)
    );
    assert_eq!(
        transport.send(&json!("text")),
        Err(TransportError::NotAnObject)
    );
    transport.disconnect().await;
    assert_eq!(
        transport.send(&json!({"id": "r2", "method": "system.ping"})),
        Err(TransportError::NotConnected)
    );
}

#[tokio::test(start_paused = true)]
async fn each_inbound_text_frame_is_delivered_once_as_one_object() {
    let (transport, _server, peer) = connect_fake().await;
    let (_sub, mut inbox) = messages(transport.as_ref());
    peer.send_json(&json!({"event": "session.text_delta", "seq": 1, "payload": {"turn_id": "t", "delta": "a"}}));
    peer.send_json(&json!({"id": "r1", "result": {}}));
    assert_eq!(next(&mut inbox).await["seq"], 1);
    assert_eq!(next(&mut inbox).await, json!({"id": "r1", "result": {}}));
    assert!(drain(&mut inbox).is_empty());
}

#[tokio::test(start_paused = true)]
async fn malformed_inbound_text_is_dropped_without_error() {
    let (transport, _server, peer) = connect_fake().await;
    let (_sub, mut inbox) = messages(transport.as_ref());
    let (_states_sub, mut seen) = states(transport.as_ref());
    peer.send_text("not json at all");
    peer.send_text("{\"truncated\": ");
    peer.send_text("[1, 2, 3]");
    peer.send_text("42");
    peer.send_json(&json!({"id": "sentinel", "result": {}}));
    // The sentinel is the first thing delivered: everything before it was dropped.
    assert_eq!(next(&mut inbox).await["id"], "sentinel");
    assert_eq!(transport.state(), ConnectionState::Connected);
    assert!(drain(&mut seen).is_empty(), "no state change");
}

#[tokio::test(start_paused = true)]
async fn binary_frames_go_to_binary_handlers_only() {
    let (transport, _server, mut peer) = connect_fake().await;
    let (_sub, mut inbox) = messages(transport.as_ref());
    let (_bin_sub, mut bin) = binaries(transport.as_ref());
    peer.send_binary(Bytes::from_static(b"RBF\x01\x01\x03mic\x00\x00\x00\x00abc"));
    peer.send_json(&json!({"id": "sentinel", "result": {}}));
    assert_eq!(
        next(&mut bin).await,
        Bytes::from_static(b"RBF\x01\x01\x03mic\x00\x00\x00\x00abc")
    );
    assert_eq!(next(&mut inbox).await["id"], "sentinel");

    transport
        .send_binary(Bytes::from_static(b"out"))
        .expect("send binary");
    assert_eq!(
        peer.recv().await,
        Some(Outgoing::Binary(Bytes::from_static(b"out")))
    );
}

#[tokio::test(start_paused = true)]
async fn a_disposed_or_dropped_subscription_is_never_called_again() {
    let (transport, _server, peer) = connect_fake().await;
    let (disposed, mut disposed_inbox) = messages(transport.as_ref());
    let (dropped, mut dropped_inbox) = messages(transport.as_ref());
    let (_kept, mut kept_inbox) = messages(transport.as_ref());
    disposed.dispose();
    drop(dropped);
    peer.send_json(&json!({"id": "r1", "result": {}}));
    assert_eq!(next(&mut kept_inbox).await["id"], "r1");
    assert!(drain(&mut disposed_inbox).is_empty());
    assert!(drain(&mut dropped_inbox).is_empty());
}

#[tokio::test(start_paused = true)]
async fn pings_are_answered_with_pongs() {
    let (_transport, _server, mut peer) = connect_fake().await;
    peer.ping(Bytes::from_static(b"p1"));
    assert_eq!(
        peer.recv().await,
        Some(Outgoing::Pong(Bytes::from_static(b"p1")))
    );
}

#[tokio::test(start_paused = true)]
async fn reconnect_delays_are_exactly_1_2_4_8_16_30_30_seconds() {
    let (transport, server, peer) = connect_fake().await;
    let (_sub, mut seen) = states(transport.as_ref());
    server.refuse_dials(true);
    let broke_at = Instant::now();
    peer.break_connection();

    let dials = server.wait_for_dials(1 + 7).await;
    assert_eq!(gaps(broke_at, &dials[1..]), secs(&[1, 2, 4, 8, 16, 30, 30]));
    assert_eq!(transport.state(), ConnectionState::Connecting);
    assert_eq!(drain(&mut seen), [ConnectionState::Connecting]);
}

#[tokio::test(start_paused = true)]
async fn backoff_resets_after_a_successful_reconnect() {
    let (transport, mut server, peer) = connect_fake().await;
    let (_sub, mut seen) = states(transport.as_ref());
    server.refuse_dials(true);
    let broke_at = Instant::now();
    peer.break_connection();
    let dials = server.wait_for_dials(1 + 3).await;
    assert_eq!(gaps(broke_at, &dials[1..]), secs(&[1, 2, 4]));

    server.refuse_dials(false);
    let peer = server.accept().await.expect("reconnected");
    assert_eq!(
        *server.dial_times().last().expect("dial") - dials[3],
        secs(&[8])[0]
    );
    assert_eq!(
        drain(&mut seen),
        [ConnectionState::Connecting, ConnectionState::Connected]
    );

    server.refuse_dials(true);
    let broke_again_at = Instant::now();
    peer.break_connection();
    let dials = server.wait_for_dials(1 + 4 + 2).await;
    assert_eq!(gaps(broke_again_at, &dials[5..]), secs(&[1, 2]));
}

#[tokio::test(start_paused = true)]
async fn a_peer_close_other_than_1008_reconnects() {
    let (transport, mut server, peer) = connect_fake().await;
    let (_sub, mut seen) = states(transport.as_ref());
    let closed_at = Instant::now();
    peer.close(1001, "going away");
    let mut peer = server.accept().await.expect("reconnected");
    assert_eq!(server.dial_times()[1] - closed_at, Duration::from_secs(1));
    assert_eq!(
        drain(&mut seen),
        [ConnectionState::Connecting, ConnectionState::Connected]
    );
    // The new socket carries frames.
    transport
        .send(&json!({"id": "r1", "method": "system.ping"}))
        .expect("send");
    assert_eq!(frame(&mut peer).await["id"], "r1");
}

#[tokio::test(start_paused = true)]
async fn a_close_with_1008_is_final() {
    let (transport, server, peer) = connect_fake().await;
    let (_sub, mut seen) = states(transport.as_ref());
    peer.close(1008, "unauthorized");
    assert_eq!(next(&mut seen).await, ConnectionState::Disconnected);
    let close = transport.last_close().expect("close recorded");
    assert_eq!((close.code, close.reason.as_str()), (1008, "unauthorized"));
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.dial_times().len(), 1, "no reconnect after 1008");
    assert!(drain(&mut seen).is_empty());

    // An explicit connect still works afterwards (e.g. with a corrected token).
    transport.connect().await.expect("connect again");
    assert_eq!(transport.state(), ConnectionState::Connected);
    assert_eq!(transport.last_close(), None);
}

#[tokio::test(start_paused = true)]
async fn disconnect_during_backoff_stops_reconnecting() {
    let (transport, server, peer) = connect_fake().await;
    server.refuse_dials(true);
    peer.break_connection();
    server.wait_for_dials(1 + 2).await;
    transport.disconnect().await;
    assert_eq!(transport.state(), ConnectionState::Disconnected);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.dial_times().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_transport_stops_reconnecting() {
    let (transport, server, peer) = connect_fake().await;
    server.refuse_dials(true);
    peer.break_connection();
    server.wait_for_dials(2).await;
    drop(transport);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.dial_times().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Handshake layer (Client) over in-memory sockets
// ---------------------------------------------------------------------------------------------

fn handshake_result(overrides: Value) -> Value {
    let mut result = json!({
        "protocol_version": "1.2",
        "min_compatible_protocol": "1.0",
        "server": {"name": "carrier", "version": "0.1.0"},
        "role": "drive",
        "session_id": "s1",
        "epoch": "e1",
        "version_skew": false,
        "features": {"sessions": true, "channels": true, "permissions": true, "resume": true},
        "channels": [],
        "limits": {"max_text_bytes": 1048576},
        "resume": {"outcome": "new"}
    });
    if let (Some(result), Some(overrides)) = (result.as_object_mut(), overrides.as_object()) {
        for (key, value) in overrides {
            result.insert(key.clone(), value.clone());
        }
    }
    result
}

struct Harness {
    client: Client,
    transport: Arc<FakeTransport>,
    server: FakeServer,
    events: UnboundedReceiver<ClientEvent>,
    _events_sub: Subscription,
}

impl Harness {
    fn new() -> Harness {
        let (transport, server) = fake_transport();
        let client = Client::new(Arc::clone(&transport) as Arc<dyn Transport>);
        let (tx, events) = mpsc::unbounded_channel();
        // Connection states are checked where they matter, with `on_state_change`; here the
        // event sequence is the session's.
        let sub = client.on_event(Box::new(move |event| {
            if !matches!(event, ClientEvent::State(_)) {
                let _ = tx.send(event.clone());
            }
        }));
        Harness {
            client,
            transport,
            server,
            events,
            _events_sub: sub,
        }
    }

    /// Connects, answering the handshake with `result`; returns the peer and the handshake.
    async fn connect(&mut self, result: Value) -> (FakePeer, Value) {
        let server = &mut self.server;
        let (connected, (peer, handshake)) = tokio::join!(self.client.connect(), async move {
            let mut peer = server.accept().await.expect("accepted");
            let handshake = answer_handshake(&mut peer, result).await;
            (peer, handshake)
        });
        connected.expect("handshake");
        assert_eq!(
            next(&mut self.events).await,
            ClientEvent::Ready {
                outcome: ResumeOutcome::New,
                version_skew: false
            }
        );
        (peer, handshake)
    }

    /// Breaks the connection and answers the reconnect handshake with `result`.
    async fn reconnect(&mut self, peer: FakePeer, result: Value) -> (FakePeer, Value) {
        peer.break_connection();
        let mut peer = self.server.accept().await.expect("reconnected");
        let handshake = answer_handshake(&mut peer, result).await;
        (peer, handshake)
    }

    async fn next_session_seqs(&mut self, count: usize) -> Vec<u64> {
        let mut seqs = Vec::new();
        while seqs.len() < count {
            if let ClientEvent::Session(event) = next(&mut self.events).await {
                seqs.push(event.seq);
            }
        }
        seqs
    }
}

async fn answer_handshake(peer: &mut FakePeer, result: Value) -> Value {
    let handshake = frame(peer).await;
    assert_eq!(handshake["method"], "system.handshake");
    peer.send_json(&json!({"id": handshake["id"], "result": result}));
    handshake
}

fn delta(seq: u64, text: &str) -> Value {
    json!({"event": "session.text_delta", "seq": seq, "payload": {"turn_id": "t1", "delta": text}})
}

#[tokio::test(start_paused = true)]
async fn the_handshake_is_the_first_frame_with_versions_and_client_name() {
    let mut h = Harness::new();
    let (_peer, handshake) = h.connect(handshake_result(json!({}))).await;
    assert_eq!(handshake["params"]["protocol_version"], "1.2");
    assert_eq!(handshake["params"]["min_compatible_protocol"], "1.0");
    assert_eq!(handshake["params"]["client"]["name"], "carrier-cli");
    assert_eq!(
        handshake["params"]["client"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(handshake["params"].get("resume").is_none());
    assert_eq!(h.client.state(), ConnectionState::Connected);
    let info = h.client.handshake().expect("handshake info");
    assert_eq!(
        (info.session_id.as_str(), info.epoch.as_str(), info.role),
        ("s1", "e1", Role::Drive)
    );
}

#[tokio::test(start_paused = true)]
async fn responses_are_correlated_by_id_even_out_of_order() {
    let mut h = Harness::new();
    let (mut peer, _) = h.connect(handshake_result(json!({}))).await;
    let client = h.client.clone();
    let server_side = async move {
        let first = frame(&mut peer).await;
        let second = frame(&mut peer).await;
        assert_ne!(first["id"], second["id"]);
        peer.send_json(&json!({"id": second["id"], "result": {"which": second["method"]}}));
        peer.send_json(&json!({"id": first["id"], "result": {"which": first["method"]}}));
        peer
    };
    let (status, role, _peer) = tokio::join!(
        client.request("session.status", json!({})),
        client.request("surface.role", json!({})),
        server_side
    );
    assert_eq!(status.expect("status")["which"], "session.status");
    assert_eq!(role.expect("role")["which"], "surface.role");
}

#[tokio::test(start_paused = true)]
async fn a_remote_error_keeps_the_wire_error_object() {
    let mut h = Harness::new();
    let (mut peer, _) = h.connect(handshake_result(json!({}))).await;
    let server_side = async move {
        let request = frame(&mut peer).await;
        peer.send_json(&json!({"id": request["id"], "error": {
            "code": "busy", "message": "a turn is running", "effect_state": "none",
            "data": {"turn_id": "t9"}
        }}));
        peer
    };
    let (result, _peer) = tokio::join!(
        h.client
            .request("session.submit", json!({"prompt": "second"})),
        server_side
    );
    let error = result.expect_err("busy");
    let wire = error.wire().expect("wire error");
    assert_eq!(wire.code, ErrorCode::Busy);
    assert_eq!(wire.message, "a turn is running");
    assert_eq!(wire.data, Some(json!({"turn_id": "t9"})));
    assert_eq!(error.effect_state(), EffectState::None);
    assert!(matches!(error, ClientError::Remote { ref method, .. } if method == "session.submit"));
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_request_times_out_with_unknown_effect() {
    let mut h = Harness::new();
    let (mut peer, _) = h.connect(handshake_result(json!({}))).await;
    let started = Instant::now();
    let error = h
        .client
        .request_with_timeout("system.ping", json!({}), Duration::from_secs(5))
        .await
        .expect_err("timeout");
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert!(matches!(error, ClientError::Timeout { .. }), "{error:?}");
    assert_eq!(error.effect_state(), EffectState::Unknown);

    // A late answer is ignored, and the connection keeps working.
    let late = frame(&mut peer).await;
    peer.send_json(&json!({"id": late["id"], "result": {}}));
    let server_side = async move {
        let ping = frame(&mut peer).await;
        peer.send_json(&json!({"id": ping["id"], "result": {"pong": true}}));
        peer
    };
    let (pong, _peer) = tokio::join!(h.client.request("system.ping", json!({})), server_side);
    assert_eq!(pong.expect("pong"), json!({"pong": true}));
}

#[tokio::test(start_paused = true)]
async fn preflight_refuses_an_unsupported_feature_and_sends_nothing() {
    let mut h = Harness::new();
    let lacking = json!({"features": {"sessions": false, "channels": true, "permissions": true, "resume": true}});
    let (mut peer, _) = h.connect(handshake_result(lacking)).await;
    let error = h
        .client
        .request("sessions.list", json!({}))
        .await
        .expect_err("unsupported");
    assert!(matches!(error, ClientError::Preflight { .. }), "{error:?}");
    let wire = error.wire().expect("wire error");
    assert_eq!(wire.code, ErrorCode::UnsupportedFeature);
    assert_eq!(wire.effect_state, Some(EffectState::None));
    let data = wire.data.as_ref().expect("data");
    assert_eq!(data["feature"], "sessions");
    assert_eq!(data["component"], "server");
    assert_eq!(data["actual_protocol"], "1.2");

    // The next frame the server sees is the one sent after the refusal.
    let server_side = async move {
        let frame = frame(&mut peer).await;
        peer.send_json(&json!({"id": frame["id"], "result": {}}));
        frame
    };
    let (_, frame) = tokio::join!(h.client.request("system.ping", json!({})), server_side);
    assert_eq!(frame["method"], "system.ping");
}

#[tokio::test(start_paused = true)]
async fn version_skew_is_reported_as_a_state() {
    let mut h = Harness::new();
    let (tx, mut seen) = mpsc::unbounded_channel();
    let _sub = h.client.on_state_change(Box::new(move |state| {
        let _ = tx.send(state);
    }));
    let connected = connect_answered(
        &mut h,
        json!({"protocol_version": "1.0", "version_skew": true}),
    )
    .await;
    assert!(connected.expect("handshake").version_skew);
    assert_eq!(h.client.state(), ConnectionState::VersionSkew);
    assert_eq!(
        drain(&mut seen),
        [ConnectionState::Connecting, ConnectionState::VersionSkew]
    );
    // The bare transport never reports skew.
    assert_eq!(h.transport.state(), ConnectionState::Connected);
    assert_eq!(
        next(&mut h.events).await,
        ClientEvent::Ready {
            outcome: ResumeOutcome::New,
            version_skew: true
        }
    );
}

#[tokio::test(start_paused = true)]
async fn version_incompatible_fails_connect_and_stops_reconnecting() {
    let mut h = Harness::new();
    let server = &mut h.server;
    let (connected, _peer) = tokio::join!(h.client.connect(), async move {
        let mut peer = server.accept().await.expect("accepted");
        let handshake = frame(&mut peer).await;
        peer.send_json(&json!({"id": handshake["id"], "error": {
            "code": "version_incompatible", "message": "server speaks 2.0",
            "data": {"server": "2.0", "client": "1.0"}
        }}));
        peer
    });
    let error = connected.expect_err("incompatible");
    assert_eq!(error.code(), Some(&ErrorCode::VersionIncompatible.into()));
    assert!(matches!(
        next(&mut h.events).await,
        ClientEvent::HandshakeFailed(_)
    ));
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(h.transport.state(), ConnectionState::Disconnected);
    assert_eq!(h.client.state(), ConnectionState::Disconnected);
    assert_eq!(h.server.dial_times().len(), 1);
    assert_eq!(h.client.request("system.ping", json!({})).await, Err(error));
}

/// Connects to a fake server that answers the handshake with `overrides`.
async fn connect_answered(h: &mut Harness, overrides: Value) -> Result<HandshakeInfo, ClientError> {
    let server = &mut h.server;
    let result = handshake_result(overrides);
    let (connected, _peer) = tokio::join!(h.client.connect(), async move {
        let mut peer = server.accept().await.expect("accepted");
        answer_handshake(&mut peer, result).await;
        peer
    });
    connected
}

#[tokio::test(start_paused = true)]
async fn the_client_judges_version_skew_itself_whatever_the_results_flag_says() {
    let mut h = Harness::new();
    let info = connect_answered(
        &mut h,
        json!({"protocol_version": "1.3", "version_skew": false}),
    )
    .await
    .expect("same major: compatible");
    assert!(info.version_skew);
    assert_eq!(h.client.state(), ConnectionState::VersionSkew);

    let mut h = Harness::new();
    let info = connect_answered(&mut h, json!({"version_skew": true}))
        .await
        .expect("compatible");
    assert!(!info.version_skew);
    assert_eq!(h.client.state(), ConnectionState::Connected);
}

#[tokio::test(start_paused = true)]
async fn a_handshake_result_the_client_cannot_talk_to_is_refused_and_not_redialled() {
    for (version, min) in [("2.0", "2.0"), ("1.3", "1.3"), ("0.9", "0.9")] {
        let mut h = Harness::new();
        let answered = connect_answered(
            &mut h,
            json!({"protocol_version": version, "min_compatible_protocol": min}),
        )
        .await;
        let error = answered.expect_err(version);
        assert_eq!(
            error.code(),
            Some(&ErrorCode::VersionIncompatible.into()),
            "{version}: {error:?}"
        );
        let data = error.wire().and_then(|w| w.data.clone()).expect("data");
        assert_eq!(data["server"]["protocol_version"], version);
        assert_eq!(data["client"]["protocol_version"], "1.2");
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(h.client.state(), ConnectionState::Disconnected, "{version}");
        assert_eq!(h.server.dial_times().len(), 1, "{version}: redialled");
    }
}

#[tokio::test(start_paused = true)]
async fn a_server_announcing_a_padded_version_is_refused_like_the_server_refuses_one() {
    // The server's parser refuses "01.0" from a client; the client reads the server's versions
    // with the same parser, so the handshake fails instead of counting "01.0" as 1.0.
    assert!("01.0"
        .parse::<carrier_protocol::version::ProtocolVersion>()
        .is_err());
    let mut h = Harness::new();
    match connect_answered(&mut h, json!({"protocol_version": "01.0"})).await {
        Err(ClientError::MalformedResponse { method, reason }) => {
            assert_eq!(method, "system.handshake");
            assert!(reason.contains("01.0"), "{reason}");
        }
        other => panic!("expected MalformedResponse, got {other:?}"),
    }
    assert_ne!(h.client.state(), ConnectionState::Connected);
}

#[tokio::test(start_paused = true)]
async fn a_1008_close_during_the_handshake_is_reported_as_refused() {
    let mut h = Harness::new();
    let server = &mut h.server;
    let (connected, _) = tokio::join!(h.client.connect(), async move {
        let peer = server.accept().await.expect("accepted");
        peer.close(1008, "unauthorized");
    });
    match connected {
        Err(ClientError::Refused { close }) => assert_eq!(close.code, 1008),
        other => panic!("expected Refused, got {other:?}"),
    }
    assert_eq!(h.client.state(), ConnectionState::Disconnected);
}

#[tokio::test(start_paused = true)]
async fn a_reconnect_resumes_from_the_last_delivered_seq_and_drops_duplicates() {
    let mut h = Harness::new();
    let (peer, _) = h.connect(handshake_result(json!({}))).await;
    for seq in 1..=3 {
        peer.send_json(&delta(seq, "x"));
    }
    assert_eq!(h.next_session_seqs(3).await, [1, 2, 3]);

    let (peer, handshake) = h
        .reconnect(
            peer,
            handshake_result(json!({"resume": {"outcome": "resumed", "replayed": 2}})),
        )
        .await;
    assert_eq!(
        handshake["params"]["resume"],
        json!({"session_id": "s1", "epoch": "e1", "after_seq": 3})
    );
    for seq in [2, 3, 4, 4, 5] {
        peer.send_json(&delta(seq, "y"));
    }
    assert_eq!(
        next(&mut h.events).await,
        ClientEvent::Ready {
            outcome: ResumeOutcome::Resumed { replayed: 2 },
            version_skew: false
        }
    );
    assert_eq!(h.next_session_seqs(2).await, [4, 5]);
    assert_eq!(h.client.resume_point().expect("cursor").after_seq, 5);
    assert_eq!(h.client.state(), ConnectionState::Connected);
}

#[tokio::test(start_paused = true)]
async fn a_gap_refetches_history_and_tells_the_application() {
    let mut h = Harness::new();
    let (peer, _) = h.connect(handshake_result(json!({}))).await;
    peer.send_json(&delta(1, "x"));
    assert_eq!(h.next_session_seqs(1).await, [1]);

    let (mut peer, _) = h
        .reconnect(
            peer,
            handshake_result(json!({"resume": {"outcome": "gap", "from": 2, "to": 6}})),
        )
        .await;
    peer.send_json(&delta(7, "z"));
    let history = frame(&mut peer).await;
    assert_eq!(history["method"], "session.history");
    peer.send_json(&json!({"id": history["id"], "result": {"entries": [
        {"role": "user", "text": "hi", "turn_id": "t1"},
        {"role": "assistant", "text": "echo: hi", "turn_id": "t1"}
    ]}}));

    let gap = ResumeOutcome::Gap { from: 2, to: 6 };
    assert_eq!(
        next(&mut h.events).await,
        ClientEvent::Ready {
            outcome: gap,
            version_skew: false
        }
    );
    assert_eq!(h.next_session_seqs(1).await, [7]);
    assert_eq!(
        next(&mut h.events).await,
        ClientEvent::HistoryRefetched {
            outcome: gap,
            entries: vec![
                ReceivedHistoryEntry {
                    role: "user".into(),
                    text: "hi".into(),
                    turn_id: Some("t1".into()),
                    truncated: false,
                },
                ReceivedHistoryEntry {
                    role: "assistant".into(),
                    text: "echo: hi".into(),
                    turn_id: Some("t1".into()),
                    truncated: false,
                },
            ]
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_reset_starts_a_new_resume_point_and_refetches_history() {
    let mut h = Harness::new();
    let (peer, _) = h.connect(handshake_result(json!({}))).await;
    for seq in 1..=4 {
        peer.send_json(&delta(seq, "x"));
    }
    assert_eq!(h.next_session_seqs(4).await, [1, 2, 3, 4]);

    let (mut peer, _) = h
        .reconnect(
            peer,
            handshake_result(json!({
                "session_id": "s9", "epoch": "e2", "resume": {"outcome": "reset"}
            })),
        )
        .await;
    // The restarted server numbers from 1 again; nothing may be mistaken for a duplicate.
    peer.send_json(&delta(1, "fresh"));
    let history = frame(&mut peer).await;
    peer.send_json(&json!({"id": history["id"], "result": {"entries": []}}));

    assert_eq!(
        next(&mut h.events).await,
        ClientEvent::Ready {
            outcome: ResumeOutcome::Reset,
            version_skew: false
        }
    );
    assert_eq!(h.next_session_seqs(1).await, [1]);
    assert_eq!(
        next(&mut h.events).await,
        ClientEvent::HistoryRefetched {
            outcome: ResumeOutcome::Reset,
            entries: vec![]
        }
    );
    let cursor = h.client.resume_point().expect("cursor");
    assert_eq!(
        (
            cursor.session_id.as_str(),
            cursor.epoch.as_str(),
            cursor.after_seq
        ),
        ("s9", "e2", 1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_in_flight_at_a_break_fails_as_connection_lost() {
    let mut h = Harness::new();
    let (mut peer, _) = h.connect(handshake_result(json!({}))).await;
    let server_side = async move {
        frame(&mut peer).await;
        peer.break_connection();
    };
    let (result, ()) = tokio::join!(
        h.client.request("session.submit", json!({"prompt": "hi"})),
        server_side
    );
    let error = result.expect_err("lost");
    assert!(
        matches!(error, ClientError::ConnectionLost { ref method } if method == "session.submit")
    );
    assert_eq!(error.effect_state(), EffectState::Unknown);
}

#[tokio::test(start_paused = true)]
async fn a_request_made_while_reconnecting_waits_and_follows_the_new_handshake() {
    let mut h = Harness::new();
    let (peer, _) = h.connect(handshake_result(json!({}))).await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let _sub = h.client.on_state_change(Box::new(move |state| {
        let _ = tx.send(state);
    }));
    let broke_at = Instant::now();
    peer.break_connection();
    // The client has noticed the break (a request sent before that is lost with the socket).
    assert_eq!(next(&mut seen).await, ConnectionState::Connecting);
    let server = &mut h.server;
    let server_side = async move {
        let mut peer = server.accept().await.expect("reconnected");
        let first = frame(&mut peer).await;
        assert_eq!(first["method"], "system.handshake");
        peer.send_json(&json!({"id": first["id"], "result": handshake_result(
            json!({"resume": {"outcome": "resumed", "replayed": 0}})
        )}));
        let second = frame(&mut peer).await;
        assert_eq!(second["method"], "session.status");
        peer.send_json(&json!({"id": second["id"], "result": {"state": "idle"}}));
        peer
    };
    let (status, _peer) = tokio::join!(h.client.request("session.status", json!({})), server_side);
    assert_eq!(status.expect("status")["state"], "idle");
    assert_eq!(broke_at.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn switching_sessions_moves_the_resume_point() {
    let mut h = Harness::new();
    let (mut peer, _) = h.connect(handshake_result(json!({}))).await;
    peer.send_json(&delta(1, "x"));
    assert_eq!(h.next_session_seqs(1).await, [1]);
    let server_side = async move {
        let switch = frame(&mut peer).await;
        peer.send_json(&json!({"id": switch["id"], "result": {"session_id": "s2"}}));
        // The other session's events start from its own numbering.
        peer.send_json(&delta(1, "other session"));
        peer
    };
    let (switched, _peer) = tokio::join!(
        h.client
            .request("sessions.switch", json!({"session_id": "s2"})),
        server_side
    );
    assert_eq!(switched.expect("switched")["session_id"], "s2");
    assert_eq!(h.next_session_seqs(1).await, [1]);
    let cursor = h.client.resume_point().expect("cursor");
    assert_eq!((cursor.session_id.as_str(), cursor.after_seq), ("s2", 1));
    assert_eq!(h.client.handshake().expect("info").session_id, "s2");
}

#[tokio::test(start_paused = true)]
async fn session_events_are_typed_and_other_events_are_notices() {
    let mut h = Harness::new();
    let (peer, _) = h.connect(handshake_result(json!({}))).await;
    peer.send_json(
        &json!({"event": "session.permission_request", "seq": 1, "payload": {
            "turn_id": "t1", "request_id": "p1", "tool": "demo.tool", "input": {"x": 1}
        }}),
    );
    peer.send_json(&json!({"event": "protocol_error", "payload": {
        "code": "malformed_frame", "message": "not JSON"
    }}));
    match next(&mut h.events).await {
        ClientEvent::Session(event) => {
            assert_eq!(event.seq, 1);
            assert_eq!(
                event.kind,
                ReceivedSessionEventKind::PermissionRequest {
                    turn_id: "t1".into(),
                    request_id: "p1".into(),
                    tool: "demo.tool".into(),
                    input: json!({"x": 1}),
                    options: None,
                }
            );
        }
        other => panic!("expected a session event, got {other:?}"),
    }
    assert_eq!(
        next(&mut h.events).await,
        ClientEvent::Notice {
            event: "protocol_error".into(),
            payload: json!({"code": "malformed_frame", "message": "not JSON"})
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_from_the_server_is_answered_method_not_found() {
    let mut h = Harness::new();
    let (mut peer, _) = h.connect(handshake_result(json!({}))).await;
    peer.send_json(&json!({"id": "srv1", "method": "client.poke", "params": {}}));
    let reply = frame(&mut peer).await;
    assert_eq!(reply["id"], "srv1");
    assert_eq!(reply["error"]["code"], "method_not_found");
}

#[tokio::test(start_paused = true)]
async fn the_handshake_method_is_reserved_and_requests_before_connect_fail() {
    let h = Harness::new();
    assert_eq!(
        h.client.request("system.handshake", json!({})).await,
        Err(ClientError::ReservedMethod)
    );
    assert_eq!(
        h.client.request("system.ping", json!({})).await,
        Err(ClientError::NotConnected)
    );
}

#[tokio::test(start_paused = true)]
async fn a_client_over_an_already_open_transport_handshakes_on_connect() {
    let (transport, mut server, mut peer) = connect_fake().await;
    let client = Client::new(Arc::clone(&transport) as Arc<dyn Transport>);
    let server_side = async {
        answer_handshake(&mut peer, handshake_result(json!({}))).await;
    };
    let (connected, ()) = tokio::join!(client.connect(), server_side);
    assert_eq!(connected.expect("handshake").session_id, "s1");
    assert_eq!(client.state(), ConnectionState::Connected);
    assert_eq!(server.dial_times().len(), 1);
    assert!(server.accept().now_or_never().is_none());
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_handshake_times_out_and_disconnects() {
    let (transport, mut server) = fake_transport();
    let client = Client::with_options(
        Arc::clone(&transport) as Arc<dyn Transport>,
        ClientOptions {
            handshake_timeout: Duration::from_secs(3),
            ..ClientOptions::default()
        },
    );
    let (connected, _peer) = tokio::join!(client.connect(), async {
        server.accept().await.expect("accepted")
    });
    assert!(
        matches!(connected, Err(ClientError::Timeout { ref method, .. }) if method == "system.handshake"),
        "{connected:?}"
    );
    assert_eq!(transport.state(), ConnectionState::Disconnected);
}

// ---------------------------------------------------------------------------------------------
// WsClientTransport against a real loopback WebSocket server
// ---------------------------------------------------------------------------------------------

/// One upgraded test connection and what its upgrade request carried.
struct Accepted {
    ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    uri: String,
    subprotocol: Option<String>,
}

/// A loopback WebSocket server on an ephemeral port; every accepted connection is handed over.
// tungstenite's upgrade callback type fixes the large error response.
#[allow(clippy::result_large_err)]
async fn ws_server() -> (String, UnboundedReceiver<Accepted>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut seen = (String::new(), None);
                let callback = |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
                                mut response: tokio_tungstenite::tungstenite::handshake::server::Response| {
                    seen.0 = request.uri().to_string();
                    if let Some(protocol) = request.headers().get("sec-websocket-protocol") {
                        seen.1 = protocol.to_str().ok().map(str::to_owned);
                        response
                            .headers_mut()
                            .insert("sec-websocket-protocol", protocol.clone());
                    }
                    Ok(response)
                };
                if let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await {
                    let _ = tx.send(Accepted {
                        ws,
                        uri: seen.0,
                        subprotocol: seen.1,
                    });
                }
            });
        }
    });
    (format!("ws://{addr}/"), rx)
}

async fn next_ws_message(accepted: &mut Accepted) -> Message {
    tokio::time::timeout(Duration::from_secs(10), accepted.ws.next())
        .await
        .expect("a message in time")
        .expect("open")
        .expect("valid")
}

#[tokio::test]
async fn ws_sends_and_receives_one_frame_per_send_with_token_and_role_in_the_query() {
    let (url, mut accepted) = ws_server().await;
    let transport =
        WsClientTransport::new(WsOptions::new(&url).token("s3cret").role(Role::Observe));
    let (_sub, mut inbox) = messages(&transport);
    let (_bin_sub, mut bin) = binaries(&transport);
    transport.connect().await.expect("connect");
    let mut server = next(&mut accepted).await;
    assert_eq!(server.uri, "/?token=s3cret&role=observe");
    assert_eq!(server.subprotocol, None);

    transport
        .send(&json!({"id": "r1", "method": "system.ping", "params": {}}))
        .expect("send");
    transport
        .send(&json!({"id": "r2", "method": "system.ping", "params": {}}))
        .expect("send");
    for id in ["r1", "r2"] {
        match next_ws_message(&mut server).await {
            Message::Text(text) => {
                let frame: Value = serde_json::from_str(&text).expect("json");
                assert_eq!(frame["id"], id);
            }
            other => panic!("expected text, got {other:?}"),
        }
    }

    server
        .ws
        .send(Message::text("garbage {"))
        .await
        .expect("send");
    server
        .ws
        .send(Message::Binary(Bytes::from_static(b"\x00\x01binary")))
        .await
        .expect("send");
    server
        .ws
        .send(Message::text(r#"{"id":"r1","result":{}}"#))
        .await
        .expect("send");
    assert_eq!(next(&mut inbox).await, json!({"id": "r1", "result": {}}));
    assert_eq!(next(&mut bin).await, Bytes::from_static(b"\x00\x01binary"));
    assert_eq!(transport.state(), ConnectionState::Connected);

    transport.disconnect().await;
    match next_ws_message(&mut server).await {
        Message::Close(Some(frame)) => assert_eq!(frame.code, CloseCode::Normal),
        other => panic!("expected a close, got {other:?}"),
    }
}

#[tokio::test]
async fn ws_can_send_the_token_as_the_subprotocol_instead() {
    let (url, mut accepted) = ws_server().await;
    let transport =
        WsClientTransport::new(WsOptions::new(&url).token("s3cret").token_in_subprotocol());
    transport.connect().await.expect("connect");
    let server = next(&mut accepted).await;
    assert_eq!(server.uri, "/");
    assert_eq!(server.subprotocol.as_deref(), Some("s3cret"));
}

#[tokio::test]
async fn ws_answers_server_pings() {
    let (url, mut accepted) = ws_server().await;
    let transport = WsClientTransport::new(WsOptions::new(&url));
    transport.connect().await.expect("connect");
    let mut server = next(&mut accepted).await;
    server
        .ws
        .send(Message::Ping(Bytes::from_static(b"hb")))
        .await
        .expect("ping");
    assert_eq!(
        next_ws_message(&mut server).await,
        Message::Pong(Bytes::from_static(b"hb"))
    );
}

#[tokio::test]
async fn ws_reconnects_after_a_server_side_close_following_the_backoff() {
    let (url, mut accepted) = ws_server().await;
    let transport = WsClientTransport::new(WsOptions::new(&url).token("t"));
    let (_sub, mut seen) = states(&transport);
    transport.connect().await.expect("connect");
    assert_eq!(next(&mut seen).await, ConnectionState::Connecting);
    assert_eq!(next(&mut seen).await, ConnectionState::Connected);

    let mut first = next(&mut accepted).await;
    // Taken before the close, so the client's backoff sleep starts after it.
    let closing_at = std::time::Instant::now();
    first
        .ws
        .close(Some(CloseFrame {
            code: CloseCode::Away,
            reason: "restarting".into(),
        }))
        .await
        .expect("close");
    assert_eq!(next(&mut seen).await, ConnectionState::Connecting);
    assert_eq!(transport.last_close().map(|close| close.code), Some(1001));

    let mut second = next(&mut accepted).await;
    assert_eq!(next(&mut seen).await, ConnectionState::Connected);
    // The first retry waits the first backoff step (exact delays are checked on a paused clock
    // above); here only the lower bound is meaningful.
    assert!(closing_at.elapsed() >= Duration::from_secs(1));
    assert_eq!(second.uri, "/?token=t");

    transport
        .send(&json!({"id": "after", "method": "system.ping"}))
        .expect("send on the new socket");
    assert!(matches!(
        next_ws_message(&mut second).await,
        Message::Text(_)
    ));
}

#[tokio::test]
async fn ws_does_not_reconnect_after_a_1008_close() {
    let (url, mut accepted) = ws_server().await;
    let transport = WsClientTransport::new(WsOptions::new(&url).token("wrong"));
    let (_sub, mut seen) = states(&transport);
    transport.connect().await.expect("upgrade completes");
    let mut server = next(&mut accepted).await;
    server
        .ws
        .close(Some(CloseFrame {
            code: CloseCode::Policy,
            reason: "unauthorized".into(),
        }))
        .await
        .expect("close");
    assert_eq!(
        drain_until(&mut seen, ConnectionState::Disconnected).await,
        [
            ConnectionState::Connecting,
            ConnectionState::Connected,
            ConnectionState::Disconnected
        ]
    );
    let close = transport.last_close().expect("close");
    assert_eq!((close.code, close.reason.as_str()), (1008, "unauthorized"));
    assert_eq!(transport.state(), ConnectionState::Disconnected);
}

#[tokio::test]
async fn ws_upgrade_refused_with_an_http_status_is_a_typed_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        if let Ok((mut stream, _)) = listener.accept().await {
            let mut buffer = [0u8; 2048];
            let _ = stream.read(&mut buffer).await;
            let _ = stream
                .write_all(
                    b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
        }
    });
    let transport = WsClientTransport::new(WsOptions::new(format!("ws://{addr}/")));
    assert_eq!(
        transport.connect().await,
        Err(TransportError::UpgradeRejected { status: 403 })
    );
    assert_eq!(transport.state(), ConnectionState::Disconnected);
}

#[tokio::test]
async fn ws_connect_to_a_closed_port_fails_without_retrying() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let transport = WsClientTransport::new(WsOptions::new(format!("ws://{addr}/")));
    assert!(matches!(
        transport.connect().await,
        Err(TransportError::Connect { .. })
    ));
    assert_eq!(transport.state(), ConnectionState::Disconnected);
}

async fn drain_until(
    rx: &mut UnboundedReceiver<ConnectionState>,
    last: ConnectionState,
) -> Vec<ConnectionState> {
    let mut seen = Vec::new();
    loop {
        let state = next(rx).await;
        seen.push(state);
        if state == last {
            return seen;
        }
    }
}

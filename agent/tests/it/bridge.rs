//! The serverless bridge: the same protocol over a host-owned socket, with latched delivery.

use carrier_test_support as support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use carrier_agent::{AgentProfile, Bridge, BridgeFrame, EmbeddedAgent};
use carrier_protocol::Role;
use carrier_server::{CarrierContext, DriverInfo, Limits};
use serde_json::{json, Value};
use support::{handshake_params, WAIT};
use tokio::sync::mpsc;

fn ctx(limits: Limits) -> CarrierContext {
    let driver = DriverInfo {
        driver_id: "bridge-host".into(),
        surface: "bridge".into(),
    };
    CarrierContext::standalone(limits, Role::Drive, driver, "bridge-epoch")
}

fn profile() -> AgentProfile {
    AgentProfile::embedded(EmbeddedAgent::default().with_demo_delay(Duration::from_millis(1)))
}

struct Host {
    bridge: Bridge,
    rx: mpsc::UnboundedReceiver<BridgeFrame>,
}

impl Host {
    fn open(profile: &AgentProfile, ctx: &CarrierContext, role: Role) -> Host {
        let (tx, rx) = mpsc::unbounded_channel();
        let bridge = Bridge::open(profile, ctx, role, move |frame| {
            tx.send(frame).map_err(|e| e.to_string().into())
        })
        .unwrap();
        Host { bridge, rx }
    }

    fn request(&mut self, id: &str, method: &str, params: Value) {
        let frame = json!({"id": id, "method": method, "params": params});
        self.bridge.feed(&frame.to_string()).unwrap();
    }

    async fn next(&mut self) -> BridgeFrame {
        tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("timed out")
            .expect("bridge writer ended")
    }

    async fn next_json(&mut self) -> Value {
        match self.next().await {
            BridgeFrame::Text(t) => serde_json::from_slice(&t).unwrap(),
            other => panic!("expected text, got {other:?}"),
        }
    }

    async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let f = self.next_json().await;
            let done = pred(&f);
            seen.push(f);
            if done {
                return seen;
            }
        }
    }
}

#[tokio::test]
async fn the_bridge_speaks_the_same_protocol() {
    let profile = profile();
    let ctx = ctx(Limits::default());
    let mut h = Host::open(&profile, &ctx, Role::Drive);
    h.request("h", "system.handshake", handshake_params(json!({})));
    let hs = h.next_json().await;
    assert_eq!(hs["result"]["epoch"], "bridge-epoch");
    assert_eq!(hs["result"]["role"], "drive");
    assert!(h.bridge.connection().is_handshaken());

    h.request("s", "session.submit", json!({"prompt": "over the bridge"}));
    let frames = h.until(|f| f["event"] == "session.turn_completed").await;
    assert_eq!(frames[0]["result"]["turn_id"], "t1");
    assert_eq!(
        frames[1]["payload"]["driver"],
        json!({"driver_id": "bridge-host", "surface": "bridge"})
    );
    let text: String = frames
        .iter()
        .filter_map(|f| f["payload"]["delta"].as_str())
        .collect();
    assert_eq!(text, "echo: over the bridge");

    h.request("st", "system.status", json!({}));
    assert_eq!(h.next_json().await["result"]["connections"], 1);
}

#[tokio::test]
async fn a_failed_send_fails_the_bridge_connection_once() {
    let profile = profile();
    let ctx = ctx(Limits::default());
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    // Accepts the handshake result, then every send fails.
    let mut failing = Bridge::open(&profile, &ctx, Role::Drive, move |_frame| {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(())
        } else {
            Err("socket gone".into())
        }
    })
    .unwrap();
    failing
        .feed(&json!({"id": "h", "method": "system.handshake", "params": handshake_params(json!({}))}).to_string())
        .unwrap();

    // A healthy observer on the same session keeps receiving everything.
    let mut watcher = Host::open(&profile, &ctx, Role::Observe);
    watcher.request("h", "system.handshake", handshake_params(json!({})));
    watcher.next_json().await;

    failing
        .feed(
            &json!({"id": "s", "method": "session.submit", "params": {"prompt": "a b c d"}})
                .to_string(),
        )
        .unwrap();
    let frames = watcher
        .until(|f| f["event"] == "session.turn_completed")
        .await;
    assert_eq!(frames.last().unwrap()["payload"]["text"], "echo: a b c d");

    // The failure latched: the connection is closed, later feeds are refused, and the send
    // function was called exactly once after the handshake (the failing call).
    let deadline = tokio::time::Instant::now() + WAIT;
    while failing.is_open() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!failing.is_open());
    assert!(failing
        .feed(r#"{"id":"p","method":"system.ping"}"#)
        .is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_bridge_enforces_the_handshake_timeout_and_the_soft_limit() {
    let profile = profile();
    let limits = Limits::default()
        .with_handshake_timeout(Duration::from_millis(100))
        .with_max_text_bytes(64);
    let ctx = ctx(limits);
    let mut h = Host::open(&profile, &ctx, Role::Drive);
    let big = format!(
        r#"{{"id":"big","method":"system.ping","params":{{"x":"{}"}}}}"#,
        "y".repeat(100)
    );
    h.bridge.feed(&big).unwrap();
    let r = h.next_json().await;
    assert_eq!(r["error"]["code"], "too_large");
    assert_eq!(r["error"]["data"]["limit"], 64);
    match h.next().await {
        BridgeFrame::Close { code, .. } => assert_eq!(code, 1008),
        other => panic!("expected close, got {other:?}"),
    }
}

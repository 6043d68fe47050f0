//! The load generator behind `carrier bench` against a real carrier on loopback: every mode
//! completes its messages without errors. Counts only; no timing assertions.

use carrier::agent::{AgentProfile, EmbeddedAgent};
use carrier::loadgen::{run, LoadError, Mode, Plan, TargetError};
use carrier::server::{CarrierConfig, WsTransport};

async fn carrier() -> (WsTransport, String) {
    let transport = WsTransport::new(CarrierConfig {
        port: 0,
        token: Some("bench-token".into()),
        ..CarrierConfig::default()
    })
    .expect("config");
    transport.attach(AgentProfile::embedded(EmbeddedAgent::default()));
    carrier_channels::echo::mount(transport.registry(), "echo").expect("echo");
    carrier_channels::relay::mount(transport.registry(), "relay").expect("relay");
    transport.start().await.expect("start");
    let url = format!("ws://127.0.0.1:{}/", transport.bound_port().expect("port"));
    (transport, url)
}

fn plan(mode: Mode, url: &str, connections: usize, messages: usize, size: usize) -> Plan {
    Plan {
        token: Some("bench-token".into()),
        connections,
        messages,
        size,
        warmup: 2,
        ..Plan::new(mode, url)
    }
}

#[tokio::test]
async fn rpc_channel_and_fanout_runs_complete_every_message() {
    let (transport, url) = carrier().await;
    for (p, expected) in [
        (plan(Mode::Rpc, &url, 4, 25, 64), 100),
        (plan(Mode::Channel, &url, 3, 10, 16 * 1024), 30),
        (plan(Mode::Fanout, &url, 5, 20, 4096), 100),
    ] {
        let report = run(&p).await.expect("run");
        assert_eq!(report.errors, 0, "{:?}: {:?}", p.mode, report.first_error);
        assert!(!report.timed_out);
        assert_eq!(report.completed, expected, "{:?}", p.mode);
        assert!(report.p50_us <= report.p99_us && report.p99_us <= report.max_us);
        let line: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert!(line["msgs_per_s"].is_number() && line["p99_us"].is_number());
        assert!(
            !report.to_json().contains("bench-token"),
            "the token is never printed"
        );
    }
    transport.stop().await;
}

#[tokio::test]
async fn a_wrong_token_is_a_connect_failure_not_a_hang() {
    let (transport, url) = carrier().await;
    let p = Plan {
        token: Some("wrong".into()),
        ..plan(Mode::Rpc, &url, 1, 1, 64)
    };
    assert!(matches!(run(&p).await, Err(LoadError::Closed(Some(1008)))));
    transport.stop().await;
}

#[tokio::test]
async fn idle_mode_reads_the_server_memory() {
    let (transport, url) = carrier().await;
    let p = Plan {
        server_pid: Some(std::process::id()),
        settle: std::time::Duration::from_millis(10),
        ..plan(Mode::Idle, &url, 5, 1, 1024)
    };
    let report = run(&p).await.expect("run");
    assert_eq!((report.completed, report.errors), (5, 0));
    let memory = report.memory.expect("memory report");
    assert!(memory.rss_before_kib > 0);
    transport.stop().await;
}

#[tokio::test]
async fn non_loopback_targets_are_refused_before_any_connection() {
    let p = plan(Mode::Raw, "ws://192.168.1.10:7070/", 1, 1, 64);
    assert!(matches!(
        run(&p).await,
        Err(LoadError::Target(TargetError::NotLoopback(_)))
    ));
}

//! The load generator behind `carrier bench` against a real carrier on loopback: every mode
//! completes its messages without errors. Counts only; no timing assertions.

use carrier::agent::{AgentProfile, EmbeddedAgent};
use carrier::server::{Auth, CarrierConfig, WsTransport};
use carrier_loadgen::{run, LoadError, Mode, Plan, TargetError};

async fn carrier() -> (WsTransport, String) {
    let transport = WsTransport::new(
        CarrierConfig::default()
            .with_port(0)
            .with_auth(Auth::Token("bench-token".into())),
    )
    .expect("config");
    transport.attach(AgentProfile::embedded(EmbeddedAgent::default()));
    carrier_channels::echo::mount(transport.registry(), "echo").expect("echo");
    carrier_channels::relay::mount(transport.registry(), "relay").expect("relay");
    transport.start().await.expect("start");
    carrier_channels::echo::mount_bulk(transport.registry(), "bulk").expect("bulk echo");
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

/// A plain WebSocket echo server on loopback (tokio-tungstenite, not the carrier). With
/// `swap_pairs`, it sends each pair of messages back in reverse order: a broken server.
async fn tungstenite_echo(swap_pairs: bool) -> String {
    use futures_util::{SinkExt, StreamExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                let mut held = None;
                while let Some(Ok(msg)) = ws.next().await {
                    if !(msg.is_binary() || msg.is_text()) {
                        continue;
                    }
                    if swap_pairs {
                        match held.take() {
                            None => held = Some(msg),
                            Some(first) => {
                                if ws.send(msg).await.is_err() || ws.send(first).await.is_err() {
                                    return;
                                }
                            }
                        }
                    } else if ws.send(msg).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

#[tokio::test]
async fn windowed_runs_keep_sixteen_in_flight_against_the_carrier_and_a_plain_echo_server() {
    let (transport, url) = carrier().await;
    let channel = Plan {
        window: 16,
        ..plan(Mode::Channel, &url, 3, 200, 1024)
    };
    let report = run(&channel).await.expect("channel run");
    assert_eq!(report.errors, 0, "{:?}", report.first_error);
    assert_eq!(report.completed, 600);
    transport.stop().await;

    let echo = tungstenite_echo(false).await;
    // Window 1 is the one-at-a-time path the baselines of compare.sh run.
    for (binary, window) in [(true, 16), (false, 16), (true, 1)] {
        let raw = Plan {
            window,
            binary,
            token: None,
            ..plan(Mode::Raw, &echo, 4, 300, 1024)
        };
        let report = run(&raw).await.expect("raw run");
        assert_eq!(report.errors, 0, "{:?}", report.first_error);
        assert_eq!(report.completed, 1200);
    }
}

#[tokio::test]
async fn a_windowed_run_reports_echoes_that_come_back_out_of_order() {
    let echo = tungstenite_echo(true).await;
    let raw = Plan {
        window: 16,
        binary: true,
        token: None,
        warmup: 0,
        ..plan(Mode::Raw, &echo, 1, 100, 64)
    };
    let report = run(&raw).await.expect("raw run");
    assert_eq!(report.errors, 1);
    assert_eq!(report.completed, 0, "the first echo is message 1, not 0");
    let error = report.first_error.unwrap_or_default();
    assert!(error.contains("reordered or lost"), "{error}");
}

#[tokio::test]
async fn windows_are_bounded_and_only_for_echo_modes() {
    for (mode, window) in [
        (Mode::Raw, 0),
        (Mode::Raw, 1025),
        (Mode::Rpc, 4),
        (Mode::Fanout, 2),
    ] {
        let p = Plan {
            window,
            ..plan(mode, "ws://127.0.0.1:9/", 1, 10, 64)
        };
        assert!(
            matches!(run(&p).await, Err(LoadError::Plan(_))),
            "{mode:?} with window {window}"
        );
    }
}

#[tokio::test]
async fn mixed_runs_measure_pings_idle_and_beside_a_transfer_on_bulk_and_reliable_channels() {
    let (transport, url) = carrier().await;
    for channel in ["bulk", "echo"] {
        let p = Plan {
            size: 64 * 1024,
            transfer_bytes: 8 << 20,
            window: 16,
            channel: Some(channel.into()),
            ..plan(Mode::Mixed, &url, 2, 0, 64 * 1024)
        };
        let report = run(&p).await.expect("mixed run");
        assert_eq!(report.errors, 0, "{channel}: {:?}", report.first_error);
        let mixed = report.mixed.expect("mixed figures");
        assert_eq!(mixed.idle_pings, 2 * carrier_loadgen::IDLE_PINGS as u64);
        // At least the asked transfer, and on until as many pings were measured during it as
        // idle.
        assert!(mixed.transfer_bytes >= 2 * (8 << 20), "{channel}");
        assert!(
            mixed.transfer_pings >= 2 * carrier_loadgen::IDLE_PINGS as u64,
            "{channel}: {}",
            mixed.transfer_pings
        );
        assert!(mixed.idle.p50_us <= mixed.idle.p99_us);
        let line: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert!(
            line["mixed"]["during_transfer"]["p99_us"].is_number(),
            "{line}"
        );
    }
    // The reader's pace is honoured: 2 MiB at 4 MiB/s takes about half a second, so the
    // measured rate is at most the asked one (a bound, not a timing assertion on the server).
    let p = Plan {
        size: 64 * 1024,
        transfer_bytes: 2 << 20,
        read_rate: Some(4 << 20),
        ..plan(Mode::Mixed, &url, 1, 0, 64 * 1024)
    };
    let report = run(&p).await.expect("paced run");
    assert_eq!(report.errors, 0, "{:?}", report.first_error);
    let mixed = report.mixed.expect("mixed");
    assert!(
        mixed.transfer_mb_per_s <= 4.0 * 1.048_576 * 1.05,
        "{}",
        mixed.transfer_mb_per_s
    );
    transport.stop().await;
}

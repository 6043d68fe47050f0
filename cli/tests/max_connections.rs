//! `carrier serve --max-connections N` and `CARRIER_MAX_CONNECTIONS`: the real binary admits
//! exactly N handshaken connections at once and answers the next upgrade with HTTP 503; the
//! limit is published in the handshake's `limits`, 1,024 by default; 0 is a usage error. (A
//! carrier holding 1,100, past the default, is the server's test:
//! `server/tests/it/max_connections.rs`.)
//!
//! Every connection is a real WebSocket on 127.0.0.1 from `tokio-tungstenite`.

use std::time::Duration;

use carrier_test_support::serve_process::Serve;
use carrier_test_support::{connect_with, Client};
use futures_util::stream::{self, StreamExt as _};

/// Handshakes in flight at once while the connections are opened (the listener's backlog and
/// the not-yet-upgraded bound of 512 stay far away).
const CONCURRENT_DIALS: usize = 64;

/// Opens `n` connections to `serve` and handshakes each; returns them with their handshake
/// results' `limits.max_connections`.
async fn hold(serve: &Serve, n: usize) -> Vec<Client> {
    let url = serve.url();
    let clients: Vec<Client> = stream::iter(0..n)
        .map(|_| {
            let url = url.clone();
            async move {
                let mut client = Client::connect(&url).await;
                let result = client.handshake(serde_json::json!({})).await;
                assert_eq!(result["limits"]["max_connections"], n as u64, "{result}");
                client
            }
        })
        .buffer_unordered(CONCURRENT_DIALS)
        .collect()
        .await;
    assert_eq!(clients.len(), n);
    clients
}

/// The next upgrade is refused with 503, and the held connections still answer.
async fn one_more_gets_503(serve: &Serve, held: &mut [Client]) {
    assert_eq!(
        connect_with(&serve.url(), &[]).await.err(),
        Some(503),
        "connection {} was admitted",
        held.len() + 1
    );
    let last = held.len() - 1;
    for i in [0, last] {
        held[i].ok("system.ping", serde_json::json!({})).await;
    }
}

#[tokio::test]
async fn the_environment_variable_sets_the_limit_and_the_default_is_1024() {
    // The child inherits the variable; the other tests of this binary give the flag, which wins.
    std::env::set_var("CARRIER_MAX_CONNECTIONS", "3");
    let limited = Serve::start(&[]).await;
    std::env::remove_var("CARRIER_MAX_CONNECTIONS");
    let limited = limited.unwrap_or_else(|refused| panic!("serve refused to start: {refused:?}"));
    let mut held = hold(&limited, 3).await;
    one_more_gets_503(&limited, &mut held).await;
    // A freed slot admits again (the carrier lets the closed connection's slot go once its
    // task ends: bounded retries).
    held.remove(0).close().await;
    let mut admitted = None;
    for _ in 0..100 {
        if let Ok((ws, _)) = connect_with(&limited.url(), &[]).await {
            admitted = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(admitted.is_some(), "a freed slot admits a new connection");
    limited.finish().await;

    let default = Serve::start(&[])
        .await
        .unwrap_or_else(|refused| panic!("serve refused to start: {refused:?}"));
    let (_client, result) = default.client().await;
    assert_eq!(result["limits"]["max_connections"], 1024, "{result}");
    default.finish().await;
}

#[tokio::test]
async fn zero_is_a_usage_error() {
    let refused = match Serve::start(&["--max-connections", "0"]).await {
        Ok(_) => panic!("serve started with --max-connections 0"),
        Err(refused) => refused,
    };
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(refused.stderr.contains("max_connections"), "{refused:?}");
}

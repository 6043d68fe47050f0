//! A token goes only to its own server: the Rust client sends no token and no prompt to a
//! listener of another user, says whose it is in a typed error, and checks again on every
//! reconnect; `any_owner` talks to it without the token.
//!
//! The other user's listener is a small Python server started as another uid
//! (`carrier_test_support::squatter`), which needs root (CI runs as root); run as another user,
//! these tests say so and return. Linux: the socket owners come from `/proc`. (The CLI's
//! commands against the same listener are the CLI's tests: `cli/tests/it/owner.rs`.)
#![cfg(target_os = "linux")]

use carrier_client::{Transport, TransportError, WsClientTransport, WsOptions};
use carrier_server::Auth;
use carrier_test_support::squatter::{
    assert_one_line_naming_the_owner, cannot_start_a_squatter, squatter, SQUATTER_UID, TOKEN,
};
use carrier_test_support::{config, embedded, Server, DELAY};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_refuses_another_users_listener_with_a_typed_error() {
    let test = "the_rust_client_refuses_another_users_listener_with_a_typed_error";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    for options in [
        WsOptions::new(squatter.url()).token(TOKEN),
        WsOptions::new(squatter.url())
            .token(TOKEN)
            .token_in_subprotocol(),
    ] {
        let transport = WsClientTransport::new(options);
        let result = transport.connect().await;
        squatter.assert_got_nothing("the Rust client");
        let error = result.expect_err("refused");
        let TransportError::ForeignListener(refusal) = &error else {
            panic!("not a foreign-listener refusal: {error:?}");
        };
        assert_eq!(refusal.addr.tcp().map(|a| a.port()), Some(squatter.port));
        assert_eq!(refusal.owner.uid, SQUATTER_UID);
        assert_one_line_naming_the_owner(&error.to_string(), squatter.port);
    }

    // any_owner: the same listener is talked to, without the token.
    let transport = WsClientTransport::new(WsOptions::new(squatter.url()).token(TOKEN).any_owner());
    transport
        .connect()
        .await
        .expect("the squatter completes the upgrade");
    assert!(matches!(
        transport.last_listener(),
        Some(carrier_client::Listener::Foreign(owner)) if owner.uid == SQUATTER_UID
    ));
    transport.disconnect().await;
    let received = squatter.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(
        !received[0].text().contains(TOKEN),
        "{}",
        received[0].text()
    );
}

/// A carrier of this user runs (in this process); the client is connected. The carrier stops
/// and another user binds its port: the reconnects find that listener and send it nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_s_reconnects_repeat_the_check() {
    let test = "the_rust_client_s_reconnects_repeat_the_check";
    if let Some(why) = cannot_start_a_squatter() {
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let config = config().with_auth(Auth::Token(TOKEN.into()));
    let own = Server::with(config, embedded(DELAY)).await;
    let port = own.port;

    let transport =
        WsClientTransport::new(WsOptions::new(format!("ws://127.0.0.1:{port}/")).token(TOKEN));
    transport
        .connect()
        .await
        .expect("connects to its own carrier");
    assert_eq!(
        transport.last_listener(),
        Some(carrier_client::Listener::Own)
    );

    own.transport.stop().await;
    let Some(mut squatter) = squatter(test, port) else {
        return;
    };
    // The first reconnect comes after 1 s; it reaches the squatter and sends nothing.
    squatter.wait_until("a reconnect attempt", |seen| {
        seen.iter().any(|v| v["closed"].is_u64())
    });
    let first = squatter
        .seen
        .iter()
        .find(|v| v["closed"].is_u64())
        .cloned()
        .unwrap_or_default();
    assert_eq!(first["text"], "", "a reconnect sent the squatter {first}");
    assert!(!transport.state().is_open(), "{:?}", transport.state());
    transport.disconnect().await;
    squatter.assert_got_nothing("a reconnect");
}

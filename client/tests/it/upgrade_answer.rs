//! The Rust client against a server whose upgrade answer is not a WebSocket handshake (RFC 6455
//! §4.1): a `tokio-tungstenite` server on 127.0.0.1 whose `101` lacks `Sec-WebSocket-Accept` or
//! answers another key. (What `carrier status` prints then is the CLI's test:
//! `cli/tests/it/hostile_server.rs`.)

use std::time::Duration;

use carrier_client::{Transport, TransportError, WsClientTransport, WsOptions};
use carrier_test_support::rogue::{accept_edited, drop_accept, listen, wrong_accept};
use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::handshake::server::Response;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
/// The most any wait below may take.
const WAIT: Duration = Duration::from_secs(60);

/// RFC 6455 §4.1: a `101` whose `Sec-WebSocket-Accept` is missing or does not answer the
/// request's key is not a WebSocket handshake. The Rust client fails the dial with a typed
/// error and writes nothing after its request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_without_the_right_accept_key_is_refused_and_nothing_follows_it() {
    for (edit, why) in [
        (
            drop_accept as fn(&mut Response),
            "no Sec-WebSocket-Accept header",
        ),
        (wrong_accept, "does not answer this request's key"),
    ] {
        let (listener, url) = listen().await;
        let transport = WsClientTransport::new(WsOptions::new(&url).token(TOKEN).no_reconnect());
        let (dialled, mut ws) =
            tokio::join!(transport.connect(), accept_edited(&listener, edit, WAIT));
        let error = dialled.expect_err("refused");
        let TransportError::InvalidUpgrade { reason } = &error else {
            panic!("not an invalid upgrade: {error:?}");
        };
        assert!(reason.contains(why), "{reason}");
        assert!(!error.to_string().contains('\n'), "{error}");
        // The client hung up without a frame.
        let after = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the client hangs up");
        assert!(
            !matches!(after, Some(Ok(_))),
            "the client went on after the upgrade: {after:?}"
        );
        drop(transport);
    }
}

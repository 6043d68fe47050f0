//! The carrier mounted inside a host's axum application at a path of the host's choosing, as
//! `examples/axum_mount.rs` does it (this file runs that example's router): the socket alone
//! with `route_service("/ws", …)`, the whole carrier with `nest_service("/agent", …)`. Driven
//! with an independent client (tokio-tungstenite) and with the project's Rust client: a turn
//! with a permission prompt answered, a channel frame echoed, the console and its modules
//! served under the prefix with relative URLs only, and the carrier's admission unchanged by
//! the mount. (The JavaScript package and Chromium drive the same router from `cli/tests`.)

#[allow(dead_code)] // `main` is the example's, not this test's
#[path = "../../examples/axum_mount.rs"]
mod axum_mount;

use std::sync::Arc;

use carrier::client::{Client as RustClient, Transport, WsClientTransport, WsOptions};
use carrier::protocol::channel_frame;
use carrier::server::WsTransport;
use carrier_test_support::{concat_deltas, names, Client, Ended, WAIT};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

/// The example's carrier and router, served by axum on a free loopback port.
struct Host {
    transport: WsTransport,
    port: u16,
    token: String,
}

impl Host {
    async fn start() -> Host {
        let transport = axum_mount::carrier().expect("the example's carrier starts");
        let token = transport
            .resolved_token()
            .expect("a minted token")
            .to_owned();
        let (port, _server) = axum_mount::serve(&transport, std::future::pending())
            .await
            .expect("the host's server binds");
        Host {
            transport,
            port,
            token,
        }
    }

    fn ws(&self, path: &str) -> String {
        format!("ws://127.0.0.1:{}{path}?token={}", self.port, self.token)
    }

    /// `GET path` with `headers`, over a plain socket: (status, lower-cased head, body).
    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .unwrap();
        let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            request.push_str(&format!("Host: 127.0.0.1:{}\r\n", self.port));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        tokio::time::timeout(WAIT, tcp.read_to_end(&mut response))
            .await
            .expect("the response within the wait")
            .unwrap();
        let response = String::from_utf8(response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_ascii_lowercase(), body.to_owned())
    }
}

/// A handshaken client runs a `/tool` turn whose permission prompt it allows.
async fn a_turn_with_a_permission_prompt(client: &mut Client) {
    let turn = client.submit("/tool list the inbox").await;
    let request = client.event("session.permission_request").await;
    assert_eq!(request["payload"]["turn_id"], turn.as_str(), "{request}");
    assert_eq!(request["payload"]["tool"], "demo.tool", "{request}");
    let request_id = request["payload"]["request_id"].clone();
    client
        .ok(
            "session.permission.respond",
            json!({"request_id": request_id, "decision": "allow"}),
        )
        .await;
    let events = client.turn_events(&turn).await;
    assert_eq!(concat_deltas(&events), "tool ran: list the inbox");
    assert!(
        names(&events).contains(&"session.permission_resolved".to_owned()),
        "{events:?}"
    );
}

/// A channel event sent on `echo` comes back to its sender.
async fn a_channel_frame_is_echoed(client: &mut Client) {
    let frame = channel_frame::encode_event_frame("echo", 0, "ping", &json!({"n": 1})).unwrap();
    client
        .ws
        .send(Message::binary(frame.to_vec()))
        .await
        .unwrap();
    loop {
        let message = tokio::time::timeout(WAIT, client.ws.next())
            .await
            .expect("the echo within the wait")
            .expect("the socket stays open")
            .unwrap();
        if let Message::Binary(bytes) = message {
            let echoed = channel_frame::decode(bytes).unwrap();
            assert_eq!(echoed.channel, "echo");
            let channel_frame::FrameBody::Event { event, payload } = &echoed.body else {
                panic!("an event frame: {echoed:?}");
            };
            assert_eq!((event.as_str(), payload), ("ping", &json!({"n": 1})));
            return;
        }
    }
}

#[tokio::test]
async fn route_service_upgrades_at_the_route_it_is_given() {
    let host = Host::start().await;
    let mut client = Client::connect(&host.ws("/ws")).await;
    let hello = client.handshake(json!({})).await;
    assert_eq!(hello["role"], "drive", "{hello}");
    a_turn_with_a_permission_prompt(&mut client).await;
    a_channel_frame_is_echoed(&mut client).await;
    // The route is the socket; without an upgrade it says so rather than 404.
    assert_eq!(host.get("/ws", &[]).await.0, 426);
    host.transport.stop().await;
}

#[tokio::test]
async fn nest_service_serves_the_socket_at_the_prefix_with_and_without_its_slash() {
    let host = Host::start().await;
    for path in ["/agent", "/agent/"] {
        let mut client = Client::connect(&host.ws(path)).await;
        client.handshake(json!({})).await;
        a_turn_with_a_permission_prompt(&mut client).await;
        a_channel_frame_is_echoed(&mut client).await;
        client.close().await;
    }
    // The host's own routes are untouched.
    let (status, _, body) = host.get("/", &[]).await;
    assert_eq!((status, body.as_str()), (200, "the host's own page\n"));
    host.transport.stop().await;
}

#[tokio::test]
async fn the_rust_client_drives_the_mounted_carrier() {
    let host = Host::start().await;
    for path in ["/agent", "/ws"] {
        let url = format!("ws://127.0.0.1:{}{path}", host.port);
        let transport = Arc::new(WsClientTransport::new(
            WsOptions::new(url).token(host.token.clone()),
        ));
        let client = RustClient::new(transport as Arc<dyn Transport>);
        tokio::time::timeout(WAIT, client.connect())
            .await
            .expect("connect within the wait")
            .expect("the handshake through the mount");
        let status = client
            .request("session.status", json!({}))
            .await
            .expect("session.status");
        assert_eq!(status["state"], "idle", "{status}");
        client.disconnect().await;
    }
    host.transport.stop().await;
}

#[tokio::test]
async fn the_console_and_its_modules_are_served_under_the_prefix_with_relative_urls() {
    let host = Host::start().await;
    let (status, head, page) = host.get("/agent/console", &[]).await;
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(
        page.contains(r#"from "./client.js""#),
        "the console imports its module relatively"
    );
    assert!(
        !page.contains(r#"from "/"#) && !page.contains("location.host}/"),
        "no absolute import or socket path in the console"
    );
    // Every module the client imports, followed from `client.js`, is served beside the console.
    let mut modules = vec!["client.js".to_owned()];
    let mut seen = 0;
    while seen < modules.len() {
        let name = modules[seen].clone();
        seen += 1;
        let (status, head, body) = host.get(&format!("/agent/{name}"), &[]).await;
        assert_eq!(status, 200, "/agent/{name}: {head}");
        assert!(head.contains("content-type: text/javascript"), "{head}");
        let absolute = body.lines().find(|line| {
            (line.starts_with("import ") || line.starts_with("export "))
                && (line.contains(r#"from "/"#) || line.contains(r#"import("/"#))
        });
        assert_eq!(absolute, None, "{name} imports relatively");
        for import in body.split("from \"./").skip(1) {
            let target = import.split('"').next().unwrap().to_owned();
            if !modules.contains(&target) {
                modules.push(target);
            }
        }
    }
    assert!(modules.len() >= 4, "{modules:?}");
    let (status, _, body) = host.get("/agent/healthz", &[]).await;
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
    let (status, _, _) = host.get("/agent/metrics", &[]).await;
    assert_eq!(status, 401, "metrics keep their token");
    let (status, _, body) = host
        .get(&format!("/agent/metrics?token={}", host.token), &[])
        .await;
    assert_eq!(status, 200);
    assert!(body.contains("carrier_connections"), "{body}");
    host.transport.stop().await;
}

#[tokio::test]
async fn the_mount_keeps_the_carriers_admission() {
    let host = Host::start().await;
    for path in ["/ws", "/agent"] {
        let wrong = format!("ws://127.0.0.1:{}{path}?token=wrong", host.port);
        let mut client = Client::connect(&wrong).await;
        assert_eq!(client.ended().await, Ended::Close(1008), "{path}");
        let (status, _, _) = host
            .get(
                &format!("{path}?token={}", host.token),
                &[
                    ("Connection", "Upgrade"),
                    ("Upgrade", "websocket"),
                    ("Sec-WebSocket-Version", "13"),
                    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                    ("Origin", "https://evil.example"),
                ],
            )
            .await;
        assert_eq!(status, 403, "a foreign Origin at {path}");
    }
    let (status, _, _) = host
        .get("/agent/console", &[("Host", "evil.example")])
        .await;
    assert_eq!(status, 403, "the console keeps the Host check");
    host.transport.stop().await;
}

/// A mounted carrier told its URL (`start_mounted_at`) reports it and advertises it in a
/// runtime file, path included, so a client that reads the file reaches it; one given no URL
/// (`start_mounted`) while asked for a runtime file fails loudly and writes nothing; a URL a
/// runtime file could not list (another host, a query, no port) is refused.
#[tokio::test]
async fn a_mounted_carrier_told_its_url_writes_the_runtime_file_and_one_not_told_fails() {
    use carrier::agent::{AgentProfile, EmbeddedAgent};
    use carrier::discovery::RuntimeDir;
    use carrier::server::{CarrierConfig, LifecycleError, RuntimeFileOptions};

    let runtime = tempfile::tempdir().expect("a scratch directory");
    let dir = RuntimeDir::at(runtime.path().join("carrier"));
    let transport = WsTransport::new(CarrierConfig::default())
        .expect("a carrier")
        .with_runtime_file(RuntimeFileOptions::in_dir(dir.clone()));
    transport.attach(AgentProfile::embedded(EmbeddedAgent::default()));

    let refused = transport.start_mounted().expect_err("no URL to advertise");
    assert!(
        matches!(refused, LifecycleError::RuntimeFileNeedsUrl),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("start_mounted_at"),
        "{refused}"
    );
    assert!(dir.scan().carriers.is_empty(), "nothing advertised");
    for bad in [
        "ws://10.0.0.1:8080/assist",
        "ws://127.0.0.1:8080/assist?token=x",
        "ws://127.0.0.1/assist",
        "http://127.0.0.1:8080/assist",
        "ws://127.0.0.1:8080",
    ] {
        let error = transport.start_mounted_at(bad).expect_err(bad);
        assert!(
            matches!(error, LifecycleError::MountUrl { .. }),
            "{bad}: {error:?}"
        );
    }
    assert!(dir.scan().carriers.is_empty(), "nothing advertised");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("the host's listener");
    let port = listener.local_addr().expect("bound").port();
    let url = format!("ws://127.0.0.1:{port}/assist");
    transport.start_mounted_at(&url).expect("started");
    assert_eq!(transport.url().as_deref(), Some(url.as_str()));
    let app = axum::Router::new().nest_service("/assist", transport.service());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let found = dir.scan();
    let [entry] = found.carriers.as_slice() else {
        panic!("one carrier advertised: {found:?}");
    };
    assert_eq!(entry.url, url);
    assert_eq!(entry.port, port);
    let token = entry.token.clone().expect("the file holds the token");
    assert_eq!(Some(token.as_str()), transport.resolved_token());
    // An independent client, from the file alone, reaches the mounted carrier.
    let mut client = Client::connect(&format!("{}?token={token}", entry.url)).await;
    let hello = client.handshake(json!({})).await;
    assert_eq!(hello["session_id"], "s1");

    let file = transport
        .runtime_file()
        .expect("a runtime file while running");
    transport.stop().await;
    assert!(!file.exists(), "stop() removes {}", file.display());
    assert_eq!(transport.url(), None);
}

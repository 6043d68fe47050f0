//! `carrier acp`, the stdio ⇄ `/acp` bridge an editor launches as its agent (README.md, "ACP
//! clients and editors"): it finds the running carrier as `send` does, forwards each stdin
//! line as one text frame and each text frame as one stdout line, writes nothing else to
//! stdout, exits 0 when stdin closes (closing with 1000) and 1 with one stderr line when the
//! carrier goes away. Driven here as an editor drives it (JSON lines on its pipes), by the
//! TypeScript and Python SDKs' own clients, and beside the other wires in one session.
//!
//! A real `carrier serve` child on 127.0.0.1 (or, for what only a server can show, a
//! `tokio-tungstenite` server of the test's own), and real child processes.

use carrier_test_support as support;

use std::process::Command;
use std::sync::Arc;

use carrier::client::{
    Client, ClientEvent, ReceivedSessionEventKind, WsClientTransport, WsOptions,
};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::acp::{chunks, validate_recordings, write_recording, AcpClient, AcpStdio};
use support::node::{acp_fixtures, acp_python_sdk, run};
use support::robota::RobotaClient;
use support::serve_process::{carrier_bin, Serve, TOKEN};
use tokio_tungstenite::tungstenite::Message;

/// What another client asked in s1 before the SDK clients load it.
const LOADED: &str = "asked by another client";

async fn serve(args: &[&str]) -> Serve {
    match Serve::start(args).await {
        Ok(serve) => serve,
        Err(refused) => panic!("serve refused to start: {refused:?}"),
    }
}

/// `carrier acp` finding `serve` through its runtime file, with `args`.
fn launch(serve: &Serve, args: &[&str]) -> AcpStdio {
    let runtime = serve
        .runtime_dir()
        .to_str()
        .expect("a UTF-8 path")
        .to_owned();
    AcpStdio::spawn(args, &[("XDG_RUNTIME_DIR", &runtime)])
}

async fn initialize(editor: &mut AcpStdio) -> Value {
    editor
        .ok(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await
}

#[tokio::test]
async fn finds_the_running_carrier_through_its_runtime_file_and_bridges_a_turn() {
    let serve = serve(&[]).await;
    // No URL and no token: both come from the runtime file.
    let mut editor = launch(&serve, &[]);
    let init = initialize(&mut editor).await;
    assert_eq!(init["agentInfo"]["name"], "carrier");
    let session = editor
        .ok("session/new", json!({"cwd": "/tmp", "mcpServers": []}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = editor
        .send_request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "/tool bridged"}]}),
        )
        .await;
    let ask = editor
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    editor
        .send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}))
        .await;
    let seen = editor.until_response(id).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn");
    assert_eq!(chunks(&seen, "agent_message_chunk"), "tool ran: bridged");

    editor.close_stdin();
    let (status, rest) = editor.exit().await;
    assert!(status.success(), "{status}: {}", editor.stderr());
    assert_eq!(rest, "", "nothing more on stdout");
    assert_eq!(editor.stderr(), "", "nothing said on stderr");
    serve.finish().await;
    // Every line it wrote is an ACP v1 message of an agent.
    validate(&editor);
}

/// Checks every stdout line of `editor` against ACP v1's JSON Schema.
fn validate(editor: &AcpStdio) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("carrier-acp.jsonl");
    write_recording(&path, editor.recording());
    validate_recordings("agent", &[path]);
}

#[tokio::test]
async fn exits_1_with_one_line_when_the_carrier_goes_away() {
    let mut serve = serve(&[]).await;
    let mut editor = launch(&serve, &[]);
    initialize(&mut editor).await;
    serve.signal_and_wait("TERM").await;
    let (status, rest) = editor.exit().await;
    assert_eq!(status.code(), Some(1), "{}", editor.stderr());
    assert_eq!(rest, "");
    let stderr = editor.stderr();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("/acp closed the connection (close 1001"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_wrong_token_exits_1_saying_so_and_no_carrier_is_a_usage_error() {
    let serve = serve(&[]).await;
    let url = format!("ws://127.0.0.1:{}/", serve.port);
    let mut editor = AcpStdio::spawn(&[&url], &[("CARRIER_TOKEN", "not-the-token")]);
    let (status, rest) = editor.exit().await;
    assert_eq!(status.code(), Some(1), "{}", editor.stderr());
    assert_eq!(rest, "");
    let stderr = editor.stderr();
    assert!(
        stderr.contains("refused this client (close 1008") && stderr.contains("--token"),
        "{stderr}"
    );

    let empty = tempfile::tempdir().unwrap();
    let mut editor = AcpStdio::spawn(&[], &[("XDG_RUNTIME_DIR", empty.path().to_str().unwrap())]);
    let (status, _) = editor.exit().await;
    assert_eq!(status.code(), Some(2), "{}", editor.stderr());
    assert!(editor.stderr().contains("no running carrier found"));
    serve.finish().await;
}

#[tokio::test]
async fn a_line_it_cannot_send_is_answered_on_stdout_as_json_rpc_and_said_on_stderr() {
    let serve = serve(&[]).await;
    let mut editor = launch(&serve, &[]);
    editor.write_raw(b"\xff\xfe not utf-8\n").await;
    let error = editor.next().await;
    assert_eq!(error["id"], Value::Null);
    assert_eq!(error["error"]["code"], -32700, "{error}");
    // One byte over the bridge's line cap, sent as it streams: skipped, never held whole.
    let mut long = vec![b'x'; carrier_cli::acp::MAX_LINE_BYTES + 1];
    long.push(b'\n');
    editor.write_raw(&long).await;
    let error = editor.next().await;
    assert_eq!(error["error"]["code"], -32600, "{error}");
    // Blank lines carry nothing; the bridge goes on.
    editor.write_raw(b"\n  \n").await;
    initialize(&mut editor).await;
    let stderr = editor.stderr();
    assert!(
        stderr.contains("not UTF-8") && stderr.contains("over the 16777216-byte limit"),
        "{stderr}"
    );
    serve.finish().await;
}

#[tokio::test]
async fn session_joins_the_carrier_session_a_browser_drives() {
    let serve = serve(&[]).await;
    let (mut browser, _) = serve.client().await;
    let mut editor = launch(&serve, &["--session", "s1"]);
    initialize(&mut editor).await;
    let result = editor
        .ok("session/new", json!({"cwd": "/tmp", "mcpServers": []}))
        .await;
    assert_eq!(result["sessionId"], "s1");
    let id = editor
        .send_request(
            "session/prompt",
            json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "from the editor"}]}),
        )
        .await;
    let seen = editor.until_response(id).await;
    assert_eq!(
        chunks(&seen, "agent_message_chunk"),
        "echo: from the editor"
    );
    let started = browser.event("session.turn_started").await;
    assert_eq!(started["payload"]["prompt"], "from the editor");
    // `--session` and `--new` exclude each other.
    let mut both = launch(&serve, &["--session", "s1", "--new"]);
    let (status, _) = both.exit().await;
    assert_eq!(status.code(), Some(2));
    serve.finish().await;
}

/// The bridge's socket as only a server sees it: it dials `/acp`, stdout gets each text frame
/// as one line (a frame holding a line break as JSON whitespace still makes one line), and the
/// end of stdin closes the socket with 1000.
#[tokio::test]
#[allow(clippy::result_large_err)] // the error type of tungstenite's upgrade callback
async fn the_end_of_stdin_closes_the_socket_with_1000() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let path = Arc::new(std::sync::Mutex::new(String::new()));
        let seen = path.clone();
        let mut ws = tokio_tungstenite::accept_hdr_async(
            tcp,
            move |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
                *seen.lock().unwrap() = req.uri().path().to_owned();
                Ok(resp)
            },
        )
        .await
        .unwrap();
        ws.send(Message::text(
            "{\"jsonrpc\":\"2.0\",\n\"method\":\"m\",\"params\":{}}",
        ))
        .await
        .unwrap();
        let mut got = Vec::new();
        while let Some(Ok(message)) = ws.next().await {
            got.push(message);
        }
        let path = path.lock().unwrap().clone();
        (path, got)
    });
    let url = format!("ws://127.0.0.1:{port}/");
    let mut editor = AcpStdio::spawn(&[&url], &[("CARRIER_TOKEN", TOKEN)]);
    let first = editor.next().await;
    assert_eq!(
        first,
        json!({"jsonrpc": "2.0", "method": "m", "params": {}})
    );
    editor
        .send(json!({"jsonrpc": "2.0", "method": "n", "params": {}}))
        .await;
    editor.close_stdin();
    let (status, _) = editor.exit().await;
    assert!(status.success(), "{}", editor.stderr());
    let (path, got) = tokio::time::timeout(support::WAIT, server)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(path, "/acp");
    assert_eq!(
        got[0],
        Message::text(r#"{"jsonrpc":"2.0","method":"n","params":{}}"#)
    );
    match got.last() {
        Some(Message::Close(Some(frame))) => assert_eq!(u16::from(frame.code), 1000),
        other => panic!("expected a close with 1000, got {other:?}"),
    }
}

/// Runs a turn on s1 through the agent protocol, so the SDK clients have one to load.
async fn a_turn_in_s1(serve: &Serve) {
    let (mut other, _) = serve.client().await;
    let turn_id = other.submit(LOADED).await;
    other.turn_events(&turn_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_client_drives_a_session_through_carrier_acp() {
    let fixtures = acp_fixtures();
    let serve = serve(&["--demo-delay-ms", "30"]).await;
    a_turn_in_s1(&serve).await;
    let mut node = Command::new("node");
    node.arg("sdk-client.mjs")
        .current_dir(&fixtures)
        .env("ACP_MODE", "stdio")
        .env("ACP_URL", format!("ws://127.0.0.1:{}/", serve.port))
        .env("ACP_TOKEN", TOKEN)
        .env("ACP_LOADED", LOADED)
        .env("CARRIER_BIN", carrier_bin());
    let out = tokio::task::spawn_blocking(move || run(node, "node sdk-client.mjs (stdio)"))
        .await
        .unwrap();
    assert!(out.success, "the SDK client failed:\n{}", out.report());
    let summary: Value =
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.report()));
    support::acp::check_sdk_summary(&summary, LOADED);
    serve.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_drives_a_session_through_carrier_acp() {
    let sdk = tokio::task::spawn_blocking(acp_python_sdk).await.unwrap();
    let serve = serve(&["--demo-delay-ms", "30"]).await;
    a_turn_in_s1(&serve).await;
    let mut python = Command::new("python3");
    python
        .arg("sdk_client.py")
        .current_dir(support::repo().join("acp/tests/fixtures"))
        .env("PYTHONPATH", &sdk)
        .env("ACP_URL", format!("ws://127.0.0.1:{}/", serve.port))
        .env("ACP_TOKEN", TOKEN)
        .env("ACP_LOADED", LOADED)
        .env("CARRIER_BIN", carrier_bin());
    let out = tokio::task::spawn_blocking(move || run(python, "python3 sdk_client.py"))
        .await
        .unwrap();
    assert!(out.success, "the SDK client failed:\n{}", out.report());
    let summary: Value =
        serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.report()));
    support::acp::check_sdk_summary(&summary, LOADED);
    serve.finish().await;
}

/// The Rust client's session events up to the `turn_completed` of the next turn: its prompt
/// and reply.
async fn rust_client_turn(events: &mut carrier::client::EventStream) -> (String, String) {
    let mut prompt = None;
    loop {
        let event = tokio::time::timeout(support::WAIT, events.next())
            .await
            .expect("an event in time")
            .expect("the client is connected");
        let ClientEvent::Session(event) = event else {
            continue;
        };
        match event.kind {
            ReceivedSessionEventKind::TurnStarted { prompt: p, .. } => prompt = p,
            ReceivedSessionEventKind::TurnCompleted { text, .. } => {
                return (prompt.expect("turn_started first"), text)
            }
            _ => {}
        }
    }
}

/// What an ACP client heard up to the end of the next turn's reply `reply`: the prompt it saw.
async fn acp_heard(next: impl AsyncFnMut() -> Value, reply: &str) -> String {
    let mut next = next;
    let mut heard = Vec::new();
    while chunks(&heard, "agent_message_chunk") != reply {
        heard.push(next().await);
    }
    chunks(&heard, "user_message_chunk")
}

/// One session, four wires: a carrier client on `/` (the project's Rust client), a seed-system
/// client on `/robota`, an editor through `carrier acp --session s1`, and another ACP client on
/// `/acp`. Each runs a turn; the other three see it.
#[tokio::test]
async fn four_wires_share_one_session_and_each_sees_the_others_turns() {
    let serve = serve(&[]).await;
    let transport = WsClientTransport::new(
        WsOptions::new(format!("ws://127.0.0.1:{}/", serve.port)).token(TOKEN),
    );
    let rust = Client::new(Arc::new(transport));
    let mut events = rust.events();
    rust.connect().await.expect("the Rust client connects");
    let robota_url = format!("ws://127.0.0.1:{}/robota?token={TOKEN}", serve.port);
    let (mut robota, _, _) = RobotaClient::connect_greeted(&robota_url).await;
    let mut editor = launch(&serve, &["--session", "s1"]);
    initialize(&mut editor).await;
    let joined = editor
        .ok("session/new", json!({"cwd": "/tmp", "mcpServers": []}))
        .await;
    assert_eq!(joined["sessionId"], "s1");
    let acp_url = format!("ws://127.0.0.1:{}/acp?token={TOKEN}", serve.port);
    let (mut acp, _) = AcpClient::initialized(&acp_url).await;
    let _ = acp.load_session("s1").await;

    // 1. The Rust client's turn.
    rust.submit("one from rust").await.expect("submit");
    assert_eq!(
        rust_client_turn(&mut events).await,
        ("one from rust".into(), "echo: one from rust".into())
    );
    let seen = robota.until_turn_ends().await;
    assert_eq!(seen[0]["content"], "one from rust");
    assert_eq!(support::robota::deltas(&seen), "echo: one from rust");
    assert_eq!(
        acp_heard(async || editor.next().await, "echo: one from rust").await,
        "one from rust"
    );
    assert_eq!(
        acp_heard(async || acp.next().await, "echo: one from rust").await,
        "one from rust"
    );

    // 2. The seed system's client's turn.
    robota
        .send(json!({"type": "submit", "prompt": "two from robota"}))
        .await;
    let seen = robota.until_turn_ends().await;
    assert_eq!(support::robota::deltas(&seen), "echo: two from robota");
    assert_eq!(
        rust_client_turn(&mut events).await,
        ("two from robota".into(), "echo: two from robota".into())
    );
    assert_eq!(
        acp_heard(async || editor.next().await, "echo: two from robota").await,
        "two from robota"
    );
    assert_eq!(
        acp_heard(async || acp.next().await, "echo: two from robota").await,
        "two from robota"
    );

    // 3. The editor's turn, through `carrier acp`.
    let id = editor
        .send_request(
            "session/prompt",
            json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "three from the editor"}]}),
        )
        .await;
    let seen = editor.until_response(id).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn");
    assert_eq!(
        rust_client_turn(&mut events).await,
        (
            "three from the editor".into(),
            "echo: three from the editor".into()
        )
    );
    let seen = robota.until_turn_ends().await;
    assert_eq!(seen[0]["content"], "three from the editor");
    assert_eq!(
        acp_heard(async || acp.next().await, "echo: three from the editor").await,
        "three from the editor"
    );

    // 4. The other ACP client's turn, on /acp.
    let id = acp.prompt("s1", "four from acp").await;
    let seen = acp.until_response(id).await;
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn");
    assert_eq!(
        rust_client_turn(&mut events).await,
        ("four from acp".into(), "echo: four from acp".into())
    );
    let seen = robota.until_turn_ends().await;
    assert_eq!(seen[0]["content"], "four from acp");
    assert_eq!(
        acp_heard(async || editor.next().await, "echo: four from acp").await,
        "four from acp"
    );

    rust.disconnect().await;
    editor.close_stdin();
    let (status, _) = editor.exit().await;
    assert!(status.success(), "{}", editor.stderr());
    serve.finish().await;
}

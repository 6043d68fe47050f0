//! The client-side CLI commands (`send`, `connect`, `status`, `doctor`) against a small fake
//! carrier built on tokio-tungstenite that behaves like the embedded default agent
//! (docs/protocol.md, "Events", the demo agent). The commands come from the `carrier-cli` library,
//! the one the binary is built on; it can only use `carrier`'s public API.

use std::process::ExitCode;
use std::time::Duration;

use carrier_cli::client::{self, ConnectArgs, DoctorArgs, SendArgs, StatusArgs};
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

// ---------------------------------------------------------------------------------------------
// A fake carrier
// ---------------------------------------------------------------------------------------------

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

#[derive(Clone, Copy)]
struct Versions {
    protocol: &'static str,
    min_compatible: &'static str,
}

const CURRENT: Versions = Versions {
    protocol: "1.2",
    min_compatible: "1.0",
};

/// Starts a fake carrier on an ephemeral loopback port: `GET /healthz`, token admission (1008 on
/// a wrong token), the handshake and the echo agent. Returns its port.
async fn fake_carrier(versions: Versions) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(stream, versions));
        }
    });
    port
}

// tungstenite's upgrade callback type fixes the large error response.
#[allow(clippy::result_large_err)]
async fn serve_connection(mut stream: TcpStream, versions: Versions) {
    let mut head = [0u8; 64];
    let Ok(n) = stream.peek(&mut head).await else {
        return;
    };
    if head[..n].starts_with(b"GET /healthz") {
        let mut request = [0u8; 4096];
        let _ = stream.read(&mut request).await;
        let body = r#"{"status":"ok"}"#;
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        return;
    }
    let mut query = String::new();
    let callback =
        |request: &tokio_tungstenite::tungstenite::handshake::server::Request,
         response: tokio_tungstenite::tungstenite::handshake::server::Response| {
            query = request.uri().query().unwrap_or("").to_owned();
            Ok(response)
        };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let params: Vec<(&str, &str)> = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let token_ok = params.contains(&("token", TOKEN));
    let observe = params.contains(&("role", "observe"));
    FakeConnection {
        ws,
        versions,
        observe,
        seq: 0,
        turns: 0,
        history: Vec::new(),
        waiting_tool: None,
    }
    .run(token_ok)
    .await;
}

struct FakeConnection {
    ws: WebSocketStream<TcpStream>,
    versions: Versions,
    observe: bool,
    seq: u64,
    turns: u64,
    history: Vec<Value>,
    /// A `/tool` turn waiting for its permission answer: (turn_id, request_id, rest).
    waiting_tool: Option<(String, String, String)>,
}

impl FakeConnection {
    async fn run(mut self, token_ok: bool) {
        if !token_ok {
            let _ = self
                .ws
                .close(Some(CloseFrame {
                    code: CloseCode::Policy,
                    reason: "unauthorized".into(),
                }))
                .await;
            return;
        }
        while let Some(Ok(message)) = self.ws.next().await {
            let Message::Text(text) = message else {
                continue;
            };
            let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            let id = frame["id"].clone();
            let params = frame["params"].clone();
            match frame["method"].as_str().unwrap_or("") {
                "system.handshake" => {
                    let theirs = params["protocol_version"].as_str().unwrap_or("");
                    if theirs.split('.').next() != self.versions.protocol.split('.').next() {
                        self.reply_error(id, "version_incompatible", "protocol majors differ")
                            .await;
                        let _ = self
                            .ws
                            .close(Some(CloseFrame {
                                code: CloseCode::Protocol,
                                reason: "".into(),
                            }))
                            .await;
                        return;
                    }
                    let result = json!({
                        "protocol_version": self.versions.protocol,
                        "min_compatible_protocol": self.versions.min_compatible,
                        "server": {"name": "carrier", "version": "9.9.9"},
                        "role": if self.observe { "observe" } else { "drive" },
                        "session_id": "s1",
                        "epoch": "e1",
                        "version_skew": self.versions.protocol != "1.2",
                        "features": {"sessions": true, "usage": false},
                        "channels": [],
                        "limits": {},
                        "resume": {"outcome": "new"}
                    });
                    self.reply(id, result).await;
                }
                "system.status" => {
                    let result = json!({
                        "server": {"name": "carrier", "version": "9.9.9"},
                        "protocol_version": self.versions.protocol,
                        "min_compatible_protocol": self.versions.min_compatible,
                        "epoch": "e1",
                        "connections": 1,
                        "channels": ["mic"],
                        "compatibility": {
                            "sessions": {"required_protocol": "1.0", "available": true},
                            "usage": {"required_protocol": "1.1", "available": false}
                        }
                    });
                    self.reply(id, result).await;
                }
                "session.submit" if self.observe => {
                    self.reply_error(id, "forbidden", "observe connections cannot submit")
                        .await;
                }
                "session.submit" if params["prompt"] == "/drop" => {
                    // Starts a turn, then goes away as a stopping server would.
                    self.reply(id, json!({"turn_id": "dropped"})).await;
                    let _ = self
                        .ws
                        .close(Some(CloseFrame {
                            code: CloseCode::Away,
                            reason: "server stopping".into(),
                        }))
                        .await;
                    return;
                }
                "session.submit" => {
                    self.turns += 1;
                    let turn = format!("t{}", self.turns);
                    let prompt = params["prompt"].as_str().unwrap_or("").to_owned();
                    self.reply(id, json!({"turn_id": turn})).await;
                    self.history
                        .push(json!({"role": "user", "text": prompt, "turn_id": turn}));
                    self.event(
                        "session.turn_started",
                        json!({"turn_id": turn, "driver": "cli", "prompt": prompt}),
                    )
                    .await;
                    if let Some(rest) = prompt.strip_prefix("/tool ") {
                        let request = format!("p{}", self.turns);
                        self.event(
                            "session.permission_request",
                            json!({"turn_id": turn, "request_id": request, "tool": "demo.tool", "input": {"arg": rest}}),
                        )
                        .await;
                        self.waiting_tool = Some((turn, request, rest.to_owned()));
                    } else {
                        self.stream_reply(&turn, &format!("echo: {prompt}")).await;
                    }
                }
                "session.permission.respond" => {
                    let Some((turn, request, rest)) = self.waiting_tool.take() else {
                        self.reply_error(id, "not_found", "no such request").await;
                        continue;
                    };
                    let decision = params["decision"].as_str().unwrap_or("deny").to_owned();
                    self.reply(id, json!({})).await;
                    self.event(
                        "session.permission_resolved",
                        json!({"request_id": request, "decision": decision}),
                    )
                    .await;
                    let text = if decision == "allow" {
                        format!("tool ran: {rest}")
                    } else {
                        "tool denied".to_owned()
                    };
                    self.stream_reply(&turn, &text).await;
                }
                "session.history" => {
                    let entries = self.history.clone();
                    self.reply(id, json!({ "entries": entries })).await;
                }
                "session.status" => {
                    let result = match &self.waiting_tool {
                        Some((turn, _, _)) => {
                            json!({"session_id": "s1", "state": "awaiting_permission", "turn_id": turn})
                        }
                        None => json!({"session_id": "s1", "state": "idle"}),
                    };
                    self.reply(id, result).await;
                }
                "sessions.list" => {
                    let result = json!({"sessions": [
                        {"session_id": "s1", "title": "main", "state": "idle"},
                        {"session_id": "s2", "title": "side", "state": "idle"}
                    ]});
                    self.reply(id, result).await;
                }
                other => {
                    self.reply_error(id, "method_not_found", &format!("no method {other}"))
                        .await;
                }
            }
        }
    }

    /// One delta per word, each space kept with the following word.
    async fn stream_reply(&mut self, turn: &str, text: &str) {
        for (n, word) in text.split(' ').enumerate() {
            let delta = if n == 0 {
                word.to_owned()
            } else {
                format!(" {word}")
            };
            self.event(
                "session.text_delta",
                json!({"turn_id": turn, "delta": delta}),
            )
            .await;
        }
        self.history
            .push(json!({"role": "assistant", "text": text, "turn_id": turn}));
        self.event(
            "session.turn_completed",
            json!({"turn_id": turn, "text": text, "aborted": false}),
        )
        .await;
    }

    async fn reply(&mut self, id: Value, result: Value) {
        self.send(json!({"id": id, "result": result})).await;
    }

    async fn reply_error(&mut self, id: Value, code: &str, message: &str) {
        self.send(
            json!({"id": id, "error": {"code": code, "message": message, "effect_state": "none"}}),
        )
        .await;
    }

    async fn event(&mut self, name: &str, payload: Value) {
        self.seq += 1;
        self.send(json!({"event": name, "seq": self.seq, "payload": payload}))
            .await;
    }

    async fn send(&mut self, frame: Value) {
        let _ = self.ws.send(Message::text(frame.to_string())).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

struct Output {
    code: ExitCode,
    out: String,
    err: String,
}

/// Bounds a whole command so a bug fails the test instead of hanging it.
async fn bounded<F: std::future::Future<Output = ExitCode>>(command: F) -> ExitCode {
    tokio::time::timeout(Duration::from_secs(20), command)
        .await
        .expect("the command finished")
}

async fn send(port: u16, token: &str, prompt: &str, allow: bool) -> Output {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = SendArgs {
        url: Some(format!("ws://127.0.0.1:{port}/")),
        token: Some(token.to_owned()),
        prompt: Some(prompt.to_owned()),
        allow,
        deny: false,
        any_owner: false,
    };
    let code = bounded(client::send_with(args, &mut out, &mut err)).await;
    output(code, out, err)
}

async fn console(port: u16, observe: bool, lines: &[&str]) -> Output {
    let (tx, rx) = mpsc::unbounded_channel();
    for line in lines {
        tx.send((*line).to_owned()).expect("queued");
    }
    drop(tx);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = ConnectArgs {
        url: Some(format!("ws://127.0.0.1:{port}/")),
        token: Some(TOKEN.to_owned()),
        observe,
        any_owner: false,
    };
    let code = bounded(client::connect_with(args, rx, &mut out, &mut err)).await;
    output(code, out, err)
}

fn output(code: ExitCode, out: Vec<u8>, err: Vec<u8>) -> Output {
    Output {
        code,
        out: String::from_utf8(out).expect("utf-8 stdout"),
        err: String::from_utf8(err).expect("utf-8 stderr"),
    }
}

async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    port
}

// ---------------------------------------------------------------------------------------------
// send
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_the_reply_to_stdout_and_exits_0() {
    let port = fake_carrier(CURRENT).await;
    let result = send(port, TOKEN, "hello big world", false).await;
    assert_eq!(result.out, "echo: hello big world\n");
    assert_eq!(result.err, "");
    assert_eq!(result.code, ExitCode::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_a_wrong_token_exits_1_with_one_clear_line() {
    let port = fake_carrier(CURRENT).await;
    let result = send(port, "wrong", "hello", false).await;
    assert_eq!(result.code, ExitCode::FAILURE);
    assert_eq!(result.out, "");
    assert_eq!(result.err.lines().count(), 1, "{}", result.err);
    assert!(result.err.starts_with("carrier: "));
    assert!(result.err.contains("1008"), "{}", result.err);
    assert!(result.err.contains("CARRIER_TOKEN"), "{}", result.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_denies_a_permission_request_by_default() {
    let port = fake_carrier(CURRENT).await;
    let result = send(port, TOKEN, "/tool rm -rf", false).await;
    assert_eq!(result.out, "tool denied\n");
    assert!(result.err.contains("deny"), "{}", result.err);
    assert_eq!(result.code, ExitCode::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_allow_lets_the_tool_run() {
    let port = fake_carrier(CURRENT).await;
    let result = send(port, TOKEN, "/tool ls", true).await;
    assert_eq!(result.out, "tool ran: ls\n");
    assert_eq!(result.code, ExitCode::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_to_a_closed_port_exits_1_and_points_to_doctor() {
    let port = closed_port().await;
    let result = send(port, TOKEN, "hello", false).await;
    assert_eq!(result.code, ExitCode::FAILURE);
    assert_eq!(result.err.lines().count(), 1);
    assert!(result.err.contains("carrier doctor"), "{}", result.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_a_url_that_is_not_ws_exits_2() {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = SendArgs {
        url: Some("http://127.0.0.1:7070/".into()),
        token: None,
        prompt: Some("hi".into()),
        allow: false,
        deny: false,
        any_owner: false,
    };
    let code = client::send_with(args, &mut out, &mut err).await;
    assert_eq!(code, ExitCode::from(2));
    assert_eq!(String::from_utf8(err).expect("utf-8").lines().count(), 1);
}

#[derive(Parser)]
struct SendCli {
    #[command(flatten)]
    args: SendArgs,
}

#[test]
fn send_flags_parse_and_allow_conflicts_with_deny() {
    let cli = SendCli::try_parse_from([
        "send",
        "ws://127.0.0.1:7070/",
        "--token",
        "t",
        "hello",
        "--allow",
    ])
    .expect("parses");
    assert_eq!(
        cli.args.target_and_prompt(),
        Some((Some("ws://127.0.0.1:7070/"), "hello"))
    );
    assert!(cli.args.allow);
    // One word is the prompt: the URL then comes from the runtime file.
    let cli = SendCli::try_parse_from(["send", "hi"]).expect("parses");
    assert_eq!(cli.args.target_and_prompt(), Some((None, "hi")));
    let cli = SendCli::try_parse_from(["send"]).expect("parses");
    assert_eq!(
        cli.args.target_and_prompt(),
        None,
        "send_with exits 2: no prompt"
    );
    assert!(SendCli::try_parse_from(["send", "ws://x/", "hi", "--allow", "--deny"]).is_err());
}

// ---------------------------------------------------------------------------------------------
// connect
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_runs_piped_lines_in_order_and_exits_0_at_end_of_input() {
    let port = fake_carrier(CURRENT).await;
    let result = console(
        port,
        false,
        &[
            "hello there",
            "/tool x",
            "/allow",
            "/status",
            "/history",
            "/sessions",
        ],
    )
    .await;
    assert_eq!(result.code, ExitCode::SUCCESS, "{}", result.err);
    let expected = [
        "echo: hello there",
        "[permission] `demo.tool` wants to run with {\"arg\":\"x\"}: /allow or /deny",
        "[permission allow]",
        "tool ran: x",
        "session s1: idle",
        "user: hello there",
        "assistant: echo: hello there",
        "user: /tool x",
        "assistant: tool ran: x",
        "* s1  idle  main",
        "  s2  idle  side",
    ];
    assert_eq!(result.out.lines().collect::<Vec<_>>(), expected);
    assert_no_reconnect_note(&result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_denies_a_pending_permission_when_input_ends() {
    let port = fake_carrier(CURRENT).await;
    let result = console(port, false, &["/tool y"]).await;
    assert_eq!(result.code, ExitCode::SUCCESS, "{}", result.err);
    assert!(
        result.out.ends_with("[permission deny]\ntool denied\n"),
        "{}",
        result.out
    );
    assert!(result.err.contains("denying"), "{}", result.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_quit_leaves_at_once() {
    let port = fake_carrier(CURRENT).await;
    let result = console(port, false, &["/quit", "never sent"]).await;
    assert_eq!(result.code, ExitCode::SUCCESS);
    assert_eq!(result.out, "");
    assert_no_reconnect_note(&result);
}

/// The connection never broke in these tests: the console must not say it did (the
/// `connecting` of the first handshake once printed "connection lost" after startup).
fn assert_no_reconnect_note(result: &Output) {
    assert!(
        !result.err.contains("connection lost") && !result.err.contains("reconnect"),
        "{}",
        result.err
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_reports_a_lost_connection_once_and_goes_on_after_the_reconnect() {
    let port = fake_carrier(CURRENT).await;
    // `/drop` makes the fake close with 1001 mid-turn; the reconnect (1 s backoff) gets a fresh
    // binding, which the client reports as a reset.
    let result = console(port, false, &["/drop", "/status"]).await;
    assert_eq!(result.code, ExitCode::SUCCESS, "{}", result.err);
    assert_eq!(
        result
            .err
            .matches("[connection lost; reconnecting…]")
            .count(),
        1,
        "{}",
        result.err
    );
    assert!(
        result.err.contains("[reconnected to a restarted server"),
        "{}",
        result.err
    );
    assert_eq!(result.out, "session s1: idle\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_observe_reports_that_prompts_are_forbidden() {
    let port = fake_carrier(CURRENT).await;
    let result = console(port, true, &["hello", "/status"]).await;
    assert_eq!(result.code, ExitCode::SUCCESS);
    assert!(result.err.contains("role observe"), "{}", result.err);
    assert!(result.err.contains("forbidden"), "{}", result.err);
    assert_eq!(result.out, "session s1: idle\n");
}

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_prints_the_status_and_url_as_one_line() {
    let port = fake_carrier(CURRENT).await;
    let url = format!("ws://127.0.0.1:{port}/");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = StatusArgs {
        json: true,
        url: Some(url.clone()),
        token: Some(TOKEN.into()),
        any_owner: false,
    };
    let code = bounded(client::status_with(args, &mut out, &mut err)).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let out = String::from_utf8(out).expect("utf-8");
    assert_eq!(out.lines().count(), 1);
    let status: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(status["url"], url.as_str());
    assert_eq!(status["protocol_version"], "1.2");
    assert_eq!(status["channels"], json!(["mic"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_without_json_is_readable() {
    let port = fake_carrier(CURRENT).await;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = StatusArgs {
        json: false,
        url: Some(format!("ws://127.0.0.1:{port}/")),
        token: Some(TOKEN.into()),
        any_owner: false,
    };
    let code = bounded(client::status_with(args, &mut out, &mut err)).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let out = String::from_utf8(out).expect("utf-8");
    assert!(out.starts_with("carrier 9.9.9 at ws://127.0.0.1:"), "{out}");
    assert!(
        out.contains("feature usage: unavailable (needs protocol 1.1)"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// doctor
// ---------------------------------------------------------------------------------------------

async fn doctor(port: u16, token: Option<&str>) -> Output {
    doctor_at(port..=port, None, token).await
}

/// `carrier doctor [url]` over `ports`, with an empty runtime directory.
async fn doctor_at(
    ports: std::ops::RangeInclusive<u16>,
    url: Option<String>,
    token: Option<&str>,
) -> Output {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = DoctorArgs {
        url,
        token: token.map(str::to_owned),
    };
    // An empty runtime directory: only `port` is looked at, never a carrier that happens to run.
    let runtime = tempfile::tempdir().expect("tempdir");
    let runtime = carrier::discovery::RuntimeDir::at(runtime.path());
    let code = bounded(client::doctor_with(
        args, ports, &runtime, &mut out, &mut err,
    ))
    .await;
    output(code, out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_finds_a_server_and_reports_versions_and_missing_features() {
    let port = fake_carrier(CURRENT).await;
    let result = doctor(port, Some(TOKEN)).await;
    assert_eq!(
        result.code,
        ExitCode::SUCCESS,
        "{}{}",
        result.out,
        result.err
    );
    assert!(result
        .out
        .contains(&format!("127.0.0.1:{port}: carrier server (healthz ok)")));
    assert!(
        result.out.contains("server carrier 9.9.9, protocol 1.2"),
        "{}",
        result.out
    );
    assert!(result.out.contains("  compatible\n"), "{}", result.out);
    assert!(
        result.out.contains("feature usage unavailable"),
        "{}",
        result.out
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_without_a_token_only_checks_health() {
    let port = fake_carrier(CURRENT).await;
    let result = doctor(port, None).await;
    assert_eq!(result.code, ExitCode::SUCCESS);
    assert!(result.out.contains("set CARRIER_TOKEN"), "{}", result.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_says_which_side_to_update_on_skew_and_incompatibility() {
    let newer = fake_carrier(Versions {
        protocol: "1.3",
        min_compatible: "1.0",
    })
    .await;
    let result = doctor(newer, Some(TOKEN)).await;
    assert_eq!(result.code, ExitCode::SUCCESS);
    assert!(
        result.out.contains("version skew: update the client"),
        "{}",
        result.out
    );

    let next_major = fake_carrier(Versions {
        protocol: "2.0",
        min_compatible: "2.0",
    })
    .await;
    let result = doctor(next_major, Some(TOKEN)).await;
    assert_eq!(result.code, ExitCode::FAILURE);
    assert!(result.out.contains("incompatible"), "{}", result.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_a_carrier_named_by_url_outside_its_ports() {
    // A carrier neither on the probed ports nor in a runtime file (e.g. an older carrier's
    // file that cannot be verified): named on the command line, it is checked with the token.
    let port = fake_carrier(CURRENT).await;
    let elsewhere = closed_port().await;
    let url = format!("ws://localhost:{port}/");
    let result = doctor_at(elsewhere..=elsewhere, Some(url), Some(TOKEN)).await;
    assert_eq!(
        result.code,
        ExitCode::SUCCESS,
        "{}{}",
        result.out,
        result.err
    );
    assert!(
        result.out.contains("server carrier 9.9.9, protocol 1.2"),
        "{}",
        result.out
    );

    // Named but silent: a problem, not skipped as an empty default port is.
    let url = format!("ws://127.0.0.1:{elsewhere}/");
    let result = doctor_at(port..=port, Some(url.clone()), Some(TOKEN)).await;
    assert_eq!(result.code, ExitCode::FAILURE, "{}", result.out);
    assert!(
        result.out.contains(&format!("nothing answers at {url}")),
        "{}",
        result.out
    );

    // Not a loopback URL: a usage error before anything is probed.
    let result = doctor_at(port..=port, Some("ws://example.com/".into()), Some(TOKEN)).await;
    assert_eq!(result.code, ExitCode::from(2), "{}", result.err);
    assert!(result.err.contains("loopback"), "{}", result.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_with_nothing_listening_exits_1_with_a_hint() {
    let port = closed_port().await;
    let result = doctor(port, Some(TOKEN)).await;
    assert_eq!(result.code, ExitCode::FAILURE);
    assert!(result.err.contains("carrier serve"), "{}", result.err);
}

/// A real carrier mounted in a host's axum server at `/assist` (`nest_service`, with its
/// routes) and at `/socket` (`route_service`, the socket alone), its agent the host's own with
/// no usage reporter wired. Returns the transport, the server's port and the token.
async fn mounted_carrier() -> (carrier::server::WsTransport, u16, String) {
    use carrier::agent::{AgentProfile, EmbeddedAgent, InMemoryDirectory};
    use carrier::server::{CarrierConfig, WsTransport};

    let transport = WsTransport::new(CarrierConfig::default()).expect("a carrier");
    let agent = EmbeddedAgent::default();
    transport
        .attach(AgentProfile::builder(InMemoryDirectory::new(move |_| agent.session())).build());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    transport
        .start_mounted_at(&format!("ws://127.0.0.1:{port}/assist"))
        .expect("started");
    let app = axum::Router::new()
        .nest_service("/assist", transport.service())
        .route_service("/socket", transport.service());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let token = transport.resolved_token().expect("minted").to_owned();
    (transport, port, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_probes_a_mounted_carrier_at_the_path_of_its_url() {
    let (transport, port, token) = mounted_carrier().await;
    for path in ["/assist", "/assist/", "/socket"] {
        let url = format!("ws://127.0.0.1:{port}{path}");
        let result = doctor_at(port..=port, Some(url), Some(&token)).await;
        assert_eq!(
            result.code,
            ExitCode::SUCCESS,
            "{path}: {}{}",
            result.out,
            result.err
        );
        assert!(
            result
                .out
                .contains(&format!("127.0.0.1:{port}: carrier server at {path}")),
            "{path}: {}",
            result.out
        );
        assert!(result.out.contains("  compatible\n"), "{}", result.out);
    }
    // The root of the host's server is not a carrier, and says so, without failing the
    // carrier named by its path.
    let result = doctor_at(
        port..=port,
        Some(format!("ws://127.0.0.1:{port}/")),
        Some(&token),
    )
    .await;
    assert_eq!(result.code, ExitCode::FAILURE, "{}", result.out);
    assert!(result.out.contains("not a carrier"), "{}", result.out);
    transport.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_a_host_without_a_usage_reporter_says_usage_is_unavailable() {
    let (transport, port, token) = mounted_carrier().await;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = StatusArgs {
        json: true,
        url: Some(format!("ws://127.0.0.1:{port}/assist")),
        token: Some(token),
        any_owner: false,
    };
    let code = bounded(client::status_with(args, &mut out, &mut err)).await;
    let result = output(code, out, err);
    assert_eq!(result.code, ExitCode::SUCCESS, "{}", result.err);
    let status: Value = serde_json::from_str(&result.out).expect("one JSON line");
    for scope in ["usage.session", "usage.personal", "usage.stored"] {
        assert_eq!(
            status["compatibility"][scope]["available"], false,
            "{scope}: {status}"
        );
    }
    transport.stop().await;
}

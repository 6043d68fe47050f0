//! The client against a server that misbehaves on purpose: pings at line rate while it reads
//! nothing, a reply that streams for as long as it likes, an answer too large to hold parsed,
//! an upgrade answer that is not a WebSocket handshake. Each server is a tokio-tungstenite one
//! written here; the client is the `carrier` binary (`send`, `status`): what it prints, how it
//! exits, and its own process's peak resident size (`VmHWM`, read while it runs). (The Rust
//! client refusing a spoiled upgrade answer is the client's test:
//! `client/tests/it/upgrade_answer.rs`.)
#![cfg(target_os = "linux")]

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use carrier::client::PROTOCOL_VERSION;
use carrier_test_support::rogue::{self, drop_accept, listen, wrong_accept};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::Response;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const BIN: &str = env!("CARGO_BIN_EXE_carrier");
const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const PROMPT: &str = "hello";
/// The most any command or wait below may take.
const WAIT: Duration = Duration::from_secs(60);
const MIB: u64 = 1 << 20;

// ---------------------------------------------------------------------------------------------
// The server side
// ---------------------------------------------------------------------------------------------

type Ws = WebSocketStream<TcpStream>;

/// Accepts one WebSocket connection, the upgrade answer passed through `edit` first.
async fn accept_edited(listener: &TcpListener, edit: fn(&mut Response)) -> Ws {
    rogue::accept_edited(listener, edit, WAIT).await
}

async fn accept(listener: &TcpListener) -> Ws {
    accept_edited(listener, |_| {}).await
}

/// The next request the client sent: its id and method.
async fn request(ws: &mut Ws) -> (Value, String) {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a request in time")
            .expect("the connection is open")
            .expect("a frame");
        if let Message::Text(text) = message {
            let frame: Value = serde_json::from_str(&text).expect("JSON");
            let method = frame["method"].as_str().unwrap_or_default().to_owned();
            return (frame["id"].clone(), method);
        }
    }
}

/// What a carrier answers `system.handshake` with, `limits` as given.
fn handshake_result(limits: Value) -> Value {
    json!({
        "protocol_version": PROTOCOL_VERSION.to_string(),
        "min_compatible_protocol": PROTOCOL_VERSION.to_string(),
        "server": {"name": "carrier", "version": "9.9.9"},
        "role": "drive",
        "session_id": "s1",
        "epoch": "e1",
        "features": {},
        "channels": [],
        "limits": limits,
        "resume": {"outcome": "new"}
    })
}

async fn answer(ws: &mut Ws, id: Value, result: Value) {
    let text = json!({"id": id, "result": result}).to_string();
    ws.send(Message::text(text)).await.expect("answer");
}

/// Answers the handshake and the `session.submit` that follows with turn `t1`.
async fn open_turn(ws: &mut Ws) {
    let (id, method) = request(ws).await;
    assert_eq!(method, "system.handshake");
    answer(ws, id, handshake_result(json!({}))).await;
    let (id, method) = request(ws).await;
    assert_eq!(method, "session.submit");
    answer(ws, id, json!({"turn_id": "t1"})).await;
}

// ---------------------------------------------------------------------------------------------
// The client process
// ---------------------------------------------------------------------------------------------

/// A `carrier` command running against the server.
struct Client {
    child: Child,
    stdout: std::thread::JoinHandle<u64>,
    stderr: std::thread::JoinHandle<String>,
    peak_rss: std::thread::JoinHandle<u64>,
    _runtime: tempfile::TempDir,
}

/// How a command ended.
struct Finished {
    code: i32,
    /// Bytes written to stdout (not kept: a reply may be long).
    stdout_bytes: u64,
    stderr: String,
    /// The process's peak resident memory, as last seen before it exited.
    peak_rss: u64,
}

/// `VmHWM` of `pid` in bytes: the peak resident size of the program it runs now. (Not
/// `ru_maxrss`: a child spawned with `vfork` semantics is charged the spawning test process's
/// own peak, which its `exec` records.)
fn peak_resident(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

impl Client {
    fn start(args: &[&str]) -> Client {
        let runtime = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(BIN)
            .args(args)
            .env("CARRIER_TOKEN", TOKEN)
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run carrier");
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let stdout =
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()).unwrap_or(0));
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        // Read every 5 ms until the process is gone (a zombie has no VmHWM): the peak only
        // grows, so the last reading is the peak up to 5 ms before the exit.
        let pid = child.id();
        let peak_rss = std::thread::spawn(move || {
            let mut peak = 0;
            while let Some(now) = peak_resident(pid) {
                peak = peak.max(now);
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        });
        Client {
            child,
            stdout,
            stderr,
            peak_rss,
            _runtime: runtime,
        }
    }

    /// Waits for the command to exit, within [`WAIT`].
    fn finish(mut self) -> Finished {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("carrier did not exit within {WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Finished {
            code: status.code().unwrap_or(-1),
            stdout_bytes: self.stdout.join().unwrap_or(0),
            stderr: self.stderr.join().unwrap_or_default(),
            peak_rss: self.peak_rss.join().unwrap_or(0),
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

// ---------------------------------------------------------------------------------------------
// Pings at line rate
// ---------------------------------------------------------------------------------------------

/// How much the server pings: past the few MiB the socket buffers absorb, and within a time
/// bound.
const PINGS_WRITTEN: u64 = 256 * MIB;
const PING_FLOOD_LIMIT: Duration = Duration::from_secs(30);
/// Every this much the server goes quiet for [`QUIET`], as a server the scheduler does not run
/// would: the client's kernel then measures long round trips and widens its receive window up
/// to the system's maximum (`net.ipv4.tcp_rmem`), so the client wakes to megabytes waiting, as
/// on a loaded machine. Without the pauses the window stays small on a quiet machine, and a
/// client whose read buffer follows what is waiting passes by chance.
const QUIET_EVERY: u64 = 8 * MIB;
const QUIET: Duration = Duration::from_millis(30);
/// What the client may grow by under the flood: it owes one pong and reads through a buffer
/// of a fixed size, so nothing in it follows how many pings came or how many wait.
const GROWTH: u64 = 4 * MIB;

/// `count` pings of 125 bytes as a server sends them (unmasked), back to back. Written to the
/// socket as they are, they go out as fast as it takes them, faster than the client reads them.
fn ping_frames(count: usize) -> Vec<u8> {
    let mut ping = vec![0x89, 125];
    ping.extend_from_slice(&[b'p'; 125]);
    ping.repeat(count)
}

/// `VmRSS` of `pid` in bytes.
fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// A server that pings as fast as the socket takes it and never reads the pongs: the client's
/// writer is soon stuck on a full socket, and every ping it reads meanwhile owes a pong. It
/// owes only the latest (RFC 6455 §5.5.3), and reads a bounded chunk at a time however many
/// wait in its socket, so its memory stays flat however long it goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_pinging_at_line_rate_does_not_make_the_client_grow() {
    let (listener, url) = listen().await;
    let client = Client::start(&["send", &url, PROMPT]);
    let mut ws = accept(&listener).await;
    open_turn(&mut ws).await;
    let before = resident(client.child.id());
    // Whole frames, written after tokio-tungstenite flushed its last one: the stream stays
    // valid for the close below.
    let pings = ping_frames(8192);
    let mut wrote = 0u64;
    let started = Instant::now();
    while wrote < PINGS_WRITTEN && started.elapsed() < PING_FLOOD_LIMIT {
        ws.get_mut().write_all(&pings).await.expect("pings");
        wrote += pings.len() as u64;
        if wrote % QUIET_EVERY < pings.len() as u64 {
            tokio::time::sleep(QUIET).await;
        }
    }
    let flooded = started.elapsed();
    let end = resident(client.child.id());
    // 1008: the client gives up rather than reconnecting.
    ws.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Policy,
        reason: "done".into(),
    })))
    .await
    .expect("close");
    let finished = tokio::task::spawn_blocking(move || client.finish())
        .await
        .expect("finish");
    eprintln!(
        "{} of pings in {flooded:?}: the client's memory {} before, {} at the end, peak {}",
        mib(wrote),
        mib(before),
        mib(end),
        mib(finished.peak_rss)
    );
    assert!(
        wrote >= PINGS_WRITTEN,
        "only {} of pings in {PING_FLOOD_LIMIT:?}",
        mib(wrote)
    );
    assert_eq!(finished.code, 1, "{}", finished.stderr);
    assert!(
        end < before + GROWTH && finished.peak_rss < before + GROWTH,
        "the client grew from {} to {} (peak {}) under {} of pings",
        mib(before),
        mib(end),
        mib(finished.peak_rss),
        mib(wrote)
    );
}

// ---------------------------------------------------------------------------------------------
// A reply that streams on
// ---------------------------------------------------------------------------------------------

/// `send` prints a reply as it streams and does not keep it: 384 deltas of 1 MiB pass through
/// a client whose peak stays far below them (its streams' backlog and a few messages in
/// flight), and every byte reaches stdout. (The final text
/// is cut by the server's reply cap, as a carrier cuts it, so nothing is added at the end.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_a_long_reply_to_stdout_without_holding_it() {
    const DELTAS: u64 = 384;
    let (listener, url) = listen().await;
    let client = Client::start(&["send", &url, PROMPT]);
    let mut ws = accept(&listener).await;
    open_turn(&mut ws).await;
    let delta = "x".repeat(MIB as usize);
    for seq in 1..=DELTAS {
        let frame = format!(
            r#"{{"event":"session.text_delta","seq":{seq},"payload":{{"turn_id":"t1","delta":"{delta}"}}}}"#
        );
        ws.send(Message::text(frame)).await.expect("delta");
    }
    let completed = json!({
        "event": "session.turn_completed",
        "seq": DELTAS + 1,
        "payload": {"turn_id": "t1", "text": "x".repeat(1024), "truncated": true, "aborted": false}
    });
    ws.send(Message::text(completed.to_string()))
        .await
        .expect("completed");
    let finished = tokio::task::spawn_blocking(move || client.finish())
        .await
        .expect("finish");
    eprintln!(
        "{} streamed; the client's peak RSS {}",
        mib(DELTAS * MIB),
        mib(finished.peak_rss)
    );
    assert_eq!(finished.code, 0, "{}", finished.stderr);
    assert_eq!(
        finished.stdout_bytes,
        DELTAS * MIB + 1,
        "every delta and a newline"
    );
    assert!(
        finished.peak_rss < DELTAS * MIB / 2,
        "the client grew to {} for a {} reply",
        mib(finished.peak_rss),
        mib(DELTAS * MIB)
    );
}

// ---------------------------------------------------------------------------------------------
// An answer too large to hold parsed
// ---------------------------------------------------------------------------------------------

/// A 23 MiB handshake answer made of small values would take some 500 MiB as JSON values.
/// The client measures the text before parsing it, refuses it with one line naming the limit,
/// closes with 1009 and does not try again; its peak stays near the text's own size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_too_large_to_hold_parsed_is_refused_unparsed() {
    let (listener, url) = listen().await;
    let client = Client::start(&["status", "--json", &url]);
    let mut ws = accept(&listener).await;
    let (id, method) = request(&mut ws).await;
    assert_eq!(method, "system.handshake");
    let zeros = 23 * MIB as usize / 2;
    let padding = format!("[{}0]", "0,".repeat(zeros - 1));
    let result = handshake_result(json!({"padding": "PADDING"}))
        .to_string()
        .replace(r#""PADDING""#, &padding);
    let text = format!(r#"{{"id":{id},"result":{result}}}"#);
    let sent = text.len() as u64;
    ws.send(Message::text(text)).await.expect("answer");
    // What the client does next: a client that took the answer asks for the status, which it
    // gets; one that refused it closes with 1009.
    let next = tokio::time::timeout(WAIT, ws.next())
        .await
        .expect("the client goes on or closes");
    let closed_with = match next {
        Some(Ok(Message::Close(Some(close)))) => Some(u16::from(close.code)),
        Some(Ok(Message::Text(text))) => {
            let frame: Value = serde_json::from_str(&text).expect("JSON");
            answer(&mut ws, frame["id"].clone(), json!({})).await;
            None
        }
        other => panic!("neither a request nor a close: {other:?}"),
    };
    let finished = tokio::task::spawn_blocking(move || client.finish())
        .await
        .expect("finish");
    eprintln!(
        "a {} answer; the client's peak RSS {}",
        mib(sent),
        mib(finished.peak_rss)
    );
    assert_eq!(closed_with, Some(1009), "{}", finished.stderr);
    assert_eq!(finished.code, 1, "{}", finished.stderr);
    let line = finished.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "one line: {line}");
    assert!(
        line.contains("once parsed") && line.contains("max_parsed_bytes"),
        "{line}"
    );
    assert!(
        finished.peak_rss < 128 * MIB,
        "the client grew to {} for a {} answer",
        mib(finished.peak_rss),
        mib(sent)
    );
    // Refused for good: no second connection.
    let again = tokio::time::timeout(Duration::from_millis(1500), listener.accept()).await;
    assert!(again.is_err(), "the client reconnected");
}

// ---------------------------------------------------------------------------------------------
// An upgrade answer that is not a WebSocket handshake
// ---------------------------------------------------------------------------------------------

/// RFC 6455 §4.1: a `101` whose `Sec-WebSocket-Accept` is missing or does not answer the
/// request's key is not a WebSocket handshake: the CLI says so in one line and exits 1. (The
/// Rust client's typed error is the client's test: `client/tests/it/upgrade_answer.rs`.)
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
        let client = Client::start(&["status", &url]);
        let mut ws = accept_edited(&listener, edit).await;
        let finished = tokio::task::spawn_blocking(move || client.finish())
            .await
            .expect("finish");
        assert_eq!(finished.code, 1, "{}", finished.stderr);
        let line = finished.stderr.trim_end();
        assert_eq!(line.lines().count(), 1, "one line: {line}");
        assert!(
            line.starts_with("carrier: the server's answer to the WebSocket upgrade is invalid")
                && line.contains(why),
            "{line}"
        );
        let after = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("the client hangs up");
        assert!(!matches!(after, Some(Ok(_))), "{after:?}");
    }
}

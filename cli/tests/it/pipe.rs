//! `carrier pipe` as a user runs it: the real binary against a `carrier serve` child process with
//! an `echo:bulk` channel (`e`) and a `relay` channel (`r`), over 127.0.0.1.
//!
//! Every carrier gets its own `XDG_RUNTIME_DIR` (a temporary directory), so no test sees another
//! test's carriers; every wait is bounded and no assertion is about time.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use carrier::protocol::channel_frame;
use futures_util::{SinkExt, StreamExt};
use rand::RngCore;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio_tungstenite::tungstenite::Message;

const BIN: &str = env!("CARGO_BIN_EXE_carrier");
const TOKEN: &str = "pipe-test-token";
/// The bound on any one wait: a child's exit, a line, a connection.
const WAIT: Duration = Duration::from_secs(60);

/// A running `carrier serve`, killed on drop.
struct Serve {
    child: Child,
    url: String,
    runtime: tempfile::TempDir,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `carrier serve --port 0 --token TOKEN --channel e:echo:bulk --channel r:relay`, with a
/// runtime directory of its own.
fn serve() -> Serve {
    let runtime = tempfile::tempdir().expect("runtime dir");
    let mut child = Command::new(BIN)
        .args(["serve", "--port", "0", "--token", TOKEN])
        .args(["--channel", "e:echo:bulk", "--channel", "r:relay"])
        .env_remove("CARRIER_TOKEN")
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn carrier serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let listening: Value = serde_json::from_str(line.trim_end())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
    let url = listening["url"].as_str().expect("url").to_owned();
    Serve {
        child,
        url,
        runtime,
    }
}

/// `carrier pipe ARGS` with `XDG_RUNTIME_DIR=runtime` and no token in the environment.
fn pipe_command(runtime: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("pipe")
        .args(args)
        .env_remove("CARRIER_TOKEN")
        .env("XDG_RUNTIME_DIR", runtime)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The child's exit code within `within` (-1: ended by a signal), or `None`.
fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Waits for the exit, killing the child (and failing the test) past [`WAIT`].
fn exit_code(child: &mut Child, what: &str) -> i32 {
    match wait_exit(child, WAIT) {
        Some(code) => code,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {WAIT:?}");
        }
    }
}

/// Reads a pipe to its end on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// Forwards a pipe's lines to a channel, on a thread of its own.
fn lines(pipe: impl Read + Send + 'static) -> std_mpsc::Receiver<String> {
    let (tx, rx) = std_mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn fifty_mib_through_an_echo_bulk_channel_come_back_identical_and_eof_exits_0() {
    let carrier = serve();
    let scratch = tempfile::tempdir().expect("scratch dir");
    let input_path = scratch.path().join("input.bin");
    let mut input = File::create(&input_path).expect("create input");
    let mut sent = Sha256::new();
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..50 {
        rand::rng().fill_bytes(&mut block);
        sent.update(&block);
        input.write_all(&block).expect("write input");
    }
    drop(input);
    let sent = hex::encode(sent.finalize());

    // No URL and no token: the runtime file of the one carrier in this directory supplies both.
    let mut child = pipe_command(carrier.runtime.path(), &["--channel", "e"])
        .stdin(File::open(&input_path).expect("open input"))
        .spawn()
        .expect("spawn carrier pipe");
    let mut stdout = child.stdout.take().expect("stdout");
    let digest = std::thread::spawn(move || {
        let mut hash = Sha256::new();
        let mut total: u64 = 0;
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            match stdout.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    hash.update(&buffer[..n]);
                    total += n as u64;
                }
            }
        }
        (hex::encode(hash.finalize()), total)
    });
    let stderr = drain(child.stderr.take().expect("stderr"));
    let code = exit_code(&mut child, "carrier pipe");
    let (received, total) = digest.join().expect("hash thread");
    let stderr = text(&stderr.join().expect("stderr thread"));
    assert_eq!(code, 0, "stderr: {stderr}");
    assert_eq!(total, 50 << 20);
    assert_eq!(received, sent);
    assert_eq!(stderr, "", "nothing on stderr when it is not a terminal");
}

#[test]
fn a_wrong_token_exits_1_with_one_line_that_says_so() {
    let carrier = serve();
    let mut child = pipe_command(
        carrier.runtime.path(),
        &[&carrier.url, "--token", "wrong", "--channel", "e"],
    )
    .stdin(Stdio::null())
    .spawn()
    .expect("spawn carrier pipe");
    let stdout = drain(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    let code = exit_code(&mut child, "carrier pipe");
    let stderr = text(&stderr.join().expect("stderr thread"));
    assert_eq!(code, 1, "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains("refused the token"), "{stderr:?}");
    assert!(stdout.join().expect("stdout thread").is_empty());
}

#[test]
fn bad_chunks_and_a_missing_channel_are_usage_errors() {
    let runtime = tempfile::tempdir().expect("runtime dir");
    for args in [
        &["--channel", "e", "--chunk", "0"][..],
        &["--channel", "e", "--chunk", "16777217"],
        &["--channel", "e", "--chunk", "64k"],
        &["--chunk", "65536"],
        &["--channel", ""],
    ] {
        let mut child = pipe_command(runtime.path(), args)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn carrier pipe");
        let stderr = drain(child.stderr.take().expect("stderr"));
        let code = exit_code(&mut child, "carrier pipe");
        let stderr = text(&stderr.join().expect("stderr thread"));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(!stderr.is_empty(), "{args:?} says why");
    }
}

#[test]
fn a_carrier_that_stops_mid_transfer_makes_the_pipe_exit_1_with_one_line() {
    let mut carrier = serve();
    let url = carrier.url.clone();
    let mut child = pipe_command(carrier.runtime.path(), &[&url, "--channel", "e"])
        .env("CARRIER_TOKEN", TOKEN)
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn carrier pipe");
    let mut stdin = child.stdin.take().expect("stdin");
    let echoed = lines(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    // The echo of one line proves the pipe is connected and in the middle of a transfer.
    stdin.write_all(b"first line\n").expect("write stdin");
    let first = echoed
        .recv_timeout(WAIT)
        .expect("the echo of the first line");
    assert_eq!(first, "first line");

    let _ = carrier.child.kill();
    let _ = carrier.child.wait();
    let code = exit_code(&mut child, "carrier pipe");
    let stderr = text(&stderr.join().expect("stderr thread"));
    assert_eq!(code, 1, "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains(&url), "{stderr:?}");
    drop(stdin);
}

/// A second participant on the relay channel, speaking WebSocket with tokio-tungstenite.
struct Peer {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    seq: u32,
}

impl Peer {
    async fn connect(url: &str) -> Peer {
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("{url}?token={TOKEN}"))
            .await
            .expect("connect the peer");
        let handshake = json!({
            "id": "1",
            "method": "system.handshake",
            "params": { "protocol_version": "1.0", "min_compatible_protocol": "1.0" },
        });
        ws.send(Message::text(handshake.to_string()))
            .await
            .expect("send the handshake");
        loop {
            let message = tokio::time::timeout(WAIT, ws.next())
                .await
                .expect("a handshake response in time")
                .expect("the socket stays open")
                .expect("a message");
            if let Message::Text(text) = message {
                let value: Value = serde_json::from_str(&text).expect("JSON");
                if value["id"] == "1" {
                    assert!(value.get("result").is_some(), "handshake failed: {value}");
                    break;
                }
            }
        }
        Peer { ws, seq: 0 }
    }

    async fn send_event(&mut self, event: &str, payload: &Value) {
        let frame =
            channel_frame::encode_event_frame("r", self.seq, event, payload).expect("encode");
        self.seq += 1;
        self.ws
            .send(Message::binary(frame.to_vec()))
            .await
            .expect("send an event");
    }

    async fn send_binary(&mut self, body: &'static [u8]) {
        let frame = channel_frame::encode_binary("r", self.seq, bytes::Bytes::from_static(body))
            .expect("encode");
        self.seq += 1;
        self.ws
            .send(Message::binary(frame.to_vec()))
            .await
            .expect("send binary");
    }
}

/// Sends with `send` until `lines` yields a line for which `wanted` holds, within [`WAIT`];
/// returns the lines seen up to and including it. The relay only reaches connections that
/// exist when it forwards, and a pipe prints nothing until it receives, so repeating is how a
/// test knows the pipe has joined.
async fn until_line<F>(
    lines: &std_mpsc::Receiver<String>,
    wanted: impl Fn(&str) -> bool,
    mut send: F,
) -> Vec<String>
where
    F: AsyncFnMut(),
{
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "no wanted line within {WAIT:?}: {seen:?}"
        );
        send().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Ok(line) = lines.try_recv() {
            let done = wanted(&line);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_json_lines_with_events_and_left_out_without() {
    let carrier = serve();
    let spawn = |extra: &[&str]| {
        let mut args = vec![carrier.url.as_str(), "--channel", "r"];
        args.extend_from_slice(extra);
        pipe_command(carrier.runtime.path(), &args)
            .env("CARRIER_TOKEN", TOKEN)
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn carrier pipe")
    };
    let mut with_events = spawn(&["--events"]);
    let mut without = spawn(&[]);
    let with_stdin: ChildStdin = with_events.stdin.take().expect("stdin");
    let without_stdin: ChildStdin = without.stdin.take().expect("stdin");
    let with_lines = lines(with_events.stdout.take().expect("stdout"));
    let without_lines = lines(without.stdout.take().expect("stdout"));
    let with_err = drain(with_events.stderr.take().expect("stderr"));
    let without_err = drain(without.stderr.take().expect("stderr"));

    let mut peer = Peer::connect(&carrier.url).await;
    // Both pipes have joined once each printed a relayed binary line.
    until_line(
        &without_lines,
        |l| l == "joined",
        async || peer.send_binary(b"joined\n").await,
    )
    .await;
    until_line(
        &with_lines,
        |l| l == "joined",
        async || peer.send_binary(b"joined\n").await,
    )
    .await;

    let payload = json!({ "text": "héllo", "n": 3, "nested": { "ok": true } });
    peer.send_event("note", &payload).await;
    peer.send_binary(b"end\n").await;

    let seen = until_line(&with_lines, |l| l == "end", async || {}).await;
    let events: Vec<Value> = seen
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("an event line is JSON"))
        .collect();
    assert_eq!(events, vec![json!({ "event": "note", "payload": payload })]);
    let seen = until_line(&without_lines, |l| l == "end", async || {}).await;
    assert!(
        seen.iter().all(|l| l == "joined" || l == "end"),
        "no event lines without --events: {seen:?}"
    );

    // stdin's end: nothing was sent, so each pipe exits once the relay has been quiet a while.
    drop(with_stdin);
    drop(without_stdin);
    for (child, stderr) in [(&mut with_events, with_err), (&mut without, without_err)] {
        let code = exit_code(child, "carrier pipe");
        let stderr = text(&stderr.join().expect("stderr thread"));
        assert_eq!(code, 0, "stderr: {stderr}");
        assert_eq!(stderr, "");
    }
}

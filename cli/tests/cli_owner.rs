//! A token goes only to its own server: a runtime file counts only while the process that wrote
//! it runs, and no client of the project (`send`, `connect`, `status`, `pipe`, `acp`, `doctor`,
//! the Rust client) sends a token or a prompt to a listener of another user.
//!
//! The other user's listener is a small Python server started as uid 4242 (`setpriv`), which
//! plays a squatter: it answers `/healthz` like a carrier, completes any WebSocket upgrade, and
//! reports every byte each connection brought. Starting it needs root (CI runs as root); run as
//! another user, those tests say so and return. The runtime-file tests run as anyone. All of it
//! is Linux: the start times and the socket owners come from `/proc`.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use carrier::client::{Transport, TransportError, WsClientTransport, WsOptions};
use carrier::discovery::RuntimeDir;
use carrier_cli::client::{doctor_with, DoctorArgs};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_carrier");
/// What the commands carry in `CARRIER_TOKEN`; it must never reach the squatter.
const TOKEN: &str = "0123456789abcdef0123456789abcdef-secret-token";
const PROMPT: &str = "my secret prompt";
/// The most any command or wait below may take.
const WAIT: Duration = Duration::from_secs(30);
/// The uid the squatter runs as: any uid but this process's and the kernel's overflow uid
/// (65534), whose listeners are unattributed rather than another user's.
const SQUATTER_UID: u32 = 4242;

// ---------------------------------------------------------------------------------------------
// The squatter: another user's listener that records what it receives
// ---------------------------------------------------------------------------------------------

/// Listens on 127.0.0.1 (argv[1], or any port), prints `{"port":P}`, then for each connection
/// `{"accepted":N}` and, once it closed, `{"closed":N,"text":…}` with every byte it brought
/// (latin-1). It answers `GET /healthz` as a carrier does and completes WebSocket upgrades, so
/// a client that trusted it goes on to send its handshake; after a second of quiet it closes
/// the WebSocket with 1008, so that the client gives up rather than reconnecting.
const SQUATTER: &str = r#"
import base64, hashlib, json, socket, sys, threading
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0))
server.listen(64)
lock = threading.Lock()
def log(**fields):
    with lock:
        print(json.dumps(fields), flush=True)
log(port=server.getsockname()[1])
def serve(conn, n):
    data = b""
    conn.settimeout(3)
    try:
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        head = data.split(b"\r\n\r\n")[0]
        if head.startswith(b"GET /healthz"):
            body = b'{"status":"ok"}'
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        elif b"\r\n\r\n" in data:
            key = b""
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"sec-websocket-key":
                    key = value.strip()
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-accept: " + accept + b"\r\n\r\n")
            # Take what the client sends until it pauses, then close with 1008 so that it does
            # not reconnect.
            conn.settimeout(1)
            try:
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            conn.sendall(b"\x88\x02\x03\xf0")
            conn.settimeout(3)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    finally:
        conn.close()
        log(closed=n, text=data.decode("latin-1"))
n = 0
while True:
    conn, _ = server.accept()
    log(accepted=n)
    threading.Thread(target=serve, args=(conn, n), daemon=True).start()
    n += 1
"#;

/// One connection the squatter received, with everything it brought.
#[derive(Debug)]
struct Received {
    bytes: Vec<u8>,
}

impl Received {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The payloads of the WebSocket frames after the upgrade request, unmasked: where a
    /// prompt would be.
    fn frame_payloads(&self) -> String {
        let Some(end) = find(&self.bytes, b"\r\n\r\n") else {
            return String::new();
        };
        let mut rest = &self.bytes[end + 4..];
        let mut text = String::new();
        while rest.len() >= 2 {
            let masked = rest[1] & 0x80 != 0;
            let (len, mut at) = match rest[1] & 0x7F {
                126 if rest.len() >= 4 => (usize::from(u16::from_be_bytes([rest[2], rest[3]])), 4),
                127 => break,
                126 => break,
                n => (usize::from(n), 2),
            };
            let mut key = [0u8; 4];
            if masked {
                let Some(k) = rest.get(at..at + 4) else { break };
                key.copy_from_slice(k);
                at += 4;
            }
            let Some(payload) = rest.get(at..at + len) else {
                break;
            };
            let plain: Vec<u8> = payload
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ key[i % 4])
                .collect();
            text.push_str(&String::from_utf8_lossy(&plain));
            rest = &rest[at + len..];
        }
        text
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The squatter process (killed on drop) and what it has reported so far.
struct Squatter {
    child: Child,
    port: u16,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    /// Connections below this number were reported by an earlier [`Squatter::received`].
    reported: u64,
}

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why another user's listener cannot be started here, if it cannot.
#[allow(unsafe_code)] // geteuid(2), below
fn cannot_start_a_squatter() -> Option<&'static str> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the tests do not run as root, so they cannot start a listener as another user (CI runs as root)");
    }
    if !Path::new("/usr/bin/python3").exists() {
        return Some("/usr/bin/python3 (readable by any uid) is missing");
    }
    if Command::new("setpriv")
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        return Some("setpriv (util-linux) is missing");
    }
    None
}

/// Starts the squatter as [`SQUATTER_UID`] on `port` (0: any), or says why it cannot and returns
/// `None`.
fn squatter(test: &str, port: u16) -> Option<Squatter> {
    if let Some(why) = cannot_start_a_squatter() {
        eprintln!("SKIPPED {test}: {why}");
        return None;
    }
    let mut child = Command::new("setpriv")
        .args([
            &format!("--reuid={SQUATTER_UID}"),
            &format!("--regid={SQUATTER_UID}"),
            "--clear-groups",
            "/usr/bin/python3",
            "-u",
            "-c",
            SQUATTER,
            &port.to_string(),
        ])
        .current_dir("/")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the squatter");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                break;
            };
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    let first = lines
        .recv_timeout(WAIT)
        .expect("the squatter reports its port");
    let port = first["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("a port");
    let squatter = Squatter {
        child,
        port,
        lines,
        seen: Vec::new(),
        reported: 0,
    };
    // It really runs as the other user.
    let status = std::fs::read_to_string(format!("/proc/{}/status", squatter.pid()))
        .expect("the squatter's status");
    assert!(
        status.lines().any(|l| l.starts_with("Uid:")
            && l.split_whitespace().nth(2) == Some(&SQUATTER_UID.to_string())),
        "{status}"
    );
    Some(squatter)
}

impl Squatter {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/", self.port)
    }

    /// Takes the squatter's reports until `done` holds for them, within [`WAIT`].
    fn wait_until(&mut self, what: &str, done: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("the squatter never reported {what}: {:?}", self.seen),
            }
        }
    }

    /// Every connection made so far, once each has closed. A connection of the test's own is
    /// made last: connections are accepted in order, so once it has been, so has every earlier
    /// one.
    fn received(&mut self) -> Vec<Received> {
        let mut marker =
            TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the squatter");
        marker.write_all(b"MARKER").expect("write the marker");
        drop(marker);
        let closed = |seen: &[Value], n: u64| seen.iter().any(|v| v["closed"] == n);
        let marker_id = |seen: &[Value]| {
            seen.iter()
                .find(|v| v["text"] == "MARKER")
                .and_then(|v| v["closed"].as_u64())
        };
        self.wait_until("the marker connection", |seen| marker_id(seen).is_some());
        let marker = marker_id(&self.seen).unwrap_or_default();
        let since = self.reported;
        self.wait_until("every connection closed", |seen| {
            (since..marker).all(|n| closed(seen, n))
        });
        let mut received: Vec<(u64, Received)> = self
            .seen
            .iter()
            .filter_map(|v| {
                let n = v["closed"]
                    .as_u64()
                    .filter(|n| (since..marker).contains(n))?;
                let text = v["text"].as_str()?;
                // latin-1: one char per byte.
                let bytes = text.chars().map(|c| c as u32 as u8).collect();
                Some((n, Received { bytes }))
            })
            .collect();
        received.sort_by_key(|(n, _)| *n);
        self.seen.retain(|v| {
            let n = v["closed"].as_u64().or_else(|| v["accepted"].as_u64());
            n.is_some_and(|n| n > marker)
        });
        self.reported = marker + 1;
        received.into_iter().map(|(_, r)| r).collect()
    }

    /// Asserts that no connection brought a single byte.
    fn assert_got_nothing(&mut self, who: &str) {
        let received = self.received();
        for r in &received {
            assert!(
                r.bytes.is_empty(),
                "{who} sent the squatter {} bytes (token sent: {}, prompt sent: {}):\n{}\nframes: {}",
                r.bytes.len(),
                r.text().contains(TOKEN),
                r.frame_payloads().contains(PROMPT),
                r.text(),
                r.frame_payloads()
            );
        }
    }
}

/// Asserts `stderr` is the one line refusing the squatter's port and naming its owner.
fn assert_one_line_naming_the_owner(stderr: &str, port: u16) {
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{port}"))
            && stderr.contains(&format!("uid {SQUATTER_UID}"))
            && stderr.contains("not to you")
            && stderr.contains("nothing was sent"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------------

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `carrier ARGS` with `XDG_RUNTIME_DIR=runtime` and `CARRIER_TOKEN` set; stdin is `input`.
fn carrier(runtime: &Path, args: &[&str], input: &[u8]) -> Run {
    carrier_under(&[], runtime, args, input)
}

/// [`carrier`], run by `wrapper` (`unshare --user`, say): `WRAPPER… carrier ARGS`.
fn carrier_under(wrapper: &[&str], runtime: &Path, args: &[&str], input: &[u8]) -> Run {
    let (program, wrapper_args) = match wrapper {
        [program, rest @ ..] => (*program, rest),
        [] => (BIN, &[][..]),
    };
    let mut command = Command::new(program);
    command.args(wrapper_args);
    if !wrapper.is_empty() {
        command.arg(BIN);
    }
    let mut child = command
        .args(args)
        .env("CARRIER_TOKEN", TOKEN)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run carrier");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("carrier {args:?} did not exit within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = feeder.join();
    Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime files
// ---------------------------------------------------------------------------------------------

/// A live process of this user, killed on drop: a pid that runs but did not write the file.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("start sleep"),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks after boot.
fn start_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    stat[stat.rfind(')').expect("comm") + 1..]
        .split_whitespace()
        .nth(22 - 3)
        .and_then(|t| t.parse().ok())
        .expect("starttime")
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .expect("boot id")
        .trim()
        .to_owned()
}

/// Writes a runtime file as a carrier of this user would (a 0600 file in a 0700 directory)
/// naming `pid` and `port`, with `pid_start` as given (`None`: an older carrier's file).
fn write_runtime_file(runtime: &Path, pid: u32, port: u16, pid_start: Option<Value>) -> PathBuf {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = runtime.join("carrier");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .expect("runtime dir");
    let mut entry = json!({
        "pid": pid,
        "url": format!("ws://127.0.0.1:{port}/"),
        "port": port,
        "role": "drive",
        "token": TOKEN,
        "started": "2025-01-01T00:00:00Z",
    });
    if let Some(start) = pid_start {
        entry["pid_start"] = start;
    }
    let path = dir.join(format!("{pid}.json"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("runtime file");
    file.write_all(entry.to_string().as_bytes()).expect("write");
    path
}

/// A listener of this user that records whether anything connected or arrived.
struct Recorder {
    listener: std::net::TcpListener,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        Recorder { listener }
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().expect("addr").port()
    }

    /// Connections waiting to be accepted (the commands have exited, so none is in flight).
    fn connections(&self) -> usize {
        std::iter::from_fn(|| self.listener.accept().ok()).count()
    }
}

#[test]
fn a_runtime_file_naming_a_pid_its_writer_no_longer_has_is_ignored_and_removed() {
    let runtime = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start();
    // A live process of this user that started after the file's writer did: the pid was reused.
    let sleeper = Sleeper::start();
    let reused = start_ticks(sleeper.pid()) + 1;
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": reused})),
    );

    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert!(scan.carriers.is_empty(), "{:?}", scan.carriers);
    assert_eq!(scan.removed, std::slice::from_ref(&file));
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    assert!(!file.exists());

    // Written again, `carrier send` with no URL finds no carrier and sends nothing.
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": reused})),
    );
    let run = carrier(runtime.path(), &["send", PROMPT], b"");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("no running carrier found"),
        "{}",
        run.stderr
    );
    assert!(!file.exists(), "the stale file was removed");
    assert_eq!(recorder.connections(), 0, "something connected to the port");

    // A file from before the last boot: the same.
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({
            "boot_id": "00000000-0000-0000-0000-000000000000",
            "ticks_since_boot": start_ticks(sleeper.pid()),
        })),
    );
    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert!(scan.carriers.is_empty() && !file.exists(), "{scan:?}");

    // The file of the process that wrote it is live.
    let file = write_runtime_file(
        runtime.path(),
        sleeper.pid(),
        recorder.port(),
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": start_ticks(sleeper.pid())})),
    );
    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert_eq!(scan.carriers.len(), 1, "{scan:?}");
    assert!(file.exists());
}

#[test]
fn an_older_carrier_s_file_without_a_start_time_is_ignored_with_a_warning_while_its_pid_runs() {
    let runtime = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start();
    let sleeper = Sleeper::start();
    let file = write_runtime_file(runtime.path(), sleeper.pid(), recorder.port(), None);
    let run = carrier(runtime.path(), &["send", PROMPT], b"");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("warning: ignoring the runtime file")
            && run.stderr.contains("does not record when process"),
        "{}",
        run.stderr
    );
    assert!(
        file.exists(),
        "a possibly live carrier's file is left alone"
    );
    assert_eq!(recorder.connections(), 0, "something connected to the port");

    // Once its pid runs no more, it is removed as before.
    let pid = sleeper.pid();
    drop(sleeper);
    let scan = RuntimeDir::at(runtime.path().join("carrier")).scan();
    assert_eq!(scan.removed, [file], "pid {pid}: {scan:?}");
}

// ---------------------------------------------------------------------------------------------
// Another user's listener
// ---------------------------------------------------------------------------------------------

/// The issue's case: a carrier killed with SIGKILL left its file; its pid now belongs to
/// another user's process, which also holds its port.
#[test]
fn a_stale_runtime_file_whose_pid_and_port_another_user_took_sends_nothing() {
    let test = "a_stale_runtime_file_whose_pid_and_port_another_user_took_sends_nothing";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    // Recorded by the carrier that wrote the file, long before the squatter started.
    let file = write_runtime_file(
        runtime.path(),
        squatter.pid(),
        squatter.port,
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": 1})),
    );
    let run = carrier(runtime.path(), &["send", PROMPT], b"");
    squatter.assert_got_nothing("send");
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("no running carrier found"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(!file.exists(), "the stale file was removed");
}

/// The runtime file is genuine and its writer still runs, but the port is another user's now
/// (the carrier closed its listener, say): the dial's own check refuses it.
#[test]
fn a_live_runtime_file_pointing_at_another_users_port_sends_nothing() {
    let test = "a_live_runtime_file_pointing_at_another_users_port_sends_nothing";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let writer = Sleeper::start();
    write_runtime_file(
        runtime.path(),
        writer.pid(),
        squatter.port,
        Some(json!({"boot_id": boot_id(), "ticks_since_boot": start_ticks(writer.pid())})),
    );
    for args in [
        &["send", PROMPT][..],
        &["status", "--json"][..],
        &["connect"][..],
        &["pipe", "--channel", "up"][..],
        &["acp"][..],
    ] {
        let input = format!("{PROMPT}\n");
        let run = carrier(runtime.path(), args, input.as_bytes());
        squatter.assert_got_nothing(&format!("{args:?}"));
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert_one_line_naming_the_owner(&run.stderr, squatter.port);
    }
}

#[test]
fn send_connect_status_pipe_and_acp_refuse_another_users_listener_at_a_given_url() {
    let test = "send_connect_status_pipe_and_acp_refuse_another_users_listener_at_a_given_url";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let url = squatter.url();
    for args in [
        &["send", &url, PROMPT][..],
        &["send", &url, "--token", TOKEN, PROMPT][..],
        &["status", &url][..],
        &["connect", &url][..],
        &["pipe", &url, "--channel", "up"][..],
        &["acp", &url][..],
    ] {
        let input = format!("{PROMPT}\n");
        let run = carrier(runtime.path(), args, input.as_bytes());
        squatter.assert_got_nothing(&format!("{args:?}"));
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert_one_line_naming_the_owner(&run.stderr, squatter.port);
    }
}

#[test]
fn any_owner_talks_to_another_users_listener_without_the_token_and_says_so() {
    let test = "any_owner_talks_to_another_users_listener_without_the_token_and_says_so";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let url = squatter.url();
    // The squatter completes the upgrade but never answers the handshake, then hangs up: the
    // command fails, after a request that carried no token.
    for args in [
        &["send", "--any-owner", &url, "--token", TOKEN, PROMPT][..],
        &["status", "--any-owner", &url][..],
        &["pipe", "--any-owner", &url, "--channel", "up"][..],
    ] {
        let run = carrier(runtime.path(), args, b"");
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "warning: the listener at {url} belongs to uid {SQUATTER_UID}"
            )) && run.stderr.contains("without a token (--any-owner)"),
            "{args:?}: {}",
            run.stderr
        );
        let received = squatter.received();
        assert_eq!(received.len(), 1, "{args:?}: {received:?}");
        let text = received[0].text();
        assert!(text.starts_with("GET / HTTP/1.1\r\n"), "{args:?}: {text}");
        assert!(
            !text.contains(TOKEN) && !text.to_ascii_lowercase().contains("sec-websocket-protocol"),
            "{args:?}: the token went out: {text}"
        );
        assert!(
            !received[0].frame_payloads().contains(PROMPT),
            "{args:?}: the prompt went out before a handshake answer"
        );
    }
    // Without a URL it is a usage error: a carrier found through a runtime file is always the
    // user's own.
    let run = carrier(runtime.path(), &["send", "--any-owner", PROMPT], b"");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--any-owner needs the URL"),
        "{}",
        run.stderr
    );
    squatter.assert_got_nothing("send --any-owner without a URL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_only_the_health_of_another_users_listener_and_names_its_owner() {
    let test = "doctor_checks_only_the_health_of_another_users_listener_and_names_its_owner";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = DoctorArgs {
        url: None,
        token: Some(TOKEN.to_owned()),
    };
    let port = squatter.port;
    let code = tokio::time::timeout(
        WAIT,
        doctor_with(
            args,
            port..=port,
            &RuntimeDir::at(runtime.path()),
            &mut out,
            &mut err,
        ),
    )
    .await
    .expect("doctor finishes");
    let (out, err) = (
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    );
    let received = squatter.received();
    assert!(!received.is_empty(), "doctor did not probe the port");
    for r in &received {
        let text = r.text();
        assert!(
            text.starts_with("GET /healthz HTTP/1.1\r\n")
                && !text.contains(TOKEN)
                && !text.to_ascii_lowercase().contains("upgrade"),
            "doctor sent more than a tokenless health probe: {text}"
        );
    }

    // Not a carrier of this user's: nothing compatible was found.
    assert_eq!(code, ExitCode::FAILURE, "{out}{err}");
    assert!(
        !out.contains("  compatible") && !out.contains("carrier server"),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("127.0.0.1:{port}: ")))
        .unwrap_or_else(|| panic!("doctor does not name port {port}:\n{out}"));
    assert!(
        line.contains(&format!("belongs to uid {SQUATTER_UID}"))
            && line.contains("not to you")
            && line.contains("without a token"),
        "{line}"
    );
}

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
        Some(carrier::client::Listener::Foreign(owner)) if owner.uid == SQUATTER_UID
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

/// A carrier of this user runs; the client is connected. The carrier dies and another user binds
/// its port: the reconnects find that listener and send it nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_s_reconnects_repeat_the_check() {
    let test = "the_rust_client_s_reconnects_repeat_the_check";
    if let Some(why) = cannot_start_a_squatter() {
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let runtime = tempfile::tempdir().expect("tempdir");
    let mut serve = Command::new(BIN)
        .args(["serve", "--port", "0"])
        .env("CARRIER_TOKEN", TOKEN)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("carrier serve");
    let mut line = String::new();
    BufReader::new(serve.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let listening: Value = serde_json::from_str(&line).expect("JSON");
    let port = listening["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("port");

    let transport =
        WsClientTransport::new(WsOptions::new(format!("ws://127.0.0.1:{port}/")).token(TOKEN));
    transport
        .connect()
        .await
        .expect("connects to its own carrier");
    assert_eq!(
        transport.last_listener(),
        Some(carrier::client::Listener::Own)
    );

    let _ = serve.kill();
    let _ = serve.wait();
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

// ---------------------------------------------------------------------------------------------
// A user namespace: where the kernel cannot tell users apart
// ---------------------------------------------------------------------------------------------

/// `carrier serve` of this user on a free port (killed on drop).
struct OwnCarrier {
    child: Child,
    port: u16,
}

impl OwnCarrier {
    /// A carrier whose token is `token`.
    fn start(runtime: &Path, token: &str) -> OwnCarrier {
        let mut child = Command::new(BIN)
            .args(["serve", "--port", "0"])
            .env("CARRIER_TOKEN", token)
            .env("XDG_RUNTIME_DIR", runtime)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("carrier serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the listening line");
        let listening: Value = serde_json::from_str(&line).expect("JSON");
        let port = listening["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .expect("port");
        OwnCarrier { child, port }
    }

    fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/", self.port)
    }
}

impl Drop for OwnCarrier {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The wrapper that runs a command in a new user namespace without a uid map.
const UNSHARE_USER: [&str; 2] = ["unshare", "--user"];

/// Why a command cannot be run in a new user namespace here, if it cannot.
fn cannot_unshare_a_user_namespace() -> Option<String> {
    match Command::new("unshare").args(["--user", "true"]).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "`unshare --user` fails here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("unshare (util-linux) is missing: {e}")),
    }
}

/// Under `unshare --user` without a uid map the client runs as the kernel's overflow uid, and
/// the socket table shows every user it cannot map — the squatter, this user's own carrier —
/// as that same uid: no listener can be attributed, so none gets the token or the prompt.
/// Outside the namespace the same command still reaches the user's own carrier.
#[test]
fn in_a_user_namespace_without_a_uid_map_no_listener_is_attributed_and_nothing_is_sent() {
    let test =
        "in_a_user_namespace_without_a_uid_map_no_listener_is_attributed_and_nothing_is_sent";
    if let Some(why) = cannot_unshare_a_user_namespace() {
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let own = OwnCarrier::start(runtime.path(), TOKEN);

    let outside = carrier(runtime.path(), &["send", &own.url(), PROMPT], b"");
    assert_eq!(outside.code, 0, "{}\n{}", outside.stdout, outside.stderr);
    assert!(
        !outside.stdout.trim().is_empty(),
        "no reply: {}",
        outside.stderr
    );

    for (url, port) in [(squatter.url(), squatter.port), (own.url(), own.port)] {
        let inside = carrier_under(&UNSHARE_USER, runtime.path(), &["send", &url, PROMPT], b"");
        assert_eq!(
            inside.code, 1,
            "{url}: {}\n{}",
            inside.stdout, inside.stderr
        );
        assert!(inside.stdout.is_empty(), "{url}: {}", inside.stdout);
        let stderr = inside.stderr.trim_end();
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "carrier: refusing to talk to 127.0.0.1:{port}: the port cannot be attributed to a user ("
            )) && stderr.contains("overflow uid")
                && stderr.ends_with("nothing was sent"),
            "{stderr}"
        );
    }
    squatter.assert_got_nothing("send in a user namespace");
}

// ---------------------------------------------------------------------------------------------
// A token written into the URL
// ---------------------------------------------------------------------------------------------

/// A token written into the URL is the token: with `--any-owner` it goes to another user's
/// listener no more than `--token` does, and no line a command prints shows it.
/// `user:password@` is refused before anything is dialled. The user's own carrier still takes
/// the URL's token (over `CARRIER_TOKEN`, which is wrong for it here).
#[test]
fn a_token_in_the_url_never_reaches_another_users_listener_and_is_never_printed() {
    let test = "a_token_in_the_url_never_reaches_another_users_listener_and_is_never_printed";
    let Some(mut squatter) = squatter(test, 0) else {
        return;
    };
    let runtime = tempfile::tempdir().expect("tempdir");
    let secret = "url-secret-0123456789abcdef0123456789";
    let url = squatter.url();
    let in_query = format!("{url}?token={secret}");
    let among_others = format!("{url}?role=observe&token={secret}");
    let nothing_shown = |run: &Run, what: &str| {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{what} printed the token:\n{}\n{}",
            run.stdout,
            run.stderr
        );
    };
    for args in [
        &["send", "--any-owner", &in_query, PROMPT][..],
        &["status", "--any-owner", &among_others][..],
        &["pipe", "--any-owner", &in_query, "--channel", "up"][..],
    ] {
        let run = carrier(runtime.path(), args, b"");
        assert_eq!(run.code, 1, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("without a token (--any-owner)"),
            "{args:?}: {}",
            run.stderr
        );
        nothing_shown(&run, &format!("{args:?}"));
        let received = squatter.received();
        assert_eq!(received.len(), 1, "{args:?}: {received:?}");
        let text = received[0].text();
        assert!(text.starts_with("GET /"), "{args:?}: {text}");
        assert!(
            !text.contains(secret) && !text.contains(TOKEN),
            "{args:?}: a token went out: {text}"
        );
    }

    let port = squatter.port;
    for url in [
        format!("ws://me:{secret}@127.0.0.1:{port}/"),
        format!("ws://{secret}@127.0.0.1:{port}/?token={secret}"),
    ] {
        for any_owner in [true, false] {
            let mut args = vec!["send", &url, PROMPT];
            if any_owner {
                args.insert(1, "--any-owner");
            }
            let run = carrier(runtime.path(), &args, b"");
            assert_eq!(run.code, 2, "{args:?}: {}\n{}", run.stdout, run.stderr);
            assert!(
                run.stderr.contains("user:password@"),
                "{args:?}: {}",
                run.stderr
            );
            nothing_shown(&run, &format!("{args:?}"));
        }
    }
    squatter.assert_got_nothing("a URL with user:password@");

    let own_token = "own-carrier-token-0123456789abcdef0123";
    let own = OwnCarrier::start(runtime.path(), own_token);
    let run = carrier(
        runtime.path(),
        &["send", &format!("{}?token={own_token}", own.url()), PROMPT],
        b"",
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stdout.trim().is_empty(), "no reply: {}", run.stderr);
    assert!(
        !run.stdout.contains(own_token) && !run.stderr.contains(own_token),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}

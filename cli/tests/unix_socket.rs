//! The carrier's Unix socket, through the real binary: `carrier serve` opens it beside its
//! runtime file, and `send`, `status`, `pipe` and `doctor` use it without a token and without
//! reading a socket table; a peer of another uid is closed before the upgrade and receives
//! nothing; a socket another user planted at the advertised path is refused by every client
//! with one line naming its owner, and receives nothing; a stale socket of a SIGKILLed carrier
//! is replaced (or cleaned up with its runtime file), a symbolic link or an open directory is
//! refused.
//!
//! The other user is a small Python program run as uid 4242 and as 65534 (the kernel's overflow
//! uid, `nobody`) with `setpriv`, as in `cli_owner.rs`; that needs root (CI runs as root): run
//! as another user, those tests say so and return. The table-read check needs `strace`.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_carrier");
/// The token every carrier here is started with; it must never reach another user.
const TOKEN: &str = "0123456789abcdef-unix-socket-test-token";
const PROMPT: &str = "my secret prompt";
/// The most any command or wait below may take.
const WAIT: Duration = Duration::from_secs(30);
/// The other users: an ordinary uid, and the overflow uid (never anyone's own).
const OTHER_UIDS: [u32; 2] = [4242, 65534];

// ---------------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------------

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `carrier ARGS` with `XDG_RUNTIME_DIR=runtime`, `env` and stdin `input`, within [`WAIT`].
fn carrier(runtime: &Path, args: &[&str], env: &[(&str, &str)], input: &[u8]) -> Run {
    carrier_under(&[], runtime, args, env, input)
}

/// [`carrier`], run by `wrapper` (`strace …`): `WRAPPER… carrier ARGS`.
fn carrier_under(
    wrapper: &[&str],
    runtime: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    input: &[u8],
) -> Run {
    let mut command = match wrapper {
        [program, rest @ ..] => {
            let mut c = Command::new(program);
            c.args(rest).arg(BIN);
            c
        }
        [] => Command::new(BIN),
    };
    let mut child = command
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("CARRIER_TOKEN")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
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

/// A running `carrier serve` (killed on drop) and its `listening` line.
struct Serve {
    child: Child,
    listening: Value,
}

impl Serve {
    /// `carrier serve --port 0 --token TOKEN --channel echo:echo ARGS` with its runtime files in
    /// `runtime`, up to its `listening` line.
    fn start(runtime: &Path, args: &[&str]) -> Serve {
        match Serve::try_start(runtime, args) {
            Ok(serve) => serve,
            Err(run) => panic!("serve exited {}: {}", run.code, run.stderr),
        }
    }

    /// [`Serve::start`], or how it exited before listening.
    fn try_start(runtime: &Path, args: &[&str]) -> Result<Serve, Run> {
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--port",
                "0",
                "--token",
                TOKEN,
                "--channel",
                "echo:echo",
            ])
            .args(args)
            .env("XDG_RUNTIME_DIR", runtime)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start carrier serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, line) = mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = tx.send(first);
        });
        let first = line.recv_timeout(WAIT).expect("serve said something");
        match serde_json::from_str::<Value>(&first) {
            Ok(listening) => Ok(Serve { child, listening }),
            Err(_) => {
                let status = child.wait().expect("wait");
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                Err(Run {
                    code: status.code().unwrap_or(-1),
                    stdout: first,
                    stderr,
                })
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn port(&self) -> u16 {
        self.listening["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .expect("a port")
    }

    fn socket(&self) -> PathBuf {
        PathBuf::from(self.listening["socket"].as_str().expect("a socket"))
    }

    /// SIGKILL, as a crash would: nothing is cleaned up.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh runtime directory (`XDG_RUNTIME_DIR`); the carrier's lives in `carrier/` below it.
fn runtime() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// `GET /metrics` over the Unix socket at `socket` (no token: the same user), the body.
fn metrics_over(socket: &Path) -> String {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer
}

/// The value of the Prometheus counter `name` in `metrics`.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {metrics}"))
}

// ---------------------------------------------------------------------------------------------
// Another user
// ---------------------------------------------------------------------------------------------

/// Why a program cannot be started as another user here, if it cannot.
#[allow(unsafe_code)] // geteuid(2), below
fn cannot_run_as_another_user() -> Option<&'static str> {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the tests do not run as root, so they cannot run a program as another user (CI runs as root)");
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

/// `python3 -c SCRIPT ARGS` as `uid`, stdout piped.
fn python_as(uid: u32, script: &str, args: &[&str]) -> Child {
    Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "/usr/bin/python3",
            "-u",
            "-c",
            script,
        ])
        .args(args)
        .current_dir("/")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start python as another user")
}

/// Connects to the Unix socket argv[1], writes a WebSocket upgrade carrying the token argv[2]
/// (as a client that had the token would), reads until the server closes, and prints what it
/// got: `{"connected":…,"received":N,"ended":…}`.
const PEER: &str = r#"
import json, socket, sys
path, token = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(path)
except OSError as e:
    print(json.dumps({"connected": False, "error": str(e)}))
    sys.exit(0)
request = ("GET /?token=%s HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" % token).encode()
try:
    s.sendall(request)
except OSError:
    pass
s.settimeout(10)
data, ended = b"", "eof"
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except socket.timeout:
    ended = "timeout"
except OSError as e:
    ended = "error: " + str(e)
print(json.dumps({"connected": True, "received": len(data), "ended": ended}))
"#;

/// Binds a Unix socket at argv[1], prints `{"bound":…}`, then serves one connection at a time:
/// reads everything it brings (at most 3 s) and prints `{"n":N,"text":…}` (latin-1).
const PLANTED: &str = r#"
import json, socket, sys
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(64)
print(json.dumps({"bound": sys.argv[1]}), flush=True)
n = 0
while True:
    conn, _ = server.accept()
    conn.settimeout(3)
    data = b""
    try:
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    conn.close()
    print(json.dumps({"n": n, "text": data.decode("latin-1")}), flush=True)
    n += 1
"#;

/// Another user's listener on a Unix socket (killed on drop), and its reports.
struct Planted {
    child: Child,
    lines: mpsc::Receiver<Value>,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Planted {
    /// Starts [`PLANTED`] as `uid` in a directory of that user's.
    fn start(uid: u32) -> Planted {
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(uid)).expect("chown");
        let path = dir.path().join("planted.sock");
        let mut child = python_as(uid, PLANTED, &[path.to_str().expect("utf-8")]);
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(Ok(value)) = line.map(|l| serde_json::from_str::<Value>(&l)) else {
                    break;
                };
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let bound = lines.recv_timeout(WAIT).expect("the listener reports");
        assert!(bound.get("bound").is_some(), "{bound}");
        let owner = std::os::unix::fs::MetadataExt::uid(
            &std::fs::symlink_metadata(&path).expect("the socket"),
        );
        assert_eq!(owner, uid);
        Planted {
            child,
            lines,
            path,
            _dir: dir,
        }
    }

    /// Moves the socket to `to` (it stays the same socket: the listener keeps it).
    fn move_to(&mut self, to: &Path) {
        std::fs::rename(&self.path, to).expect("move the socket");
        self.path = to.to_owned();
    }

    /// What every connection so far brought: a marker connection of the test's own is served
    /// after all of them (one at a time, in order).
    fn received(&self) -> Vec<String> {
        let mut marker =
            std::os::unix::net::UnixStream::connect(&self.path).expect("connect the marker");
        marker.write_all(b"MARKER").expect("write the marker");
        drop(marker);
        let mut texts = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .expect("the listener reports every connection");
            let text = line["text"].as_str().unwrap_or_default().to_owned();
            if text == "MARKER" {
                return texts;
            }
            texts.push(text);
        }
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A live process of this user, killed on drop: the "writer" of a runtime file the test writes.
struct Sleeper(Child);

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

/// A runtime file as a carrier of this user writes it (0600 in a 0700 directory), for the live
/// process `pid`, listing `port` and `socket`.
fn write_runtime_file(runtime: &Path, pid: u32, port: u16, socket: &Path) {
    let dir = runtime.join("carrier");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    let entry = json!({
        "pid": pid,
        "url": format!("ws://127.0.0.1:{port}/"),
        "port": port,
        "role": "drive",
        "token": TOKEN,
        "started": "2026-01-01T00:00:00Z",
        "pid_start": {"boot_id": boot_id.trim(), "ticks_since_boot": start_ticks(pid)},
        "socket": socket,
    });
    let path = dir.join(format!("{pid}.json"));
    std::fs::write(&path, entry.to_string()).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

// ---------------------------------------------------------------------------------------------
// The same user
// ---------------------------------------------------------------------------------------------

#[test]
fn send_status_pipe_and_acp_use_the_listed_socket_without_a_token() {
    let runtime = runtime();
    // --token-file: the runtime file carries no token, so nothing but the socket admits them.
    let token_file = runtime.path().join("token");
    let serve = Serve::start(
        runtime.path(),
        &["--token-file", token_file.to_str().expect("utf-8")],
    );
    let socket = serve.socket();
    assert_eq!(
        socket,
        runtime
            .path()
            .join("carrier")
            .join(format!("{}.sock", serve.pid()))
    );

    let sent = carrier(runtime.path(), &["send", "hello there"], &[], b"");
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    assert_eq!(sent.stdout, "echo: hello there\n");

    let status = carrier(runtime.path(), &["status", "--json"], &[], b"");
    assert_eq!(status.code, 0, "{}", status.stderr);
    let status: Value = serde_json::from_str(&status.stdout).expect("JSON");
    assert_eq!(status["url"], format!("unix:{}", socket.display()));

    let payload = vec![b'x'; 100_000];
    let piped = carrier(
        runtime.path(),
        &["pipe", "--channel", "echo"],
        &[],
        &payload,
    );
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert_eq!(piped.stdout.len(), payload.len());

    // `carrier acp` too: its `/acp` on the socket.
    let input = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[]}}"#,
        "\n",
    );
    let bridged = carrier(runtime.path(), &["acp"], &[], input.as_bytes());
    assert_eq!(bridged.code, 0, "{}", bridged.stderr);
    let answers: Vec<Value> = bridged
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON-RPC lines"))
        .collect();
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert!(
        ids.contains(&&json!(1)) && ids.contains(&&json!(2)),
        "{answers:?}"
    );
    assert_eq!(answers.last().unwrap()["result"], json!({}), "{answers:?}");

    // Named explicitly, with no runtime file to find it by.
    let elsewhere = self::runtime();
    let url = format!("unix:{}", socket.display());
    let sent = carrier(elsewhere.path(), &["send", &url, "named"], &[], b"");
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    assert_eq!(sent.stdout, "echo: named\n");

    // Over TCP the token is still needed.
    let tcp = format!("ws://127.0.0.1:{}/", serve.port());
    let refused = carrier(elsewhere.path(), &["send", &tcp, "no token"], &[], b"");
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("1008"), "{}", refused.stderr);
}

/// With the socket, `carrier send` opens no socket table; without it (`--no-unix-socket`) it
/// does, which shows the trace would see one.
#[test]
fn with_the_socket_send_reads_no_socket_table() {
    if Command::new("strace")
        .arg("-V")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        eprintln!("SKIPPED with_the_socket_send_reads_no_socket_table: strace is missing");
        return;
    }
    let traced = |runtime: &Path| {
        let trace = runtime.join("trace.txt");
        let run = carrier_under(
            &[
                "strace",
                "-f",
                "-e",
                "trace=open,openat,openat2",
                "-o",
                trace.to_str().expect("utf-8"),
            ],
            runtime,
            &["send", "traced"],
            &[],
            b"",
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stdout, "echo: traced\n");
        let trace = std::fs::read_to_string(trace).expect("the trace");
        trace
            .lines()
            .filter(|l| l.contains("/proc/net/tcp"))
            .count()
    };
    let with_socket = runtime();
    let _serve = Serve::start(with_socket.path(), &[]);
    assert_eq!(traced(with_socket.path()), 0, "a socket table was read");

    let tcp_only = runtime();
    let _serve = Serve::start(tcp_only.path(), &["--no-unix-socket"]);
    assert!(traced(tcp_only.path()) > 0, "the trace saw no table read");
}

#[test]
fn a_stale_socket_of_a_killed_carrier_is_replaced_on_the_next_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let path = dir.path().join("carrier.sock");
    let path_arg = path.to_str().expect("utf-8");
    let runtime = runtime();

    let first = Serve::start(runtime.path(), &["--unix-socket", path_arg]);
    assert_eq!(first.socket(), path);
    // While it runs, a second carrier may not take the path.
    let second = Serve::try_start(runtime.path(), &["--unix-socket", path_arg])
        .err()
        .expect("refused while the first listens");
    assert_eq!(second.code, 1, "{}", second.stderr);
    assert!(
        second.stderr.contains("a listener already answers there"),
        "{}",
        second.stderr
    );
    first.kill();
    assert!(path.exists(), "SIGKILL leaves the socket behind");

    let next = Serve::start(runtime.path(), &["--unix-socket", path_arg]);
    assert_eq!(next.socket(), path);
    let url = format!("unix:{path_arg}");
    let sent = carrier(runtime.path(), &["send", &url, "again"], &[], b"");
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    assert_eq!(sent.stdout, "echo: again\n");
    drop(next);

    // The default place: the next scan removes the stale runtime file and its socket together.
    let runtime = self::runtime();
    let killed = Serve::start(runtime.path(), &[]);
    let socket = killed.socket();
    let file = socket.with_extension("json");
    killed.kill();
    assert!(socket.exists() && file.exists());
    let none = carrier(runtime.path(), &["status"], &[], b"");
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(!file.exists(), "the stale runtime file stays");
    assert!(!socket.exists(), "the stale socket stays");
}

#[test]
fn a_socket_path_that_is_a_link_or_in_an_open_directory_is_refused() {
    let runtime = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let real = dir.path().join("real.sock");
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let refused = Serve::try_start(
        runtime.path(),
        &["--unix-socket", link.to_str().expect("utf-8")],
    )
    .err()
    .expect("a symbolic link is refused");
    assert_eq!(refused.code, 1);
    assert_eq!(
        refused.stderr.trim_end().lines().count(),
        1,
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("symbolic link") && refused.stderr.contains("link.sock"),
        "{}",
        refused.stderr
    );
    assert!(link
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink()));
    assert!(!real.exists());

    let open = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let refused = Serve::try_start(
        runtime.path(),
        &[
            "--unix-socket",
            open.path().join("c.sock").to_str().expect("utf-8"),
        ],
    )
    .err()
    .expect("an open directory is refused");
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("can be written by other users"),
        "{}",
        refused.stderr
    );
    assert!(!open.path().join("c.sock").exists());
}

// ---------------------------------------------------------------------------------------------
// Another user
// ---------------------------------------------------------------------------------------------

/// Even with the socket file opened to everyone (0666 in a directory others may enter), a
/// process of another uid is closed before the upgrade: it receives nothing, whatever it sent
/// (here the right token).
#[test]
fn a_peer_of_another_uid_is_refused_before_the_upgrade_and_receives_nothing() {
    let test = "a_peer_of_another_uid_is_refused_before_the_upgrade_and_receives_nothing";
    if let Some(why) = cannot_run_as_another_user() {
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    let runtime = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.path().join("c.sock");
    let serve = Serve::start(
        runtime.path(),
        &["--unix-socket", path.to_str().expect("utf-8")],
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    for uid in OTHER_UIDS {
        let peer = python_as(uid, PEER, &[path.to_str().expect("utf-8"), TOKEN]);
        let output = peer.wait_with_output().expect("the peer ran");
        let report: Value =
            serde_json::from_slice(&output.stdout).expect("the peer's report is JSON");
        assert_eq!(report["connected"], true, "uid {uid}: {report}");
        assert_eq!(report["received"], 0, "uid {uid} received bytes: {report}");
        assert_ne!(report["ended"], "timeout", "uid {uid}: left open: {report}");
    }
    let metrics = metrics_over(&serve.socket());
    assert_eq!(
        counter(&metrics, "carrier_unix_peers_refused_total"),
        OTHER_UIDS.len() as u64
    );
    // The same user still gets in.
    let url = format!("unix:{}", path.display());
    let sent = carrier(runtime.path(), &["send", &url, "mine"], &[], b"");
    assert_eq!(sent.code, 0, "{}", sent.stderr);
}

/// Another user's listener at the socket path a live runtime file lists: every client refuses
/// it after reading its peer credentials, with one line naming the owner, and it receives
/// nothing — neither token nor prompt.
#[test]
fn a_socket_planted_by_another_user_is_refused_by_every_client() {
    let test = "a_socket_planted_by_another_user_is_refused_by_every_client";
    if let Some(why) = cannot_run_as_another_user() {
        eprintln!("SKIPPED {test}: {why}");
        return;
    }
    for uid in OTHER_UIDS {
        let runtime = runtime();
        let sleeper = Sleeper(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("start sleep"),
        );
        let pid = sleeper.0.id();
        let mut planted = Planted::start(uid);
        let advertised = runtime.path().join("carrier").join(format!("{pid}.sock"));
        write_runtime_file(runtime.path(), pid, free_port(), &advertised);
        planted.move_to(&advertised);
        let owner = match uid {
            65534 => "its owner shows as uid 65534, the kernel's overflow uid".to_owned(),
            uid => format!("its listener belongs to uid {uid}"),
        };
        let expected = format!("refusing to talk to unix:{}", advertised.display());
        let token_env = [("CARRIER_TOKEN", TOKEN)];
        for (who, args, input) in [
            ("send", vec!["send", PROMPT], &b""[..]),
            ("status", vec!["status"], b""),
            ("connect", vec!["connect"], PROMPT.as_bytes()),
            ("pipe", vec!["pipe", "--channel", "echo"], PROMPT.as_bytes()),
        ] {
            let run = carrier(runtime.path(), &args, &token_env, input);
            assert_eq!(run.code, 1, "{who} as uid {uid}: {}", run.stderr);
            assert_eq!(
                run.stderr.trim_end().lines().count(),
                1,
                "{who}: one line: {}",
                run.stderr
            );
            assert!(
                run.stderr.contains(&expected)
                    && run.stderr.contains(&owner)
                    && run.stderr.contains("nothing was sent"),
                "{who} as uid {uid}: {}",
                run.stderr
            );
        }
        let doctor = carrier(runtime.path(), &["doctor"], &token_env, b"");
        assert_eq!(doctor.code, 1, "{}", doctor.stdout);
        assert!(
            doctor
                .stdout
                .lines()
                .any(|l| l.contains(&expected) && l.contains(&owner)),
            "doctor: {}",
            doctor.stdout
        );
        for text in planted.received() {
            assert!(
                text.is_empty(),
                "uid {uid}'s socket received {} bytes (token: {}, prompt: {}): {text}",
                text.len(),
                text.contains(TOKEN),
                text.contains(PROMPT)
            );
        }
        drop(sleeper);
    }
}

// ---------------------------------------------------------------------------------------------
// The JavaScript client in Node
// ---------------------------------------------------------------------------------------------

/// The package's client in Node reaches the socket through `ws`'s `ws+unix:` URLs: a
/// handshake, a full turn and a channel echo, with no token.
#[test]
fn the_javascript_client_in_node_drives_a_turn_over_the_socket() {
    carrier_test_support::node::js_dev_dependencies();
    let js = carrier_test_support::repo().join("js");
    let runtime = runtime();
    let serve = Serve::start(runtime.path(), &[]);
    let scratch = tempfile::tempdir().expect("tempdir");
    let script = scratch.path().join("unix.mjs");
    std::fs::write(
        &script,
        format!(
            r#"
import {{ WebSocket }} from "{ws}";
import {{ CarrierClient }} from "{client}";
const client = new CarrierClient(`ws+unix:${{process.argv[2]}}:/`, {{ WebSocket, reconnect: false }});
const events = [];
client.onEvent((frame) => events.push(frame));
const until = (what, done) => new Promise((resolve, reject) => {{
  const started = Date.now();
  const tick = () => done() ? resolve() : Date.now() - started > 20000 ? reject(new Error(what)) : setTimeout(tick, 10);
  tick();
}});
await client.connect();
const {{ turn_id }} = await client.request("session.submit", {{ prompt: "hello from node" }});
await until("turn_completed", () => events.some((e) => e.event === "session.turn_completed" && e.payload.turn_id === turn_id));
const completed = events.find((e) => e.event === "session.turn_completed").payload;
const echoed = [];
client.onChannel("echo", (frame) => echoed.push(frame));
client.sendChannelEvent("echo", "ping", {{ n: 7 }});
await until("the echo", () => echoed.length === 1);
console.log(JSON.stringify({{ text: completed.text, echo: echoed[0].payload }}));
await client.disconnect();
"#,
            ws = js.join("node_modules/ws/wrapper.mjs").display(),
            client = js.join("index.js").display(),
        ),
    )
    .expect("write the script");
    let mut node = Command::new("node");
    node.arg(&script).arg(serve.socket());
    let run = carrier_test_support::node::run(node, "node over the Unix socket");
    assert!(run.success, "{}", run.report());
    let report: Value = serde_json::from_str(run.stdout.trim()).expect("JSON");
    assert_eq!(report["text"], "echo: hello from node", "{report}");
    assert_eq!(report["echo"], json!({"n": 7}), "{report}");
}

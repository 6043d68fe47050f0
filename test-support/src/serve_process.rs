//! Runs the real `carrier serve` binary (`--port 0`) as a child of the test, reads its
//! `listening` line, and finds the agent processes it runs through `/proc`. Every wait has a
//! timeout; nothing sleeps and hopes.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::agent::Client;
use crate::common::WAIT;

/// The token every `carrier serve` of these tests is started with.
pub const TOKEN: &str = "test-token";

/// `CMD` of `--agent-cmd` for a Python agent of `cli/tests/agents/`, the path quoted as a shell
/// would need it (the carrier splits it with POSIX rules). `-S` skips `site`: the agents use
/// the standard library only, and start several times faster.
pub fn python_agent(script: &str, args: &str) -> String {
    let path = crate::common::repo().join("cli/tests/agents").join(script);
    format!("python3 -S '{}' {args}", path.display())
}

/// `CMD` of `--agent-cmd` for `examples/reverse_agent.rs` (built by `cargo test`).
pub fn reverse_agent(delay_ms: u64) -> String {
    let path = examples_dir().join("reverse_agent");
    assert!(
        path.exists(),
        "{} is missing: run the whole `cargo test` (it builds the examples) or `cargo build --examples`",
        path.display()
    );
    format!("'{}' --delay-ms {delay_ms}", path.display())
}

fn examples_dir() -> PathBuf {
    carrier_bin()
        .parent()
        .map(|p| p.join("examples"))
        .unwrap_or_default()
}

/// The `carrier` binary that `cargo test` built beside the running test: Cargo puts a test at
/// `target/PROFILE/deps/NAME-HASH` and the binary at `target/PROFILE/carrier` (the path
/// `CARGO_BIN_EXE_carrier` names, which only the binary's own package's tests see, and this
/// crate is not that package). Only `carrier-cli`'s tests call this; for them Cargo builds it.
pub fn carrier_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("carrier"))
        .unwrap_or_default();
    assert!(
        bin.exists(),
        "{} is missing: Serve runs the binary that `cargo test -p carrier-cli` builds",
        bin.display()
    );
    bin
}

/// A running `carrier serve`.
pub struct Serve {
    /// The process.
    pub child: Child,
    /// Its process id.
    pub pid: u32,
    /// The port it listens on.
    pub port: u16,
    stderr: tempfile::NamedTempFile,
    /// `XDG_RUNTIME_DIR` of this carrier: its runtime file stays out of the developer's.
    runtime: tempfile::TempDir,
}

/// `carrier serve` that exited before listening.
#[derive(Debug)]
pub struct Refused {
    /// How it exited.
    pub status: ExitStatus,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Serve {
    /// `carrier serve --port 0 --token test-token ARGS…`, up to its `listening` line.
    pub async fn start(args: &[&str]) -> Result<Serve, Refused> {
        Serve::start_with_fd_limit(None, args).await
    }

    /// [`Serve::start`] with the process's open-file limit lowered to `fds` (through the
    /// shell's `ulimit`, which then `exec`s the carrier: the pid stays the carrier's).
    pub async fn start_with_fd_limit(fds: Option<u32>, args: &[&str]) -> Result<Serve, Refused> {
        let stderr = tempfile::NamedTempFile::new().expect("temp file");
        let runtime = tempfile::tempdir().expect("runtime dir");
        let mut command = match fds {
            None => Command::new(carrier_bin()),
            Some(n) => {
                let mut c = Command::new("sh");
                c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\"")])
                    .arg(carrier_bin());
                c
            }
        };
        let mut child = command
            .args(["serve", "--port", "0", "--token", TOKEN])
            .args(args)
            .env("RUST_LOG", "info")
            .env("XDG_RUNTIME_DIR", runtime.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().expect("reopen"))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn carrier");
        let pid = child.id().expect("pid");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("no listening line in time");
        let Ok(Some(line)) = first else {
            let status = tokio::time::timeout(WAIT, child.wait())
                .await
                .expect("serve did not exit")
                .expect("wait");
            let stderr = std::fs::read_to_string(stderr.path()).unwrap_or_default();
            return Err(Refused { status, stderr });
        };
        let listening: Value = serde_json::from_str(&line).expect("listening JSON");
        assert_eq!(listening["event"], "listening");
        let port = listening["port"].as_u64().expect("port") as u16;
        Ok(Serve {
            child,
            pid,
            port,
            stderr,
            runtime,
        })
    }

    /// [`Serve::start`] that must succeed.
    pub async fn with_agent(agent_cmd: &str, extra: &[&str]) -> Serve {
        let mut args = vec!["--agent-cmd", agent_cmd];
        args.extend_from_slice(extra);
        match Serve::start(&args).await {
            Ok(serve) => serve,
            Err(refused) => panic!("serve refused to start: {refused:?}"),
        }
    }

    /// The WebSocket URL of this carrier, token included.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/?token={TOKEN}", self.port)
    }

    /// A handshaken drive client and its handshake result.
    pub async fn client(&self) -> (Client, Value) {
        let mut c = Client::connect(&self.url()).await;
        let r = c.handshake(serde_json::json!({})).await;
        (c, r)
    }

    /// The `XDG_RUNTIME_DIR` this carrier writes its runtime file in: a client command run
    /// with it finds this carrier.
    pub fn runtime_dir(&self) -> &Path {
        self.runtime.path()
    }

    /// What serve has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }

    /// The live processes whose parent is this carrier (its agent processes).
    pub fn agent_pids(&self) -> Vec<u32> {
        children_of(self.pid)
    }

    /// The one agent process running now.
    pub fn agent_pid(&self) -> u32 {
        let pids = self.agent_pids();
        assert_eq!(pids.len(), 1, "expected one agent process, got {pids:?}");
        pids[0]
    }

    /// Sends `signal` (e.g. "TERM") to serve and waits for it to exit.
    pub async fn signal_and_wait(&mut self, signal: &str) -> ExitStatus {
        send_signal(self.pid, signal);
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("serve did not exit")
            .expect("wait")
    }

    /// SIGTERM: serve must stop gracefully (exit 0) and leave none of its agent processes
    /// running — checked right after it exits, with no grace.
    pub async fn finish(mut self) {
        let agents = self.agent_pids();
        let status = self.signal_and_wait("TERM").await;
        assert!(
            status.success(),
            "serve exited with {status}: {}",
            self.log()
        );
        for pid in agents {
            assert!(!alive(pid), "agent process {pid} outlived the carrier");
        }
    }
}

/// Sends `signal` (a name `kill` understands, e.g. `TERM`) to process `pid`.
pub fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// `(state, ppid)` of a process from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMM) STATE PPID …" — COMM may contain spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Whether `pid` is a running process (a zombie has exited: it only waits to be reaped).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// Live children of `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(s, ppid)| ppid == parent && s != 'Z' && s != 'X'))
        .collect()
}

/// Polls `cond` every 10 ms until it holds, at most [`WAIT`].
pub async fn until(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A process's peak resident memory (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM").expect("VmHWM")
}

/// A process's resident memory now (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS").expect("VmRSS")
}

/// A `KiB` line of `/proc/PID/status`, e.g. `VmRSS`.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The value of `name` in a carrier's `GET /metrics` (asked with [`TOKEN`]); panics when it
/// is missing.
pub async fn gauge(port: u16, name: &str) -> u64 {
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let req = format!(
        "GET /metrics?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.expect("request");
    let mut text = String::new();
    tokio::time::timeout(WAIT, tcp.read_to_string(&mut text))
        .await
        .expect("metrics in time")
        .expect("read");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics:\n{text}"))
}

//! The real `carrier serve` binary as a child process, for tests that need what a person runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

use super::wait::WAIT;

/// Delay between the demo agent's deltas: long enough that a turn is seen streaming.
const DEMO_DELAY_MS: &str = "30";

/// The real `carrier serve` binary with the embedded agent and an `upload` files channel.
/// Dropping it kills the server.
pub(crate) struct Carrier {
    child: Child,
    /// The port `serve` reported in its listening line.
    pub port: u16,
    /// The token `serve` minted and reported.
    pub token: String,
    /// The server's log (stderr, `RUST_LOG=info`).
    pub stderr: PathBuf,
    /// Kept open so the server's stdout never turns into a broken pipe.
    _stdout: BufReader<ChildStdout>,
    _logs: tempfile::TempDir,
}

impl Drop for Carrier {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Carrier {
    /// Starts `carrier serve --port 0` with an `upload` files channel into `inbox` and
    /// reads its listening line.
    pub(crate) async fn start(inbox: &Path) -> Carrier {
        let logs = tempfile::tempdir().unwrap();
        let stderr = logs.path().join("carrier-stderr.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_carrier"));
        command
            .args(["serve", "--port", "0", "--demo-delay-ms", DEMO_DELAY_MS])
            .arg("--channel")
            .arg(format!("upload:files:{}", inbox.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .kill_on_drop(true);
        // Settings of the person running the tests must not leak into the server under test.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("CARRIER_") {
                command.env_remove(name);
            }
        }
        command.env("RUST_LOG", "info");
        // Its runtime file stays out of the developer's runtime directory.
        command.env("XDG_RUNTIME_DIR", logs.path());
        let mut child = command.spawn().expect("start carrier serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let read = tokio::time::timeout(WAIT, stdout.read_line(&mut line)).await;
        let listening: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        let (Some(port), Some(token)) = (listening["port"].as_u64(), listening["token"].as_str())
        else {
            let _ = child.start_kill();
            panic!(
                "carrier serve printed no listening line within {WAIT:?} ({read:?}, {line:?})\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        };
        Carrier {
            port: port as u16,
            token: token.to_owned(),
            child,
            stderr,
            _stdout: stdout,
            _logs: logs,
        }
    }

    /// Kills the server (SIGKILL, no graceful close) and waits until it is gone: to pages
    /// connected to it, the carrier has vanished.
    pub(crate) async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }

    /// The server's HTTP origin, e.g. `http://127.0.0.1:PORT`.
    pub(crate) fn http(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

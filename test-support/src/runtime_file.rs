//! Runtime files as a carrier of this user writes them, and the processes and ports they name:
//! what the tests of discovery (how a runtime file is judged) and of the CLI (what its commands
//! do with one) stand on. Linux: start times come from `/proc`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::{json, Value};

use crate::squatter::TOKEN;

/// A live process of this user, killed on drop: a pid that runs but did not write the file.
pub struct Sleeper(Child);

impl Sleeper {
    /// `sleep 60`.
    pub fn start() -> Sleeper {
        Sleeper(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("start sleep"),
        )
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
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
pub fn start_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    stat[stat.rfind(')').expect("comm") + 1..]
        .split_whitespace()
        .nth(22 - 3)
        .and_then(|t| t.parse().ok())
        .expect("starttime")
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .expect("boot id")
        .trim()
        .to_owned()
}

/// Writes a runtime file as a carrier of this user would (a 0600 file in a 0700 directory)
/// naming `pid` and `port`, with `pid_start` as given (`None`: an older carrier's file).
pub fn write_runtime_file(
    runtime: &Path,
    pid: u32,
    port: u16,
    pid_start: Option<Value>,
) -> PathBuf {
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
pub struct Recorder {
    listener: std::net::TcpListener,
}

impl Recorder {
    /// Listens on a free port of 127.0.0.1.
    pub fn start() -> Recorder {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        Recorder { listener }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().expect("addr").port()
    }

    /// Connections waiting to be accepted (the commands have exited, so none is in flight).
    pub fn connections(&self) -> usize {
        std::iter::from_fn(|| self.listener.accept().ok()).count()
    }
}

//! Headless Debian Chromium with a fresh profile, started in its own process group so that every
//! process it spawns dies with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use tokio::time::Instant;

use super::cdp::Cdp;
use super::page::{log_tail, Page};
use super::WAIT;

/// Where Debian's package puts the browser; `CARRIER_TEST_CHROMIUM` overrides it.
const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// A running headless Chromium with a fresh profile.
pub struct Chromium {
    cdp: Arc<Cdp>,
    process: BrowserProcess,
}

/// The browser's processes and scratch files. Dropping it kills the browser's whole process
/// group (renderers, GPU and network services included), then removes the profile.
struct BrowserProcess {
    child: Child,
    stderr: PathBuf,
    /// Profile and log; removed (as a field, after `drop`) once every process writing into it
    /// has been killed.
    _scratch: tempfile::TempDir,
}

impl Drop for BrowserProcess {
    fn drop(&mut self) {
        let group = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals the process group this test created for
        // the browser (`process_group(0)` at spawn); it touches no memory.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Chromium {
    /// Starts the browser headless with a fresh profile, the test flags plus `extra_args`, and
    /// connects to its DevTools socket.
    /// A missing browser fails the test (CI installs it with `.ci/install-browser.sh`).
    pub async fn launch(extra_args: &[&str]) -> Chromium {
        let binary = std::env::var_os("CARRIER_TEST_CHROMIUM")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CHROMIUM));
        assert!(
            binary.exists(),
            "Chromium not found at {}: install it with `.ci/install-browser.sh` (Debian package \
             `chromium`) or point CARRIER_TEST_CHROMIUM at a binary. A missing browser fails \
             this test on purpose.",
            binary.display()
        );
        let scratch = tempfile::tempdir().expect("scratch dir for the browser");
        let profile = scratch.path().join("profile");
        let stderr = scratch.path().join("chromium-stderr.log");
        let log = std::fs::File::create(&stderr).expect("browser log file");
        let mut command = Command::new(&binary);
        command
            .args([
                "--headless",
                "--no-sandbox", // the tests run as root, where the sandbox cannot start
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage", // containers often have a tiny /dev/shm
                "--window-size=1280,900",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra_args)
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut process = BrowserProcess {
            child,
            stderr,
            _scratch: scratch,
        };
        let url = process.devtools_url(&profile).await;
        match Cdp::connect(&url).await {
            Ok(cdp) => Chromium { cdp, process },
            Err(e) => panic!("{e}\n{}", process.log_tail()),
        }
    }

    /// Opens a tab whose failure messages include this browser's log.
    pub async fn new_page(&self) -> Page {
        let page = match self.cdp.new_page().await {
            Ok(page) => page,
            Err(e) => panic!("cannot open a tab: {e}\n{}", self.process.log_tail()),
        };
        page.add_log("chromium stderr", self.process.stderr.clone());
        page
    }
}

impl BrowserProcess {
    /// Waits for the browser to write `DevToolsActivePort` (port, then path) into its profile.
    async fn devtools_url(&mut self, profile: &Path) -> String {
        let file = profile.join("DevToolsActivePort");
        let deadline = Instant::now() + WAIT;
        loop {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                return format!("ws://127.0.0.1:{port}{path}");
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("Chromium exited early ({status})\n{}", self.log_tail());
            }
            if Instant::now() >= deadline {
                panic!(
                    "Chromium wrote no DevTools address within {WAIT:?}\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }

    fn log_tail(&self) -> String {
        log_tail("chromium stderr", &self.stderr)
    }
}

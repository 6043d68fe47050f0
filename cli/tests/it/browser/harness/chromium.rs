//! Headless Debian Chromium with a fresh profile, started in its own process group so that every
//! process it spawns dies with it.
//!
//! A machine without the browser gets it installed on first use — once per test binary, by
//! `.ci/install-browser.sh` (apt-get, as root or with passwordless `sudo -n`), which also
//! serialises installs across processes — so `cargo test` passes on a fresh machine as the README
//! says. Where it cannot be installed the test fails with one line saying what to do.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::cdp::Cdp;
use super::page::{log_tail, Page};
use super::wait::WAIT;

/// Where Debian's package puts the browser; `CARRIER_TEST_CHROMIUM` overrides it.
const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// How long installing the browser may take (apt-get update and a ~100 MB download).
const INSTALL_WAIT: Duration = Duration::from_secs(20 * 60);

/// The browser to run: `CARRIER_TEST_CHROMIUM`, else Debian's, installed first if missing. Every
/// test of the binary waits for the one lookup (and install); a failure fails each of them with
/// the same line.
fn browser_binary() -> PathBuf {
    static BROWSER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BROWSER.get_or_init(find_or_install) {
        Ok(path) => path.clone(),
        Err(line) => panic!("{line}"),
    }
}

fn find_or_install() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("CARRIER_TEST_CHROMIUM").map(PathBuf::from) {
        return if runs(&path) {
            Ok(path)
        } else {
            Err(format!(
                "CARRIER_TEST_CHROMIUM={} does not run (`--version` failed): point it at a Chromium binary, or unset it to use {DEFAULT_CHROMIUM}",
                path.display()
            ))
        };
    }
    let default = PathBuf::from(DEFAULT_CHROMIUM);
    if runs(&default) {
        return Ok(default);
    }
    let script = carrier_test_support::repo().join(".ci/install-browser.sh");
    eprintln!(
        "browser test: {DEFAULT_CHROMIUM} is missing; installing Debian's chromium with {} (once)",
        script.display()
    );
    let mut install = Command::new("bash");
    install.arg(&script).stdin(Stdio::null());
    let Some(output) = run_bounded(&mut install, INSTALL_WAIT) else {
        return Err(format!(
            "Chromium is missing and {} did not finish within {INSTALL_WAIT:?}",
            script.display()
        ));
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().last().unwrap_or("").trim();
    match output.status.code() {
        Some(0) if runs(&default) => {
            eprintln!("{}", String::from_utf8_lossy(&output.stdout).trim_end());
            Ok(default)
        }
        Some(0) => Err(format!(
            "{} reported success but {DEFAULT_CHROMIUM} still does not run",
            script.display()
        )),
        // Cannot install here: the script's one line says what to do.
        Some(2) => Err(format!("browser test: {last}")),
        code => {
            eprintln!("{stderr}");
            Err(format!(
                "Chromium is missing and {} could not install it (exit {code:?}: {last}); apt's output is above",
                script.display()
            ))
        }
    }
}

/// Whether `binary --version` runs and succeeds (within a minute).
fn runs(binary: &Path) -> bool {
    if !binary.exists() {
        return false;
    }
    let mut version = Command::new(binary);
    version.arg("--version").stdin(Stdio::null());
    run_bounded(&mut version, Duration::from_secs(60)).is_some_and(|o| o.status.success())
}

/// Runs `command` to completion with its output captured; kills it and returns `None` past
/// `limit`.
fn run_bounded(command: &mut Command, limit: Duration) -> Option<Output> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    Some(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// A running headless Chromium with a fresh profile.
pub(crate) struct Chromium {
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

#[allow(unsafe_code)] // kill(2) of the browser's process group, below
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
    /// connects to its DevTools socket. A missing browser is installed first where this user
    /// can; otherwise the test fails (never skips) with one line saying what to do.
    pub(crate) async fn launch(extra_args: &[&str]) -> Chromium {
        // The lookup blocks (and may install): off the runtime's worker threads.
        let binary = tokio::task::spawn_blocking(browser_binary)
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
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
    pub(crate) async fn new_page(&self) -> Page {
        let page = match Page::open(&self.cdp).await {
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

//! Running Node.js and npm from the tests: a command with a deadline and its captured output,
//! and the JavaScript package's and the ACP fixtures' dev dependencies installed once per test
//! binary.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest any one command (a whole `node --test` run, `npm ci`, `npm pack`, `tsc`) may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

/// A finished command.
pub struct Run {
    /// Whether it exited with success.
    pub success: bool,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Run {
    /// Both outputs, for an assertion message.
    pub fn report(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }
}

/// Runs `command` to completion within [`COMMAND_TIMEOUT`], killing it past that (and failing
/// the test).
pub fn run(mut command: Command, what: &str) -> Run {
    let out = tempfile::tempfile().unwrap();
    let err = tempfile::tempfile().unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what} ({e}): Node.js 20+ and npm are needed"));
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |mut file: std::fs::File| {
        use std::io::{Read, Seek};
        let mut text = String::new();
        file.rewind().unwrap();
        file.read_to_string(&mut text).unwrap();
        text
    };
    let run = Run {
        success: status.is_some_and(|s| s.success()),
        stdout: read(out),
        stderr: read(err),
    };
    assert!(
        status.is_some(),
        "{what} did not finish within {COMMAND_TIMEOUT:?}\n{}",
        run.report()
    );
    run
}

/// `npm ci` in `js/` from the committed lock file, once per test binary, unless `node_modules`
/// is newer than the lock file.
pub fn js_dev_dependencies() {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if !*installed {
        npm_ci(&crate::common::repo().join("js"));
        *installed = true;
    }
}

/// `npm ci` in `acp/tests/fixtures/` (the ACP SDK, the JSON Schema validator, `ws`), once per
/// test binary, unless its `node_modules` is newer than the lock file. Returns the folder.
pub fn acp_fixtures() -> std::path::PathBuf {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let dir = crate::common::repo().join("acp/tests/fixtures");
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if !*installed {
        npm_ci(&dir);
        *installed = true;
    }
    dir
}

/// `npm ci` in `dir` from its committed lock file, unless its `node_modules` is newer than
/// the lock file. Fails the test with what to do when it cannot install.
pub fn npm_ci(dir: &Path) {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let fresh = match (
        modified(&dir.join("node_modules/.package-lock.json")),
        modified(&dir.join("package-lock.json")),
    ) {
        (Some(installed), Some(lock)) => installed >= lock,
        _ => false,
    };
    if !fresh {
        let mut npm = Command::new("npm");
        npm.args(["ci", "--no-audit", "--no-fund"]).current_dir(dir);
        let what = format!("npm ci in {}", dir.display());
        let out = run(npm, &what);
        assert!(
            out.success,
            "{what} failed: Node.js 20+ and npm are needed, and the npm registry must be \
             reachable:\n{}",
            out.report()
        );
    }
}

/// The Python SDK of ACP (`acp/tests/fixtures/requirements.txt`, pinned), installed with
/// `pip install --target` into `target/acp-python/` once per test binary (again only when the
/// requirements change): the folder to put on `PYTHONPATH`. Nothing is installed globally.
pub fn acp_python_sdk() -> std::path::PathBuf {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let requirements = crate::common::repo().join("acp/tests/fixtures/requirements.txt");
    let target = crate::serve_process::carrier_bin()
        .parent()
        .and_then(Path::parent)
        .map(|t| t.join("acp-python"))
        .expect("the target folder");
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if *installed {
        return target;
    }
    let marker = target.join(".requirements.txt");
    let wanted = std::fs::read(&requirements).expect("acp/tests/fixtures/requirements.txt");
    if std::fs::read(&marker).ok().as_ref() != Some(&wanted) {
        let _ = std::fs::remove_dir_all(&target);
        let mut pip = Command::new("python3");
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(&target)
        .arg("-r")
        .arg(&requirements);
        let out = run(pip, "pip install the ACP Python SDK");
        assert!(
            out.success,
            "cannot install the ACP Python SDK: run `python3 -m pip install --target {} -r {}` \
             (PyPI must be reachable):\n{}",
            target.display(),
            requirements.display(),
            out.report()
        );
        std::fs::write(&marker, &wanted).expect("write the install marker");
    }
    *installed = true;
    target
}
